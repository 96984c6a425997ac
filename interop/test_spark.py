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
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from spark_support import (  # noqa: E402
    PARTITIONS,
    PIPELINE_COUNTS,
    RECORDS,
    by_window,
    check_isolation_levels,
    check_sink,
    connector_jars,
    counts,
    create,
    events,
    fill,
    lose_records,
    missing,
    offsets_query,
    output,
    pipeline_events,
    produce,
    produce_transactions,
    producers,
    record_ts,
    rows,
    timestamp_queries,
)

JARS = connector_jars("spark", "SPARK_KAFKA_JARS")
if not JARS:
    missing("Spark's Kafka connector is not resolved (bash interop/maven.sh spark, or set SPARK_KAFKA_JARS)",
            allow_module_level=True)

kafka = pytest.importorskip("kafka")

from kafka_compat.testing import EmbeddedBroker  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "spark"))
import pipeline  # noqa: E402


@pytest.fixture(scope="module")
def spark():
    try:
        import pyspark  # noqa: F401
    except ImportError:
        missing("pyspark 4.0 is not installed (pip install 'pyspark==4.0.*')")
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
                missing(mark.kwargs["reason"])
        with new_cluster() as c:
            yield c
        return
    with EmbeddedBroker() as b:
        yield b


BOTH = pytest.mark.parametrize("broker", ["single", "cluster"], indirect=True)


def source_offsets(progress, which: str) -> dict:
    """A batch's Kafka source offsets ({topic: {partition: offset}}), from the progress' own JSON."""
    return json.loads(progress.json)["sources"][0][which]


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
    produce(broker, pipeline.SOURCE_TOPIC, pipeline_events())
    run_pipeline(spark, broker, tmp_path / "ckpt")
    got = output(broker)
    assert by_window(got) == PIPELINE_COUNTS
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
    assert by_window(first) == [
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

def read(spark, broker, **options):
    """A batch query's rows as sorted (topic, partition, offset, value)."""
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    rows = reader.load().selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value").collect()
    return sorted(tuple(r) for r in rows)


def test_batch_query_with_per_partition_starting_and_ending_offsets(spark, broker):
    fill(broker)
    query = offsets_query("source")
    assert read(spark, broker, subscribe="source", **query["options"]) == query["rows"]


def test_batch_query_by_timestamp(spark, broker):
    fill(broker)
    for query in timestamp_queries("source"):
        assert read(spark, broker, subscribe="source", **query["options"]) == query["rows"]


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
    lose_records(broker, "lossy", how, 15)
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
    check_sink(broker, "sunk", n)


# --------------------------------------------------------------------------- transactions

@BOTH
def test_read_committed_reads_only_what_committed_transactions_wrote(spark, broker, tmp_path):
    """Transactions that commit and abort interleave on every partition: a read_committed batch
    and stream see exactly the committed values, read_uncommitted sees the aborted ones too."""
    create(broker, "txn")
    committed, aborted = produce_transactions(broker, "txn", "spark-txn")

    check_isolation_levels(lambda level: [r[3] for r in read(spark, broker, subscribe="txn",
                                                             **{"kafka.isolation.level": level})],
                           committed, aborted)
    query = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", "txn").option("startingOffsets", "earliest")
             .option("kafka.isolation.level", "read_committed").load()
             .selectExpr("CAST(value AS STRING) AS value")
             .writeStream.format("memory").queryName("txn_committed").trigger(availableNow=True).start())
    query.awaitTermination()
    assert sorted(r.value for r in spark.sql("SELECT value FROM txn_committed").collect()) == sorted(committed)
