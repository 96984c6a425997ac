"""How long producers stall when a leader's log directory fails, against a SIGKILLed leader.

    python bench/log_dir_failure.py [--trials T]

Three brokers (a real ZooKeeper, zookeeper.session.timeout.ms=6000), a partition with replication
factor 3 led by broker 2, whose log directory is a small filesystem of its own (faults.disk, root);
an idempotent acks=all producer writes every 5 ms (bench/cluster.py's Acks) beside a bulk writer of
about 1 MB/s (so that the full disk is met at the next segment roll within a second or so, segments
holding their blocks ahead; its own errors are not counted). Each trial runs the three
cases side by side, the order rotating between trials, each on a fresh cluster:

  two_dirs   broker 2 has a second, healthy log dir; its first one fills: the dir goes offline,
             the controller hears of it through the log_dir_event znode and moves the leadership
  one_dir    its only log dir fills: the broker halts, and the controller moves the leadership
             once its ZooKeeper session has ended
  sigkill    the leader is SIGKILLed (the reference: the controller waits for the session too)

Measured: the longest time without an acknowledgement from the fault to the producer's first
acknowledgements on the new leader. Prints a line per measurement, then one JSON line with the
medians and the ratios to sigkill, and the load average. Timing never runs in CI.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cluster import Acks  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kafka_compat.testing import EmbeddedCluster  # noqa: E402

WAIT = 120.0
TOPIC = "failover"
BROKER = 2
SETTINGS = {"min.insync.replicas": 2, "default.replication.factor": 3, "auto.create.topics.enable": False,
            "replica.lag.time.max.ms": 6000, "offsets.topic.num.partitions": 1}
CASES = ("two_dirs", "one_dir", "sigkill")


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def bulk(bootstrap: str, stop: threading.Event) -> None:
    """About 1 MB/s of 4 KiB records, acks=1, errors ignored."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "log_level": 0})
    while not stop.is_set():
        for _ in range(25):
            try:
                producer.produce(TOPIC, b"b" * 4096, partition=0)
            except BufferError:
                break
        producer.poll(0.1)
    producer.flush(10)


def stall(case: str) -> float:
    """One case on a fresh cluster: the longest gap between acknowledgements around the fault, in seconds."""
    c = EmbeddedCluster(3, SETTINGS, disks={BROKER: 32 << 20})
    b = c.brokers[BROKER]
    if case == "two_dirs":
        b.log_dir = f"{b.log_dir},{os.path.join(b.data_dir, 'logs2')}"
    with c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        deadline = time.monotonic() + WAIT
        while True:        # the brokers may not know the controller yet
            try:
                admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=-1,
                                              replica_assignment=[[BROKER, 0, 1]],
                                              config={"segment.bytes": str(2 << 20)})])[TOPIC].result(30)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        c.wait_until(lambda: (s := c.partition_state(TOPIC, 0)) and s["leader"] == BROKER and len(s["isr"]) == 3,
                     WAIT, "broker 2 leading with a full ISR")
        producer = Acks(c.bootstrap, TOPIC)
        stop = threading.Event()
        writer = threading.Thread(target=bulk, args=(c.bootstrap, stop), daemon=True)
        writer.start()
        try:
            producer.wait_for_acks(0.0, 100)
            t0 = time.monotonic()
            if case == "sigkill":
                c.kill(BROKER)
            else:
                c.fill_disk(BROKER)
            c.wait_until(lambda: c.leader(TOPIC, 0) not in (None, -1, BROKER), WAIT, "a new leader")
            producer.wait_for_acks(time.monotonic())
        finally:
            stop.set()
            writer.join()
            producer.close()
        if producer.errors:
            raise RuntimeError(f"the producer saw errors: {producer.errors[:3]}")
        times = [t0] + sorted(a for _, a in producer.acks if a > t0)
        return max(y - x for x, y in zip(times, times[1:]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args()
    results: dict[str, list[float]] = {case: [] for case in CASES}
    for k in range(args.trials):
        for case in CASES[k % 3:] + CASES[:k % 3]:
            gap = stall(case)
            results[case].append(gap)
            log(f"  trial {k + 1} {case}: longest time without an acknowledgement {gap:.2f} s "
                f"(load {os.getloadavg()[0]:.1f})")
    med = {case: statistics.median(v) for case, v in results.items()}
    print(json.dumps({"scenario": "log_dir_failure", "stall_s": results, "median_s": med,
                      "two_dirs_vs_sigkill": med["two_dirs"] / med["sigkill"],
                      "one_dir_vs_sigkill": med["one_dir"] / med["sigkill"],
                      "loadavg": os.getloadavg()}))


if __name__ == "__main__":
    main()
