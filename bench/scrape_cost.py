"""What one Prometheus scrape costs the broker: CPU time to render a snapshot shaped like a full run.

    python bench/scrape_cost.py [--rounds 9] [--topics 17] [--partitions 118] [--requests 15]

A scrape of kafka-compat's endpoint takes a snapshot on the event loop, then
renders it on the endpoint's thread. The snapshot here is shaped like a broker's
after `bench/run.py`'s scenarios (17 topics, 118 partitions, 15 request types,
a client quota: some 2,500 lines). Side by side in one run, it renders the same
snapshot two ways and reports CPU time per scrape and per line, median over
rounds, and their ratio:

- `exposition`: kafka-compat's renderer (kafka_compat/server/prometheus.py);
- `prometheus_client`: the library's generic `generate_latest` over the same
  metric families (parsed from that text; tests/test_metrics.py checks that it
  renders them to the same bytes).

CPU time (`time.thread_time`), not wall time: the machine is shared.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from kafka_compat.server.broker_topic_stats import BrokerTopicStats  # noqa: E402
from kafka_compat.server.prometheus import exposition  # noqa: E402
from kafka_compat.server.request_metrics import SLOTS, TIMES, RequestMetrics  # noqa: E402

REQUEST_TYPES = ("Produce", "FetchConsumer", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch",
                 "FindCoordinator", "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup", "ApiVersions",
                 "CreateTopics", "DeleteTopics", "InitProducerId", "DescribeConfigs", "InitProducerId")


def full_run_snapshot(topics: int = 17, partitions: int = 118, requests: int = 15, seed: int = 7) -> dict:
    """A snapshot as BrokerMetrics.snapshot takes it, with the counts of a long benchmark run."""
    rnd = random.Random(seed)
    stats = BrokerTopicStats()
    names = [f"bench-{i}-{rnd.choice(('produce', 'consume', 'e2e'))}" for i in range(topics)]
    for name in names:
        stats.record_append(name, rnd.randrange(10**9), rnd.randrange(10**7))
        stats.record_fetch(name, False)
        stats.record_bytes_out(name, rnd.randrange(10**9), False)
    metrics = {}
    for name in REQUEST_TYPES[:requests]:
        m = metrics[name] = RequestMetrics(name, 12)
        for v in rnd.sample(range(13), 2):
            m.requests[v] = rnd.randrange(1, 10**6)
        for i in range(len(TIMES)):
            for b in range(1, SLOTS):
                m.counts[i * SLOTS + b] = rnd.randrange(50) if b < 8 else 0
        m.queue_s, m.local_s, m.send_s = rnd.random() * 100, rnd.random() * 1000, rnd.random() * 10
    parts = [(names[i % topics], i // topics, True, 1, 1, 1, rnd.randrange(10**10), 0, rnd.randrange(10**8))
             for i in range(partitions)]
    return {
        "topics": {t: s.snapshot() for t, s in stats.topics.items()},
        "all_topics": stats.all_topics.snapshot(),
        "requests": {n: m.snapshot() for n, m in metrics.items()},
        "partitions": parts,
        "isr": (0, 0, 0),
        "connections": {"PLAINTEXT": 12},
        "listeners": {"PLAINTEXT": (5000, 4988, 12.5, 0.0)},
        "idle": 0.73,
        "groups": {"Stable": 2, "Empty": 5},
        "offsets": 40,
        "offset_commits": 12345,
        "purgatories": {"Produce": (3, 1), "Fetch": (20, 4), "Heartbeat": (10, 10), "Rebalance": (0, 0)},
        "controller": (1, 0, 0),
        "quotas": {"Produce": ("byte-rate", [("", "capped", 1048576.0, 812.5)])},
        "fetch_sessions": (40, 1200, 3),
    }


class Parsed:
    """A prometheus_client collector of the families parsed from a rendered text."""

    def __init__(self, text: str):
        self.metrics = list(text_string_to_metric_families(text))

    def collect(self):
        return self.metrics


def library_render(text: str):
    """prometheus_client's renderer over the same families: a function of no arguments."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Parsed(text))
    return lambda: generate_latest(registry)


def cpu_per_call(fn, calls: int) -> float:
    t = time.thread_time()
    for _ in range(calls):
        fn()
    return (time.thread_time() - t) / calls


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--calls", type=int, default=50, help="scrapes rendered per side and round")
    ap.add_argument("--topics", type=int, default=17)
    ap.add_argument("--partitions", type=int, default=118)
    ap.add_argument("--requests", type=int, default=15, help="request types with counts")
    args = ap.parse_args(argv)
    s = full_run_snapshot(args.topics, args.partitions, args.requests)
    text = exposition(s)
    lines = text.count(b"\n")
    ours, library = (lambda: exposition(s)), library_render(text.decode())
    if library() != text:
        print("prometheus_client renders these families differently", file=sys.stderr)
        return 1
    sides: dict[str, list[float]] = {"exposition": [], "prometheus_client": []}
    ratios = []
    for r in range(args.rounds):
        order = [("exposition", ours), ("prometheus_client", library)]
        if r % 2:
            order.reverse()
        got = {name: cpu_per_call(fn, args.calls) for name, fn in order}
        for name, t in got.items():
            sides[name].append(t)
        ratios.append(got["exposition"] / got["prometheus_client"])
    print(f"{lines} lines ({len(text):,} bytes), {args.rounds} rounds of {args.calls} renders per side")
    for name, times in sides.items():
        med = statistics.median(times)
        print(f"  {name:18} {med * 1e3:7.2f} ms/scrape  {med / lines * 1e6:6.2f} µs/line")
    print(f"  ratio exposition/prometheus_client {statistics.median(ratios):.3f} "
          f"[{min(ratios):.3f}..{max(ratios):.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
