"""Streams groups (KIP-1071): the sticky task assignor, reconciliation, the topology's configuration,
and StreamsGroupHeartbeat/StreamsGroupDescribe with the group APIs over the wire."""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wire import AsyncWireClient  # noqa: E402

from kafka_compat.group.streams.assignor import MemberSpec, TaskSpec, assign  # noqa: E402
from kafka_compat.group.streams.streams_group import MemberState, StreamsGroupMember, reconcile  # noqa: E402
from kafka_compat.group.streams.tasks import EMPTY, TasksTuple  # noqa: E402
from kafka_compat.group.streams.topology import (  # noqa: E402
    INCORRECTLY_PARTITIONED_TOPICS,
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
    CopartitionGroup,
    StreamsTopology,
    Subtopology,
    TopicInfo,
    configure,
    validate_topology,
)
from kafka_compat.protocol.errors import ErrorCode as E  # noqa: E402
from kafka_compat.protocol.errors import KafkaError  # noqa: E402
from kafka_compat.protocol.messages.streams_group_describe import StreamsGroupDescribeRequest  # noqa: E402
from kafka_compat.protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatRequest as R  # noqa: E402
from kafka_compat.server.broker import Broker, advertised_api_versions  # noqa: E402
from kafka_compat.server.kafka_config import BrokerConfig  # noqa: E402


def T(active=(), standby=(), warmup=()) -> TasksTuple:
    """T({"0": [0, 1]}) and the like."""
    def items(x):
        return x.items() if isinstance(x, dict) else x
    return TasksTuple.of(items(active), items(standby), items(warmup))


# ---------------------------------------------------------------- the sticky task assignor
def flat(tasks: dict) -> set:
    return {(s, p) for s, ps in tasks.items() for p in ps}


@pytest.mark.parametrize("name,members,subs,standbys,check", [
    ("balanced from scratch", {"a": ("p1", T()), "b": ("p2", T())}, {"0": (4, True)}, 0,
     lambda r: sorted(len(flat(t.active)) for t in r.values()) == [2, 2]),
    ("sticky: a keeps what it ran", {"a": ("p1", T({"0": [0, 1, 2, 3]})), "b": ("p2", T())}, {"0": (4, True)}, 0,
     lambda r: flat(r["a"].active) == {("0", 0), ("0", 1)} and flat(r["b"].active) == {("0", 2), ("0", 3)}),
    ("a standby holder is promoted", {"b": ("p2", T(standby={"0": [0, 1]}))}, {"0": (2, True)}, 0,
     lambda r: flat(r["b"].active) == {("0", 0), ("0", 1)}),
    ("standbys on the other process", {"a": ("p1", T()), "b": ("p2", T())}, {"0": (2, True)}, 1,
     lambda r: all(not (flat(t.active) & flat(t.standby)) and len(flat(t.standby)) == 1 for t in r.values())),
    ("no standby on the active's process", {"a": ("p1", T()), "b": ("p1", T())}, {"0": (2, True)}, 1,
     lambda r: all(not t.standby for t in r.values())),
    ("stateless tasks get no standbys", {"a": ("p1", T()), "b": ("p2", T())}, {"0": (2, False)}, 1,
     lambda r: all(not t.standby for t in r.values())),
    ("stateless fill up the lighter member", {"a": ("p1", T({"0": [0, 1, 2]})), "b": ("p2", T())},
     {"0": (3, True), "1": (1, False)}, 0,
     lambda r: sorted(len(flat(t.active)) for t in r.values()) == [2, 2]),
    ("a previous standby keeps its standby", {"a": ("p1", T({"0": [0]})), "b": ("p2", T()),
                                              "c": ("p3", T(standby={"0": [0]}))}, {"0": (1, True)}, 1,
     lambda r: flat(r["a"].active) == {("0", 0)} and flat(r["c"].standby) == {("0", 0)}),
    ("no warm-up tasks", {"a": ("p1", T()), "b": ("p2", T())}, {"0": (6, True), "1": (3, True)}, 1,
     lambda r: all(not t.warmup for t in r.values())),
])
def test_sticky_task_assignor(name, members, subs, standbys, check):
    result = assign({m: MemberSpec(*x) for m, x in members.items()},
                    {s: TaskSpec(*x) for s, x in subs.items()}, standbys)
    every = {(s, p) for s, (n, _) in subs.items() for p in range(n)}
    assert set().union(*(flat(t.active) for t in result.values())) == every, name      # each active task once
    assert sum(len(flat(t.active)) for t in result.values()) == len(every), name
    assert check(result), (name, result)


# ---------------------------------------------------------------- reconciliation (revoke before assign)
def member(epoch=1, state=MemberState.STABLE, assigned=EMPTY, pending=EMPTY, process="p1"):
    return StreamsGroupMember("m", member_epoch=epoch, previous_member_epoch=epoch - 1, state=state,
                              process_id=process, assigned=assigned, pending_revocation=pending)


def nobody(sub, p):
    return None


def no_copies(sub, p):
    return ()


@pytest.mark.parametrize("name,m,target,owned,active_owner,copies,want", [
    ("stable at the target stays", member(2, assigned=T({"0": [0]})), T({"0": [0]}), None, nobody, no_copies,
     (2, MemberState.STABLE, T({"0": [0]}), EMPTY)),
    ("new tasks free: assigned at the target epoch", member(1), T({"0": [0, 1]}), T(), nobody, no_copies,
     (3, MemberState.STABLE, T({"0": [0, 1]}), EMPTY)),
    ("a task to revoke: epoch kept, revocation asked", member(1, assigned=T({"0": [0, 1]})), T({"0": [1]}),
     T({"0": [0, 1]}), nobody, no_copies, (1, MemberState.UNREVOKED_TASKS, T({"0": [1]}), T({"0": [0]}))),
    ("revoked already (not owned): moves on", member(1, assigned=T({"0": [0, 1]})), T({"0": [1]}),
     T({"0": [1]}), nobody, no_copies, (3, MemberState.STABLE, T({"0": [1]}), EMPTY)),
    ("still owned by another: unreleased", member(1), T({"0": [0]}), T(), lambda s, p: "p2", no_copies,
     (3, MemberState.UNRELEASED_TASKS, EMPTY, EMPTY)),
    ("standby not on a process holding the active", member(1), T(standby={"0": [0]}), T(),
     lambda s, p: "p1", no_copies, (3, MemberState.UNRELEASED_TASKS, EMPTY, EMPTY)),
    ("standby while another process runs the active", member(1), T(standby={"0": [0]}), T(),
     lambda s, p: "p2", no_copies, (3, MemberState.STABLE, T(standby={"0": [0]}), EMPTY)),
    ("active waits for this process's own standby copy", member(1), T({"0": [0]}), T(), nobody,
     lambda s, p: {"p1"}, (3, MemberState.UNRELEASED_TASKS, EMPTY, EMPTY)),
    ("unrevoked: waits while the member owns them",
     member(1, MemberState.UNREVOKED_TASKS, T({"0": [1]}), T({"0": [0]})), T({"0": [1]}), T({"0": [0, 1]}),
     nobody, no_copies, (1, MemberState.UNREVOKED_TASKS, T({"0": [1]}), T({"0": [0]}))),
    ("unrevoked: moves on once they are gone",
     member(1, MemberState.UNREVOKED_TASKS, T({"0": [1]}), T({"0": [0]})), T({"0": [1]}), T({"0": [1]}),
     nobody, no_copies, (3, MemberState.STABLE, T({"0": [1]}), EMPTY)),
])
def test_reconcile(name, m, target, owned, active_owner, copies, want):
    after = reconcile(m, 3 if name != "stable at the target stays" else 2, target, owned, active_owner, copies)
    assert (after.member_epoch, after.state, after.assigned, after.pending_revocation) == want, name


# ---------------------------------------------------------------- the topology
def word_join(changelog_partitions=0):
    """WordJoin's shape: A re-keyed into a repartition topic, joined with B, counted after a second one."""
    return StreamsTopology(1, (
        Subtopology("0", ("A",), ("app-left-repartition",)),
        Subtopology("1", ("B",), ("app-by-bucket-repartition",),
                    (TopicInfo("app-join-store-changelog", changelog_partitions),),
                    (TopicInfo("app-left-repartition"),), (CopartitionGroup((0,), (0,)),)),
        Subtopology("2", (), (), (TopicInfo("app-counts-changelog"),), (TopicInfo("app-by-bucket-repartition"),)),
    ))


def test_configure_derives_partitions_and_lists_the_missing_internal_topics():
    c = configure(word_join(), {"A": 3, "B": 3}.get)
    assert c.status == [(MISSING_INTERNAL_TOPICS, "Internal topics are missing: app-by-bucket-repartition, "
                                                  "app-counts-changelog, app-join-store-changelog, "
                                                  "app-left-repartition")]
    assert {n: i.partitions for n, i in c.to_create.items()} == dict.fromkeys(c.to_create, 3)
    ready = configure(word_join(), {"A": 3, "B": 3, **dict.fromkeys(c.to_create, 3)}.get)
    assert ready.is_ready and ready.tasks == {"0": 3, "1": 3, "2": 3} and not ready.to_create


def test_configure_reports_what_is_wrong():
    missing = configure(word_join(), {"B": 3}.get)
    assert missing.status == [(MISSING_SOURCE_TOPICS, "Source topics A are missing.")] and not missing.tasks
    # two external topics joined must agree
    joined = StreamsTopology(1, (Subtopology("0", ("A", "B"), copartition_groups=(CopartitionGroup((0, 1)),)),))
    wrong = configure(joined, {"A": 3, "B": 4}.get)
    assert [code for code, _ in wrong.status] == [INCORRECTLY_PARTITIONED_TOPICS] and not wrong.tasks
    # a repartition topic without a count follows the external topic it is copartitioned with
    follows = configure(word_join(), {"A": 3, "B": 4}.get)
    assert follows.to_create["app-left-repartition"].partitions == 4
    assert follows.to_create["app-join-store-changelog"].partitions == 4


def test_invalid_topologies_are_refused():
    with pytest.raises(KafkaError) as e:
        validate_topology(word_join(changelog_partitions=3))
    assert e.value.error_code == E.STREAMS_INVALID_TOPOLOGY
    with pytest.raises(KafkaError):
        validate_topology(StreamsTopology(0, (Subtopology("0", ("A",), ("nowhere",)),)))


# ---------------------------------------------------------------- over the wire
def settings(tmp_path, **extra) -> BrokerConfig:
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path), "offsets.topic.num.partitions": "2",
             "group.streams.heartbeat.interval.ms": "1000", "group.streams.min.heartbeat.interval.ms": "1000",
             "group.streams.initial.rebalance.delay.ms": "0"}
    props.update(extra)
    return BrokerConfig.from_properties(props)


async def started(tmp_path, **extra):
    b = Broker(settings(tmp_path, **extra))
    await b.start()
    await b.group_coordinator.wait_loaded()
    return b, await AsyncWireClient.connect("127.0.0.1", b.bound[0].port)


def wire_topology(epoch=1):
    return R.Topology(epoch=epoch, subtopologies=[
        R.Subtopology(subtopology_id="0", source_topics=["in"], source_topic_regex=[], repartition_sink_topics=[],
                      state_changelog_topics=[R.TopicInfo(name="app-store-changelog", partitions=0,
                                                          replication_factor=0, topic_configs=[
                                                              R.KeyValue(key="cleanup.policy", value="compact")])],
                      repartition_source_topics=[], copartition_groups=[])])


def hb(member_id="m", epoch=0, owned=(), topology=True, process="p1", group="app", timeout=30000):
    active = standby = warmup = None
    if owned is not None:
        t = owned if isinstance(owned, TasksTuple) else T()
        active, standby, warmup = ([R.TaskIds(subtopology_id=s, partitions=sorted(p)) for s, p in kind.items()]
                                   for kind in t)
    return R(group_id=group, member_id=member_id, member_epoch=epoch, rebalance_timeout_ms=timeout if epoch == 0 else -1,
             topology=wire_topology() if topology and epoch == 0 else None, process_id=process if epoch == 0 else None,
             active_tasks=active, standby_tasks=standby, warmup_tasks=warmup)


def tasks_of(resp) -> TasksTuple | None:
    if resp.active_tasks is None:
        return None
    return T([(t.subtopology_id, t.partitions) for t in resp.active_tasks],
             [(t.subtopology_id, t.partitions) for t in resp.standby_tasks],
             [(t.subtopology_id, t.partitions) for t in resp.warmup_tasks])


@pytest.mark.parametrize("protocols,advertised", [("classic,consumer,streams", True), ("classic,consumer", False)])
def test_88_and_89_are_advertised_only_with_the_streams_protocol(tmp_path, protocols, advertised):
    table = advertised_api_versions(settings(tmp_path, **{"group.coordinator.rebalance.protocols": protocols}))
    assert (88 in table and 89 in table and 93 in table) is advertised


def test_heartbeat_validation(tmp_path):
    async def scenario():
        b, c = await started(tmp_path)
        out = {
            "no member id": await c.call(88, 0, hb(member_id="")),
            "join without topology": await c.call(88, 0, hb(topology=False)),
            "join without rebalance timeout": await c.call(88, 0, hb(timeout=-1)),
            "join owning tasks": await c.call(88, 0, hb(owned=T({"0": [0]}))),
            "epoch below -2": await c.call(88, 0, hb(epoch=-3, owned=None)),
            "unknown group": await c.call(88, 0, hb(group="nope", epoch=4, owned=None)),
        }
        bad = hb()
        bad.topology.subtopologies[0].state_changelog_topics[0].partitions = 2
        out["changelog with partitions"] = await c.call(88, 0, bad)
        regex = hb()
        regex.topology.subtopologies[0].source_topic_regex = ["in.*"]
        out["source topic regex"] = await c.call(88, 0, regex)
        await b.stop()
        return {k: v.error_code for k, v in out.items()}

    assert asyncio.run(scenario()) == {
        "no member id": E.INVALID_REQUEST, "join without topology": E.INVALID_REQUEST,
        "join without rebalance timeout": E.INVALID_REQUEST, "join owning tasks": E.INVALID_REQUEST,
        "epoch below -2": E.INVALID_REQUEST, "unknown group": E.GROUP_ID_NOT_FOUND,
        "changelog with partitions": E.STREAMS_INVALID_TOPOLOGY, "source topic regex": E.INVALID_REQUEST}


def test_a_streams_group_from_join_to_two_members(tmp_path):
    from kafka_compat.protocol.messages.delete_groups import DeleteGroupsRequest
    from kafka_compat.protocol.messages.describe_groups import DescribeGroupsRequest
    from kafka_compat.protocol.messages.list_groups import ListGroupsRequest
    from kafka_compat.protocol.messages.offset_commit import OffsetCommitRequest

    def commit(epoch, member="m1"):
        return OffsetCommitRequest(group_id="app", generation_id_or_member_epoch=epoch, member_id=member, topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(name="in", partitions=[
                OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=7,
                                                                 committed_metadata="")])])

    async def scenario():
        b, c = await started(tmp_path)
        missing = await c.call(88, 0, hb("m1"))           # the source topic does not exist yet
        b.controller.create_topic("in", 2, 1, {})
        first = await c.call(88, 0, hb("m1", missing.member_epoch, owned=T(), topology=False))
        changelog = b.metadata_cache.get_topic("app-store-changelog")
        second = await c.call(88, 0, hb("m1", first.member_epoch, owned=T()))
        alone = tasks_of(second)
        # a second member (another process): m1 must give up a task before m2 gets it
        m2 = await c.call(88, 0, hb("m2", process="p2"))
        m1 = await c.call(88, 0, hb("m1", second.member_epoch, owned=alone))
        m1_keeps = tasks_of(m1)
        m2_waits = await c.call(88, 0, hb("m2", m2.member_epoch, owned=T()))
        m1_done = await c.call(88, 0, hb("m1", m1.member_epoch, owned=m1_keeps))
        m2_gets = await c.call(88, 0, hb("m2", m2_waits.member_epoch, owned=tasks_of(m2_waits) or T()))
        described = (await c.call(89, 0, StreamsGroupDescribeRequest(group_ids=["app", "nope"]))).groups
        offsets = {
            "right epoch": await c.call(8, 9, commit(m1_done.member_epoch)),
            "stale epoch": await c.call(8, 9, commit(m1_done.member_epoch + 3)),
            "v8": await c.call(8, 8, commit(m1_done.member_epoch)),
            "unknown member": await c.call(8, 9, commit(m1_done.member_epoch, "x")),
        }
        listed = await c.call(16, 5, ListGroupsRequest(types_filter=["streams"]))
        classic = await c.call(15, 6, DescribeGroupsRequest(groups=["app"]))
        not_empty = await c.call(42, 2, DeleteGroupsRequest(groups_names=["app"]))
        left = [await c.call(88, 0, hb(m, -1, owned=None)) for m in ("m1", "m2")]
        deleted = await c.call(42, 2, DeleteGroupsRequest(groups_names=["app"]))
        await b.stop()
        return dict(missing=missing, first=first, changelog=changelog, second=second, m2=m2, m1=m1,
                    m2_waits=m2_waits, m1_done=m1_done, m2_gets=m2_gets, described=described,
                    offsets={k: v.topics[0].partitions[0].error_code for k, v in offsets.items()}, listed=listed,
                    classic=classic, not_empty=not_empty, left=left, deleted=deleted)

    r = asyncio.run(scenario())
    assert [s.status_code for s in r["missing"].status] == [MISSING_SOURCE_TOPICS] and tasks_of(r["missing"]) == T()
    # the source topic is there: the broker creates the changelog with one partition per task
    assert [s.status_code for s in r["first"].status or []] in ([MISSING_INTERNAL_TOPICS], [])
    assert r["changelog"] is not None and r["changelog"].partitions == 2
    assert r["second"].status == [] and tasks_of(r["second"]) == T({"0": [0, 1]})
    assert r["second"].heartbeat_interval_ms == 1000
    # m1 is asked to revoke one task (its epoch stays); m2 waits for it, then gets it with a standby-free split
    assert r["m1"].member_epoch == r["second"].member_epoch and len(tasks_of(r["m1"]).active["0"]) == 1
    assert not (tasks_of(r["m2_waits"]) or T()).active
    got = tasks_of(r["m2_gets"])
    assert got.active and not (got.active["0"] & tasks_of(r["m1"]).active["0"])
    assert r["m2_gets"].member_epoch == r["m1_done"].member_epoch
    app, nope = r["described"]
    assert (app.error_code, app.group_state, len(app.members)) == (0, "Stable", 2)
    assert app.topology.subtopologies[0].state_changelog_topics[0].partitions == 2
    assert {tuple(t.partitions) for m in app.members for t in m.assignment.active_tasks} == {(0,), (1,)}
    assert nope.error_code == E.GROUP_ID_NOT_FOUND
    assert r["offsets"] == {"right epoch": E.NONE, "stale epoch": E.STALE_MEMBER_EPOCH, "v8": E.UNSUPPORTED_VERSION,
                            "unknown member": E.UNKNOWN_MEMBER_ID}
    assert [(g.group_id, g.group_type, g.protocol_type) for g in r["listed"].groups] == [("app", "streams", "streams")]
    assert r["classic"].groups[0].error_message == "Group app is not a classic group."
    assert r["not_empty"].results[0].error_code == E.NON_EMPTY_GROUP
    assert [x.member_epoch for x in r["left"]] == [-1, -1]
    assert r["deleted"].results[0].error_code == E.NONE


def test_a_new_groups_first_assignment_waits_for_the_initial_delay(tmp_path):
    async def scenario():
        b, c = await started(tmp_path, **{"group.streams.initial.rebalance.delay.ms": "60000"})
        b.controller.create_topic("in", 1, 1, {})
        first = await c.call(88, 0, hb("m1"))
        again = await c.call(88, 0, hb("m1", first.member_epoch, owned=T(), topology=False))
        await b.stop()
        return first, again

    first, again = asyncio.run(scenario())
    assert first.member_epoch == 1      # (the second is 2: the changelog topic the first had created)
    for r in (first, again):
        assert r.error_code == E.NONE and r.member_epoch >= 1
        assert r.status[0].status_code == 5 and not (tasks_of(r) or T()).active
    assert first.status[0].status_detail == "Assignment delayed due to the configured initial rebalance delay."


def test_streams_version_0_turns_the_apis_off(tmp_path):
    from kafka_compat.protocol.messages.update_features import UpdateFeaturesRequest as U

    async def scenario():
        b, c = await started(tmp_path)
        b.controller.create_topic("in", 1, 1, {})
        on = await c.call(88, 0, hb("m1"))
        r = await c.call(57, 1, U(timeout_ms=10000, validate_only=False, feature_updates=[
            U.FeatureUpdateKey(feature="streams.version", max_version_level=0, upgrade_type=2)]))
        off = await c.call(88, 0, hb("m2"))
        described = await c.call(89, 0, StreamsGroupDescribeRequest(group_ids=["app"]))
        await b.stop()
        return on, r, off, described

    on, r, off, described = asyncio.run(scenario())
    assert on.error_code == E.NONE and r.error_code == E.NONE
    assert off.error_code == E.UNSUPPORTED_VERSION
    assert described.groups[0].error_code == E.UNSUPPORTED_VERSION


def test_a_streams_group_is_reloaded_after_a_restart(tmp_path):
    """Its StreamsGroup* records in __consumer_offsets bring back the epochs, topology, members and tasks."""
    from test_groups import offsets_log_records

    from kafka_compat.group.coordinator_records import read_consumer_value, read_key

    async def first_life():
        b, c = await started(tmp_path)
        b.controller.create_topic("in", 2, 1, {})
        j = await c.call(88, 0, hb("m1"))
        j = await c.call(88, 0, hb("m1", j.member_epoch, owned=T()))
        j = await c.call(88, 0, hb("m1", j.member_epoch, owned=T()))
        state = (await c.call(89, 0, StreamsGroupDescribeRequest(group_ids=["app"]))).groups[0]
        kinds = set()
        for key_bytes, value in offsets_log_records(b, "app"):
            key = read_key(key_bytes)
            kinds.add(getattr(key, "type", None))
            if getattr(key, "type", None) == 22 and value is not None:
                read_consumer_value(22, value)        # decodes as Kafka's value
        await b.stop()
        return j, state, kinds

    async def second_life():
        b, c = await started(tmp_path)
        state = (await c.call(89, 0, StreamsGroupDescribeRequest(group_ids=["app"]))).groups[0]
        again = await c.call(88, 0, hb("m1", state.members[0].member_epoch, owned=T({"0": [0, 1]})))
        await b.stop()
        return state, again

    j, before, kinds = asyncio.run(first_life())
    assert {17, 19, 20, 21, 22, 23} <= kinds
    after, again = asyncio.run(second_life())
    fields = ("group_state", "group_epoch", "assignment_epoch")
    assert [getattr(after, f) for f in fields] == [getattr(before, f) for f in fields]
    assert after.topology.epoch == before.topology.epoch
    assert [(m.member_id, m.member_epoch, m.process_id) for m in after.members] == \
        [(m.member_id, m.member_epoch, m.process_id) for m in before.members]
    assert [t.partitions for t in after.members[0].assignment.active_tasks] == [[0, 1]]
    assert again.error_code == E.NONE and again.member_epoch == j.member_epoch     # no rebalance after the load
