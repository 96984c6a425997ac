"""A fuzzing campaign against a real broker process.

Many connections at once each send a run of mutated frames, read and drop
whatever comes back, and give up on a connection the broker closed or stopped
reading; a few connections are left hanging mid-frame to the end (a stuck
client must not delay the others). Meanwhile a probe process sends ApiVersions
on its own connection and times each round trip (the event loop's latency as a
client sees it), a sampler reads the broker's RSS and descriptor count, and the
companion client produces and consumes. At the end the broker must still be
running, and the companion's history must check clean.
"""
from __future__ import annotations

import asyncio
import os
import random
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from kafka_compat.history import History, Report, check
from kafka_compat.server.client_quota_manager import CONTROLLER_MUTATION_RATE, DEFAULT
from kafka_compat.server.config_store import LocalConfigStore
from kafka_compat.testing import EmbeddedBroker

from .companion import Companion
from .corpus import SASL_PASSWORD, SASL_USER, load_requests, sasl_plain_handshake
from .mutate import Case, Mutator

WRITE_TIMEOUT = 5.0                                              # a connection not read that long is dropped
# The fuzzer's clients are all the ANONYMOUS user: a default-user controller_mutation_rate quota of a
# partition a second (a bucket of 11, KIP-599), stored before the broker starts as AlterClientQuotas would
# store it, bounds the topics its garbled CreateTopics and Metadata requests can make. A second
# listener takes SASL/PLAIN logins, for fuzzing in the middle of a handshake.
DEFAULT_USER_QUOTAS = {CONTROLLER_MUTATION_RATE: "1.0"}
DEFAULT_OVERRIDES = {
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config":
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        f'password="admin-secret" user_{SASL_USER}="{SASL_PASSWORD}";',
}
LISTENERS = {"PLAINTEXT": "PLAINTEXT", "SASL_PLAINTEXT": "SASL_PLAINTEXT"}


@dataclass
class Result:
    frames: int = 0
    bytes: int = 0
    connections: int = 0
    closed_by_broker: int = 0
    responses: int = 0
    write_timeouts: int = 0
    seconds: float = 0.0
    probe_count: int = 0
    probe_max: float = 0.0
    probe_failures: int = 0
    probe_slow: list = field(default_factory=list)          # (time into the run, seconds) over 1 s
    max_rss: int = 0
    max_fds: int = 0
    broker_exit: int | None = None                          # set if the broker died during the run
    stop_exit: int | None = None                            # its exit status after SIGTERM at the end
    handler_errors: list = field(default_factory=list)      # exception lines from the broker's log
    history: Report | None = None
    companion_errors: list = field(default_factory=list)
    produce_stalls: list = field(default_factory=list)
    topics: int = 0

    def problems(self, stall_limit: float = 1.0) -> list[str]:
        out = []
        if self.broker_exit is not None:
            out.append(f"broker exited with {self.broker_exit}")
        elif self.stop_exit != 0:
            out.append(f"broker's clean shutdown ended with {self.stop_exit}")
        if self.probe_max > stall_limit:
            out.append(f"probe stalled {self.probe_max:.2f}s (> {stall_limit}s); slow probes: {self.probe_slow[:10]}")
        if self.probe_failures:
            out.append(f"{self.probe_failures} probe failures")
        if self.handler_errors:
            out.append(f"{len(self.handler_errors)} handler exceptions, e.g. {self.handler_errors[:5]}")
        if self.history is not None and not self.history.ok:
            out.append(f"history: {self.history.summary()}")
        if self.produce_stalls:
            out.append(f"{len(self.produce_stalls)} produce acks waited over 10s: {self.produce_stalls[:5]}")
        return out

    def summary(self) -> str:
        return (f"{self.frames} frames ({self.bytes} bytes) on {self.connections} connections in {self.seconds:.0f}s "
                f"({self.frames / max(self.seconds, 1e-9):.0f}/s); broker closed {self.closed_by_broker}, "
                f"{self.responses} responses, {self.write_timeouts} write timeouts; probe {self.probe_count} "
                f"round trips, max {self.probe_max * 1000:.0f} ms, {self.probe_failures} failures; "
                f"max RSS {self.max_rss / 2**20:.0f} MiB, max fds {self.max_fds}, topics {self.topics}; "
                f"handler exceptions {len(self.handler_errors)}; "
                f"history: {self.history.summary() if self.history else 'not checked'}")


COMPANION_MIN_ACKS = 101


class Probe(threading.Thread):
    """Runs the probe process (probe.py) and collects its round trips: (time into the run, seconds)."""

    def __init__(self, port: int, interval: float = 0.1):
        super().__init__(daemon=True)
        self.latencies: list[tuple[float, float]] = []
        self.failures: list[str] = []
        self.proc = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "probe.py"),
                                      str(port), str(interval)], stdout=subprocess.PIPE, text=True)

    def run(self) -> None:
        for line in self.proc.stdout:
            parts = line.split(" ", 2)
            if parts[0] == "fail":
                self.failures.append(" ".join(parts[1:]).strip())
            elif len(parts) == 2:
                self.latencies.append((float(parts[0]), float(parts[1])))

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self.join(10)


class Sampler(threading.Thread):
    """The broker process's RSS and open descriptors, every `interval` seconds."""

    def __init__(self, pid: int, interval: float = 0.5):
        super().__init__(daemon=True)
        import psutil

        self.proc = psutil.Process(pid)
        self.interval = interval
        self.max_rss = 0
        self.max_fds = 0
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                self.max_rss = max(self.max_rss, self.proc.memory_info().rss)
                self.max_fds = max(self.max_fds, self.proc.num_fds())
            except Exception:       # the process is gone: the campaign reports its exit
                return
            self.stop_event.wait(self.interval)


class Fuzzer:
    """Sends `frames` mutated frames over `connections` concurrent connections."""

    def __init__(self, port: int, mutator: Mutator, frames: int, connections: int = 16, hang: int = 8,
                 max_per_connection: int = 64, sasl_port: int | None = None):
        self.port = port
        self.sasl_port = sasl_port
        self.sasl_frames = sasl_plain_handshake()
        self.mutator = mutator
        self.left = frames
        self.connections = connections
        self.hang = hang
        self.max_per_connection = max_per_connection
        self.result = Result()
        self._hanging: list[asyncio.StreamWriter] = []

    async def run(self) -> None:
        workers = [asyncio.create_task(self._worker()) for _ in range(self.connections)]
        try:
            await asyncio.gather(*workers)
        finally:
            for w in self._hanging:
                w.transport.abort()

    def _take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True

    async def _worker(self) -> None:
        rng = self.mutator.rng
        r = self.result
        while self.left > 0:
            sasl = self.sasl_port is not None and rng.random() < 0.25
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.sasl_port if sasl else self.port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            r.connections += 1
            drain = asyncio.create_task(self._discard(reader))
            keep = False
            try:
                if sasl and not await self._sasl_prelude(writer, drain):
                    continue
                for _ in range(rng.randint(1, self.max_per_connection)):
                    if drain.done() or not self._take():
                        break
                    case = self.mutator.case()
                    if not await self._send(writer, case):
                        self.left += 1          # not delivered: it does not count
                        break
                    if not case.framed:
                        # the broker now waits for bytes that never come, or reads garbage: leave a few of
                        # these hanging to the end, as stuck clients
                        keep = len(self._hanging) < self.hang and rng.random() < 0.2
                        break
            except (ConnectionError, OSError):
                self.left += 1                  # the frame being written when the broker closed
            finally:
                if drain.done() and not drain.cancelled() and drain.result():
                    r.closed_by_broker += 1
                if keep and not drain.done():
                    self._hanging.append(writer)
                else:
                    drain.cancel()
                    writer.transport.abort()

    async def _sasl_prelude(self, writer: asyncio.StreamWriter, drain: asyncio.Task) -> bool:
        """On the SASL listener: the handshake and the authentication, each sent as it is or damaged
        (so the damage lands in the middle of a login); False when the connection is done with."""
        rng = self.mutator.rng
        for frame in self.sasl_frames:
            if drain.done() or not self._take():
                return False
            case = self.mutator.mutate(frame) if rng.random() < 0.3 else Case([struct.pack(">i", len(frame)) + frame])
            if not await self._send(writer, case):
                self.left += 1
                return False
            if not case.framed:
                return False
        return True

    async def _send(self, writer: asyncio.StreamWriter, case: Case) -> bool:
        r = self.result
        for chunk in case.chunks:
            writer.write(chunk)
            try:
                await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT)
            except asyncio.TimeoutError:
                r.write_timeouts += 1
                return False
        r.frames += 1
        r.bytes += case.size
        return True

    async def _discard(self, reader: asyncio.StreamReader) -> bool:
        """Read and drop responses; True when the broker closed the connection."""
        r = self.result
        try:
            while True:
                head = await reader.readexactly(4)
                size = struct.unpack(">i", head)[0]
                await reader.readexactly(size)
                r.responses += 1
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            return True


TRACEBACK_END = re.compile(r"^(\w[\w.]*(Error|Exception)\b.*)$", re.M)


def handler_errors(log_text: str) -> list[str]:
    """The exception lines of the tracebacks in a broker log (each one a request that crashed its handler)."""
    out = []
    for block in log_text.split("Traceback (most recent call last):")[1:]:
        m = TRACEBACK_END.search(block)
        out.append(m.group(1)[:300] if m else block.strip().splitlines()[-1][:300])
    return out


def memory_backed_dir() -> str | None:
    """/dev/shm where it exists: the probe then measures the event loop, not a disk shared with other work
    (a pwrite that waits for a busy disk is the storage campaign's subject)."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def run_campaign(frames: int, *, connections: int = 16, seed: int = 1, overrides: dict | None = None,
                 companion: bool = True, companion_rate: float = 200.0, progress=None,
                 data_parent: str | None = None, keep_log: str | None = None) -> Result:
    """Start a broker (its data in a fresh directory under `data_parent`, default a memory-backed one),
    fuzz it with `frames` mutated frames beside the companion client, and report."""
    seeds = [f for _, f in load_requests()]
    mutator = Mutator(seeds, random.Random(seed))
    data_dir = tempfile.mkdtemp(prefix="kafka-compat-fuzz-", dir=data_parent or memory_backed_dir())
    logs = os.path.join(data_dir, "logs")
    os.makedirs(logs)
    LocalConfigStore(logs).change_entity_config("users", DEFAULT, DEFAULT_USER_QUOTAS)
    try:
        return _run(frames, connections, mutator, EmbeddedBroker({**DEFAULT_OVERRIDES, **(overrides or {})},
                                                                 data_dir=data_dir, listeners=LISTENERS),
                    companion, companion_rate, progress, keep_log)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def _run(frames, connections, mutator, broker, companion, companion_rate, progress, keep_log) -> Result:
    with broker:
        sampler = Sampler(broker.proc.pid)
        sampler.start()
        mate = Companion(broker.bootstrap, History(), rate=companion_rate).start() if companion else None
        probe = Probe(broker.port)
        probe.start()
        fuzzer = Fuzzer(broker.port, mutator, frames, connections, sasl_port=broker.ports["SASL_PLAINTEXT"])
        t0 = time.monotonic()
        reporter = None
        if progress is not None:
            reporter = threading.Thread(target=_report_progress, args=(fuzzer, probe, sampler, progress, t0),
                                        daemon=True)
            reporter.start()
        try:
            asyncio.run(fuzzer.run())
        finally:
            result = fuzzer.result
            result.seconds = time.monotonic() - t0
            fuzzer.left = 0
            if mate is not None:
                if broker.proc.poll() is None:
                    mate.wait_for_acks(COMPANION_MIN_ACKS, 60)   # a history worth checking, however short the run
                mate.stop()
                if broker.proc.poll() is None:
                    mate.read_all()
                result.history = check(mate.history)
                result.companion_errors = mate.errors
                result.produce_stalls = mate.produce_stalls
            probe.stop()
            sampler.stop_event.set()
            sampler.join(5)
        result.probe_count = len(probe.latencies)
        result.probe_max = max((lat for _, lat in probe.latencies), default=0.0)
        result.probe_slow = [(round(at, 1), round(lat, 2)) for at, lat in probe.latencies if lat > 1.0]
        result.probe_failures = len(probe.failures)
        result.max_rss, result.max_fds = sampler.max_rss, sampler.max_fds
        result.broker_exit = broker.proc.poll()
        result.stop_exit = broker.stop() if result.broker_exit is None else None
        with open(broker.log_path, errors="replace") as f:
            result.handler_errors = handler_errors(f.read())
        if keep_log:
            shutil.copy(broker.log_path, keep_log)
        logs = os.path.join(broker.data_dir, "logs")
        result.topics = len({d.rsplit("-", 1)[0] for d in os.listdir(logs)
                             if "-" in d and os.path.isdir(os.path.join(logs, d))}) if os.path.isdir(logs) else 0
    return result


def _report_progress(fuzzer: Fuzzer, probe: Probe, sampler: Sampler, progress, t0: float) -> None:
    while fuzzer.left > 0:
        time.sleep(10)
        r = fuzzer.result
        worst = max((lat for _, lat in probe.latencies), default=0.0)
        progress(f"{time.monotonic() - t0:.0f}s: {r.frames} frames, {r.connections} connections, "
                 f"probe max {worst * 1000:.0f} ms, RSS {sampler.max_rss / 2**20:.0f} MiB, fds {sampler.max_fds}")
