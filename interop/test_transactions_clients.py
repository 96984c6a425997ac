"""Transactions with real clients: exactly-once consume-transform-produce, aborts, fencing and timeouts.

A copier (confluent-kafka in its own process, or the Java client) reads an input
topic and writes each record, transformed, to the same partition of an output
topic, sending its consumer offsets in the same transaction; every third
transaction is aborted after its records reached the log, and then redone. The
outcome is checked with independent consumers: read_committed sees each input
record exactly once, in order, per partition; read_uncommitted sees the aborted
copies too; the group's committed offsets are exactly the end of the input. A
restart of the broker must not change what read_committed sees (the aborted
transactions come back from the .txnindex files, the coordinator's state from
`__transaction_state`).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import peers
import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import (  # noqa: E402
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kafka_compat.testing import EmbeddedBroker  # noqa: E402

HERE = Path(__file__).resolve().parent
PARTITIONS = 3
COUNT = 60          # input records, COUNT / PARTITIONS per partition
WAIT = 60.0
BROKER = {"group.initial.rebalance.delay.ms": "0",
          "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker(BROKER) as b:
        yield b


def create_topics(bootstrap: str, *names: str, partitions: int = PARTITIONS, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, partitions, replication) for n in names]).values():
        future.result(WAIT)


def produce_input(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    """COUNT plain records, record i to partition i % PARTITIONS; their values per partition, in order."""
    p = Producer({"bootstrap.servers": bootstrap})
    by_partition: dict[int, list[bytes]] = {i: [] for i in range(PARTITIONS)}
    for i in range(COUNT):
        value = f"v{i}".encode()
        p.produce(topic, key=f"k{i}".encode(), value=value, partition=i % PARTITIONS)
        by_partition[i % PARTITIONS].append(value)
    assert p.flush(WAIT) == 0
    return by_partition


def read_all(bootstrap: str, topic: str, isolation: str, at_least: int) -> dict[int, list[bytes]]:
    """Everything a fresh consumer with ``isolation`` reads, once it has ``at_least`` records and the
    topic stays quiet, per partition in offset order."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "enable.auto.commit": False,
                  "isolation.level": isolation})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    total, quiet, polls = 0, 0, 0
    while (total < at_least or quiet < 3) and polls < 120:
        polls += 1
        msgs = [m for m in c.consume(100, 1.0) if m.error() is None]
        quiet = 0 if msgs else quiet + 1
        for m in msgs:
            got[m.partition()].append(m.value())
        total += len(msgs)
    c.close()
    return got


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    found = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], WAIT)
    c.close()
    return {tp.partition: tp.offset for tp in found}


def check_outcome(bootstrap: str, source: dict[int, list[bytes]], output: str, group: str, input_topic: str,
                  aborted: int) -> None:
    expected = {p: [b"t-" + v for v in vs] for p, vs in source.items()}
    assert read_all(bootstrap, output, "read_committed", COUNT) == expected
    uncommitted = read_all(bootstrap, output, "read_uncommitted", COUNT + aborted)
    assert sum(map(len, uncommitted.values())) == COUNT + aborted
    for p, values in uncommitted.items():
        assert set(values) == set(expected[p])      # the aborted copies are copies of the same records
    assert committed_offsets(bootstrap, group, input_topic) == {p: len(vs) for p, vs in source.items()}


def copy_with_confluent(bootstrap: str, input_topic: str, output: str, group: str) -> dict:
    done = subprocess.run([sys.executable, str(HERE / "txn_support.py"), "copy", "--bootstrap", bootstrap,
                           "--input", input_topic, "--output", output, "--group", group,
                           "--transactional-id", unique("copier"), "--count", str(COUNT)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_confluent_consume_transform_produce_is_exactly_once_and_survives_a_restart(tmp_path):
    with EmbeddedBroker(BROKER) as broker:
        bootstrap = broker.bootstrap
        input_topic, output, group = unique("in"), unique("out"), unique("copier")
        create_topics(bootstrap, input_topic, output)
        source = produce_input(bootstrap, input_topic)
        result = copy_with_confluent(bootstrap, input_topic, output, group)
        assert result["committed"] == COUNT and result["aborted"] > 0
        check_outcome(bootstrap, source, output, group, input_topic, result["aborted"])
        broker.restart()
        check_outcome(broker.bootstrap, source, output, group, input_topic, result["aborted"])


def test_a_new_producer_with_the_same_id_fences_the_old_one_and_aborts_its_transaction(broker):
    bootstrap = broker.bootstrap
    topic, txn_id = unique("fence"), unique("fenced")
    create_topics(bootstrap, topic, partitions=1)
    old = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    old.init_transactions(WAIT)
    old.begin_transaction()
    for i in range(5):
        old.produce(topic, value=f"old-{i}".encode(), partition=0)
    assert old.flush(WAIT) == 0

    new = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    new.init_transactions(WAIT)            # fences `old` and aborts its open transaction
    new.begin_transaction()
    new.produce(topic, value=b"new", partition=0)
    new.commit_transaction(WAIT)

    # The fenced producer's late write is refused (an old epoch), which librdkafka takes as fatal: fenced.
    # (it never reaches the log: read_uncommitted below sees no "late")
    try:
        old.produce(topic, value=b"late", partition=0)
        old.flush(WAIT)
    except KafkaException:
        pass
    with pytest.raises(KafkaException) as refused:
        old.commit_transaction(WAIT)
    assert refused.value.args[0].code() == KafkaError._FENCED
    assert read_all(bootstrap, topic, "read_committed", 1)[0] == [b"new"]
    assert read_all(bootstrap, topic, "read_uncommitted", 6)[0] == [f"old-{i}".encode() for i in range(5)] + [b"new"]


def test_a_producer_killed_in_a_transaction_is_aborted_when_the_transaction_times_out(broker):
    bootstrap = broker.bootstrap
    topic = unique("killed")
    create_topics(bootstrap, topic, partitions=1)
    victim = subprocess.Popen([sys.executable, str(HERE / "txn_support.py"), "hang", "--bootstrap", bootstrap,
                               "--output", topic, "--transactional-id", unique("victim"), "--count", "5",
                               "--timeout-ms", "3000"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    try:
        assert victim.stdout.readline().strip() == "ready"
    finally:
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
    # A plain record after the open transaction: read_committed reaches it only once that is aborted.
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce(topic, value=b"after", partition=0)
    assert p.flush(WAIT) == 0
    assert read_all(bootstrap, topic, "read_committed", 1)[0] == [b"after"]
    assert read_all(bootstrap, topic, "read_uncommitted", 6)[0] == [f"doomed-{i}".encode() for i in range(5)] + [
        b"after"]


# ---------------------------------------------------------------- Java
def compile_copier(jars: str, out: Path) -> str:
    """TransactionalCopy compiled against ``jars`` into ``out``: the class path that runs it."""
    subprocess.run(["javac", "-nowarn", "-cp", jars, "-d", str(out), str(HERE / "java_txn" / "TransactionalCopy.java")],
                   check=True, capture_output=True)
    return os.pathsep.join([str(out), jars])


@pytest.fixture(scope="module")
def java_copier(tmp_path_factory):
    """The class path that runs TransactionalCopy with the Java client 3.9 (compiled once per module)."""
    jars = peers.require(peers.java_classpath(), "the Java client")
    return compile_copier(jars, tmp_path_factory.mktemp("java-txn"))


def test_java_consume_transform_produce_is_exactly_once(broker, java_copier):
    bootstrap = broker.bootstrap
    input_topic, output, group = unique("jin"), unique("jout"), unique("jcopier")
    create_topics(bootstrap, input_topic, output)
    source = produce_input(bootstrap, input_topic)
    done = subprocess.run(["java", "-cp", java_copier, "TransactionalCopy", bootstrap, input_topic, output, group,
                           unique("jtxn"), str(COUNT)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["committed"] == COUNT and result["aborted"] > 0
    check_outcome(bootstrap, source, output, group, input_topic, result["aborted"])


def java_probe(classpath: str, bootstrap: str, topic: str) -> dict:
    done = subprocess.run(["java", "-cp", classpath, "TransactionalCopy", "probe", bootstrap, topic],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_java_admin_and_consumer_see_the_last_stable_offset_as_sparks_read_committed_source_does(
        broker, java_copier):
    """Spark's Kafka source with kafka.isolation.level=read_committed asks the Admin client for latest
    offsets at that level and reads up to them with a consumer of that level."""
    bootstrap = broker.bootstrap
    topic = unique("spark")
    create_topics(bootstrap, topic, partitions=1)
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        plain.produce(topic, value=f"plain-{i}".encode(), partition=0)
    assert plain.flush(WAIT) == 0
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("spark-txn")})
    p.init_transactions(WAIT)
    for name, commit in (("committed", True), ("aborted", False), ("open", None)):
        p.begin_transaction()
        for i in range(2):
            p.produce(topic, value=f"{name}-{i}".encode(), partition=0)
        assert p.flush(WAIT) == 0
        if commit is True:
            p.commit_transaction(WAIT)
        elif commit is False:
            p.abort_transaction(WAIT)
    # plain 0-2, committed 3-4 + marker 5, aborted 6-7 + marker 8, open 9-10
    seen = java_probe(java_copier, bootstrap, topic)
    assert seen["read_committed"] == {"end": 9, "values": ["plain-0", "plain-1", "plain-2", "committed-0",
                                                          "committed-1"]}
    assert seen["read_uncommitted"]["end"] == 11 and len(seen["read_uncommitted"]["values"]) == 9
    p.commit_transaction(WAIT)
    seen = java_probe(java_copier, bootstrap, topic)
    assert seen["read_committed"] == {"end": 12, "values": ["plain-0", "plain-1", "plain-2", "committed-0",
                                                           "committed-1", "open-0", "open-1"]}
