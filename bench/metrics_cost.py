"""What metrics cost per request: broker CPU time with the Prometheus endpoint on against off.

    python bench/metrics_cost.py [--rounds 9] [--requests 20000] [--at REV]
    python bench/metrics_cost.py --instructions [--requests 500] [--at REV]

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

`--instructions` counts instead what the load cannot change: each side's broker
runs under valgrind's callgrind (instrumentation off while it starts), requests
go one at a time, and callgrind counts the instructions the broker executes
(all its threads) while it answers them, and for one scrape. Everything runs
about 50 times slower under callgrind, so every phase of a request looks longer
than it is: the metrics' share it gives is an upper bound (times past the
first histogram bucket cost more to record), and it moves with the load. So it
also counts the request path alone, which no clock can move: RequestChannel's
`handle` and `request_done` around a handler that does nothing, in a loop, with
a fake clock that advances 10 µs (every phase in the first bucket) or 100 µs per
reading.
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
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

KINDS = ("produce", "fetch", "metadata")
TREE = ROOT             # the kafka_compat the --instructions children import (--tree)

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


def one_at_a_time(client: WireClient, kind: str, n: int) -> None:
    key, version, body = bodies(kind)
    for i in range(n):
        client.send_raw(encode_request(key, version, body, i))
        decode_response(key, version, client.read_frame())


def callgrind(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True, timeout=120)


def instructions(metrics: bool, n: int, python: str) -> dict[str, float]:
    """Instructions per request of each kind (and per scrape) of a broker under callgrind."""
    d = tempfile.mkdtemp(prefix="metrics-cost-")
    port = free_port()
    args = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={d}/callgrind.out",
            python, "-m", "kafka_compat", "serve", "--listeners", f"PLAINTEXT://127.0.0.1:{port}",
            "--log-dirs", os.path.join(d, "logs"), "-o", "num.partitions=1", "-o", "log.segment.bytes=67108864"]
    url = None
    if metrics:
        metrics_port = free_port()
        args += ["-o", f"prometheus.listener=http://127.0.0.1:{metrics_port}"]
        url = f"http://127.0.0.1:{metrics_port}/metrics"
    out: dict[str, float] = {}
    with open(os.path.join(d, "broker.log"), "wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=d,
                                env=dict(os.environ, PYTHONPATH=TREE) if python == sys.executable else None)
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the broker did not start under valgrind: see " + d) from None
                time.sleep(0.5)
        client = WireClient("127.0.0.1", port, timeout=600)
        for kind in KINDS:                                      # warm up, uncounted
            one_at_a_time(client, kind, 200)
        if url:
            urllib.request.urlopen(url, timeout=600).read()
        callgrind(proc.pid, "-i", "on")
        for kind in KINDS + (("scrape",) if url else ()):
            callgrind(proc.pid, "-z")
            if kind == "scrape":
                urllib.request.urlopen(url, timeout=600).read()
            else:
                one_at_a_time(client, kind, n)
            callgrind(proc.pid, "-d")
            dumps = sorted(glob.glob(os.path.join(d, "callgrind.out.*")), key=os.path.getmtime)
            with open(dumps[-1]) as f:
                total = next(int(line.split()[1]) for line in f if line.startswith("totals:"))
            out[kind] = total / (1 if kind == "scrape" else n)
            for dump in dumps:
                os.remove(dump)
        client.close()
    finally:
        proc.terminate()
        proc.wait(120)
        shutil.rmtree(d, ignore_errors=True)
    return out


# Run in a child under callgrind: the request path alone (see the module's docstring), against whichever
# kafka_compat the child's interpreter imports (this tree, or a checkout's with --at).
REQUEST_PATH = """
import functools, itertools, os, subprocess, sys
from kafka_compat.protocol.frames import APIS, Request
from kafka_compat.server import request_channel
from kafka_compat.server.client_quota_manager import QuotaManagers
metrics, step, n = sys.argv[1] == "on", float(sys.argv[2]), int(sys.argv[3])
clock = functools.partial(next, itertools.count(1000.0, step))
request_channel.monotonic = clock
channel = request_channel.RequestChannel(lambda request, connection: 1, QuotaManagers(), metrics=metrics)
class Connection:
    last_active = 0.0
connection = Connection()
def run(count):
    handle, done = channel.handle, channel.request_done
    for request in [Request(3, 12, i, "c", None, None, APIS[3]) for i in range(count)]:
        connection.last_active = clock()
        handle(request, connection)
        done(request, connection)
run(100)
def control(*args):
    subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True, capture_output=True)
control("-i", "on")
control("-z")
run(n)
control("-d")
"""


def request_path(metrics: bool, step: float, n: int, python: str) -> float:
    """Instructions per request of the request path alone (REQUEST_PATH) under callgrind."""
    d = tempfile.mkdtemp(prefix="metrics-cost-")
    try:
        subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                        f"--callgrind-out-file={d}/callgrind.out", python, "-c", REQUEST_PATH,
                        "on" if metrics else "off", str(step), str(n)], check=True, capture_output=True, cwd=d,
                       env=dict(os.environ, PYTHONPATH=TREE) if python == sys.executable else None, timeout=600)
        dumps = [f for f in glob.glob(os.path.join(d, "callgrind.out.*")) if not f.endswith(".out")]
        totals = []
        for dump in dumps:
            with open(dump) as f:
                totals += [int(line.split()[1]) for line in f if line.startswith("totals:")]
        return max(totals) / n
    finally:
        shutil.rmtree(d, ignore_errors=True)


def count_instructions(n: int, python: str, at: str | None) -> int:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("--instructions needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 1
    print(f"# the request path alone, instructions per request{' at ' + at if at else ''}")
    print("| phases | metrics off | metrics on | on - off |")
    print("|---|---|---|---|")
    for step in (0.00001, 0.0001):
        off, on = request_path(False, step, 2000, python), request_path(True, step, 2000, python)
        print(f"| {step * 1e6:.0f} µs each | {off:,.0f} | {on:,.0f} | {on - off:+,.0f} |", flush=True)
    off, on = instructions(False, n, python), instructions(True, n, python)
    print(f"# instructions per request under callgrind, {n} requests one at a time{' at ' + at if at else ''}")
    print("| request | metrics off | metrics on | on - off | on / off |")
    print("|---|---|---|---|---|")
    for kind in KINDS:
        print(f"| {kind} | {off[kind]:,.0f} | {on[kind]:,.0f} | {on[kind] - off[kind]:+,.0f} | "
              f"{on[kind] / off[kind]:.4f} |")
    print(f"one scrape: {on['scrape']:,.0f} instructions")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--requests", type=int, help="per side, kind and round (default 20,000; 500 with "
                    "--instructions)")
    ap.add_argument("--at", metavar="REV", help="run both sides at this git revision")
    ap.add_argument("--instructions", action="store_true", help="count instructions under callgrind instead")
    ap.add_argument("--tree", metavar="DIR", help="with --instructions: the source tree to run (e.g. a `git "
                    "archive` of another revision), instead of this one")
    args = ap.parse_args()
    if args.tree:
        global TREE
        TREE = os.path.abspath(args.tree)
    python = None
    if args.at:
        from bench.contenders import checkout
        python = checkout(args.at)
    if args.instructions:
        return count_instructions(args.requests or 500, python or sys.executable, args.at or args.tree)
    args.requests = args.requests or 20000
    load0 = os.getloadavg()[0]
    off, on = Side(False, python), Side(True, python)
    try:
        for side in (off, on):                                  # warm both up, untimed
            for kind in ("produce", "fetch", "metadata"):
                pipelined(side.client, kind, 500)
        for r in range(args.rounds):
            for side in ((off, on) if r % 2 == 0 else (on, off)):
                for kind in KINDS:
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
