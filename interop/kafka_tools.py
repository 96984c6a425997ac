"""Apache Kafka 4.4's own command-line tools, run from the jars `bash interop/maven.sh kafka` resolves.

Kafka's bin/*.sh scripts only name a main class and start a JVM on the distribution's libs/; this does
the same with .cache/jvm/kafka/ (the kafka_2.13, kafka-tools and log4j2 jars and their dependencies):

    from kafka_tools import run
    out = run("kafka-topics", "--bootstrap-server", broker.bootstrap, "--list")
    out.stdout.splitlines()

`run` returns the CompletedProcess (text, stdout and stderr captured, never raising on a non-zero exit)
or None when java or the jars are missing; `require()` skips the calling pytest test instead. `start`
is `run` for the tools that keep running (consumers, the verifiable producer), as a Popen. Logging goes
to stderr at WARN, so stdout holds only what the tool prints. Nothing here talks Kafka.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference import LOG4J2  # noqa: E402  (root WARN to stderr, as the reference broker logs)

ROOT = Path(__file__).resolve().parent.parent
JAR_DIR = ROOT / ".cache" / "jvm" / "kafka"

# bin/<script>.sh -> the class it runs (Kafka 4.4's bin/ directory)
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-delegation-tokens": "org.apache.kafka.tools.DelegationTokenCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
}

# a small heap and the C1 compiler only: the tools run for seconds, where JIT start-up dominates. The JVM's
# own warnings (a stale class-data archive, say) go to stderr, never into the stdout a test parses.
JVM_FLAGS = ["-Xmx256m", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:+UseSerialGC",
             "-Djava.awt.headless=true", "-Xlog:disable", "-Xlog:all=warning:stderr"]

# Loading the admin client's classes is most of a tool's second or two. The first run of each tool on a
# machine writes a class-data archive of what it loaded (AppCDS, -XX:ArchiveClassesAtExit: a few seconds
# once); later runs map it (-XX:SharedArchiveFile), about halving their start. Kept in the ignored cache,
# one directory per java version and jar set; KAFKA_TOOLS_CDS=0 turns it off.
CDS_DIR = ROOT / ".cache" / "kafka-tools-cds"

_log_config: str | None = None


def missing() -> str | None:
    """Why the tools cannot run here, or None when they can."""
    if shutil.which("java") is None:
        return "java is not installed"
    for jar in ("kafka-tools.jar", "kafka_2.13.jar", "kafka-clients.jar", "log4j-core.jar"):
        if not (JAR_DIR / jar).is_file():
            return f"Kafka's tools are not resolved ({JAR_DIR / jar} is missing: bash interop/maven.sh kafka)"
    return None


def require() -> None:
    """Skip the calling pytest test when the tools cannot run."""
    why = missing()
    if why is not None:
        import pytest

        pytest.skip(why)


def classpath() -> str:
    return str(JAR_DIR / "*")         # the JVM expands a directory's `*` to its jars, as kafka-run-class.sh does


def log_config() -> str:
    """A log4j2 configuration (root WARN to stderr), written once per process into a temporary directory."""
    global _log_config
    if _log_config is None or not os.path.exists(_log_config):
        path = os.path.join(tempfile.mkdtemp(prefix="kafka-tools-"), "log4j2.properties")
        with open(path, "w") as f:
            f.write(LOG4J2)
        _log_config = path
    return _log_config


_cds_key: str | None = None


def _cds_dir() -> Path | None:
    """This java's and this jar set's archive directory (None: archives are off)."""
    global _cds_key
    if os.environ.get("KAFKA_TOOLS_CDS", "1") == "0":
        return None
    if _cds_key is None:
        version = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
        coords = JAR_DIR / ".coords"
        jars = coords.read_text() if coords.is_file() else " ".join(sorted(os.listdir(JAR_DIR)))
        _cds_key = hashlib.sha256((version + jars).encode()).hexdigest()[:16]
    return CDS_DIR / _cds_key


def main_class(tool: str) -> str:
    """The class a tool runs (`tool`: a bin/ script's name, with or without .sh, or a class name)."""
    return TOOLS.get(tool.removesuffix(".sh"), tool)


def command(tool: str, *args, cds: list[str] = ()) -> list[str]:
    """The java command line of a tool."""
    return ["java", *JVM_FLAGS, *cds, f"-Dlog4j2.configurationFile={log_config()}", "-cp", classpath(),
            main_class(tool), *map(str, args)]


def run(tool: str, *args, input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess | None:
    """Run a tool to its end; None when it cannot run here. stdin is `input`, or empty."""
    if missing() is not None:
        return None
    cds, dump = [], None
    directory = _cds_dir()
    if directory is not None:
        archive = directory / f"{main_class(tool)}.jsa"
        if archive.is_file():
            cds = [f"-XX:SharedArchiveFile={archive}"]
        else:               # written under a name of our own, then renamed: concurrent runs never see half of one
            directory.mkdir(parents=True, exist_ok=True)
            dump = directory / f"{archive.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.part"
            cds = [f"-XX:ArchiveClassesAtExit={dump}"]
    try:
        out = subprocess.run(command(tool, *args, cds=cds), input=input if input is not None else "",
                             capture_output=True, text=True, timeout=timeout)
    finally:
        if dump is not None:
            if dump.is_file() and dump.stat().st_size > 0:
                os.replace(dump, archive)
            else:
                dump.unlink(missing_ok=True)
    if dump is None and cds and "[cds]" in out.stderr:
        archive.unlink(missing_ok=True)     # the JVM would not map it (a jar changed, say): the next run writes it anew
    return out


def start(tool: str, *args, stdout=subprocess.PIPE, stderr=None, stdin=subprocess.DEVNULL) -> subprocess.Popen | None:
    """Start a tool that keeps running; None when it cannot run here. The caller stops it
    (Popen.terminate: the JVM's shutdown hooks run, as on Ctrl-C). It maps the tool's archive if one exists."""
    if missing() is not None:
        return None
    directory = _cds_dir()
    archive = directory / f"{main_class(tool)}.jsa" if directory is not None else None
    cds = [f"-XX:SharedArchiveFile={archive}"] if archive is not None and archive.is_file() else []
    return subprocess.Popen(command(tool, *args, cds=cds), stdout=stdout, stderr=stderr, stdin=stdin, text=True)


if __name__ == "__main__":
    import sys

    why = missing()
    if why:
        sys.exit(why)
    version = run("kafka-topics", "--version")
    print(f"Kafka tools {version.stdout.strip()} from {JAR_DIR}")
    for name, cls in TOOLS.items():
        print(f"  {name:28s} {cls}")
