"""A PySpark Structured Streaming pipeline on kafka-compat, through Spark's own Kafka connector.

It reads JSON events {"key": ..., "ts": ...} from topic `events` (subscribe,
startingOffsets=earliest), counts them per key in tumbling event-time windows
with a watermark, and writes each finished window to topic `event-counts` with
the Kafka sink: key = the event key, value = JSON
{"key", "window_start", "window_end", "count"} with UTC ISO-8601 times.
Append mode with a watermark emits every window once, when it can no longer
change, so the output is exact; progress lives in the checkpoint directory.

    spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0 \\
        interop/spark/pipeline.py --bootstrap 127.0.0.1:9092 --checkpoint /tmp/ckpt

or `python interop/spark/pipeline.py ... --jars DIR` with the connector jars in
DIR (`bash interop/maven.sh spark` resolves them into .cache/jvm/spark).
"""
from __future__ import annotations

import argparse
import glob
import os

SOURCE_TOPIC = "events"
SINK_TOPIC = "event-counts"
EVENT_SCHEMA = "key STRING, ts TIMESTAMP"


def spark_session(jars_dir: str | None = None, app: str = "kafka-compat-pipeline", cores: int = 2):
    """A local SparkSession; with jars_dir, the connector jars come from there instead of --packages."""
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.appName(app).master(f"local[{cores}]")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", str(cores))
               .config("spark.ui.enabled", "false"))
    if jars_dir:
        jars = sorted(glob.glob(os.path.join(jars_dir, "*.jar")))
        if not jars:
            raise FileNotFoundError(f"no jars in {jars_dir}")
        builder = builder.config("spark.jars", ",".join(jars))
    return builder.getOrCreate()


def windowed_counts(raw, window: str = "10 seconds", watermark: str = "5 seconds"):
    """Kafka rows (value = JSON event) -> Kafka rows (key, value) of finished windowed counts."""
    from pyspark.sql import functions as F

    events = (raw.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
              .select("e.key", "e.ts")
              .where(F.col("key").isNotNull() & F.col("ts").isNotNull()))
    counts = (events.withWatermark("ts", watermark)
              .groupBy(F.window("ts", window), "key")
              .count())
    return counts.select(
        F.col("key"),
        F.to_json(F.struct(
            F.col("key"),
            F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
            F.date_format("window.end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
            F.col("count"))).alias("value"))


def start(spark, bootstrap: str, checkpoint: str, *, source_options: dict | None = None,
          sink_options: dict | None = None, window: str = "10 seconds", watermark: str = "5 seconds",
          trigger: dict | None = None, query_name: str | None = None, source_topic: str = SOURCE_TOPIC,
          sink_topic: str = SINK_TOPIC):
    """Start the streaming query; returns the StreamingQuery."""
    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source_topic)
              .option("startingOffsets", "earliest"))
    for k, v in (source_options or {}).items():
        reader = reader.option(k, v)
    writer = (windowed_counts(reader.load(), window, watermark).writeStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("topic", sink_topic)
              .option("checkpointLocation", checkpoint)
              .outputMode("append"))
    for k, v in (sink_options or {}).items():
        writer = writer.option(k, v)
    if trigger:
        writer = writer.trigger(**trigger)
    if query_name:
        writer = writer.queryName(query_name)
    return writer.start()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--checkpoint", required=True, help="checkpoint directory (progress and state)")
    ap.add_argument("--jars", default=os.environ.get("SPARK_KAFKA_JARS"),
                    help="directory of connector jars (default $SPARK_KAFKA_JARS; omit with --packages)")
    ap.add_argument("--window", default="10 seconds")
    ap.add_argument("--watermark", default="5 seconds")
    args = ap.parse_args(argv)
    spark = spark_session(args.jars)
    query = start(spark, args.bootstrap, args.checkpoint, window=args.window, watermark=args.watermark)
    query.awaitTermination()


if __name__ == "__main__":
    main()
