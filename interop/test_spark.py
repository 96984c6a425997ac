"""PySpark 4.0 Structured Streaming on kafka-compat, through Spark's own Kafka connector.

Spark's connector (spark-sql-kafka-0-10_2.13 4.0.0 with its token provider and
dependencies) comes from Maven Central as --packages would fetch it: interop/maven.sh
resolves it into .cache/jvm/spark, or $SPARK_KAFKA_JARS names another directory.
pyspark 4.0.0 comes from PyPI (interop/setup.sh). One SparkSession (local[2]) serves
the whole module; each test gets its own broker, and the pipeline, the sink and
read_committed also run on a three-broker cluster.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
JARS = os.environ.get("SPARK_KAFKA_JARS") or (str(ROOT / ".cache" / "jvm" / "spark")
                                               if (ROOT / ".cache" / "jvm" / "spark").is_dir() else None)
if not JARS:
    pytest.skip("Spark's Kafka connector is not resolved (bash interop/maven.sh spark, or set SPARK_KAFKA_JARS)",
                allow_module_level=True)

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


@pytest.fixture(params=["single"])
def broker(request):
    """One broker; with the parameter "cluster" (indirect), three brokers under ZooKeeper, RF 3."""
    if request.param == "cluster":
        from cluster_support import new_cluster, skip_without_cluster
        for mark in skip_without_cluster():
            if mark.args[0]:
                pytest.skip(mark.kwargs["reason"])
        with new_cluster() as c:
            yield c
        return
    with EmbeddedBroker() as b:
        yield b


BOTH = pytest.mark.parametrize("broker", ["single", "cluster"], indirect=True)


def create(broker, *topics, partitions: int = PARTITIONS, configs: dict | None = None) -> None:
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        rf = min(3, len(getattr(broker, "brokers", [broker])))
        admin.create_topics([kafka.admin.NewTopic(t, partitions, rf, topic_configs=configs or {}) for t in topics])
    finally:
        admin.close()


def produce(broker, topic: str, records, batch_each: bool = False) -> None:
    """records: (partition, key, value, timestamp_ms) tuples, sent in order (batch_each: one batch each)."""
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap)
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
    """DescribeProducers: the idempotent producers partition 0 of topic remembers."""
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    tp = kafka.TopicPartition(topic, 0)
    try:
        return admin.describe_producers([tp])[tp].active_producers
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

@BOTH
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
    # the Kafka sink's producer is idempotent by default, and one sequence covers every row
    states = producers(broker, pipeline.SINK_TOPIC)
    assert [s.last_sequence for s in states] == [len(got) - 1] and states[0].producer_id >= 0


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


# --------------------------------------------------------------------------- batch queries and source options

RECORDS = 10                                # per partition in `source`


def record_ts(p: int, i: int) -> int:
    """Timestamp (ms) of record i of partition p: one second apart, partitions 100 ms apart."""
    return (BASE_S + i) * 1000 + p * 100


def fill(broker, topic: str = "source") -> None:
    create(broker, topic)
    produce(broker, topic, [(p, f"k{p}-{i}", f"v{p}-{i}", record_ts(p, i))
                            for i in range(RECORDS) for p in range(PARTITIONS)])


def read(spark, broker, **options):
    """A batch query's rows as sorted (topic, partition, offset, value)."""
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    rows = reader.load().selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value").collect()
    return sorted(tuple(r) for r in rows)


def rows(topic: str, wanted: dict[int, range]):
    return sorted((topic, p, i, f"v{p}-{i}") for p, offsets in wanted.items() for i in offsets)


def test_batch_query_with_per_partition_starting_and_ending_offsets(spark, broker):
    fill(broker)
    got = read(spark, broker, subscribe="source",
               startingOffsets=json.dumps({"source": {"0": 2, "1": -2, "2": 7}}),    # -2: earliest
               endingOffsets=json.dumps({"source": {"0": 5, "1": 3, "2": -1}}))      # -1: latest
    assert got == rows("source", {0: range(2, 5), 1: range(0, 3), 2: range(7, RECORDS)})


def test_batch_query_by_timestamp(spark, broker):
    fill(broker)
    # from the first record at or after 4.5 s in every partition (offset 5), up to (not
    # including) the first at or after 7.5 s (offset 8)
    got = read(spark, broker, subscribe="source", startingTimestamp=str((BASE_S + 4) * 1000 + 500),
               endingTimestamp=str((BASE_S + 7) * 1000 + 500))
    assert got == rows("source", {p: range(5, 8) for p in range(PARTITIONS)})
    # per partition; a timestamp past every record means "up to the end"
    got = read(spark, broker, subscribe="source",
               startingOffsetsByTimestamp=json.dumps({"source": {"0": record_ts(0, 9), "1": record_ts(1, 0),
                                                                 "2": record_ts(2, 3) + 1}}),
               endingOffsetsByTimestamp=json.dumps({"source": {"0": record_ts(0, 99), "1": record_ts(1, 2),
                                                               "2": record_ts(2, 99)}}))
    assert got == rows("source", {0: range(9, RECORDS), 1: range(0, 2), 2: range(4, RECORDS)})


def test_subscribe_pattern_and_assign(spark, broker):
    for topic in ("pat-1", "pat-2", "other"):
        fill(broker, topic)
    got = read(spark, broker, subscribePattern="pat-.*")
    assert got == rows("pat-1", {p: range(RECORDS) for p in range(PARTITIONS)}) + \
        rows("pat-2", {p: range(RECORDS) for p in range(PARTITIONS)})
    got = read(spark, broker, assign=json.dumps({"other": [0, 2], "pat-2": [1]}))
    assert got == sorted(rows("other", {0: range(RECORDS), 2: range(RECORDS)})
                         + rows("pat-2", {1: range(RECORDS)}))


def test_min_partitions_splits_offset_ranges_and_reads_every_record_once(spark, broker):
    fill(broker)
    df = (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", "source").option("minPartitions", "6").load())
    # Spark splits each partition's range in proportion to its size: 3 x 10 records -> 3 x 2
    assert df.rdd.getNumPartitions() == 6
    got = sorted(tuple(r) for r in df.selectExpr("topic", "partition", "offset", "CAST(value AS STRING)").collect())
    assert got == rows("source", {p: range(RECORDS) for p in range(PARTITIONS)})


def test_max_offsets_per_trigger_bounds_every_micro_batch(spark, broker, tmp_path):
    fill(broker)
    query = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", "source").option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "7").load()
             .selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value")
             .writeStream.format("memory").queryName("bounded")
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    sizes = [p["numInputRows"] for p in query.recentProgress]
    assert sum(sizes) == PARTITIONS * RECORDS and max(sizes) <= 7 and len(sizes) >= 5
    got = sorted(tuple(r) for r in spark.sql("SELECT * FROM bounded").collect())
    assert got == rows("source", {p: range(RECORDS) for p in range(PARTITIONS)})


# --------------------------------------------------------------------------- data loss

@pytest.fixture
def retention_broker():
    """Retention enforced every 200 ms."""
    with EmbeddedBroker({"log.retention.check.interval.ms": 200}) as b:
        yield b


def lose_records(broker, how: str, before: int) -> None:
    """Remove offsets [0, before) of lossy-0, by DeleteRecords or by time retention."""
    if how == "delete-records":
        admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            admin.delete_records({kafka.TopicPartition("lossy", 0): before})
        finally:
            admin.close()
    else:
        admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            # an hour: the records before `before` are from 2023, the rest from now
            admin.alter_configs([kafka.admin.ConfigResource("TOPIC", "lossy", {"retention.ms": "3600000"})])
        finally:
            admin.close()
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        tp = kafka.TopicPartition("lossy", 0)
        deadline = time.monotonic() + WAIT
        while consumer.beginning_offsets([tp])[tp] < before:
            assert time.monotonic() < deadline, "the records were not removed"
            time.sleep(0.2)
        assert consumer.beginning_offsets([tp])[tp] == before
    finally:
        consumer.close()


def stream_lossy(spark, broker, tmp_path, fail_on_data_loss: bool):
    """Copy lossy-0's (offset, value) to JSON files in tmp_path/out (a sink that recovers from its checkpoint)."""
    return (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", "lossy").option("startingOffsets", "earliest")
            .option("failOnDataLoss", str(fail_on_data_loss).lower()).load()
            .selectExpr("offset", "CAST(value AS STRING) AS value")
            .writeStream.format("json").option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True).start())


def copied(spark, tmp_path) -> list[tuple[int, str]]:
    return sorted(tuple(r) for r in spark.read.schema("offset LONG, value STRING").json(str(tmp_path / "out"))
                  .collect())


@pytest.mark.parametrize("how", ["delete-records", "retention"])
@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_fail_on_data_loss_reports_or_skips_removed_records(spark, retention_broker, tmp_path, how,
                                                            fail_on_data_loss):
    """The query read 0..9 and stopped; 10..14 go before it resumes: it fails, or reads 15..19."""
    from pyspark.errors import StreamingQueryException

    broker = retention_broker
    # one batch per segment, so that retention can remove whole segments up to offset 15
    create(broker, "lossy", partitions=1, configs={"segment.bytes": "100", "retention.ms": "-1"})
    produce(broker, "lossy", [(0, None, f"v0-{i}", record_ts(0, i)) for i in range(10)], batch_each=True)
    stream_lossy(spark, broker, tmp_path, fail_on_data_loss).awaitTermination()
    assert copied(spark, tmp_path) == [(i, f"v0-{i}") for i in range(10)]

    # 10..14 are old; 15..19 are new, so time retention keeps them
    now = int(time.time() * 1000)
    produce(broker, "lossy", [(0, None, f"v0-{i}", record_ts(0, i) if i < 15 else now) for i in range(10, 20)],
            batch_each=True)
    lose_records(broker, how, 15)
    query = stream_lossy(spark, broker, tmp_path, fail_on_data_loss)
    if fail_on_data_loss:
        with pytest.raises(StreamingQueryException) as failed:
            query.awaitTermination()
        assert "failOnDataLoss" in str(failed.value)
        assert copied(spark, tmp_path) == [(i, f"v0-{i}") for i in range(10)]
    else:
        query.awaitTermination()
        assert copied(spark, tmp_path) == [(i, f"v0-{i}") for i in [*range(10), *range(15, 20)]]


# --------------------------------------------------------------------------- the sink

@BOTH
def test_the_sinks_idempotent_producer_writes_every_row_exactly_once(spark, broker):
    create(broker, "sunk", partitions=1)
    n = 5000
    (spark.range(n).selectExpr("CAST(id AS STRING) AS key", "CONCAT('row-', CAST(id AS STRING)) AS value")
     .repartition(4)
     .write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", "sunk").save())
    got = consume(broker, "sunk")
    assert sorted(int(k) for _, _, k, _ in got) == list(range(n))
    assert all(v == f"row-{k}" for _, _, k, v in got)
    assert [o for _, o, _, _ in got] == list(range(n))          # no gaps, nothing written twice
    # kafka-clients 3.9's defaults (enable.idempotence=true, acks=all): the broker tracked
    # the sink's producer ids and sequences, and their sequences cover every row once
    states = producers(broker, "sunk")
    assert states and all(s.producer_id >= 0 for s in states)
    assert sum(s.last_sequence + 1 for s in states) == n


# --------------------------------------------------------------------------- transactions

@BOTH
def test_read_committed_reads_only_what_committed_transactions_wrote(spark, broker, tmp_path):
    """Transactions that commit and abort interleave on every partition: a read_committed batch
    and stream see exactly the committed values, read_uncommitted sees the aborted ones too."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    create(broker, "txn")
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "spark-txn"})
    producer.init_transactions(30)
    committed, aborted = [], []
    for t in range(6):
        producer.begin_transaction()
        values = [f"t{t}-{i}" for i in range(3 * PARTITIONS)]
        for i, value in enumerate(values):
            producer.produce("txn", value=value.encode(), partition=i % PARTITIONS)
        producer.flush(30)          # on the broker before the abort (librdkafka purges what it still holds)
        if t % 3 == 1:
            producer.abort_transaction(30)
            aborted += values
        else:
            producer.commit_transaction(30)
            committed += values
    producer.flush(10)

    def values(**options):
        return sorted(v for _, _, _, v in read(spark, broker, subscribe="txn", **options))

    assert values(**{"kafka.isolation.level": "read_committed"}) == sorted(committed)
    assert values(**{"kafka.isolation.level": "read_uncommitted"}) == sorted(committed + aborted)
    query = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", "txn").option("startingOffsets", "earliest")
             .option("kafka.isolation.level", "read_committed").load()
             .selectExpr("CAST(value AS STRING) AS value")
             .writeStream.format("memory").queryName("txn_committed").trigger(availableNow=True).start())
    query.awaitTermination()
    assert sorted(r.value for r in spark.sql("SELECT value FROM txn_committed").collect()) == sorted(committed)
