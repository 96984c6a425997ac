"""Followers against a real in-process leader (replication_harness): catching up byte for byte, the follower's
high watermark, Kafka's truncation rules on a diverging epoch (the KIP-279 loop included), out-of-range
recovery, fencing, and a leader that goes away and comes back."""
from __future__ import annotations

import asyncio

import pytest
from replication_harness import TOPIC, Cluster, batch, until

from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.server.replica_fetcher import offset_truncation_state


def run(tmp_path, scenario, n: int = 2, **kw):
    async def main():
        cluster = Cluster(tmp_path, n, **kw)
        try:
            return await scenario(cluster)
        finally:
            await cluster.close()
    return asyncio.run(main())


# ---------------------------------------------------------------- the rules as a table
@pytest.mark.parametrize("leader_epoch, leader_end, ours, expected", [
    (3, -1, {3: (3, 10)}, (7, True)),          # the leader knows no end: keep the fetch offset
    (-1, 5, {}, (5, True)),                    # no epoch from the leader: its offset, below our end
    (-1, 50, {}, (12, True)),                  # ... but never past our end
    (3, 8, {3: (3, 10)}, (8, True)),           # a shared epoch: the smaller end
    (3, 11, {3: (3, 10)}, (10, True)),
    (4, 9, {4: (2, 6)}, (6, False)),           # we never saw epoch 4: the end of ours below it, and ask again
    (1, 4, {1: None}, (4, True)),              # no epoch that old here: the leader's end
])
def test_offset_truncation_state_is_kafkas(leader_epoch, leader_end, ours, expected):
    assert offset_truncation_state(7, 12, leader_epoch, leader_end, lambda e: ours.get(e)) == expected


# ---------------------------------------------------------------- catching up
def test_a_follower_copies_the_leader_byte_for_byte_and_takes_its_high_watermark(tmp_path):
    async def scenario(c):
        c.lead(0, 0, isr=(0, 1))
        c.lead(0, 0, isr=(0, 1))
        pending = c[0].produce(-1, batch(b"a", b"b"), batch(b"c"))
        result = await asyncio.wait_for(pending, 10)          # acks=-1: answered once the follower has it
        c[0].produce(1, batch(b"d"))
        await until(lambda: c[1].partition().log_end_offset == 4, what="the follower to catch up")
        await until(lambda: c[1].partition().high_watermark == 4, what="the follower's HW")
        return result[0].error_code, c[0].data(), c[1].data(), c[0].partition().high_watermark

    error, leader, follower, hw = run(tmp_path, scenario)
    assert error == ErrorCode.NONE and hw == 4
    assert follower == leader and len(leader) > 0


def test_the_follower_high_watermark_is_the_smaller_of_the_leaders_and_its_end(tmp_path):
    async def scenario(c):
        c.lead(0, 0, isr=(0,), replicas=(0, 1), to=[0])     # the follower is outside the ISR: the HW runs ahead
        c[0].produce(1, batch(b"a"), batch(b"b"), batch(b"c"))
        c.nodes[1].rm.fetcher_manager.config = c.nodes[1].rm.fetcher_manager.config.__class__(
            1, max_wait_ms=50, backoff_ms=20, max_bytes=1)        # one batch per fetch
        c.lead(0, 0, isr=(0,), replicas=(0, 1), to=[1])
        seen = []
        await until(lambda: seen.append((c[1].partition().log_end_offset, c[1].partition().high_watermark))
                    or c[1].partition().log_end_offset == 3, what="catch-up")
        return seen

    seen = run(tmp_path, scenario, **{"min.insync.replicas": 1})
    assert all(hw <= leo for leo, hw in seen) and seen[-1] == (3, 3)


# ---------------------------------------------------------------- divergence
def test_a_diverged_follower_truncates_and_then_equals_the_leader(tmp_path):
    async def scenario(c):
        # node 1 led epoch 0 alone and wrote what nobody else has; node 0 then led epoch 1 without it
        c.lead(1, 0, isr=(1,), to=[1])
        c[1].produce(1, batch(b"lost-1"), batch(b"lost-2"), batch(b"lost-3"))
        c.lead(0, 1, isr=(0,), to=[0])
        c[0].produce(1, batch(b"kept-1"), batch(b"kept-2"))
        c.lead(0, 2, isr=(0,), to=[0])
        c[0].produce(1, batch(b"kept-3"))
        c.lead(0, 2, isr=(0,), to=[1])
        await until(lambda: c[1].data() == c[0].data(), what="the logs to agree")
        return c[1].partition().log.leader_epoch_cache.entries, c[0].partition().log.leader_epoch_cache.entries

    follower_epochs, leader_epochs = run(tmp_path, scenario)
    assert follower_epochs == leader_epochs


def test_repeated_leader_changes_converge_through_the_kip279_loop(tmp_path):
    """Epochs 0 and 3 on the follower, 0 and 2 on the leader, diverging after epoch 0: the follower first
    truncates to the end of its epoch below the leader's answer, asks again, and ends equal."""
    async def scenario(c):
        c.lead(0, 0, isr=(0, 1))
        c.lead(0, 0, isr=(0, 1))
        await asyncio.wait_for(c[0].produce(-1, batch(b"shared")), 10)
        c.lead(1, 3, isr=(1,), to=[1])                        # the follower leads a later epoch alone
        c[1].produce(1, batch(b"x1"), batch(b"x2"))
        c.lead(0, 2, isr=(0,), to=[0])                        # the leader an earlier one, longer
        c[0].produce(1, batch(b"y1"), batch(b"y2"), batch(b"y3"))
        c.lead(0, 4, isr=(0,), to=[0])
        c.lead(0, 4, isr=(0,), to=[1])
        await until(lambda: c[1].data() == c[0].data(), what="the logs to agree")
        return [e.epoch for e in c[1].partition().log.leader_epoch_cache.entries]

    assert run(tmp_path, scenario) == [0, 2]


def test_a_follower_drops_an_epoch_it_led_without_writing(tmp_path):
    """The follower led epoch 1 and wrote nothing (its epoch cache starts epoch 1 at its log end); the
    leader never saw epoch 1. The divergence point is the follower's own end: truncating there changes no
    record, but the empty epoch must go, as in Kafka, or every fetch diverges again and it never catches up."""
    async def scenario(c):
        c.lead(0, 0, isr=(0, 1))
        c.lead(0, 0, isr=(0, 1))
        await asyncio.wait_for(c[0].produce(-1, batch(b"shared")), 10)
        await until(lambda: c[1].data() == c[0].data(), what="the follower to have it")
        c.lead(1, 1, isr=(1,), to=[1])                        # led, nothing written
        c.lead(0, 2, isr=(0,), to=[0])
        c[0].produce(1, batch(b"after-1"), batch(b"after-2"))
        c.lead(0, 2, isr=(0,), to=[1])
        await until(lambda: c[1].data() == c[0].data(), what="the follower to catch up")
        return [e.epoch for e in c[1].partition().log.leader_epoch_cache.entries]

    assert run(tmp_path, scenario) == [0, 2]


# ---------------------------------------------------------------- out of range
def test_a_follower_behind_the_leaders_log_start_starts_over_there(tmp_path):
    async def scenario(c):
        c.lead(0, 0, isr=(0,), to=[0])
        c[0].produce(1, *(batch(b"v%d" % i) for i in range(5)))
        c[0].rm.delete_records(30000, [(TOPIC, 0, 3)])        # the leader keeps offsets 3 and 4 only
        c.lead(0, 0, isr=(0,), to=[1])
        await until(lambda: c[1].partition().log_end_offset == 5, what="the follower to catch up")
        return c[1].partition().log_start_offset, c[1].data() == c[0].data()

    assert run(tmp_path, scenario) == (3, True)


def test_a_follower_past_the_leaders_end_without_leader_epochs_truncates_to_it(tmp_path):
    """An unclean election as an old-format follower meets it: no epochs to compare, so the fetch past the
    leader's end is out of range and the follower truncates to the end ListOffsets gives."""
    async def scenario(c):
        c.lead(1, 5, isr=(1,), to=[1])                        # the follower's own epoch 5, longer
        c[1].produce(1, *(batch(b"f%d" % i) for i in range(6)))
        c[1].partition().log.leader_epoch_cache.clear()       # written before leader epochs existed
        c.lead(0, 7, isr=(0,), to=[0])                        # an unclean leader with less
        c[0].produce(1, batch(b"l0"), batch(b"l1"))
        c.lead(0, 7, isr=(0,), to=[1])
        await until(lambda: c[1].partition().log_end_offset == 2, what="truncation to the leader's end")
        c[0].produce(1, batch(b"l2"))                         # and from there on it copies the leader
        await until(lambda: c[1].partition().log_end_offset == 3, what="the next batch")
        return c[1].data()[-len(batch(b"l2")):] == c[0].data()[-len(batch(b"l2")):]

    # as in Kafka, what was below the truncation point is not repaired (there was no way to compare it)
    assert run(tmp_path, scenario)


# ---------------------------------------------------------------- errors
def test_a_fenced_follower_stops_until_a_new_leader_and_isr(tmp_path):
    async def scenario(c):
        c.lead(0, 3, isr=(0,), to=[0])
        c[0].produce(1, batch(b"a"))
        c.lead(0, 2, isr=(0,), to=[1])                        # the follower's state is older than the leader's
        fm = c[1].rm.fetcher_manager
        await until(lambda: (TOPIC, 0) in fm.failed_partitions, what="the partition to be failed")
        stopped = (fm.fetch_state((TOPIC, 0)), c[1].partition().log_end_offset)
        c.lead(0, 3, isr=(0,), to=[1])                        # the new LeaderAndIsr brings it back
        await until(lambda: c[1].partition().log_end_offset == 1, what="fetching again")
        return stopped, (TOPIC, 0) in fm.failed_partitions

    stopped, still_failed = run(tmp_path, scenario)
    assert stopped == (None, 0) and not still_failed


def test_a_leader_that_goes_away_is_retried_and_fetched_from_when_back(tmp_path):
    async def scenario(c):
        c.lead(0, 0, isr=(0,), to=[0])
        c[0].produce(1, batch(b"a"))
        c[0].down = True
        c.lead(0, 0, isr=(0,), to=[1])
        await until(lambda: c[1].rm.fetcher_manager.fetch_state((TOPIC, 0)).delayed_until > 0,
                    what="a failed fetch to back off")
        c[0].produce(1, batch(b"b"))
        c[0].down = False
        await until(lambda: c[1].data() == c[0].data() and c[1].partition().log_end_offset == 2,
                    what="catch-up after the leader came back")
        return True

    assert run(tmp_path, scenario)


def test_becoming_leader_stops_fetching_and_serves(tmp_path):
    async def scenario(c):
        c.lead(0, 0, isr=(0, 1))
        c.lead(0, 0, isr=(0, 1))
        await asyncio.wait_for(c[0].produce(-1, batch(b"a")), 10)
        c.lead(1, 1, isr=(1,), to=[1])
        fetching = c[1].rm.fetcher_manager.fetch_state((TOPIC, 0))
        appended = c[1].produce(1, batch(b"b"))[0]
        return fetching, appended.error_code, appended.base_offset

    assert run(tmp_path, scenario) == (None, ErrorCode.NONE, 1)


def test_delete_records_answers_once_the_follower_has_deleted_as_far(tmp_path):
    """Kafka's DelayedDeleteRecords: the low watermark in the answer is one every live replica has reached."""
    async def scenario(c):
        c.lead(0, 0, isr=(0, 1), to=[0, 1])
        c[0].produce(-1, *(batch(b"v%d" % i) for i in range(5)))
        await until(lambda: c[1].partition().log_end_offset == 5, what="the follower to catch up")
        answer = c[0].rm.delete_records(30000, [(TOPIC, 0, 3)])
        waited = isinstance(answer, asyncio.Future)
        result = await answer if waited else answer
        return waited, result, c[1].partition().log_start_offset

    assert run(tmp_path, scenario) == (True, [(ErrorCode.NONE, 3)], 3)
