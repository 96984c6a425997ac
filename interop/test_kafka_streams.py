"""Kafka Streams 4.4 (interop/streams/WordJoin.java) against kafka-compat, one broker and a three-broker cluster.

The application re-keys topic A (a repartition topic), joins it with topic B in a ten-minute window
(KStream-KStream join over window stores), writes the sums to OUT and counts them per bucket (groupBy on a
new key: a second repartition, and the state store "bucket-counts") into COUNTS. Input: for each id one
A record ("a<id>" -> "<id>,<n>") and one B record ("<id>" -> "<m>"), so OUT must hold exactly one
("<id>", "<n+m>") per id and the last count of bucket b<j> must be the number of ids with id % 10 == j.

Two instances run as separate JVMs (their own state.dir, classic group protocol). Half of the input
goes in, we wait until some output is out, SIGKILL one instance, send the other half, and wait (bounded)
for the survivor to produce the rest. With exactly_once_v2 OUT is read read_committed and must be exactly
the expected set, no duplicates, and the committed counts exact; with at_least_once every expected record
must be there but duplicates are allowed (a killed instance's uncommitted work is redone), so counts
may only be at least the expected ones.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid

import jvm_apps
import pytest

from kafka_compat.testing import EmbeddedBroker, zookeeper_missing

pytestmark = pytest.mark.skipif(jvm_apps.missing("streams") is not None, reason=str(jvm_apps.missing("streams")))
ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

WAIT = float(os.environ.get("STREAMS_WAIT", 240))
IDS = 300
PARTITIONS = 3


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker({"group.initial.rebalance.delay.ms": 0}) as b:
        yield b


@pytest.fixture(scope="module")
def cluster():
    missing = zookeeper_missing()
    if missing:
        pytest.skip(missing)
    from cluster_support import new_cluster
    with new_cluster() as c:
        yield c


@pytest.fixture(scope="module", params=["broker", "cluster"])
def target(request):
    """(bootstrap, replication factor) of one broker or the cluster."""
    if request.param == "broker":
        return request.getfixturevalue("broker").bootstrap, 1
    return request.getfixturevalue("cluster").bootstrap, 3


@pytest.fixture(scope="module")
def classpath():
    return jvm_apps.streams_classpath()


class Instance:
    """One WordJoin JVM; its output goes to a log file we show when something fails."""

    def __init__(self, classpath: str, bootstrap: str, app_id: str, guarantee: str, topics, rf: int, name: str,
                 extra=()):
        """`extra`: WordJoin's optional arguments (group protocol, standby replicas)."""
        self.dir = tempfile.mkdtemp(prefix=f"streams-{name}-")
        self.log_path = os.path.join(self.dir, "out.log")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=" + os.environ.get("STREAMS_LOG", "warn"),
             "-cp", classpath, "WordJoin", bootstrap, app_id, guarantee, os.path.join(self.dir, "state"),
             *topics, str(rf), *extra], stdout=self._log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read()[-int(os.environ.get("STREAMS_LOG_TAIL", 6000)):].decode(errors="replace")

    def running_seen(self) -> bool:
        return "state RUNNING" in self.log()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def create_topics(bootstrap: str, rf: int, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, PARTITIONS, rf) for n in names])
    for f in futures.values():
        f.result(WAIT)
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=10).topics
        if all(n in md and len(md[n].partitions) == PARTITIONS and
               all(p.leader >= 0 for p in md[n].partitions.values()) for n in names):
            return
        time.sleep(0.2)
    raise TimeoutError(f"topics {names} have no leaders")


def produce(bootstrap: str, topic_a: str, topic_b: str, ids: range) -> None:
    # murmur2, as the Java client partitions: B must be co-partitioned with Streams' repartition of A
    # (librdkafka's default, CRC32, would put most ids of B where the join never sees them)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "partitioner": "murmur2_random"})
    for i in ids:
        p.produce(topic_a, key=f"a{i}", value=f"{i},{i * 7}")
        p.produce(topic_b, key=str(i), value=str(1000 + i))
    assert p.flush(60) == 0


def expected_sums() -> dict[str, str]:
    return {str(i): str(i * 7 + 1000 + i) for i in range(IDS)}


def expected_counts() -> dict[str, int]:
    counts: dict[str, int] = {}
    for i in range(IDS):
        counts[f"b{i % 10}"] = counts.get(f"b{i % 10}", 0) + 1
    return counts


class Reader:
    """A consumer that keeps reading a topic from the start; `records` is everything seen so far, in order."""

    def __init__(self, bootstrap: str, topic: str, isolation: str):
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                           "enable.auto.commit": False, "auto.offset.reset": "earliest",
                           "isolation.level": isolation})
        self.c.subscribe([topic])
        self.records: list[tuple[str, str]] = []

    def poll(self, seconds: float = 1.0) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for m in self.c.consume(500, 0.2):
                if not m.error():
                    self.records.append((m.key().decode(), m.value().decode()))

    def close(self) -> None:
        self.c.close()


def run_and_kill(classpath: str, bootstrap: str, rf: int, guarantee: str):
    """Run two instances, kill one mid-run; returns (OUT records in order, last COUNTS per key, the instances)."""
    tag = uuid.uuid4().hex[:6]
    topics = [f"wj-a-{tag}", f"wj-b-{tag}", f"wj-out-{tag}", f"wj-counts-{tag}"]
    create_topics(bootstrap, rf, *topics)
    isolation = "read_committed" if guarantee == "exactly_once_v2" else "read_uncommitted"
    out, counts = Reader(bootstrap, topics[2], isolation), Reader(bootstrap, topics[3], isolation)
    instances = [Instance(classpath, bootstrap, f"wordjoin-{tag}", guarantee, topics, rf, f"{tag}-{n}")
                 for n in range(2)]
    try:
        def wait(cond, what):
            deadline = time.monotonic() + WAIT
            while not cond():
                if time.monotonic() > deadline:
                    logs = "\n".join(f"--- instance {n}\n{x.log()}" for n, x in enumerate(instances))
                    seen = f"{len(out.records)} results ({len(set(out.records))} distinct), counts {dict(counts.records)}"
                    raise AssertionError(f"{guarantee}: timed out waiting for {what}; {seen}\n{logs}")
                for x in instances[1:]:
                    assert x.proc.poll() is None, f"the surviving instance exited:\n{x.log()}"
                out.poll(0.5)
                counts.poll(0.5)

        wait(lambda: all(x.running_seen() for x in instances), "both instances to be RUNNING")
        produce(bootstrap, topics[0], topics[1], range(IDS // 2))
        wait(lambda: len(out.records) >= IDS // 10, "the first results")
        instances[0].kill()
        produce(bootstrap, topics[0], topics[1], range(IDS // 2, IDS))
        want, want_counts = expected_sums(), expected_counts()

        def complete():
            last = dict(counts.records)
            return (set(want.items()) <= set(out.records)
                    and all(int(last.get(k, 0)) >= n for k, n in want_counts.items()))
        wait(complete, f"all {IDS} join results and counts")
        out.poll(3)             # anything late (a duplicate would show here)
        counts.poll(1)
        return out.records, dict(counts.records), instances
    finally:
        out.close()
        counts.close()
        for x in instances:
            x.close()


def test_streams_exactly_once_v2_survives_an_instance_kill(target, classpath):
    bootstrap, rf = target
    records, last_counts, _ = run_and_kill(classpath, bootstrap, rf, "exactly_once_v2")
    want = expected_sums()
    # committed output only: every result exactly once, and the committed counts exact
    dupes = len(records) - len(set(records))
    assert sorted(records) == sorted(want.items()), f"{len(records)} results for {len(want)} ids, {dupes} duplicates"
    assert last_counts == {k: str(n) for k, n in expected_counts().items()}


def test_streams_at_least_once_survives_an_instance_kill(target, classpath):
    bootstrap, rf = target
    records, last_counts, _ = run_and_kill(classpath, bootstrap, rf, "at_least_once")
    # at least once: every result there; work the killed instance had not committed is redone by the
    # survivor, so duplicates are allowed and counts may overshoot
    assert set(records) == set(expected_sums().items())
    print(f"at_least_once: {len(records)} results for {IDS} ids, {len(records) - len(set(records))} repeated")
    assert all(int(last_counts[k]) >= n for k, n in expected_counts().items())
