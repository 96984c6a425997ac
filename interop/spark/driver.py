"""A Spark driver that a test in another Python drives: one SparkSession, one JSON request a line on stdin,
one JSON answer a line on the file descriptor --reply-fd names (Spark's and py4j's own output stay on
stdout and stderr). interop/test_spark35.py runs it with the python of the pyspark 3.5 venv
(.cache/venv/spark35), since pyspark 3.5 and 4.0 cannot share one environment.

    python interop/spark/driver.py --jars DIR --reply-fd N

Requests: {"op": OP, ...}; the answer is {"ok": RESULT} or {"error": "Type: message"}.
    version                                   Spark's version and the connector's kafka-clients version
    read      bootstrap, options              a batch query: sorted [topic, partition, offset, value]
    stream    bootstrap, options, checkpoint, sink
                                              Trigger.AvailableNow into a memory sink, or "json" files that
                                              outlive the query: {"rows": sorted [topic, partition, offset,
                                              value] the sink holds, "batches": [numInputRows...]}
    write     bootstrap, topic, n, parts      spark.range(n) as key = id, value = "row-<id>", through the sink
    pipeline  bootstrap, checkpoint, source_topic, sink_topic
                                              interop/spark/pipeline.py under Trigger.AvailableNow: {"progress":
                                              [each batch's progress JSON]}
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys

import pipeline

COLUMNS = ("topic", "partition", "offset", "CAST(value AS STRING) AS value")
ROW_SCHEMA = "topic STRING, partition INT, offset LONG, value STRING"
_names = itertools.count()
ERROR_LINES = 30                # of an error's text the answer keeps


def _reader(spark, bootstrap: str, options: dict, stream: bool = False):
    reader = (spark.readStream if stream else spark.read).format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader


def _sorted_rows(rows) -> list:
    return sorted([r[0], r[1], r[2], r[3]] for r in rows)


def version(spark) -> dict:
    jvm = spark.sparkContext._jvm
    return {"spark": spark.version, "kafka_clients": jvm.org.apache.kafka.common.utils.AppInfoParser.getVersion()}


def read(spark, bootstrap: str, options: dict) -> list:
    return _sorted_rows(_reader(spark, bootstrap, options).load().selectExpr(*COLUMNS).collect())


def stream(spark, bootstrap: str, options: dict, checkpoint: str, sink: str = "memory") -> dict:
    writer = _reader(spark, bootstrap, options, stream=True).load().selectExpr(*COLUMNS).writeStream
    if sink == "json":          # files in checkpoint + "-out": a sink that resumes from its checkpoint
        out = checkpoint + "-out"
        writer = writer.format("json").option("path", out)
    else:
        name = f"stream_{next(_names)}"
        writer = writer.format("memory").queryName(name)
    query = writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    query.awaitTermination()
    got = (spark.read.schema(ROW_SCHEMA).json(out) if sink == "json" else spark.sql(f"SELECT * FROM {name}"))
    return {"rows": _sorted_rows(got.collect()), "batches": [p["numInputRows"] for p in query.recentProgress]}


def write(spark, bootstrap: str, topic: str, n: int, parts: int = 4) -> None:
    (spark.range(n).selectExpr("CAST(id AS STRING) AS key", "CONCAT('row-', CAST(id AS STRING)) AS value")
     .repartition(parts)
     .write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save())


def run_pipeline(spark, bootstrap: str, checkpoint: str, source_topic: str, sink_topic: str) -> dict:
    query = pipeline.start(spark, bootstrap, checkpoint, trigger={"availableNow": True},
                           source_topic=source_topic, sink_topic=sink_topic)
    query.awaitTermination()
    # pyspark 3.5 gives each progress as a dict, 4.0 as a StreamingQueryProgress with its JSON
    return {"progress": [p if isinstance(p, dict) else json.loads(p.json) for p in query.recentProgress]}


OPS = {"version": version, "read": read, "stream": stream, "write": write, "pipeline": run_pipeline}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jars", required=True, help="directory of the connector's jars")
    ap.add_argument("--reply-fd", type=int, required=True, help="file descriptor the answers go to")
    args = ap.parse_args(argv)
    reply = os.fdopen(args.reply_fd, "w", buffering=1)
    spark = pipeline.spark_session(args.jars, app="kafka-compat-driver")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        reply.write(json.dumps({"ok": "ready"}) + "\n")
        for line in sys.stdin:
            request = json.loads(line)
            op = OPS.get(request.pop("op", None))
            try:
                if op is None:
                    raise ValueError(f"unknown op in {line.strip()}")
                answer = {"ok": op(spark, **request)}
            except Exception as e:      # the test sees what failed (not the whole JVM stack), and the session goes on
                answer = {"error": "\n".join(f"{type(e).__name__}: {e}".splitlines()[:ERROR_LINES])}
            reply.write(json.dumps(answer) + "\n")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
