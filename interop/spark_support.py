"""What the Spark suites share (interop/test_spark.py drives pyspark 4.0 in-process, interop/test_spark35.py
drives pyspark 3.5 in its own venv): where each connector's jars are, and the topics' data and reads on
the Kafka side, done with kafka-python and confluent-kafka in the test's own process."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BASE_S = 1_700_000_000                      # 2023-11-14T22:13:20Z, a window boundary
PARTITIONS = 3
RECORDS = 10                                # per partition in `fill`
WAIT = 60.0                                 # seconds an expected outcome may take (a hang, not timing)
SOURCE_TOPIC = "events"                     # interop/spark/pipeline.py's topics
SINK_TOPIC = "event-counts"


def missing(why: str, *, allow_module_level: bool = False):
    """Skip for a missing Spark peer; in CI ($CI set), fail instead: CI installs every peer."""
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"{why} (CI installs it: bash interop/setup.sh)", pytrace=False)
    pytest.skip(why, allow_module_level=allow_module_level)


def connector_jars(name: str, env: str) -> str | None:
    """The directory of a Maven set (interop/maven.sh NAME) of connector jars, or $env, or None."""
    if os.environ.get(env):
        return os.environ[env]
    d = ROOT / ".cache" / "jvm" / name
    return str(d) if (d / ".coords").is_file() else None


def iso(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _kafka():
    import kafka
    return kafka


def create(broker, *topics, partitions: int = PARTITIONS, configs: dict | None = None) -> None:
    kafka = _kafka()
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        rf = min(3, len(getattr(broker, "brokers", [broker])))
        admin.create_topics([kafka.admin.NewTopic(t, partitions, rf, topic_configs=configs or {}) for t in topics])
    finally:
        admin.close()


def produce(broker, topic: str, records, batch_each: bool = False) -> None:
    """records: (partition, key, value, timestamp_ms) tuples, sent in order (batch_each: one batch each)."""
    producer = _kafka().KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        for partition, key, value, ts in records:
            producer.send(topic, key=key and key.encode(), value=value.encode(), partition=partition,
                          timestamp_ms=ts)
            if batch_each:
                producer.flush()
        producer.flush()
    finally:
        producer.close()


def consume(broker, topic: str) -> list[tuple[int, int, str, str]]:
    """Everything in topic as (partition, offset, key, value), in partition then offset order."""
    kafka = _kafka()
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                   enable_auto_commit=False, consumer_timeout_ms=2000)
    try:
        tps = [kafka.TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        consumer.assign(tps)
        end = consumer.end_offsets(tps)
        out = []
        deadline = time.monotonic() + WAIT
        while any(consumer.position(tp) < end[tp] for tp in tps):
            assert time.monotonic() < deadline, f"could not read {topic} up to {end}"
            for tp, ms in consumer.poll(timeout_ms=500).items():
                out += [(tp.partition, m.offset, m.key and m.key.decode(), m.value.decode()) for m in ms]
        return sorted(out)
    finally:
        consumer.close()


def events(keys, seconds, partitions: int = PARTITIONS):
    """One JSON event per (key, second), spread over partitions round robin; record time = event time."""
    out = []
    for i, (key, s) in enumerate((k, s) for s in seconds for k in keys):
        out.append((i % partitions, key, json.dumps({"key": key, "ts": iso(BASE_S + s)}), (BASE_S + s) * 1000))
    return out


def counts(key: str, start: int, n: int) -> tuple[str, dict]:
    return key, {"key": key, "window_start": iso(BASE_S + start), "window_end": iso(BASE_S + start + 10),
                 "count": n}


def by_window(got):
    return sorted(got, key=lambda kv: (kv[0], kv[1]["window_start"]))


# what the pipeline writes for pipeline_events(): every window of a and b, none of "late"
PIPELINE_COUNTS = [counts("a", 0, 10), counts("a", 10, 10), counts("a", 20, 10),
                   counts("b", 0, 5), counts("b", 10, 5), counts("b", 20, 5)]


def pipeline_events():
    """a: 10 events per 10 s window over [0, 30); b: every other second; then one late event that
    advances the watermark to 95 s and so closes every earlier window."""
    return events("a", range(30)) + events("b", range(0, 30, 2)) + events(["late"], [100])


def output(broker, topic: str = SINK_TOPIC) -> list[tuple[str, dict]]:
    """The pipeline's sink topic as (key, decoded value) in the order it was written."""
    return [(k, json.loads(v)) for _, _, k, v in consume(broker, topic)]


def producers(broker, topic: str) -> list:
    """DescribeProducers: the idempotent producers partition 0 of topic remembers."""
    kafka = _kafka()
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    tp = kafka.TopicPartition(topic, 0)
    try:
        return admin.describe_producers([tp])[tp].active_producers
    finally:
        admin.close()


def record_ts(p: int, i: int) -> int:
    """Timestamp (ms) of record i of partition p: one second apart, partitions 100 ms apart."""
    return (BASE_S + i) * 1000 + p * 100


def fill(broker, topic: str = "source") -> None:
    create(broker, topic)
    produce(broker, topic, [(p, f"k{p}-{i}", f"v{p}-{i}", record_ts(p, i))
                            for i in range(RECORDS) for p in range(PARTITIONS)])


def rows(topic: str, wanted: dict[int, range]):
    return sorted((topic, p, i, f"v{p}-{i}") for p, offsets in wanted.items() for i in offsets)


def offsets_query(topic: str) -> dict:
    """Per-partition starting and ending offsets (-2: earliest, -1: latest), and what they select."""
    return {"options": {"startingOffsets": json.dumps({topic: {"0": 2, "1": -2, "2": 7}}),
                        "endingOffsets": json.dumps({topic: {"0": 5, "1": 3, "2": -1}})},
            "rows": rows(topic, {0: range(2, 5), 1: range(0, 3), 2: range(7, RECORDS)})}


def timestamp_queries(topic: str) -> list[dict]:
    """Starting and ending timestamps, global then per partition, and what they select."""
    return [
        # from the first record at or after 4.5 s in every partition (offset 5), up to (not
        # including) the first at or after 7.5 s (offset 8)
        {"options": {"startingTimestamp": str((BASE_S + 4) * 1000 + 500),
                     "endingTimestamp": str((BASE_S + 7) * 1000 + 500)},
         "rows": rows(topic, {p: range(5, 8) for p in range(PARTITIONS)})},
        # per partition; a timestamp past every record means "up to the end"
        {"options": {"startingOffsetsByTimestamp": json.dumps({topic: {"0": record_ts(0, 9), "1": record_ts(1, 0),
                                                                       "2": record_ts(2, 3) + 1}}),
                     "endingOffsetsByTimestamp": json.dumps({topic: {"0": record_ts(0, 99), "1": record_ts(1, 2),
                                                                     "2": record_ts(2, 99)}})},
         "rows": rows(topic, {0: range(9, RECORDS), 1: range(0, 2), 2: range(4, RECORDS)})},
    ]


def produce_transactions(broker, topic: str, transactional_id: str) -> tuple[list[str], list[str]]:
    """Transactions that commit and abort interleave on every partition of topic: (committed, aborted) values."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    committed, aborted = [], []
    for t in range(6):
        producer.begin_transaction()
        values = [f"t{t}-{i}" for i in range(3 * PARTITIONS)]
        for i, value in enumerate(values):
            producer.produce(topic, value=value.encode(), partition=i % PARTITIONS)
        producer.flush(30)          # on the broker before the abort (librdkafka purges what it still holds)
        if t % 3 == 1:
            producer.abort_transaction(30)
            aborted += values
        else:
            producer.commit_transaction(30)
            committed += values
    producer.flush(10)
    return committed, aborted


def lose_records(broker, topic: str, how: str, before: int) -> None:
    """Remove offsets [0, before) of partition 0 of topic, by DeleteRecords or by time retention."""
    kafka = _kafka()
    if how == "delete-records":
        admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            admin.delete_records({kafka.TopicPartition(topic, 0): before})
        finally:
            admin.close()
    else:
        admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            # an hour: the records before `before` are from 2023, the rest from now
            admin.alter_configs([kafka.admin.ConfigResource("TOPIC", topic, {"retention.ms": "3600000"})])
        finally:
            admin.close()
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        tp = kafka.TopicPartition(topic, 0)
        deadline = time.monotonic() + WAIT
        while consumer.beginning_offsets([tp])[tp] < before:
            assert time.monotonic() < deadline, "the records were not removed"
            time.sleep(0.2)
        assert consumer.beginning_offsets([tp])[tp] == before
    finally:
        consumer.close()


def check_isolation_levels(read_values, committed: list[str], aborted: list[str]) -> None:
    """read_values(isolation level) -> the values a batch query read: committed only, or aborted too."""
    assert sorted(read_values("read_committed")) == sorted(committed)
    assert sorted(read_values("read_uncommitted")) == sorted(committed + aborted)


def check_sink(broker, topic: str, n: int) -> None:
    """What a sink of n rows (key = id, value = row-id) left in topic: every row once, through idempotent producers."""
    got = consume(broker, topic)
    assert sorted(int(k) for _, _, k, _ in got) == list(range(n))
    assert all(v == f"row-{k}" for _, _, k, v in got)
    assert [o for _, o, _, _ in got] == list(range(n))          # no gaps, nothing written twice
    # the connector's kafka-clients defaults (enable.idempotence=true, acks=all): the broker tracked
    # the sink's producer ids and sequences, and their sequences cover every row once
    states = producers(broker, topic)
    assert states and all(s.producer_id >= 0 for s in states)
    assert sum(s.last_sequence + 1 for s in states) == n
