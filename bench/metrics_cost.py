"""What metrics cost per request: broker CPU time with the Prometheus endpoint on against off.

    python bench/metrics_cost.py [--rounds 9] [--requests 20000] [--at REV]

Metrics cost something per request (timings, counters, histograms) and per scrape,
nothing per record, so the worst case is many small requests. Two brokers run
side by side, one with `prometheus.listener` (scraped every 5 s, as bench/run.py's
`kafka-compat+metrics` is) and one without; each round sends both the same
pipelined requests over our wire client, alternating which goes first: Produce
(one 10-record batch each, acks=1), then Fetch (4 KiB each), then Metadata. The
figure is the broker process's CPU time (user + system) per request, median over
rounds, and each round's on/off ratio (the two sides ran seconds apart): median
[min..max]; CPU time, not wall time, because this 2-core machine is shared and its
wall times swing by tens of percent from one minute to the next. The kernel counts
CPU time in 10 ms ticks: 20,000 requests of ~50 µs make a side's figure good to
about 1%. `--at REV` runs both sides at a git revision (its own checkout and venv,
as bench/run.py's kafka-compat@REV), for the cost before a change.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import urllib.request

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

from wire import WireClient, decode_response, encode_request  # noqa: E402

from kafka_compat.protocol.messages.fetch import FetchRequest  # noqa: E402
from kafka_compat.protocol.messages.metadata import MetadataRequest  # noqa: E402
from kafka_compat.protocol.messages.produce import ProduceRequest  # noqa: E402
from kafka_compat.protocol.records import build_batch  # noqa: E402
from kafka_compat.testing import EmbeddedBroker, free_port  # noqa: E402

TOPIC = "cost"
WINDOW = 64           # requests in flight


def bodies(kind: str):
    if kind == "produce":
        batch = build_batch([(None, b"v" * 100, [], 1000 + i) for i in range(10)])
        return 0, 9, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
            name=TOPIC, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    if kind == "fetch":
        return 1, 12, FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=4096, isolation_level=0, session_id=0,
            session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=TOPIC, partitions=[FetchRequest.FetchPartition(
                partition=0, fetch_offset=0, partition_max_bytes=4096)])], forgotten_topics_data=[], rack_id="")
    return 3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                  allow_auto_topic_creation=True)


def pipelined(client: WireClient, kind: str, n: int) -> None:
    key, version, body = bodies(kind)
    frames = [encode_request(key, version, body, i) for i in range(n)]
    sent = received = 0
    while received < n:
        while sent < n and sent - received < WINDOW:
            client.send_raw(frames[sent])
            sent += 1
        decode_response(key, version, client.read_frame())
        received += 1


class Side:
    def __init__(self, metrics: bool, python: str | None = None):
        overrides = {"num.partitions": 1}
        self.stop = threading.Event()
        if metrics:
            port = free_port()
            overrides["prometheus.listener"] = f"http://127.0.0.1:{port}"
            threading.Thread(target=self.scrape, args=(f"http://127.0.0.1:{port}/metrics",), daemon=True).start()
        self.name = "metrics on" if metrics else "metrics off"
        self.broker = EmbeddedBroker(overrides, python=python).start()
        self.proc = psutil.Process(self.broker.proc.pid)
        self.client = WireClient("127.0.0.1", self.broker.port, timeout=60)
        pipelined(self.client, "metadata", 5)                 # creates the topic
        self.cpu_per_request: dict[str, list[float]] = {}

    def scrape(self, url: str) -> None:
        while not self.stop.wait(5.0):
            try:
                with urllib.request.urlopen(url, timeout=30) as r:
                    r.read()
            except OSError:
                pass

    def cpu(self) -> float:
        t = self.proc.cpu_times()
        return t.user + t.system

    def run(self, kind: str, n: int) -> None:
        before = self.cpu()
        pipelined(self.client, kind, n)
        self.cpu_per_request.setdefault(kind, []).append((self.cpu() - before) / n * 1e6)

    def close(self) -> None:
        self.stop.set()
        self.client.close()
        self.broker.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--at", metavar="REV", help="run both sides at this git revision")
    args = ap.parse_args()
    python = None
    if args.at:
        from bench.contenders import checkout
        python = checkout(args.at)
    load0 = os.getloadavg()[0]
    off, on = Side(False, python), Side(True, python)
    try:
        for side in (off, on):                                  # warm both up, untimed
            for kind in ("produce", "fetch", "metadata"):
                pipelined(side.client, kind, 500)
        for r in range(args.rounds):
            for side in ((off, on) if r % 2 == 0 else (on, off)):
                for kind in ("produce", "fetch", "metadata"):
                    side.run(kind, args.requests)
                time.sleep(0.2)
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        off.close()
        on.close()
    print(f"# {args.rounds} rounds x {args.requests} requests{' at ' + args.at if args.at else ''}; load average "
          f"{load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print("| request | CPU µs/request, metrics off | metrics on | on / off, medians | on / off per round: median "
          "[min..max] |")
    print("|---|---|---|---|---|")
    for kind in ("produce", "fetch", "metadata"):
        offs, ons = off.cpu_per_request[kind], on.cpu_per_request[kind]
        a, b = statistics.median(offs), statistics.median(ons)
        per_round = [y / x for x, y in zip(offs, ons) if x]
        print(f"| {kind} | {a:.1f} | {b:.1f} | {b / a:.3f} | {statistics.median(per_round):.3f} "
              f"[{min(per_round):.3f}..{max(per_round):.3f}] |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
