"""Apache Kafka itself, started on loopback as the reference broker.

The jars come from Maven Central through `interop/maven.sh` (`.cache/jvm/kafka` for
Kafka 4.x in KRaft mode, `.cache/jvm/kafka3` for Kafka 3.9 in ZooKeeper mode). Each
`start_*` formats fresh storage in a temporary folder, starts the JVMs, and returns once
every broker answers; `ReferenceKafka.stop()` ends them and removes the folder.

Kafka's documentation asks for little on a small machine, and these are the settings
used here (docs/compatibility.md and bench/README repeat them): a fixed 512 MiB heap with G1, two
network threads and two I/O threads per broker, the replication factors of the internal
topics lowered to the cluster's size.

Run as a script to start a single node and print its bootstrap address:
    python interop/reference.py [--cluster] [--zookeeper]
"""
from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402

KAFKA4_DIR = peers.CACHE / "jvm" / "kafka"
KAFKA3_DIR = peers.CACHE / "jvm" / "kafka3"
HEAP = ["-Xms512m", "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"]
THREADS = {"num.network.threads": 2, "num.io.threads": 2, "num.replica.fetchers": 1,
           "background.threads": 2, "log.cleaner.threads": 1}
# Kafka 4's defaults where they differ from 3.9's (KIP-1030), so that the ZooKeeper-mode reference
# differs from Kafka 4 by its mode and not by its defaults.
KAFKA4_DEFAULTS = {"log.message.timestamp.after.max.ms": 3_600_000, "num.recovery.threads.per.data.dir": 2}
LOG4J2 = """\
status = error
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
"""
LOG4J1 = """\
log4j.rootLogger=WARN, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


def kafka_version(jar_dir: Path) -> str | None:
    """The version kafka-clients.jar carries, or None when that set is not resolved."""
    return peers.java_client_version(jar_dir) if (jar_dir / "kafka_2.13.jar").is_file() else None


def available(zookeeper: bool = False) -> bool:
    jar_dir = KAFKA3_DIR if zookeeper else KAFKA4_DIR
    return bool(shutil.which("java")) and kafka_version(jar_dir) is not None


def _classpath(jar_dir: Path) -> str:
    return str(jar_dir / "*")


def _props(values: dict) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


@dataclass
class ReferenceKafka:
    """Running Apache Kafka brokers: their bootstrap address, and how to stop them."""

    version: str
    mode: str                                   # "kraft" or "zookeeper"
    ports: list[int]
    root: Path
    procs: list[subprocess.Popen] = field(default_factory=list)
    zookeeper: object | None = None             # kafka_compat.testing.EmbeddedZooKeeper, ZooKeeper mode only
    sasl_ports: list[int] = field(default_factory=list)     # the SASL_PLAINTEXT listeners of a secured start

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{peers.LOOPBACK}:{p}" for p in self.ports)

    @property
    def address(self) -> tuple[str, int]:
        return peers.LOOPBACK, self.ports[0]

    def log(self, i: int = 0) -> str:
        return (self.root / f"broker{i}.log").read_text(errors="replace")

    def stop(self) -> None:
        for p in self.procs:
            peers.stop(p, timeout=20)
        if self.zookeeper is not None:
            self.zookeeper.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def small_cluster(brokers: int) -> dict:
    """The settings every reference broker gets: internal topics sized to the cluster, the threads of THREADS,
    and no initial rebalance delay (as the conformance tests' kafka-compat has it)."""
    rf = min(3, brokers)
    return {"offsets.topic.replication.factor": rf, "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": min(2, rf), "group.initial.rebalance.delay.ms": 0, **THREADS}


def _start_jvm(jar_dir: Path, main: str, props: Path, log: Path, log_config: Path) -> subprocess.Popen:
    prop = "log4j2.configurationFile" if log_config.suffix == ".properties2" else "log4j.configuration"
    conf = f"file:{log_config}" if prop == "log4j.configuration" else str(log_config)
    with open(log, "ab") as out:
        return subprocess.Popen(["java", *HEAP, f"-D{prop}={conf}", "-cp", _classpath(jar_dir), main, str(props)],
                                stdout=out, stderr=subprocess.STDOUT)


def _wait_ready(ref: ReferenceKafka, timeout: float) -> None:
    """Every broker accepts a connection and answers Metadata with all brokers registered."""
    sys.path.insert(0, str(peers.ROOT / "tests"))
    from wire import WireClient

    from kafka_compat.protocol.messages import metadata

    deadline = time.monotonic() + timeout
    for i, port in enumerate(ref.ports):
        while True:
            if ref.procs[i].poll() is not None:
                raise RuntimeError(f"reference broker {i} exited with {ref.procs[i].returncode}:\n{ref.log(i)[-4000:]}")
            try:
                c = WireClient(peers.LOOPBACK, port, timeout=2)
                try:
                    resp = c.call(3, 12, metadata.MetadataRequest(topics=[], allow_auto_topic_creation=False))
                finally:
                    c.close()
                if len(resp.brokers) == len(ref.ports):
                    break
            except (OSError, ConnectionError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"reference broker {i} not ready after {timeout}s:\n{ref.log(i)[-4000:]}")
            time.sleep(0.2)


# A secured reference (start_kraft(secured=True)): a SASL_PLAINTEXT listener beside PLAINTEXT, with PLAIN
# users, and Kafka's StandardAuthorizer. PLAINTEXT's ANONYMOUS is a super user (the controller and the brokers
# talk there); the security tests use the SASL listener. conformance_secured_broker mirrors it.
SECURE_USERS = {"admin": "admin-secret", "alice": "alice-secret"}


def secured_settings(authorizer: str) -> dict:
    users = " ".join(f'user_{u}="{p}"' for u, p in SECURE_USERS.items())
    return {"sasl.enabled.mechanisms": "PLAIN", "authorizer.class.name": authorizer,
            "super.users": "User:admin;User:ANONYMOUS",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
                f'password="admin-secret" {users};'}


def start_kraft(brokers: int = 1, overrides: dict | None = None, timeout: float = 90.0,
                secured: bool = False) -> ReferenceKafka:
    """Kafka 4.x in KRaft mode: every node is broker and controller, one voter each."""
    version = kafka_version(KAFKA4_DIR)
    if version is None:
        raise RuntimeError("Kafka 4.x is not resolved (run: bash interop/maven.sh kafka)")
    root = Path(tempfile.mkdtemp(prefix="reference-kafka-"))
    from kafka_compat.testing import free_ports

    every = free_ports(3 * brokers)          # all distinct: each bound at once
    ports, controller_ports, sasl_ports = every[:brokers], every[brokers:2 * brokers], every[2 * brokers:]
    voters = ",".join(f"{i}@{peers.LOOPBACK}:{p}" for i, p in enumerate(controller_ports))
    cluster_id = _cluster_id()
    log_config = root / "log4j2.properties2"
    log_config.write_text(LOG4J2)
    ref = ReferenceKafka(version, "kraft", ports, root, sasl_ports=sasl_ports if secured else [])
    rf = min(3, brokers)
    try:
        for i in range(brokers):
            data = root / f"data{i}"
            props = root / f"server{i}.properties"
            props.write_text(_props({
                "process.roles": "broker,controller", "node.id": i,
                "controller.quorum.voters": voters, "controller.listener.names": "CONTROLLER",
                "listeners": f"PLAINTEXT://{peers.LOOPBACK}:{ports[i]},CONTROLLER://{peers.LOOPBACK}:{controller_ports[i]}",
                "advertised.listeners": f"PLAINTEXT://{peers.LOOPBACK}:{ports[i]}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "inter.broker.listener.name": "PLAINTEXT",
                "log.dirs": data,
                "share.coordinator.state.topic.replication.factor": rf,
                "share.coordinator.state.topic.min.isr": min(2, rf),
                **small_cluster(brokers), **(_secured(i, ports, controller_ports, sasl_ports) if secured else {}),
                **(overrides or {}),
            }))
            subprocess.run(["java", "-Xmx256m", f"-Dlog4j2.configurationFile={log_config}", "-cp",
                            _classpath(KAFKA4_DIR), "kafka.tools.StorageTool", "format", "-t", cluster_id,
                            "-c", str(props)], check=True, capture_output=True)
            ref.procs.append(_start_jvm(KAFKA4_DIR, "kafka.Kafka", props, root / f"broker{i}.log", log_config))
        _wait_ready(ref, timeout)
    except BaseException:
        ref.stop()
        raise
    return ref


def _secured(i: int, ports, controller_ports, sasl_ports) -> dict:
    lo = peers.LOOPBACK
    return {"listeners": f"PLAINTEXT://{lo}:{ports[i]},CONTROLLER://{lo}:{controller_ports[i]},"
                         f"SASL_PLAINTEXT://{lo}:{sasl_ports[i]}",
            "advertised.listeners": f"PLAINTEXT://{lo}:{ports[i]},SASL_PLAINTEXT://{lo}:{sasl_ports[i]}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            **secured_settings("org.apache.kafka.metadata.authorizer.StandardAuthorizer")}


def start_zookeeper_mode(brokers: int = 1, overrides: dict | None = None, timeout: float = 90.0) -> ReferenceKafka:
    """Kafka 3.9 in ZooKeeper mode, on Debian's ZooKeeper: the reference for our own cluster."""
    from kafka_compat.testing import EmbeddedZooKeeper

    version = kafka_version(KAFKA3_DIR)
    if version is None:
        raise RuntimeError("Kafka 3.9 is not resolved (run: bash interop/maven.sh kafka3)")
    root = Path(tempfile.mkdtemp(prefix="reference-kafka3-"))
    zk = EmbeddedZooKeeper(data_dir=str(root / "zookeeper")).start()
    from kafka_compat.testing import free_ports

    ports = free_ports(brokers)
    log_config = root / "log4j.properties"
    log_config.write_text(LOG4J1)
    ref = ReferenceKafka(version, "zookeeper", ports, root, zookeeper=zk)
    try:
        for i in range(brokers):
            props = root / f"server{i}.properties"
            props.write_text(_props({
                "broker.id": i, "zookeeper.connect": zk.connect_string("/kafka"),
                "listeners": f"PLAINTEXT://{peers.LOOPBACK}:{ports[i]}",
                "log.dirs": root / f"data{i}",
                **KAFKA4_DEFAULTS, **small_cluster(brokers), **(overrides or {}),
            }))
            ref.procs.append(_start_jvm(KAFKA3_DIR, "kafka.Kafka", props, root / f"broker{i}.log", log_config))
        _wait_ready(ref, timeout)
    except BaseException:
        ref.stop()
        raise
    return ref


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding, as `random-uuid` prints; never
    one that starts with '-' (as Kafka's Uuid.randomUuid avoids), which StorageTool would take for an option."""
    import base64

    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


@contextlib.contextmanager
def reference(brokers: int = 1, zookeeper: bool = False, overrides: dict | None = None) -> Iterator[ReferenceKafka]:
    ref = (start_zookeeper_mode if zookeeper else start_kraft)(brokers, overrides)
    try:
        yield ref
    finally:
        ref.stop()


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", action="store_true", help="three brokers instead of one")
    ap.add_argument("--zookeeper", action="store_true", help="Kafka 3.9 in ZooKeeper mode instead of 4.x KRaft")
    a = ap.parse_args()
    t0 = time.monotonic()
    with reference(3 if a.cluster else 1, a.zookeeper) as ref:
        print(f"Apache Kafka {ref.version} ({ref.mode}) at {ref.bootstrap}, ready in {time.monotonic() - t0:.1f}s;"
              " Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while all(p.poll() is None for p in ref.procs):
                time.sleep(1)
