"""Old message formats with kafka-python pinned to old protocol versions.

api_version=(0, 9) speaks Produce v1 / Fetch v1 with magic 0 message sets (no
timestamps), api_version=(0, 10) speaks Produce v2 / Fetch v2 with magic 1 (create
times). The broker stores them as sent, so one partition written by a (0, 9), then
a (0, 10), then a modern producer holds magic 0, 1 and 2 batches side by side (the
segment files are read to make sure). Modern consumers (kafka-python, librdkafka,
the Java client) read all of it, and so do both old ones, which get the magic 2
part down-converted.
"""
from __future__ import annotations

import json
import time

import pytest

kafka = pytest.importorskip("kafka")

import peers  # noqa: E402
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from test_clients import WAIT, base_timestamp, stored_batches  # noqa: E402
from test_groups_support import new_topic  # noqa: E402

from kafka_compat.testing import EmbeddedBroker  # noqa: E402

PER_CLIENT = 300
OLD = {0: (0, 9, 0), 1: (0, 10, 0)}          # magic -> the kafka-python api_version that writes it
NO_TIMESTAMP = -1


def timestamp(m) -> int:
    """kafka-python reports a magic 0 entry's missing timestamp as None, Kafka's protocol as -1."""
    return NO_TIMESTAMP if m.timestamp is None else m.timestamp


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker() as b:
        yield b


def value_of(tag: str, i: int) -> bytes | None:
    return None if i % 10 == 9 else f"{tag}-v{i}".encode()


def produce(broker, topic: str, tag: str, api_version=None, base_ts: int | None = None,
            codec: str | None = None) -> list[tuple]:
    """PER_CLIENT records into partition 0; returns (offset, key, value, timestamp) as acknowledged."""
    old = api_version is not None
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=api_version, linger_ms=5,
                             compression_type=codec, **({"enable_idempotence": False} if old else {}))
    try:
        futures = [producer.send(topic, partition=0, key=f"{tag}-k{i}".encode(), value=value_of(tag, i),
                                 timestamp_ms=None if base_ts is None else base_ts + i,
                                 **({} if old else {"headers": [("h", str(i).encode())]}))
                   for i in range(PER_CLIENT)]
        producer.flush()
        return [(f.get().offset, f"{tag}-k{i}".encode(), value_of(tag, i), base_ts + i)
                for i, f in enumerate(futures)]
    finally:
        producer.close()


def consume(broker, topic: str, count: int, api_version=None) -> list:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=api_version, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + WAIT
        while len(got) < count and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=500).values():
                got.extend(msgs)
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [None, "gzip"])
def test_old_client_produces_and_fetches(broker, magic, codec):
    """An old client alone: what it produces is stored in its own format and read back by it."""
    topic = new_topic(broker, partitions=1)
    base = base_timestamp()
    sent = produce(broker, topic, f"m{magic}", OLD[magic], base, codec)
    assert [o for o, *_ in sent] == list(range(PER_CLIENT))
    assert {m for m, _ in stored_batches(broker, topic)} == {magic}
    got = consume(broker, topic, PER_CLIENT, OLD[magic])
    assert [(m.offset, m.key, m.value) for m in got] == [s[:3] for s in sent]
    # magic 0 has no timestamps; magic 1 keeps the create time
    assert [timestamp(m) for m in got] == [NO_TIMESTAMP if magic == 0 else s[3] for s in sent]


def test_mixed_log_read_by_modern_and_old_clients(broker):
    topic = new_topic(broker, partitions=1)
    base = base_timestamp()
    sent = (produce(broker, topic, "m0", OLD[0], base)
            + produce(broker, topic, "m1", OLD[1], base + PER_CLIENT, "gzip")     # compressed magic 1 wrappers
            + produce(broker, topic, "m2", None, base + 2 * PER_CLIENT, "lz4"))
    assert [o for o, *_ in sent] == list(range(3 * PER_CLIENT))
    magics = [m for m, _ in stored_batches(broker, topic)]
    assert magics == sorted(magics) and set(magics) == {0, 1, 2}, "the log should hold all three formats in order"
    total = len(sent)

    def held(got, timestamps) -> None:
        assert [(m.offset, m.key, m.value) for m in got] == [s[:3] for s in sent]
        assert [timestamp(m) for m in got] == timestamps

    # modern: magic 0 entries have no timestamp; magic 2 ones keep their header
    modern = consume(broker, topic, total)
    held(modern, [NO_TIMESTAMP] * PER_CLIENT + [s[3] for s in sent[PER_CLIENT:]])
    assert [list(m.headers) for m in modern[2 * PER_CLIENT:]] == [[("h", str(i).encode())] for i in range(PER_CLIENT)]
    # Fetch v2 (magic 1): magic 2 down-converted to magic 1 keeps create times
    held(consume(broker, topic, total, OLD[1]), [NO_TIMESTAMP] * PER_CLIENT + [s[3] for s in sent[PER_CLIENT:]])
    # Fetch v1 (magic 0): everything down to magic 0, no timestamps at all
    held(consume(broker, topic, total, OLD[0]), [NO_TIMESTAMP] * total)
    # other modern readers of the same log (last: they skip when not installed)
    want = [(o, k.decode(), None if v is None else v.decode()) for o, k, v, _ in sent]
    assert confluent_read(broker, topic, total) == want
    assert java_read(broker, topic, total) == want


def confluent_read(broker, topic: str, count: int) -> list[tuple]:
    ck = pytest.importorskip("confluent_kafka")
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got = []
    try:
        deadline = time.monotonic() + WAIT
        while len(got) < count and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=1000, timeout=0.2):
                assert m.error() is None, m.error()
                got.append((m.offset(), m.key().decode(), None if m.value() is None else m.value().decode()))
    finally:
        consumer.close()
    return got


def java_read(broker, topic: str, count: int) -> list[tuple]:
    cp = peers.require(peers.java_harness_classpath(), "the Java client")
    out = peers.java_harness(cp, "consume", "--bootstrap", broker.bootstrap, "--topic", topic, "--partition", "0",
                             "--count", str(count))
    assert out.returncode == 0, out.stderr[-3000:]
    return [(r["offset"], r["key"], r["value"]) for r in map(json.loads, out.stdout.splitlines())]
