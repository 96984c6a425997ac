"""PySpark 3.5 Structured Streaming on kafka-compat, through Spark 3.5's own Kafka connector.

pyspark 3.5 cannot share an environment with pyspark 4.0 (interop/test_spark.py), so it lives in a
venv of its own, .cache/venv/spark35 (interop/setup.sh), and its driver is a separate process:
interop/spark/driver.py, run with that venv's python, answers this module's requests over a pipe.
The connector, spark-sql-kafka-0-10_2.12 3.5.7 with its token provider and dependencies (Scala 2.12
like pyspark 3.5's jars; kafka-clients 3.4.1), comes from Maven Central: `bash interop/maven.sh
spark35` resolves it into .cache/jvm/spark35, or $SPARK35_KAFKA_JARS names another directory.

The cases that differ between connector versions: the pipeline (with a restart from its checkpoint
across a broker restart), offsets and timestamps as starting and ending points, maxOffsetsPerTrigger,
failOnDataLoss after DeleteRecords, the idempotent sink and read_committed over transactions. One
broker and one three-broker cluster serve the whole module, each test on topics of its own; the
pipeline, the sink and read_committed run on both.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import spark_support as ss  # noqa: E402

SPARK = "3.5.7"
KAFKA_CLIENTS = "3.4.1"                     # what spark-sql-kafka-0-10_2.12 3.5.7 depends on
VENV_PYTHON = ss.ROOT / ".cache" / "venv" / "spark35" / "bin" / "python"
DRIVER = Path(__file__).resolve().parent / "spark" / "driver.py"
ANSWER_WAIT = 300.0                         # seconds one request may take (a hang, not timing)

JARS = ss.connector_jars("spark35", "SPARK35_KAFKA_JARS")
if not JARS:
    ss.missing("Spark 3.5's Kafka connector is not resolved (bash interop/maven.sh spark35, or set SPARK35_KAFKA_JARS)",
            allow_module_level=True)
if not VENV_PYTHON.exists():
    ss.missing(f"the pyspark {SPARK} venv is not there ({VENV_PYTHON}; bash interop/setup.sh makes it)",
            allow_module_level=True)
pytest.importorskip("kafka")

from kafka_compat.testing import EmbeddedBroker  # noqa: E402


class SparkDriverError(AssertionError):
    pass


class Driver:
    """interop/spark/driver.py in the venv's python: one SparkSession, requests answered in order."""

    def __init__(self, log_path: Path):
        reply_r, reply_w = os.pipe()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_")) and k != "PYTHONPATH"}
        env["PYSPARK_PYTHON"] = str(VENV_PYTHON)
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen([str(VENV_PYTHON), str(DRIVER), "--jars", JARS, "--reply-fd", str(reply_w)],
                                     stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT,
                                     pass_fds=(reply_w,), env=env, text=True)
        os.close(reply_w)
        self._replies = os.fdopen(reply_r, "r")
        self._ready = False         # the first request waits for the session: the JVM starts beside the brokers

    def _answer(self):
        deadline = time.monotonic() + ANSWER_WAIT
        while not select.select([self._replies], [], [], 1.0)[0]:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SparkDriverError(f"the Spark {SPARK} driver gave no answer "
                                       f"(exit {self.proc.poll()}):\n{self.log_tail()}")
        line = self._replies.readline()
        if not line:
            raise SparkDriverError(f"the Spark {SPARK} driver exited ({self.proc.wait()}):\n{self.log_tail()}")
        answer = json.loads(line)
        if "error" in answer:
            raise SparkDriverError(answer["error"])
        return answer["ok"]

    def __call__(self, op: str, **request):
        if not self._ready:
            assert self._answer() == "ready"
            self._ready = True
        self.proc.stdin.write(json.dumps({"op": op, **request}) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._replies.close()
        self._log.close()


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    driver = Driver(tmp_path_factory.mktemp("spark35") / "driver.log")
    yield driver
    driver.close()


# The brokers outlive a test: no time retention, or it would remove the records stamped 2023
NO_RETENTION = {"log.retention.ms": -1}


@pytest.fixture(scope="module")
def single():
    """One broker for the module."""
    with EmbeddedBroker(NO_RETENTION) as b:
        yield b


@pytest.fixture(scope="module")
def cluster():
    """Three brokers under ZooKeeper for the module, RF 3."""
    from cluster_support import new_cluster, skip_without_cluster
    for mark in skip_without_cluster():
        if mark.args[0]:
            ss.missing(mark.kwargs["reason"])
    with new_cluster(**NO_RETENTION) as c:
        yield c


@pytest.fixture(params=["single"])
def broker(request):
    return request.getfixturevalue(request.param)


BOTH = pytest.mark.parametrize("broker", ["single", "cluster"], indirect=True)


# --------------------------------------------------------------------------- the pipeline

@BOTH
def test_pipeline_writes_exactly_the_finished_windowed_counts(spark, broker, tmp_path):
    source, sink = "pipeline-events", "pipeline-counts"
    ss.create(broker, source)
    ss.create(broker, sink, partitions=1)
    ss.produce(broker, source, ss.pipeline_events())
    spark("pipeline", bootstrap=broker.bootstrap, checkpoint=str(tmp_path / "ckpt"), source_topic=source,
          sink_topic=sink)
    got = ss.output(broker, sink)
    assert ss.by_window(got) == ss.PIPELINE_COUNTS
    # the Kafka sink's producer is idempotent by default, and one sequence covers every row
    states = ss.producers(broker, sink)
    assert [s.last_sequence for s in states] == [len(got) - 1] and states[0].producer_id >= 0


def test_restart_from_checkpoint_after_a_broker_restart_continues_where_it_stopped(spark, single, tmp_path):
    broker, source, sink = single, "restart-events", "restart-counts"
    ss.create(broker, source)
    ss.create(broker, sink, partitions=1)

    def run():
        return spark("pipeline", bootstrap=broker.bootstrap, checkpoint=str(tmp_path / "ckpt"),
                     source_topic=source, sink_topic=sink)["progress"]

    # first run: [0, 30) and one event at 45 s, so the watermark (40 s) closes [0, 10) .. [30, 40)
    sent = ss.events("ab", range(0, 30, 3)) + ss.events("c", [45])
    ss.produce(broker, source, sent)
    stopped_at = run()[-1]["sources"][0]["endOffset"]
    first = ss.output(broker, sink)
    assert ss.by_window(first) == [
        ss.counts("a", 0, 4), ss.counts("a", 10, 3), ss.counts("a", 20, 3),
        ss.counts("b", 0, 4), ss.counts("b", 10, 3), ss.counts("b", 20, 3)]
    assert stopped_at == {source: {str(p): sum(r[0] == p for r in sent) for p in range(ss.PARTITIONS)}}

    broker.restart()
    ss.produce(broker, source, ss.events("ab", range(40, 50)) + ss.events(["late"], [100]))
    assert run()[0]["sources"][0]["startOffset"] == stopped_at
    got = ss.output(broker, sink)
    assert got[:len(first)] == first            # nothing rewritten
    assert sorted(got[len(first):], key=lambda kv: kv[0]) == [
        ss.counts("a", 40, 10), ss.counts("b", 40, 10), ss.counts("c", 40, 1)]


# --------------------------------------------------------------------------- batch queries and source options

def test_batch_queries_by_offsets_and_timestamps(spark, single):
    ss.fill(single, "bounds")
    for query in [ss.offsets_query("bounds"), *ss.timestamp_queries("bounds")]:
        got = spark("read", bootstrap=single.bootstrap, options={"subscribe": "bounds", **query["options"]})
        assert [tuple(r) for r in got] == query["rows"], query["options"]


def test_max_offsets_per_trigger_bounds_every_micro_batch(spark, single, tmp_path):
    ss.fill(single, "bounded")
    got = spark("stream", bootstrap=single.bootstrap, checkpoint=str(tmp_path / "ckpt"),
                options={"subscribe": "bounded", "startingOffsets": "earliest", "maxOffsetsPerTrigger": "7"})
    sizes = got["batches"]
    assert sum(sizes) == ss.PARTITIONS * ss.RECORDS and max(sizes) <= 7 and len(sizes) >= 5
    assert [tuple(r) for r in got["rows"]] == ss.rows("bounded", {p: range(ss.RECORDS) for p in range(ss.PARTITIONS)})


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_fail_on_data_loss_after_delete_records(spark, single, tmp_path, fail_on_data_loss):
    """The query read 0..9 and stopped; DeleteRecords removes 10..14 before it resumes: it fails, or reads 15..19."""
    topic = f"lossy-{str(fail_on_data_loss).lower()}"
    ss.create(single, topic, partitions=1, configs={"segment.bytes": "100", "retention.ms": "-1"})

    def resume():
        return spark("stream", bootstrap=single.bootstrap, checkpoint=str(tmp_path / "ckpt"),
                     options={"subscribe": topic, "startingOffsets": "earliest",
                              "failOnDataLoss": str(fail_on_data_loss).lower()}, sink="json")["rows"]

    ss.produce(single, topic, [(0, None, f"v0-{i}", ss.record_ts(0, i)) for i in range(10)], batch_each=True)
    assert resume() == [[topic, 0, i, f"v0-{i}"] for i in range(10)]
    ss.produce(single, topic, [(0, None, f"v0-{i}", ss.record_ts(0, i)) for i in range(10, 20)], batch_each=True)
    ss.lose_records(single, topic, "delete-records", 15)
    if fail_on_data_loss:
        with pytest.raises(SparkDriverError, match="failOnDataLoss"):
            resume()
        # the failed query wrote nothing: the sink's files hold 0..9 only
        written = [json.loads(line) for f in (tmp_path / "ckpt-out").glob("part-*.json")
                   for line in f.read_text().splitlines()]
        assert sorted(r["offset"] for r in written) == list(range(10))
    else:
        assert resume() == [[topic, 0, i, f"v0-{i}"] for i in [*range(10), *range(15, 20)]]


# --------------------------------------------------------------------------- the sink

@BOTH
def test_the_sinks_idempotent_producer_writes_every_row_exactly_once(spark, broker):
    ss.create(broker, "sunk", partitions=1)
    spark("write", bootstrap=broker.bootstrap, topic="sunk", n=5000)
    ss.check_sink(broker, "sunk", 5000)


# --------------------------------------------------------------------------- transactions

@BOTH
def test_read_committed_reads_only_what_committed_transactions_wrote(spark, broker, tmp_path):
    """Transactions that commit and abort interleave on every partition: a read_committed batch
    and stream see exactly the committed values, read_uncommitted sees the aborted ones too."""
    ss.create(broker, "txn")
    committed, aborted = ss.produce_transactions(broker, "txn", "spark35-txn")

    ss.check_isolation_levels(lambda level: [r[3] for r in spark("read", bootstrap=broker.bootstrap, options={
        "subscribe": "txn", "kafka.isolation.level": level})], committed, aborted)
    streamed = spark("stream", bootstrap=broker.bootstrap, checkpoint=str(tmp_path / "ckpt"),
                     options={"subscribe": "txn", "startingOffsets": "earliest",
                              "kafka.isolation.level": "read_committed"})
    assert sorted(v for _, _, _, v in streamed["rows"]) == sorted(committed)


# --------------------------------------------------------------------------- what ran

def test_the_driver_ran_spark_35_with_its_own_connector(spark):
    assert spark("version") == {"spark": SPARK, "kafka_clients": KAFKA_CLIENTS}
