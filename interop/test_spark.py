"""PySpark 4.0 Structured Streaming on kafka-compat, through Spark's own Kafka connector.

Needs pyspark 4.0 and the connector jars in $SPARK_KAFKA_JARS (see
interop/spark/get_jars.sh); CI installs neither, so there every test here skips
and interop/test_java_spark_calls.py checks the same Java client calls. One
SparkSession (local[2]) serves the whole module; each test gets its own broker.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

JARS = os.environ.get("SPARK_KAFKA_JARS")
if not JARS:
    pytest.skip("SPARK_KAFKA_JARS is not set: it names a directory with spark-sql-kafka-0-10_2.13-4.0.0 and "
                "its dependencies (bash interop/spark/get_jars.sh)", allow_module_level=True)

kafka = pytest.importorskip("kafka")

from kafka_compat.testing import EmbeddedBroker  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "spark"))
import pipeline  # noqa: E402

BASE_S = 1_700_000_000                      # 2023-11-14T22:13:20Z, a window boundary
PARTITIONS = 3
WAIT = 60.0                                 # seconds an expected outcome may take (a hang, not timing)


def iso(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark", reason="pyspark 4.0 is not installed (pip install 'pyspark==4.0.*')")
    session = pipeline.spark_session(JARS, app="kafka-compat-interop")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def broker():
    with EmbeddedBroker() as b:
        yield b


def create(broker, *topics, partitions: int = PARTITIONS, configs: dict | None = None) -> None:
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([kafka.admin.NewTopic(t, partitions, 1, topic_configs=configs or {}) for t in topics])
    finally:
        admin.close()


def produce(broker, topic: str, records) -> None:
    """records: (partition, key, value, timestamp_ms) tuples, sent in order."""
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        for partition, key, value, ts in records:
            producer.send(topic, key=key and key.encode(), value=value.encode(), partition=partition,
                          timestamp_ms=ts)
        producer.flush()
    finally:
        producer.close()


def consume(broker, topic: str) -> list[tuple[int, int, str, str]]:
    """Everything in topic as (partition, offset, key, value), in partition then offset order."""
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


def output(broker) -> list[tuple[str, dict]]:
    """event-counts as (key, decoded value) in the order it was written."""
    return [(k, json.loads(v)) for _, _, k, v in consume(broker, pipeline.SINK_TOPIC)]


def source_offsets(progress, which: str) -> dict:
    """A batch's Kafka source offsets ({topic: {partition: offset}}), from the progress' own JSON."""
    return json.loads(progress.json)["sources"][0][which]


def producers(broker, topic: str) -> list:
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        return admin.describe_producers([kafka.TopicPartition(topic, 0)])
    finally:
        admin.close()


def run_pipeline(spark, broker, checkpoint, **options):
    """Run the pipeline over what the topic holds now (Trigger.AvailableNow), then stop.

    AvailableNow ends with the batch that has no data but emits the windows
    the last watermark closed, so the output is complete when it returns.
    """
    query = pipeline.start(spark, broker.bootstrap, str(checkpoint), trigger={"availableNow": True}, **options)
    query.awaitTermination()
    return query


# --------------------------------------------------------------------------- the pipeline

def test_pipeline_writes_exactly_the_finished_windowed_counts(spark, broker, tmp_path):
    create(broker, pipeline.SOURCE_TOPIC)
    create(broker, pipeline.SINK_TOPIC, partitions=1)
    # a: 10 events per 10 s window over [0, 30); b: every other second; then one late
    # event that advances the watermark to 95 s and so closes every earlier window
    produce(broker, pipeline.SOURCE_TOPIC, events("a", range(30)) + events("b", range(0, 30, 2))
            + events(["late"], [100]))
    run_pipeline(spark, broker, tmp_path / "ckpt")
    got = output(broker)
    assert sorted(got, key=lambda kv: (kv[0], kv[1]["window_start"])) == [
        counts("a", 0, 10), counts("a", 10, 10), counts("a", 20, 10),
        counts("b", 0, 5), counts("b", 10, 5), counts("b", 20, 5)]


def test_restart_from_checkpoint_after_a_broker_restart_continues_where_it_stopped(spark, broker, tmp_path):
    create(broker, pipeline.SOURCE_TOPIC)
    create(broker, pipeline.SINK_TOPIC, partitions=1)
    ckpt = tmp_path / "ckpt"
    # first run: [0, 30) and one event at 45 s, so the watermark (40 s) closes [0, 10) .. [30, 40)
    sent = events("ab", range(0, 30, 3)) + events("c", [45])
    produce(broker, pipeline.SOURCE_TOPIC, sent)
    stopped_at = source_offsets(run_pipeline(spark, broker, ckpt).lastProgress, "endOffset")
    first = output(broker)
    assert sorted(first, key=lambda kv: (kv[0], kv[1]["window_start"])) == [
        counts("a", 0, 4), counts("a", 10, 3), counts("a", 20, 3),
        counts("b", 0, 4), counts("b", 10, 3), counts("b", 20, 3)]
    assert stopped_at == {pipeline.SOURCE_TOPIC: {str(p): sum(r[0] == p for r in sent) for p in range(PARTITIONS)}}

    broker.restart()
    produce(broker, pipeline.SOURCE_TOPIC, events("ab", range(40, 50)) + events(["late"], [100]))
    resumed_from = source_offsets(run_pipeline(spark, broker, ckpt).recentProgress[0], "startOffset")
    assert resumed_from == stopped_at
    got = output(broker)
    assert got[:len(first)] == first            # nothing rewritten
    assert sorted(got[len(first):], key=lambda kv: kv[0]) == [
        counts("a", 40, 10), counts("b", 40, 10), counts("c", 40, 1)]
