"""KIP-848 consumer groups: assignors, reconciliation, records, and a group reloaded after a restart."""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from wire import AsyncWireClient  # noqa: E402

from kafka_compat.group.assignor import GroupSpec, MemberSubscription, RangeAssignor, UniformAssignor  # noqa: E402
from kafka_compat.group.coordinator_records import (  # noqa: E402
    ConsumerRecordKey,
    read_consumer_value,
    read_key,
)
from kafka_compat.group.modern.consumer_group_member import ConsumerGroupMember, MemberState  # noqa: E402
from kafka_compat.group.modern.current_assignment_builder import reconcile  # noqa: E402
from kafka_compat.group.modern.records import current_assignment_record, member_metadata_record  # noqa: E402
from kafka_compat.group.modern.regex import resolve_regex, validate_regex  # noqa: E402
from kafka_compat.protocol.errors import ErrorCode as E  # noqa: E402
from kafka_compat.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest  # noqa: E402
from kafka_compat.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest  # noqa: E402
from kafka_compat.server.broker import Broker, advertised_api_versions  # noqa: E402
from kafka_compat.server.kafka_config import BrokerConfig  # noqa: E402

T1, T2 = b"\x01" * 16, b"\x02" * 16


def spec(members: dict, current=None) -> GroupSpec:
    return GroupSpec({m: MemberSubscription(frozenset(ts)) for m, ts in members.items()}, current or {})


def sizes(result) -> list[int]:
    return sorted(sum(len(ps) for ps in a.values()) for a in result.values())


# ---------------------------------------------------------------- assignors
def test_uniform_balances_then_keeps_what_members_had():
    first = UniformAssignor().assign(spec({"a": [T1], "b": [T1], "c": [T1]}), {T1: 12})
    assert sizes(first) == [4, 4, 4]
    second = UniformAssignor().assign(spec({"a": [T1], "b": [T1], "c": [T1], "d": [T1]}, first), {T1: 12})
    assert sizes(second) == [3, 3, 3, 3]
    for m in "abc":     # stickiness: the old members only gave partitions up
        assert second[m][T1] <= first[m][T1]
    every = [p for a in second.values() for p in a.get(T1, ())]
    assert sorted(every) == list(range(12))


def test_uniform_with_different_subscriptions_gives_each_topic_to_its_subscribers():
    result = UniformAssignor().assign(spec({"a": [T1], "b": [T1, T2], "c": [T2]}), {T1: 4, T2: 4})
    assert T2 not in result["a"] and T1 not in result["c"]
    assert sizes(result) == [2, 3, 3] or max(sizes(result)) - min(sizes(result)) <= 1
    assert sorted(p for m in result.values() for p in m.get(T1, ())) == [0, 1, 2, 3]


def test_range_gives_contiguous_ranges_and_co_partitions():
    result = RangeAssignor().assign(spec({"a": [T1, T2], "b": [T1, T2], "c": [T1, T2]}), {T1: 7, T2: 7})
    assert result["a"][T1] == frozenset({0, 1, 2}) and result["b"][T1] == frozenset({3, 4})
    assert result["c"][T1] == frozenset({5, 6})
    assert all(result[m][T1] == result[m][T2] for m in "abc")


# ---------------------------------------------------------------- reconciliation
def test_revoke_before_assign():
    member = ConsumerGroupMember("m", member_epoch=3, assigned_partitions={T1: frozenset({0, 1, 2})})
    owners = {(T1, 3): 2}       # partition 3 is still owned by another member
    epoch_of = lambda t, p: owners.get((t, p), -1)  # noqa: E731
    target = {T1: frozenset({0, 3})}
    step1 = reconcile(member, 4, target, epoch_of, [(T1, [0, 1, 2])])
    assert step1.state == MemberState.UNREVOKED_PARTITIONS and step1.member_epoch == 3
    assert step1.assigned_partitions == {T1: frozenset({0})}
    assert step1.partitions_pending_revocation == {T1: frozenset({1, 2})}
    assert reconcile(step1, 4, target, epoch_of, [(T1, [0, 1, 2])]) == step1     # still owns them
    step2 = reconcile(step1, 4, target, epoch_of, [(T1, [0])])
    assert (step2.state, step2.member_epoch, step2.previous_member_epoch) == \
        (MemberState.UNRELEASED_PARTITIONS, 4, 3)
    assert step2.assigned_partitions == {T1: frozenset({0})}     # 3 is not free yet
    owners.clear()
    step3 = reconcile(step2, 4, target, epoch_of, [(T1, [0])])
    assert step3.state == MemberState.STABLE and step3.assigned_partitions == {T1: frozenset({0, 3})}


def test_regex_validation_follows_re2():
    assert validate_regex("orders-.*") is None
    assert validate_regex("(?=x)y") and validate_regex("(a)\\1") and validate_regex("[")
    assert resolve_regex("orders-.*", ["orders-1", "orders", "x-orders-1"]) == frozenset({"orders-1"})


# ---------------------------------------------------------------- records
def test_records_round_trip_with_kafka_key_versions():
    member = ConsumerGroupMember("m1", member_epoch=5, previous_member_epoch=4, state=MemberState.UNREVOKED_PARTITIONS,
                                 instance_id="i", client_id="c", subscribed_topic_names=("t",),
                                 subscribed_topic_regex="x.*", rebalance_timeout_ms=300,
                                 assigned_partitions={T1: frozenset({1, 2})},
                                 partitions_pending_revocation={T2: frozenset({0})})
    for record, version in ((member_metadata_record("g", member), 5), (current_assignment_record("g", member), 8)):
        key, value = record.encode()
        assert key[:2] == version.to_bytes(2, "big") and value[:2] == b"\x00\x00"
        assert read_key(key) == ConsumerRecordKey(version, "g", "m1")
        decoded = read_consumer_value(version, value)
        assert decoded == record.value
    v = read_consumer_value(8, current_assignment_record("g", member).encode()[1])
    assert (v.member_epoch, v.previous_member_epoch, v.state) == (5, 4, 1)


# ---------------------------------------------------------------- over the wire, and after a restart
def settings(tmp_path, **extra) -> BrokerConfig:
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path), "offsets.topic.num.partitions": "2"}
    props.update(extra)
    return BrokerConfig.from_properties(props)


def heartbeat(member_id, epoch, topics=None, owned=None, timeout=30000):
    return ConsumerGroupHeartbeatRequest(group_id="g", member_id=member_id, member_epoch=epoch,
                                         rebalance_timeout_ms=timeout if epoch == 0 else -1,
                                         subscribed_topic_names=topics, topic_partitions=owned)


def test_a_consumer_group_is_reloaded_after_a_restart(tmp_path):
    async def first_life():
        b = Broker(settings(tmp_path))
        await b.start()
        b.controller.create_topic("t", 4, 1, {})
        c = await AsyncWireClient.connect("127.0.0.1", b.bound[0].port)
        r1 = await c.call(68, 1, heartbeat("m1", 0, ["t"], []))
        r2 = await c.call(68, 1, heartbeat("m2", 0, ["t"], []))
        bad = await c.call(68, 1, heartbeat("m1", 7))
        unknown = await c.call(68, 1, heartbeat("nobody", 3))
        await b.stop()
        return r1, r2, bad, unknown

    async def second_life():
        b = Broker(settings(tmp_path))
        await b.start()
        await b.group_coordinator.wait_loaded()
        c = await AsyncWireClient.connect("127.0.0.1", b.bound[0].port)
        d = await c.call(69, 1, ConsumerGroupDescribeRequest(group_ids=["g", "missing"]))
        await b.stop()
        return d

    r1, r2, bad, unknown = asyncio.run(first_life())
    assert r1.error_code == E.NONE and r1.member_epoch == 1
    assert sum(len(tp.partitions) for tp in r1.assignment.topic_partitions) == 4
    assert r2.error_code == E.NONE and r2.member_epoch == 2
    assert bad.error_code == E.FENCED_MEMBER_EPOCH and unknown.error_code == E.UNKNOWN_MEMBER_ID
    d = asyncio.run(second_life())
    g, missing = d.groups
    assert missing.error_code == E.GROUP_ID_NOT_FOUND
    assert (g.error_code, g.group_epoch, g.assignment_epoch, g.assignor_name) == (E.NONE, 2, 2, "uniform")
    members = {m.member_id: m for m in g.members}
    assert set(members) == {"m1", "m2"}
    assert members["m1"].member_epoch == 1 and members["m1"].member_type == 1
    targets = sorted(p for m in members.values() for tp in m.target_assignment.topic_partitions
                     for p in tp.partitions)
    assert targets == [0, 1, 2, 3]


@pytest.mark.parametrize("protocols,advertised", [("classic,consumer", True), ("classic", False)])
def test_68_and_69_are_advertised_only_with_the_consumer_protocol(tmp_path, protocols, advertised):
    table = advertised_api_versions(settings(tmp_path, **{"group.coordinator.rebalance.protocols": protocols}))
    assert (68 in table and 69 in table) is advertised
    assert 11 in table


# ---------------------------------------------------------------- the heartbeat's rules over the wire
def hb(group="g", member_id="m", epoch=0, topics=("t",), owned=(), instance=None, regex=None, assignor=None,
       timeout=30000):
    return ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance,
        rebalance_timeout_ms=timeout if epoch == 0 else -1, server_assignor=assignor,
        subscribed_topic_names=None if topics is None else list(topics), subscribed_topic_regex=regex,
        topic_partitions=None if owned is None else [
            ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=t, partitions=list(ps)) for t, ps in owned])


def owned_of(resp):
    return [(tp.topic_id, tp.partitions) for tp in resp.assignment.topic_partitions] if resp.assignment else []


async def started(tmp_path, **extra):
    b = Broker(settings(tmp_path, **extra))
    await b.start()
    await b.group_coordinator.wait_loaded()
    return b, await AsyncWireClient.connect("127.0.0.1", b.bound[0].port)


def test_heartbeat_errors_and_limits(tmp_path):
    async def scenario():
        b, c = await started(tmp_path, **{"group.consumer.max.size": "2"})
        b.controller.create_topic("t", 2, 1, {})
        out = {
            "bad regex": (await c.call(68, 1, hb(member_id="r", topics=None, regex="(?=x)"))).error_code,
            "assignor": (await c.call(68, 1, hb(member_id="a", assignor="sticky"))).error_code,
            "no member id": (await c.call(68, 1, hb(member_id=""))).error_code,
            "join without subscription": (await c.call(68, 1, hb(member_id="x", topics=None))).error_code,
            "unknown group": (await c.call(68, 1, hb(group="nope", epoch=3))).error_code,
        }
        assert (await c.call(68, 1, hb(member_id="m1"))).error_code == E.NONE
        assert (await c.call(68, 1, hb(member_id="m2"))).error_code == E.NONE
        out["full"] = (await c.call(68, 1, hb(member_id="m3"))).error_code
        # v0: the broker names the member
        v0 = await c.call(68, 0, hb(group="g0", member_id=""))
        await b.stop()
        return out, v0

    out, v0 = asyncio.run(scenario())
    assert out == {"bad regex": E.INVALID_REGULAR_EXPRESSION, "assignor": E.UNSUPPORTED_ASSIGNOR,
                   "no member id": E.INVALID_REQUEST, "join without subscription": E.INVALID_REQUEST,
                   "unknown group": E.GROUP_ID_NOT_FOUND, "full": E.GROUP_MAX_SIZE_REACHED}
    assert v0.error_code == E.NONE and v0.member_id and v0.member_epoch == 1


def test_static_member_leaves_for_a_while_and_comes_back_to_its_partitions(tmp_path):
    async def scenario():
        b, c = await started(tmp_path)
        b.controller.create_topic("t", 4, 1, {})
        a = await c.call(68, 1, hb(member_id="a", instance="i-a"))
        s = await c.call(68, 1, hb(member_id="s", instance="i-s"))
        # a releases what the target moves to s, then s takes it
        a2 = await c.call(68, 1, hb(member_id="a", epoch=a.member_epoch, topics=None, owned=owned_of(a)))
        a3 = await c.call(68, 1, hb(member_id="a", epoch=a2.member_epoch, topics=None,
                                    owned=owned_of(a2) or owned_of(a)))
        s2 = await c.call(68, 1, hb(member_id="s", epoch=s.member_epoch, topics=None, owned=[]))
        held = owned_of(s2)
        away = await c.call(68, 1, hb(member_id="s", epoch=-2, topics=None, owned=None, instance="i-s"))
        taken = await c.call(68, 1, hb(member_id="other", instance="i-a"))     # a is alive: not released
        back = await c.call(68, 1, hb(member_id="s-new", instance="i-s"))
        describe = await c.call(69, 1, ConsumerGroupDescribeRequest(group_ids=["g"]))
        await b.stop()
        return a3, held, away, taken, back, describe

    a3, held, away, taken, back, describe = asyncio.run(scenario())
    assert held and away.error_code == E.NONE and away.member_epoch == -2
    assert taken.error_code == E.UNRELEASED_INSTANCE_ID
    assert back.error_code == E.NONE and owned_of(back) == held      # the same partitions, no rebalance
    members = {m.member_id for m in describe.groups[0].members}
    assert members == {"a", "s-new"}


def test_offsets_with_member_epochs_and_the_admin_apis(tmp_path):
    from kafka_compat.protocol.messages.delete_groups import DeleteGroupsRequest
    from kafka_compat.protocol.messages.describe_groups import DescribeGroupsRequest
    from kafka_compat.protocol.messages.list_groups import ListGroupsRequest
    from kafka_compat.protocol.messages.offset_commit import OffsetCommitRequest
    from kafka_compat.protocol.messages.offset_fetch import OffsetFetchRequest

    def commit(epoch, version):
        return OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=epoch, member_id="m", topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
                OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=5,
                                                                 committed_metadata="")])])

    def fetch(epoch):
        return OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id="g", member_id="m", member_epoch=epoch, topics=None)])

    async def scenario():
        b, c = await started(tmp_path)
        b.controller.create_topic("t", 2, 1, {})
        j = await c.call(68, 1, hb(member_id="m"))
        out = {
            "v9 right epoch": (await c.call(8, 9, commit(j.member_epoch, 9))).topics[0].partitions[0].error_code,
            "v9 stale": (await c.call(8, 9, commit(j.member_epoch + 5, 9))).topics[0].partitions[0].error_code,
            "v8": (await c.call(8, 8, commit(j.member_epoch, 8))).topics[0].partitions[0].error_code,
            "fetch stale": (await c.call(9, 9, fetch(j.member_epoch + 5))).groups[0].error_code,
        }
        fetched = (await c.call(9, 9, fetch(j.member_epoch))).groups[0]
        out["fetched"] = [(p.partition_index, p.committed_offset) for t in fetched.topics for p in t.partitions]
        listed = await c.call(16, 5, ListGroupsRequest(types_filter=["consumer"]))
        classic_only = await c.call(16, 5, ListGroupsRequest(types_filter=["classic"]))
        described = await c.call(15, 6, DescribeGroupsRequest(groups=["g"]))
        not_empty = await c.call(42, 2, DeleteGroupsRequest(groups_names=["g"]))
        await c.call(68, 1, hb(member_id="m", epoch=-1, topics=None, owned=None))
        deleted = await c.call(42, 2, DeleteGroupsRequest(groups_names=["g"]))
        gone = await c.call(69, 0, ConsumerGroupDescribeRequest(group_ids=["g"]))
        await b.stop()
        return out, listed, classic_only, described, not_empty, deleted, gone

    out, listed, classic_only, described, not_empty, deleted, gone = asyncio.run(scenario())
    assert out == {"v9 right epoch": E.NONE, "v9 stale": E.STALE_MEMBER_EPOCH, "v8": E.UNSUPPORTED_VERSION,
                   "fetch stale": E.STALE_MEMBER_EPOCH, "fetched": [(0, 5)]}
    assert [(g.group_id, g.group_type, g.protocol_type) for g in listed.groups] == [("g", "consumer", "consumer")]
    assert not classic_only.groups
    assert described.groups[0].error_code == E.GROUP_ID_NOT_FOUND and described.groups[0].group_state == "Dead"
    assert described.groups[0].error_message == "Group g is not a classic group."
    assert not_empty.results[0].error_code == E.NON_EMPTY_GROUP
    assert deleted.results[0].error_code == E.NONE
    assert gone.groups[0].error_code == E.GROUP_ID_NOT_FOUND


def test_new_partitions_reach_members_without_a_rejoin(tmp_path):
    async def scenario():
        b, c = await started(tmp_path)
        b.controller.create_topic("t", 2, 1, {})
        j = await c.call(68, 1, hb(member_id="m"))
        b.controller.create_partitions("t", 5)
        later = await c.call(68, 1, hb(member_id="m", epoch=j.member_epoch, topics=None, owned=owned_of(j)))
        await b.stop()
        return j, later

    j, later = asyncio.run(scenario())
    assert sum(len(ps) for _, ps in owned_of(j)) == 2
    assert later.member_epoch > j.member_epoch and sum(len(ps) for _, ps in owned_of(later)) == 5


def test_a_coordinator_move_unloads_and_reloads_the_partition(tmp_path):
    async def scenario():
        b, c = await started(tmp_path)
        b.controller.create_topic("t", 3, 1, {})
        j = await c.call(68, 1, hb(member_id="m"))
        coordinator = b.group_coordinator
        index = coordinator.partition_for("g")
        before = coordinator.groups.get_group("g")
        coordinator.on_resignation(index)          # another broker leads the partition now
        unloaded = coordinator.groups.get_group("g")
        await coordinator.on_election(index)       # and back here
        after = coordinator.groups.get_group("g")
        await b.stop()
        return j, before, unloaded, after

    j, before, unloaded, after = asyncio.run(scenario())
    assert unloaded is None and before.is_dead
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    assert after.members["m"].assigned_partitions == before.members["m"].assigned_partitions
    assert after.members["m"].member_epoch == j.member_epoch


def test_a_member_revoking_when_the_coordinator_moves_still_has_only_its_rebalance_timeout(tmp_path):
    """Loading re-arms the rebalance timeout of a member told to revoke (as Kafka's onLoaded does): one that
    never acknowledges is fenced then, long before its session (60 s here) would end, and its partitions
    go to the member waiting for them."""
    async def scenario():
        b, c = await started(tmp_path, **{"group.consumer.session.timeout.ms": "60000"})
        b.controller.create_topic("t", 2, 1, {})
        t = b.metadata_cache.get_topic("t").topic_id
        await c.call(68, 1, hb(member_id="a", timeout=300))
        joined = await c.call(68, 1, hb(member_id="b"))
        told = await c.call(68, 1, hb(member_id="a", epoch=1, topics=None, owned=[(t, [0, 1])]))
        coordinator = b.group_coordinator
        index = coordinator.partition_for("g")
        coordinator.on_resignation(index)
        await coordinator.on_election(index)
        state = coordinator.groups.get_group("g").members["a"].state
        for _ in range(200):                   # a guard against a hang: 20 s, a third of the session
            if "a" not in coordinator.groups.get_group("g").members:
                break
            await asyncio.sleep(0.1)
        members = set(coordinator.groups.get_group("g").members)
        later = await c.call(68, 1, hb(member_id="b", epoch=joined.member_epoch, topics=None, owned=[]))
        await b.stop()
        return t, told, state, members, later

    t, told, state, members, later = asyncio.run(scenario())
    assert told.error_code == E.NONE and told.member_epoch == 1 and len(owned_of(told)[0][1]) == 1
    assert state == MemberState.UNREVOKED_PARTITIONS        # reloaded as it was
    assert members == {"b"}
    assert later.error_code == E.NONE and owned_of(later) == [(t, [0, 1])]


def test_leader_epochs_order_a_partitions_elections_and_resignations(tmp_path):
    async def scenario():
        b, c = await started(tmp_path)
        b.controller.create_topic("t", 1, 1, {})
        await c.call(68, 1, hb(member_id="m"))
        coordinator = b.group_coordinator
        index = coordinator.partition_for("g")
        coordinator.on_resignation(index)
        await coordinator.on_election(index, 5)
        again = coordinator.on_election(index, 5)                 # already loaded at that epoch
        coordinator.on_resignation(index, 4)                      # older than the load: ignored
        kept = (coordinator.groups.get_group("g"), coordinator.validate_group_status("g", "ConsumerGroupHeartbeat"))
        coordinator.on_resignation(index, 6)                      # leadership moved on
        gone = (coordinator.groups.get_group("g"), coordinator.validate_group_status("g", "ConsumerGroupHeartbeat"))
        await b.stop()
        return again, kept, gone

    again, (kept, kept_status), (gone, gone_status) = asyncio.run(scenario())
    assert again is None and kept is not None and "m" in kept.members and kept_status is None
    assert gone is None and gone_status == E.NOT_COORDINATOR


def test_a_member_waiting_for_partitions_heartbeats_at_the_minimum_interval(tmp_path):
    async def scenario():
        b, c = await started(tmp_path, **{"group.consumer.min.heartbeat.interval.ms": "100",
                                          "group.consumer.heartbeat.interval.ms": "1000"})
        b.controller.create_topic("t", 2, 1, {})
        first = await c.call(68, 1, hb(member_id="a"))
        waiting = await c.call(68, 1, hb(member_id="b"))       # its target is still owned by a
        await b.stop()
        return first, waiting

    first, waiting = asyncio.run(scenario())
    assert first.heartbeat_interval_ms == 1000 and owned_of(first)
    assert not owned_of(waiting) and waiting.heartbeat_interval_ms == 100


def test_a_joining_member_gets_free_partitions_at_once_and_released_ones_at_its_next_heartbeat(tmp_path):
    """What a rebalance costs in heartbeats: the joiner's first one brings what nobody owns; the owner's
    next one is told to revoke, its acknowledgement frees the partitions, and the joiner's next one has them."""
    async def scenario():
        b, c = await started(tmp_path)
        b.controller.create_topic("t", 4, 1, {})
        b.controller.create_topic("u", 2, 1, {})
        t, u = (b.metadata_cache.get_topic(n).topic_id for n in "tu")
        steps = {"a joins": await c.call(68, 1, hb(member_id="a"))}
        steps["b joins"] = await c.call(68, 1, hb(member_id="b", topics=("t", "u")))
        steps["a is told"] = await c.call(68, 1, hb(member_id="a", epoch=1, topics=None, owned=[(t, range(4))]))
        kept = dict(owned_of(steps["a is told"]))[t]
        steps["a acknowledges"] = await c.call(68, 1, hb(member_id="a", epoch=1, topics=None, owned=[(t, kept)]))
        steps["b again"] = await c.call(68, 1, hb(member_id="b", epoch=steps["b joins"].member_epoch, topics=None,
                                                   owned=owned_of(steps["b joins"])))
        await b.stop()
        return t, u, steps

    t, u, steps = asyncio.run(scenario())
    assert all(r.error_code == E.NONE for r in steps.values()), steps
    assert dict(owned_of(steps["a joins"])) == {t: [0, 1, 2, 3]}
    joined = dict(owned_of(steps["b joins"]))
    assert joined == {u: [0, 1]} and steps["b joins"].member_epoch == 2     # t's are still a's
    told = steps["a is told"]
    assert told.member_epoch == 1 and 0 < len(dict(owned_of(told))[t]) < 4  # revoke first, at its epoch
    assert steps["a acknowledges"].member_epoch == 2
    kept = dict(owned_of(told))[t]
    b_now = dict(owned_of(steps["b again"]))
    assert b_now[u] == [0, 1] and sorted(b_now[t] + kept) == [0, 1, 2, 3]


def test_transactional_offsets_of_a_consumer_group_member_count_at_the_commit(tmp_path):
    """TxnOffsetCommit for a consumer group: checked against the member's epoch, pending (unstable)
    until the transaction commits, then the group's committed offset."""
    from test_transaction_coordinator import ADD_OFFSETS, Txn, connect, fetch_offset, running

    from kafka_compat.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
    from kafka_compat.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest

    def commit(t, member_id, epoch, offset, topic_id=b"\0" * 16):
        return TxnOffsetCommitRequest(
            transactional_id=t.txn_id, group_id="g", producer_id=t.pid, producer_epoch=t.epoch,
            generation_id_or_member_epoch=epoch, member_id=member_id,
            topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
                name="t", topic_id=topic_id, partitions=[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=offset, committed_metadata="")])])

    async def scenario():
        async with running(tmp_path) as b:
            c = await connect(b)        # the transaction coordinator loaded
            await b.group_coordinator.wait_loaded()
            return await steps(b, c)

    async def steps(b, c):
        b.controller.create_topic("t", 1, 1, {})
        j = await c.call(68, 1, hb(member_id="m"))
        t = Txn(c, "eos")
        await t.init()
        out = {"add": (await c.call(ADD_OFFSETS, 2, AddOffsetsToTxnRequest(
            transactional_id="eos", producer_id=t.pid, producer_epoch=t.epoch, group_id="g"))).error_code}
        for name, member, epoch in (("stale", "m", j.member_epoch + 3), ("unknown", "nobody", j.member_epoch),
                                    ("member", "m", j.member_epoch)):
            out[name] = (await c.call(28, 3, commit(t, member, epoch, 7))).topics[0].partitions[0].error_code
        # v6 (KIP-1319) tells a consumer-protocol member its epoch is stale, as OffsetCommit does
        out["stale v6"] = (await c.call(28, 6, commit(t, "m", j.member_epoch + 3, 7, b.metadata_cache.get(
            "t").topic_id))).topics[0].partitions[0].error_code
        out["pending"] = await fetch_offset(c, "g", "t", True)
        out["end"] = await t.end(True)
        await t.settled("CompleteCommit")
        out["committed"] = await fetch_offset(c, "g", "t", True)
        await c.close()
        return out

    out = asyncio.run(scenario())
    assert out == {"add": E.NONE, "stale": E.ILLEGAL_GENERATION, "unknown": E.UNKNOWN_MEMBER_ID, "member": E.NONE,
                   "stale v6": E.STALE_MEMBER_EPOCH,
                   "pending": (E.UNSTABLE_OFFSET_COMMIT, -1), "end": E.NONE, "committed": (E.NONE, 7)}
