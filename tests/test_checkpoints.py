"""After a produce, the broker's files are Kafka's: leader-epoch-checkpoint per partition,
replication-offset-checkpoint per data dir, and dump-log shows each batch's leader epoch."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from confluent_kafka import Producer

from kafka_compat.testing import EmbeddedBroker

WAIT = 30.0


def wait_for(path: str, predicate=lambda text: True) -> str:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                text = f.read()
            if predicate(text):
                return text
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared as expected")


def test_checkpoints_and_dump_log_after_a_produce(tmp_path):
    with EmbeddedBroker({"num.partitions": 2, "replica.high.watermark.checkpoint.interval.ms": 100},
                       data_dir=str(tmp_path)) as broker:
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for i in range(5):
            p.produce("cp", key=b"k", value=b"v%d" % i, partition=i % 2)
            p.flush(WAIT)
        logs = os.path.join(str(tmp_path), "logs")
        hw = wait_for(os.path.join(logs, "replication-offset-checkpoint"), lambda t: "cp 0 3" in t)
        lines = hw.splitlines()
        assert lines[0] == "0" and int(lines[1]) == len(lines) - 2
        assert {"cp 0 3", "cp 1 2"} <= set(lines[2:])
        epochs = wait_for(os.path.join(logs, "cp-0", "leader-epoch-checkpoint"))
        assert epochs == "0\n1\n0 0\n"          # version, one entry: epoch 0 from offset 0
    dump = subprocess.run([sys.executable, "-m", "kafka_compat", "dump-log",
                           os.path.join(logs, "cp-0", "00000000000000000000.log")],
                          capture_output=True, text=True, check=True).stdout
    batch_lines = [line for line in dump.splitlines() if line.startswith("baseOffset:")]
    assert len(batch_lines) == 3 and all("partitionLeaderEpoch: 0 " in line for line in batch_lines)
