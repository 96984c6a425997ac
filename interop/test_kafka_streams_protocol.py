"""Kafka Streams 4.4 with `group.protocol=streams` (KIP-1071): the broker configures the topology, creates
the internal topics and assigns the tasks (interop/streams/WordJoin.java, as in test_kafka_streams.py).

Two instances with num.standby.replicas=1 (the group config streams.num.standby.replicas, from the broker's
group.streams.num.standby.replicas) run; half of the input goes in; one instance is SIGKILLed, and once
its session times out the survivor runs every task, among them those it kept as standbys (promoted); the
other half goes in; a third instance joins late and is given tasks; the output must be exact (exactly
once: every join result once and the counts exact; at least once: every result, duplicates allowed).
StreamsGroupDescribe shows the broker's view at each step. One broker and the three-broker cluster.
"""
from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import jvm_apps
import pytest
import test_kafka_streams as ks

from kafka_compat.protocol.messages.find_coordinator import FindCoordinatorRequest
from kafka_compat.protocol.messages.streams_group_describe import StreamsGroupDescribeRequest
from kafka_compat.testing import EmbeddedBroker, zookeeper_missing

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from wire import WireClient  # noqa: E402

pytestmark = pytest.mark.skipif(jvm_apps.missing("streams") is not None, reason=str(jvm_apps.missing("streams")))
pytest.importorskip("confluent_kafka")

# a killed member's tasks move once its session times out: short sessions, frequent heartbeats
STREAMS_GROUP_CONFIGS = {
    "group.streams.session.timeout.ms": 6000, "group.streams.min.session.timeout.ms": 1000,
    "group.streams.heartbeat.interval.ms": 1000, "group.streams.min.heartbeat.interval.ms": 500,
    "group.streams.num.standby.replicas": 1, "group.streams.initial.rebalance.delay.ms": 0,
    "group.initial.rebalance.delay.ms": 0}
STANDBYS = "1"


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker(STREAMS_GROUP_CONFIGS) as b:
        yield b


@pytest.fixture(scope="module")
def cluster():
    missing = zookeeper_missing()
    if missing:
        pytest.skip(missing)
    from cluster_support import new_cluster
    with new_cluster(**STREAMS_GROUP_CONFIGS) as c:
        yield c


@pytest.fixture(scope="module", params=["broker", "cluster"])
def target(request):
    if request.param == "broker":
        return request.getfixturevalue("broker").bootstrap, 1
    return request.getfixturevalue("cluster").bootstrap, 3


@pytest.fixture(scope="module")
def classpath():
    return jvm_apps.streams_classpath()


def describe(bootstrap: str, group: str):
    """The group as its coordinator's StreamsGroupDescribe shows it (None while no coordinator answers)."""
    for address in bootstrap.split(","):
        host, port = address.rsplit(":", 1)
        try:
            c = WireClient(host, int(port), timeout=5)
            found = c.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group])).coordinators[0]
            c.close()
            if found.error_code:
                continue
            c = WireClient(found.host, found.port, timeout=5)
            g = c.call(89, 0, StreamsGroupDescribeRequest(group_ids=[group])).groups[0]
            c.close()
            return g if g.error_code == 0 else None
        except OSError:
            continue
    return None


def tasks(assignment, kind: str) -> set[tuple[str, int]]:
    return {(t.subtopology_id, p) for t in getattr(assignment, kind) for p in t.partitions}


def run(classpath: str, bootstrap: str, rf: int, guarantee: str):
    tag = uuid.uuid4().hex[:6]
    app = f"wordjoin-s-{tag}"
    topics = [f"wjs-a-{tag}", f"wjs-b-{tag}", f"wjs-out-{tag}", f"wjs-counts-{tag}"]
    ks.create_topics(bootstrap, rf, *topics)
    isolation = "read_committed" if guarantee == "exactly_once_v2" else "read_uncommitted"
    out, counts = ks.Reader(bootstrap, topics[2], isolation), ks.Reader(bootstrap, topics[3], isolation)

    def start(n):
        return ks.Instance(classpath, bootstrap, app, guarantee, topics, rf, f"{tag}-{n}", ("streams", STANDBYS))
    instances = [start(0), start(1)]
    try:
        def wait(cond, what):
            deadline = time.monotonic() + ks.WAIT
            while not cond():
                if time.monotonic() > deadline:
                    logs = "\n".join(f"--- instance {n}\n{x.log()}" for n, x in enumerate(instances))
                    raise AssertionError(f"{guarantee}: timed out waiting for {what}; {len(out.records)} results, "
                                         f"group {describe(bootstrap, app)}\n{logs}")
                for x in instances[1:]:
                    assert x.proc.poll() is None, f"an instance exited:\n{x.log()}"
                out.poll(0.5)
                counts.poll(0.5)

        def group_is(n_members):
            g = describe(bootstrap, app)
            return g is not None and g.group_state == "Stable" and len(g.members) == n_members and \
                all(tasks(m.assignment, "active_tasks") for m in g.members) and g

        wait(lambda: all(x.running_seen() for x in instances), "both instances to be RUNNING")
        wait(lambda: group_is(2), "a stable group of two, each with active tasks")
        before = group_is(2)
        assert {s.subtopology_id for s in before.topology.subtopologies} == {"0", "1", "2"}
        # every stateful task has its standby on the other instance
        for m in before.members:
            assert tasks(m.assignment, "standby_tasks"), f"member {m.member_id} has no standby tasks"
            assert not tasks(m.assignment, "standby_tasks") & tasks(m.assignment, "active_tasks")
        ks.produce(bootstrap, topics[0], topics[1], range(ks.IDS // 2))
        wait(lambda: len(out.records) >= ks.IDS // 10, "the first results")
        instances[0].kill()
        ks.produce(bootstrap, topics[0], topics[1], range(ks.IDS // 2, ks.IDS))
        wait(lambda: group_is(1), "the survivor to run every task")
        alone = group_is(1)
        survivor = alone.members[0]
        was = next(m for m in before.members if m.member_id == survivor.member_id)
        assert tasks(was.assignment, "standby_tasks") <= tasks(survivor.assignment, "active_tasks"), \
            "the survivor's standbys were not promoted"
        all_tasks = set().union(*(tasks(m.assignment, "active_tasks") for m in before.members))
        assert tasks(survivor.assignment, "active_tasks") == all_tasks
        instances.append(start(2))         # a late instance
        wait(lambda: instances[2].running_seen() and group_is(2), "the late instance to be given tasks")
        after = group_is(2)
        late = next(m for m in after.members if m.member_id != survivor.member_id)
        assert tasks(late.assignment, "active_tasks")
        want, want_counts = ks.expected_sums(), ks.expected_counts()

        def complete():
            last = dict(counts.records)
            return (set(want.items()) <= set(out.records)
                    and all(int(last.get(k, 0)) >= n for k, n in want_counts.items()))
        wait(complete, f"all {ks.IDS} join results and counts")
        out.poll(3)
        counts.poll(1)
        return out.records, dict(counts.records)
    finally:
        out.close()
        counts.close()
        for x in instances:
            x.close()


def test_streams_protocol_exactly_once_v2(target, classpath):
    bootstrap, rf = target
    records, last_counts = run(classpath, bootstrap, rf, "exactly_once_v2")
    want = ks.expected_sums()
    dupes = len(records) - len(set(records))
    assert sorted(records) == sorted(want.items()), f"{len(records)} results for {len(want)} ids, {dupes} duplicates"
    assert last_counts == {k: str(n) for k, n in ks.expected_counts().items()}


def test_streams_protocol_at_least_once(target, classpath):
    bootstrap, rf = target
    records, last_counts = run(classpath, bootstrap, rf, "at_least_once")
    assert set(records) == set(ks.expected_sums().items())
    assert all(int(last_counts[k]) >= n for k, n in ks.expected_counts().items())


def coordinator_of(bootstrap: str, group: str) -> int | None:
    for address in bootstrap.split(","):
        host, port = address.rsplit(":", 1)
        try:
            c = WireClient(host, int(port), timeout=5)
            found = c.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group])).coordinators[0]
            c.close()
            if not found.error_code:
                return found.node_id
        except OSError:
            continue
    return None


def test_streams_protocol_survives_a_coordinator_move(cluster, classpath):
    """The group coordinator's broker is killed mid-run: the new leader of the group's __consumer_offsets
    partition loads the StreamsGroup* records, the members carry on with their epochs, the output is whole."""
    bootstrap, rf = cluster.bootstrap, 3
    tag = uuid.uuid4().hex[:6]
    app = f"wordjoin-m-{tag}"
    topics = [f"wjm-a-{tag}", f"wjm-b-{tag}", f"wjm-out-{tag}", f"wjm-counts-{tag}"]
    ks.create_topics(bootstrap, rf, *topics)
    out, counts = ks.Reader(bootstrap, topics[2], "read_uncommitted"), ks.Reader(bootstrap, topics[3], "read_uncommitted")
    instances = [ks.Instance(classpath, bootstrap, app, "at_least_once", topics, rf, f"{tag}-{n}", ("streams", STANDBYS))
                 for n in range(2)]
    killed = None
    try:
        def wait(cond, what):
            deadline = time.monotonic() + ks.WAIT
            while not cond():
                if time.monotonic() > deadline:
                    logs = "\n".join(f"--- instance {n}\n{x.log()}" for n, x in enumerate(instances))
                    raise AssertionError(f"timed out waiting for {what}; {len(out.records)} results\n{logs}")
                for x in instances:
                    assert x.proc.poll() is None, f"an instance exited:\n{x.log()}"
                out.poll(0.5)
                counts.poll(0.5)

        def stable():
            g = describe(bootstrap, app)
            return g is not None and g.group_state == "Stable" and len(g.members) == 2 and g

        wait(lambda: all(x.running_seen() for x in instances) and stable(), "a stable group of two")
        before = stable()
        ks.produce(bootstrap, topics[0], topics[1], range(ks.IDS // 2))
        wait(lambda: len(out.records) >= ks.IDS // 10, "the first results")
        killed = coordinator_of(bootstrap, app)
        assert killed is not None
        cluster.kill(killed)
        ks.produce(bootstrap, topics[0], topics[1], range(ks.IDS // 2, ks.IDS))
        wait(lambda: coordinator_of(bootstrap, app) not in (None, killed) and stable(), "the group on a new coordinator")
        after = stable()
        assert {m.member_id for m in after.members} == {m.member_id for m in before.members}
        assert after.group_epoch >= before.group_epoch and after.topology.epoch == before.topology.epoch
        want, want_counts = ks.expected_sums(), ks.expected_counts()

        def complete():
            last = dict(counts.records)
            return (set(want.items()) <= set(out.records)
                    and all(int(last.get(k, 0)) >= n for k, n in want_counts.items()))
        wait(complete, f"all {ks.IDS} join results and counts")
        assert set(out.records) == set(want.items())
    finally:
        out.close()
        counts.close()
        for x in instances:
            x.close()
        if killed is not None:
            cluster.restart(killed)
