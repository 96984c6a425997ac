"""The leader's ISR: expansion once a follower catches up into the current epoch, shrinking when it lags,
AlterPartition to the controller with the maximal-ISR rule while a change is pending, the answers'
error handling, and what min.insync.replicas does to acks=-1 and the high watermark."""
from __future__ import annotations

import asyncio

from kafka_compat.storage.unified_log import FetchIsolation
from replication_harness import TOPIC, TOPIC_ID, Cluster, batch, until

from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.server.delayed_fetch import FetchParams, PartitionFetchInfo

LEADER, FOLLOWER = 0, 1


def run(tmp_path, scenario, **kw):
    async def main():
        cluster = Cluster(tmp_path, 2, **kw)
        try:
            return await scenario(cluster)
        finally:
            await cluster.close()
    return asyncio.run(main())


def follower_fetch(node, offset: int, epoch: int, last_fetched_epoch: int = -1):
    """What a follower's Fetch does to the leader's state (no fetcher runs: the test is the follower)."""
    params = FetchParams(FOLLOWER, 0, 1, 1 << 20, FetchIsolation.LOG_END)
    return node.rm.read_from_local_log(params, [(TOPIC, 0, PartitionFetchInfo(offset, 1 << 20, epoch,
                                                                               last_fetched_epoch))])[0]


def vars_of(meters) -> tuple[int, int, int]:
    return meters.shrinks, meters.expands, meters.failed


def alter_requests(c):
    return [(v, [(p.partition_index, list(p.new_isr or [b.broker_id for b in p.new_isr_with_epochs]),
                  p.partition_epoch) for t in body.topics for p in t.partitions]) for v, body in c.controller.requests]


def test_a_caught_up_follower_joins_the_isr_and_counts_while_the_change_is_pending(tmp_path):
    async def scenario(c):
        c.lead(LEADER, 1, isr=(LEADER,), to=[LEADER])
        p = c[LEADER].partition()
        c[LEADER].produce(1, batch(b"a"), batch(b"b"))
        c.controller.reachable = False                 # the answer will not come yet
        follower_fetch(c[LEADER], 2, 1)                # caught up into epoch 1 (which starts at 0)
        pending = (p.pending_isr is not None, p.isr, p.maximal_isr)
        c[LEADER].produce(1, batch(b"c"))              # the HW now waits for the follower too
        hw_held = p.high_watermark
        c.controller.reachable = True
        meters_pending = vars_of(c[LEADER].rm.isr_change_meters)
        await until(lambda: p.pending_isr is None, what="the controller's answer")
        return pending, hw_held, p.isr, p.partition_epoch, alter_requests(c), meters_pending, \
            vars_of(c[LEADER].rm.isr_change_meters)

    pending, hw_held, isr, partition_epoch, requests, meters_pending, meters = run(tmp_path, scenario)
    assert pending == (True, (LEADER,), (LEADER, FOLLOWER)) and hw_held == 2
    # the expansion is counted once the controller has committed it (Kafka's AlterPartitionListener)
    assert meters_pending == (0, 0, 0) and meters == (0, 1, 0)
    assert isr == (LEADER, FOLLOWER) and partition_epoch == 2
    assert requests[-1] == (3, [(0, [LEADER, FOLLOWER], 1)])     # v3 (by topic id), the epoch we knew


def test_a_follower_not_yet_in_the_current_epoch_does_not_join(tmp_path):
    async def scenario(c):
        c.lead(LEADER, 0, isr=(LEADER,), to=[LEADER])
        c[LEADER].produce(1, batch(b"a"), batch(b"b"))
        c.lead(LEADER, 1, isr=(LEADER,), to=[LEADER])            # epoch 1 starts at offset 2
        c[LEADER].produce(1, batch(b"c"))
        p = c[LEADER].partition()
        p.log.update_high_watermark(1)                           # a follower at 1 is past the HW...
        follower_fetch(c[LEADER], 1, 1)                          # ...but not into epoch 1
        before = (p.pending_isr, list(c.controller.requests))
        follower_fetch(c[LEADER], 3, 1)
        return before, p.pending_isr is not None

    (pending_before, requests_before), proposed_after = run(tmp_path, scenario)
    assert pending_before is None and requests_before == [] and proposed_after


def test_a_lagging_follower_is_shrunk_out_only_once_the_controller_commits(tmp_path):
    async def scenario(c):
        c.lead(LEADER, 0, isr=(LEADER, FOLLOWER), to=[LEADER])
        p = c[LEADER].partition()
        c.controller.reachable = False
        c[LEADER].produce(1, batch(b"a"))
        p.remote_replicas[FOLLOWER].last_caught_up_time_ms -= 10_000   # lagging for longer than the lag time
        shrinking = p.maybe_shrink_isr()
        during = (p.isr, p.maximal_isr, p.high_watermark)               # the HW still waits for the follower
        c.controller.reachable = True
        await until(lambda: p.pending_isr is None, what="the shrink to commit")
        return shrinking, during, p.isr, p.high_watermark, vars_of(c[LEADER].rm.isr_change_meters)

    shrinking, during, isr, hw, meters = run(tmp_path, scenario, lag_ms=1000)
    assert shrinking and during == ((LEADER, FOLLOWER), (LEADER, FOLLOWER), 0)
    assert isr == (LEADER,) and hw == 1
    assert meters == (1, 0, 0)          # (shrinks, expands, failed)


def test_the_isr_expiration_task_shrinks_a_silent_follower(tmp_path):
    async def scenario(c):
        c.lead(LEADER, 0, isr=(LEADER, FOLLOWER), to=[LEADER])
        c[LEADER].produce(1, batch(b"a"))
        await until(lambda: c[LEADER].partition().isr == (LEADER,), what="isr-expiration")
        return alter_requests(c)

    assert run(tmp_path, scenario, lag_ms=200)[-1][1] == [(0, [LEADER], 0)]


def test_min_insync_replicas_with_one_replica_left(tmp_path):
    """acks=-1 is refused before anything is written; acks=1 is written, but the HW stays (Kafka 3.7+)."""
    async def scenario(c):
        c.lead(LEADER, 0, isr=(LEADER,), to=[LEADER])
        p = c[LEADER].partition()
        refused = c[LEADER].produce(-1, batch(b"a"))[0]
        leo_after_refusal = p.log_end_offset
        accepted = c[LEADER].produce(1, batch(b"b"))[0]
        return refused.error_code, leo_after_refusal, accepted.error_code, p.log_end_offset, p.high_watermark

    assert run(tmp_path, scenario, **{"min.insync.replicas": 2}) == (
        ErrorCode.NOT_ENOUGH_REPLICAS, 0, ErrorCode.NONE, 1, 0)


async def propose_expansion(c, answer_error: int):
    """The follower catches up; the controller will answer the proposal with ``answer_error``."""
    c.lead(LEADER, 0, isr=(LEADER,), to=[LEADER])
    c.controller.partition_error = answer_error
    follower_fetch(c[LEADER], 0, 0)
    await until(lambda: c.controller.requests, what="the request")
    return c[LEADER].partition()


def test_an_ineligible_replica_answer_goes_back_to_the_committed_isr(tmp_path):
    async def scenario(c):
        p = await propose_expansion(c, ErrorCode.INELIGIBLE_REPLICA)
        await until(lambda: p.pending_isr is None, what="the refusal")
        return p.isr, p.maximal_isr, vars_of(c[LEADER].rm.isr_change_meters)

    assert run(tmp_path, scenario) == ((LEADER,), (LEADER,), (0, 0, 1))    # a refused change counts as failed


def test_a_fenced_answer_waits_for_new_metadata_and_a_leader_and_isr_clears_it(tmp_path):
    async def scenario(c):
        p = await propose_expansion(c, ErrorCode.FENCED_LEADER_EPOCH)
        await asyncio.sleep(0.05)
        stuck = (p.pending_isr is not None, len(c.controller.requests))
        c.lead(LEADER, 1, isr=(LEADER, FOLLOWER), to=[LEADER])
        return stuck, p.pending_isr, p.isr

    (still_pending, sent), pending, isr = run(tmp_path, scenario)
    assert still_pending and sent == 1 and pending is None and isr == (LEADER, FOLLOWER)


def test_a_request_the_controller_refuses_whole_is_sent_again(tmp_path):
    async def scenario(c):
        c.lead(LEADER, 0, isr=(LEADER,), to=[LEADER])
        p = c[LEADER].partition()
        c.controller.top_level_error = ErrorCode.NOT_CONTROLLER
        follower_fetch(c[LEADER], 0, 0)
        await until(lambda: len(c.controller.requests) >= 2, what="a retry")
        c.controller.top_level_error = ErrorCode.NONE
        await until(lambda: p.pending_isr is None, what="success")
        return p.isr

    assert run(tmp_path, scenario) == (LEADER, FOLLOWER)


def test_a_topic_without_id_is_proposed_by_name(tmp_path):
    async def scenario(c):
        from kafka_compat.server.metadata_cache import PartitionLeadership
        state = PartitionLeadership(LEADER, 0, (LEADER,), (LEADER, FOLLOWER))
        c[LEADER].rm.become_leader_or_follower(100, 1, [(TOPIC, b"\0" * 16, {0: state})])
        follower_fetch(c[LEADER], 0, 0)
        await until(lambda: c.controller.requests, what="the request")
        version, body = c.controller.requests[0]
        return version, body.topics[0].topic_name

    assert run(tmp_path, scenario) == (1, TOPIC)


def test_the_high_watermark_never_goes_down_on_the_leader(tmp_path):
    async def scenario(c):
        c.lead(LEADER, 0, isr=(LEADER,), to=[LEADER])
        c[LEADER].produce(1, batch(b"a"), batch(b"b"))
        p = c[LEADER].partition()
        before = p.high_watermark
        c.lead(LEADER, 1, isr=(LEADER, FOLLOWER), to=[LEADER])     # a follower whose end is unknown joins
        after = p.high_watermark
        follower_fetch(c[LEADER], 0, 1)                              # and turns out to be empty
        return before, after, p.high_watermark

    assert run(tmp_path, scenario) == (2, 2, 2)


def test_acks_all_completes_with_the_expanded_isr(tmp_path):
    """End to end with a real follower: its fetcher brings it in; acks=-1 then needs both replicas."""
    async def scenario(c):
        c.lead(LEADER, 0, isr=(LEADER,))
        c.lead(LEADER, 0, isr=(LEADER,))
        p = c[LEADER].partition()
        await until(lambda: p.isr == (LEADER, FOLLOWER), what="the follower to join")
        result = await asyncio.wait_for(c[LEADER].produce(-1, batch(b"x")), 10)
        return result[0].error_code, c[FOLLOWER].partition().log_end_offset, TOPIC_ID == p.topic_id

    assert run(tmp_path, scenario, **{"min.insync.replicas": 2}) == (ErrorCode.NONE, 1, True)



def test_acks_all_waiting_on_a_refused_expansion_completes_with_the_committed_isr(tmp_path):
    """While an expansion is pending the high watermark waits for the new replica too. A broker in controlled
    shutdown fetches from its successor, is proposed, and has left the live brokers when the controller refuses
    it: acks=-1 is answered at the refusal, not when the produce times out (nothing else moves the high
    watermark: that replica's fetches stopped, and the producer is waiting for this answer)."""
    async def scenario(c):
        c.lead(LEADER, 0, isr=(LEADER,), to=[LEADER])
        p = c[LEADER].partition()
        c.controller.partition_error = ErrorCode.INELIGIBLE_REPLICA
        c.controller.reachable = False                 # the refusal will come after the produce
        follower_fetch(c[LEADER], 0, 0)
        waiting = c[LEADER].produce(-1, batch(b"a"), timeout_ms=60_000)
        held = (p.maximal_isr, p.high_watermark, isinstance(waiting, asyncio.Future) and not waiting.done())
        c[FOLLOWER].down = True
        c.publish_brokers()                            # it stopped
        c.controller.reachable = True
        result = await asyncio.wait_for(waiting, 10)
        return held, result[0].error_code, p.isr, p.high_watermark

    assert run(tmp_path, scenario) == (((LEADER, FOLLOWER), 0, True), ErrorCode.NONE, (LEADER,), 1)


def test_a_replica_refused_as_ineligible_stops_holding_the_high_watermark_while_still_alive(tmp_path):
    """A broker in controlled shutdown keeps fetching from its successor for a moment, is caught up, proposed,
    and refused (INELIGIBLE_REPLICA); then its fetchers stop. It is still among the live brokers until its
    ZooKeeper session ends and the controller says so, but it will not join: acks=-1 is answered at the
    refusal, not once the UpdateMetadata dropping it arrives (that wait was the SIGTERM bench's 0.4 s gaps)."""
    async def scenario(c):
        c.lead(LEADER, 0, isr=(LEADER,), to=[LEADER])
        p = c[LEADER].partition()
        c.controller.partition_error = ErrorCode.INELIGIBLE_REPLICA
        c.controller.reachable = False                 # the refusal will come after the produce
        follower_fetch(c[LEADER], 0, 0)
        waiting = c[LEADER].produce(-1, batch(b"a"), timeout_ms=60_000)
        held = (p.maximal_isr, p.high_watermark, isinstance(waiting, asyncio.Future) and not waiting.done())
        c.controller.reachable = True
        result = await asyncio.wait_for(waiting, 10)
        return held, result[0].error_code, p.isr, p.high_watermark, c[LEADER].cache.is_alive(FOLLOWER)

    assert run(tmp_path, scenario) == (((LEADER, FOLLOWER), 0, True), ErrorCode.NONE, (LEADER,), 1, True)


def test_acks_all_held_by_a_caught_up_replica_completes_when_it_leaves_the_live_brokers(tmp_path):
    """A caught-up follower outside the ISR holds the high watermark while it is alive (it is about to join:
    here the controller did not get to its expansion); the UpdateMetadata that drops it from the live brokers
    lets acks=-1 complete with the ISR alone."""
    async def scenario(c):
        c.lead(LEADER, 0, isr=(LEADER,), to=[LEADER])
        p = c[LEADER].partition()
        c.controller.partition_error = ErrorCode.OPERATION_NOT_ATTEMPTED
        follower_fetch(c[LEADER], 0, 0)
        await until(lambda: p.pending_isr is None, what="the refusal")
        waiting = c[LEADER].produce(-1, batch(b"a"), timeout_ms=60_000)
        await asyncio.sleep(0.05)
        held = (p.high_watermark, waiting.done())
        c[FOLLOWER].down = True
        c.publish_brokers()
        c[LEADER].rm.brokers_gone({FOLLOWER})         # what UpdateMetadata does after updating the cache
        result = await asyncio.wait_for(waiting, 10)
        return held, result[0].error_code, p.high_watermark

    assert run(tmp_path, scenario) == ((0, False), ErrorCode.NONE, 1)
