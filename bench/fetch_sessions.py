"""What incremental fetch sessions (KIP-227) save a consumer of many partitions: broker CPU per fetch,
with sessions against without, side by side.

    python bench/fetch_sessions.py [--rounds 3] [--partitions 1000] [--seconds 10] [--rate 200]

Two brokers run at once, one as configured by default and one with
max.incremental.fetch.session.cache.slots=0 (every fetch a full one, as before
consumers got sessions). Each round, a kafka-python consumer assigned every
partition of a topic reads a trickle of records (`--rate` a second, spread over
the partitions) from each broker in turn, alternating which goes first. The
figures per side are the broker's CPU time (user + system) per Fetch request and
the fetches per second; the ratio is sessions / none, median [min..max] over
rounds. CPU time, not wall time: this machine is shared. kafka-python sends a
session's incremental requests (only the partitions whose offsets moved), so the
saving is on both the request's decoding and the answer's partitions.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kafka_compat.testing import EmbeddedBroker, free_port  # noqa: E402

TOPIC = "sessions"


def fetches(metrics_url: str) -> float:
    with urllib.request.urlopen(metrics_url, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("kafka_network_requestmetrics_requests_total") and 'request="FetchConsumer"' in line:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def cpu_seconds(pid: int) -> float:
    import psutil
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def start(sessions: bool, partitions: int) -> EmbeddedBroker:
    port = free_port()
    settings = {"prometheus.listener": f"http://127.0.0.1:{port}", "num.partitions": partitions}
    if not sessions:
        settings["max.incremental.fetch.session.cache.slots"] = 0
    b = EmbeddedBroker(settings).start()
    b.metrics_url = f"http://127.0.0.1:{port}/metrics"
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])
    admin.close()
    return b


def measure(b: EmbeddedBroker, partitions: int, seconds: float, rate: float) -> tuple[float, float]:
    """(broker CPU s per fetch, fetches per second) while one consumer reads a trickle of records."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, fetch_max_wait_ms=100, enable_auto_commit=False)
    consumer.assign([TopicPartition(TOPIC, p) for p in range(partitions)])
    consumer.seek_to_end()
    producer = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=0)
    consumer.poll(timeout_ms=1000)                       # settled: positions known, the session open
    f0, c0, t0 = fetches(b.metrics_url), cpu_seconds(b.proc.pid), time.monotonic()
    sent, got, i = 0, 0, 0
    while time.monotonic() - t0 < seconds:
        due = int((time.monotonic() - t0) * rate)
        while sent < due:
            producer.send(TOPIC, b"x" * 100, partition=i % partitions)
            sent += 1
            i += 7
        got += sum(len(v) for v in consumer.poll(timeout_ms=50).values())
    elapsed = time.monotonic() - t0
    f1, c1 = fetches(b.metrics_url), cpu_seconds(b.proc.pid)
    producer.close()
    consumer.close()
    if got == 0:
        raise SystemExit("the consumer read nothing: the run measured no work")
    return (c1 - c0) / max(f1 - f0, 1), (f1 - f0) / elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=200.0)
    args = ap.parse_args()
    brokers = {"sessions": start(True, args.partitions), "none": start(False, args.partitions)}
    per = {name: [] for name in brokers}
    try:
        for r in range(args.rounds):
            order = list(brokers) if r % 2 == 0 else list(reversed(brokers))
            for name in order:
                per[name].append(measure(brokers[name], args.partitions, args.seconds, args.rate))
            print(f"round {r + 1}: " + ", ".join(f"{n} {per[n][-1][0] * 1e6:.0f} µs CPU/fetch, "
                                                 f"{per[n][-1][1]:.1f} fetches/s" for n in brokers), flush=True)
    finally:
        for b in brokers.values():
            b.stop()
    ratios = [s[0] / n[0] for s, n in zip(per["sessions"], per["none"])]
    for name, runs in per.items():
        print(f"{name:9s} {statistics.median(x[0] for x in runs) * 1e6:8.0f} µs broker CPU per fetch, "
              f"{statistics.median(x[1] for x in runs):6.1f} fetches/s")
    print(f"ratio sessions/none CPU per fetch {statistics.median(ratios):.3f} "
          f"[{min(ratios):.3f}..{max(ratios):.3f}], {args.rounds} rounds, {args.partitions} partitions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
