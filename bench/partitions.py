"""One broker with many partitions: creation, produce throughput, idle CPU, descriptors, startup.

    python bench/partitions.py                      # 10,000 partitions (100 topics x 100)
    python bench/partitions.py --partitions 50000 --nofile 65536
    python bench/partitions.py --dir D --compare BASE/.venv/bin/python .venv/bin/python --rounds 3
    python bench/partitions.py --dir D --base 1009e5f --partitions 50000 --nofile 20000   # against a commit
    python bench/partitions.py --dir D --base 1009e5f --partitions 50000 --messages 0 --unclean   # after SIGKILL

Starts a real broker (kafka_compat.testing.EmbeddedBroker, RLIMIT_NOFILE set to --nofile),
creates the partitions with CreateTopics, produces --messages records spread over all of them
(confluent-kafka, acks=1), samples the broker's CPU over --idle seconds of idleness, then times
a clean restart and an unclean one (SIGKILL) until Metadata lists every partition. Prints one
JSON line per figure. Timing lives here, never in tests.

``--compare`` runs checkouts side by side on one data directory (filled once by the last, as
above, when --dir holds no logs yet): in turn, each starts the broker after a clean shutdown
(seconds until it listens, until Metadata lists every partition, and the CPU seconds spent by
then), idles for --idle seconds (idle CPU) and shuts down cleanly; medians and ratios to the
first interpreter close the run, with the load average; with ``--unclean`` each start follows an
unclean shutdown instead (no clean-shutdown marker; brokers are killed). Each checkout's package is compiled to
bytecode first, as a deployed one is. ``--base REV`` compares a commit of this repository (its
files exported to a temporary folder with a venv of its own that reuses this one's packages)
with this checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_compat.testing import EmbeddedBroker


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def report(**fields) -> None:
    print(json.dumps(fields), flush=True)


def wait_for_partitions(bootstrap: str, want: int, timeout: float = 600) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            meta = admin.list_topics(timeout=30)
            if sum(len(t.partitions) for n, t in meta.topics.items() if n.startswith("p-")) >= want:
                return
        except Exception:
            pass
        time.sleep(0.2)
    raise RuntimeError("partitions did not come back")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=10000)
    ap.add_argument("--per-topic", type=int, default=100)
    ap.add_argument("--messages", type=int, default=200000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--idle", type=float, default=10.0)
    ap.add_argument("--nofile", type=int, default=20000)
    ap.add_argument("--dir", default=None, help="data directory (default: a new temporary one)")
    ap.add_argument("--compare", nargs="+", metavar="PYTHON", help="interpreters (checkouts' venvs) to restart with")
    ap.add_argument("--base", metavar="REV", help="compare this git commit with this checkout (as --compare)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--unclean", action="store_true",
                    help="with --compare/--base: every start follows an unclean shutdown (no clean-shutdown "
                         "marker, as SIGKILL leaves it), and each broker is killed, not stopped")
    args = ap.parse_args()
    if args.base:
        args.compare = [checkout_python(args.base), sys.executable]

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, args.nofile))

    if args.compare:
        return compare(args, limit)
    broker = EmbeddedBroker(data_dir=args.dir or tempfile.mkdtemp(prefix="bench-partitions-"), preexec_fn=limit)
    broker.start()
    try:
        total = populate(broker, args)
        for kind in ("clean", "unclean"):
            if kind == "clean":
                broker.stop(timeout=600)
            else:
                broker.kill()
            t0 = time.monotonic()
            broker.start(timeout=600)
            listening = time.monotonic() - t0
            wait_for_partitions(broker.bootstrap, total)
            report(figure=f"startup after {kind} shutdown", listening_s=round(listening, 2),
                   all_partitions_s=round(time.monotonic() - t0, 2), fds=open_fds(broker.proc.pid),
                   rss_mb=round(rss_mb(broker.proc.pid)))
    finally:
        broker.close()
        if args.dir is None:
            shutil.rmtree(broker.data_dir, ignore_errors=True)
    return 0


def populate(broker: EmbeddedBroker, args) -> int:
    """Create the partitions, produce into all of them, sample idle CPU; returns the partition count."""
    pid = broker.proc.pid
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = [f"p-{i}" for i in range((args.partitions + args.per_topic - 1) // args.per_topic)]
    t0 = time.monotonic()
    for i in range(0, len(topics), 10):
        futures = admin.create_topics([NewTopic(t, args.per_topic, 1) for t in topics[i:i + 10]],
                                      operation_timeout=300, request_timeout=600)
        for f in futures.values():
            f.result(600)
    created = time.monotonic() - t0
    total = len(topics) * args.per_topic
    report(figure="create", partitions=total, seconds=round(created, 2),
           partitions_per_s=round(total / created), fds=open_fds(pid), rss_mb=round(rss_mb(pid)))

    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 2000000, "acks": 1})
    value = b"x" * args.size
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    for n in range(args.messages):
        part = n % total
        while True:
            try:
                p.produce(topics[part // args.per_topic], value, partition=part % args.per_topic)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(600) == 0
    took, cpu = time.monotonic() - t0, cpu_seconds(pid) - cpu0
    report(figure="produce", messages=args.messages, size=args.size, seconds=round(took, 2),
           msgs_per_s=round(args.messages / took), mb_per_s=round(args.messages * args.size / took / 1e6, 2),
           broker_cpu_s=round(cpu, 2), fds=open_fds(pid), rss_mb=round(rss_mb(pid)))

    cpu0 = cpu_seconds(pid)
    time.sleep(args.idle)
    report(figure="idle", seconds=args.idle, cpu_percent=round(100 * (cpu_seconds(pid) - cpu0) / args.idle, 2),
           fds=open_fds(pid), rss_mb=round(rss_mb(pid)))

    return total


def checkout_python(rev: str) -> str:
    """An interpreter running commit ``rev`` of this repository: its files exported with git archive,
    installed (editable, no dependencies) into a venv over the system's packages, as worktrees get."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    commit = subprocess.run(["git", "rev-parse", "--short", rev], cwd=repo, capture_output=True, text=True,
                            check=True).stdout.strip()
    where = os.path.join(tempfile.gettempdir(), f"kafka-compat-{commit}")
    python = os.path.join(where, ".venv", "bin", "python")
    if not os.path.exists(python):
        os.makedirs(where, exist_ok=True)
        archive = subprocess.run(["git", "archive", commit], cwd=repo, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", where], input=archive, check=True)
        subprocess.run(["python3", "-m", "venv", "--system-site-packages", os.path.join(where, ".venv")], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "-e", where], check=True)
    return python


def compare(args, limit) -> int:
    data_dir = args.dir or tempfile.mkdtemp(prefix="bench-partitions-")
    logs = os.path.join(data_dir, "logs")
    total = args.partitions // args.per_topic * args.per_topic
    if not (os.path.isdir(logs) and any(n.startswith("p-") for n in os.listdir(logs))):
        broker = EmbeddedBroker(data_dir=data_dir, python=args.compare[-1], preexec_fn=limit)
        broker.start()
        try:
            total = populate(broker, args)
            broker.stop(timeout=600)
        finally:
            broker.close()
    for py in args.compare:
        # a deployed broker has its bytecode cached; without it (PYTHONDONTWRITEBYTECODE) every
        # start would spend seconds compiling the package, the same for each checkout
        where = subprocess.run([py, "-c", "import os, kafka_compat, kafka_compat.storage as s; "
                                "print(os.path.dirname(kafka_compat.__file__), os.path.dirname(s.__file__))"],
                               capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
        subprocess.run([py, "-m", "compileall", "-q", *where.stdout.split()], check=True)
    figures: dict[str, dict[str, list[float]]] = {py: {} for py in args.compare}
    for _ in range(args.rounds):
        for py in args.compare:
            broker = EmbeddedBroker(data_dir=data_dir, python=py, preexec_fn=limit)
            if args.unclean:   # what a SIGKILL leaves: the marker is removed while a broker runs
                try:
                    os.unlink(os.path.join(logs, ".kafka_cleanshutdown"))
                except FileNotFoundError:
                    pass
            try:
                t0 = time.monotonic()
                broker.start(timeout=900)
                listening = time.monotonic() - t0
                wait_for_partitions(broker.bootstrap, total, timeout=900)
                ready, pid = time.monotonic() - t0, broker.proc.pid
                cpu = cpu_seconds(pid)
                time.sleep(args.idle)
                idle = 100 * (cpu_seconds(pid) - cpu) / args.idle
                fds, rss = open_fds(pid), rss_mb(pid)
                t1 = time.monotonic()
                if args.unclean:
                    broker.kill()
                else:
                    broker.stop(timeout=900)
                row = dict(listening_s=listening, all_partitions_s=ready, startup_cpu_s=cpu,
                           idle_cpu_percent=idle, stop_s=time.monotonic() - t1)
                for k, v in row.items():
                    figures[py].setdefault(k, []).append(v)
                report(figure=f"restart after {'un' if args.unclean else ''}clean shutdown", python=py,
                       partitions=total, fds=fds, rss_mb=round(rss), load=os.getloadavg()[0],
                       **{k: round(v, 2) for k, v in row.items()})
            finally:
                broker.close()
    base = {k: statistics.median(v) for k, v in figures[args.compare[0]].items()}
    for py in args.compare:
        med = {k: statistics.median(v) for k, v in figures[py].items()}
        report(figure="median", python=py, partitions=total, unclean=args.unclean, load=os.getloadavg()[0],
               **{k: round(v, 2) for k, v in med.items()},
               **{f"{k}_ratio": round(v / base[k], 3) if base[k] else None for k, v in med.items()})
    if args.dir is None:
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0

if __name__ == "__main__":
    sys.exit(main())
