"""The Java client 3.9.1 calls Spark's Kafka connector makes, against our broker.

interop/java/SparkCalls.java makes them as Spark 4.0's source does: the driver's
AdminClient describeTopics and listOffsets (earliest, latest, by timestamp), and
a task's consumer assign/seek/poll with seekToBeginning/seekToEnd + position
after every poll. Spark itself is exercised in test_spark.py, which needs
pyspark and the connector jars; these run wherever the Java client does.
"""
from __future__ import annotations

import json
import subprocess

import pytest

kafka = pytest.importorskip("kafka")

import peers  # noqa: E402

from kafka_compat.testing import EmbeddedBroker  # noqa: E402

TOPIC = "spark-calls"
PARTITIONS = 3
PER_PARTITION = 10
BASE_MS = 1_700_000_000_000


def ts(partition: int, i: int) -> int:
    """Timestamp of record i in a partition: one second apart, partitions 100 ms apart."""
    return BASE_MS + i * 1000 + partition * 100


@pytest.fixture(scope="module")
def classpath():
    return peers.require(peers.java_harness_classpath(), "the Java client 3.9.1 (with javac)")


@pytest.fixture(scope="module")
def broker(classpath):
    with EmbeddedBroker() as b:
        admin = kafka.KafkaAdminClient(bootstrap_servers=b.bootstrap)
        admin.create_topics([kafka.admin.NewTopic(TOPIC, PARTITIONS, 1)])
        admin.close()
        producer = kafka.KafkaProducer(bootstrap_servers=b.bootstrap)
        for p in range(PARTITIONS):
            for i in range(PER_PARTITION):
                producer.send(TOPIC, key=f"k{p}-{i}".encode(), value=f"v{p}-{i}".encode(),
                              partition=p, timestamp_ms=ts(p, i))
        producer.flush()
        producer.close()
        yield b


def spark_calls(classpath, broker, *args, rc: int = 0, topic: str = TOPIC) -> list[dict]:
    proc = subprocess.run(["java", "-cp", classpath, "SparkCalls", *args,
                           "--bootstrap", broker.bootstrap, "--topic", topic],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == rc, f"SparkCalls {args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def offsets(classpath, broker, spec: str) -> dict[int, tuple[int, int]]:
    return {r["partition"]: (r["offset"], r["timestamp"])
            for r in spark_calls(classpath, broker, "list-offsets", "--spec", spec)}


def test_describe_topics_reports_every_partition_led_by_the_broker(classpath, broker):
    (d,) = spark_calls(classpath, broker, "describe")
    assert d["topic"] == TOPIC and d["internal"] is False
    assert [p["partition"] for p in d["partitions"]] == list(range(PARTITIONS))
    for p in d["partitions"]:
        assert p["leader"] == 0 and p["replicas"] == [0] and p["isr"] == [0]


def test_list_offsets_earliest_latest_and_by_timestamp(classpath, broker):
    assert offsets(classpath, broker, "earliest") == {p: (0, -1) for p in range(PARTITIONS)}
    assert offsets(classpath, broker, "latest") == {p: (PER_PARTITION, -1) for p in range(PARTITIONS)}
    # the first record at or after the timestamp, and that record's timestamp
    assert offsets(classpath, broker, str(BASE_MS + 4500)) == {p: (5, ts(p, 5)) for p in range(PARTITIONS)}
    assert offsets(classpath, broker, str(BASE_MS)) == {0: (0, ts(0, 0)), 1: (0, ts(1, 0)), 2: (0, ts(2, 0))}
    # past the last record: no offset (Spark then applies startingOffsetsByTimestampStrategy)
    assert offsets(classpath, broker, str(ts(2, PER_PARTITION))) == {p: (-1, -1) for p in range(PARTITIONS)}


def test_task_read_seeks_polls_and_sees_the_available_range_after_every_poll(classpath, broker):
    out = spark_calls(classpath, broker, "read", "--partition", "1", "--from", "3", "--until", "8",
                      "--max-poll-records", "2")
    records = [r for r in out if "offset" in r]
    assert [(r["offset"], r["key"], r["value"], r["timestamp"]) for r in records] == \
        [(i, f"k1-{i}", f"v1-{i}", ts(1, i)) for i in range(3, 8)]
    polls = [r for r in out if "poll" in r]
    assert len(polls) >= 3                  # two records per poll at most
    assert all((p["earliest"], p["latest"]) == (0, PER_PARTITION) for p in polls)
    assert not [r for r in out if "lost" in r]
    assert out[-1] == {"done": 8, "position": 8}


def test_records_removed_by_delete_records_fail_the_read_or_are_skipped(classpath, broker):
    (d,) = spark_calls(classpath, broker, "delete-records", "--partition", "2", "--before", "4")
    assert d == {"partition": 2, "low_watermark": 4}
    assert offsets(classpath, broker, "earliest") == {0: (0, -1), 1: (0, -1), 2: (4, -1)}
    # failOnDataLoss=true: the task sees offsets 0..3 are gone and fails
    out = spark_calls(classpath, broker, "read", "--partition", "2", "--from", "0", "--until", "10", rc=4)
    assert out[-1]["lost"] == [0, 4] and (out[-1]["earliest"], out[-1]["latest"]) == (4, PER_PARTITION)
    # failOnDataLoss=false: it skips to the earliest offset left and reads the rest
    out = spark_calls(classpath, broker, "read", "--partition", "2", "--from", "0", "--until", "10",
                      "--skip-lost")
    assert [r["lost"] for r in out if "lost" in r] == [[0, 4]]
    assert [r["offset"] for r in out if "offset" in r] == list(range(4, PER_PARTITION))
    assert out[-1] == {"done": PER_PARTITION, "position": PER_PARTITION}
