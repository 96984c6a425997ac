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

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JAR_DIR = ROOT / ".cache" / "jvm" / "kafka"

# bin/<script>.sh -> the class it runs (Kafka 4.4's bin/ directory)
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
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
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
}

# a small heap and the C1 compiler only: the tools run for seconds, where JIT start-up dominates
JVM_FLAGS = ["-Xmx256m", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:+UseSerialGC",
             "-Djava.awt.headless=true"]

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


def command(tool: str, *args: str) -> list[str]:
    """The java command line of a tool (`tool`: a bin/ script's name without .sh, or a class name)."""
    main_class = TOOLS.get(tool.removesuffix(".sh"), tool)
    return ["java", *JVM_FLAGS, f"-Dlog4j2.configurationFile={log_config()}", "-cp", classpath(), main_class,
            *map(str, args)]


def run(tool: str, *args, input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess | None:
    """Run a tool to its end; None when it cannot run here. stdin is `input`, or empty."""
    if missing() is not None:
        return None
    return subprocess.run(command(tool, *args), input=input if input is not None else "", capture_output=True,
                          text=True, timeout=timeout)


def start(tool: str, *args, stdout=subprocess.PIPE, stderr=None, stdin=subprocess.DEVNULL) -> subprocess.Popen | None:
    """Start a tool that keeps running; None when it cannot run here. The caller stops it
    (Popen.terminate: the JVM's shutdown hooks run, as on Ctrl-C)."""
    if missing() is not None:
        return None
    return subprocess.Popen(command(tool, *args), stdout=stdout, stderr=stderr, stdin=stdin, text=True)


if __name__ == "__main__":
    import sys

    why = missing()
    if why:
        sys.exit(why)
    version = run("kafka-topics", "--version")
    print(f"Kafka tools {version.stdout.strip()} from {JAR_DIR}")
    for name, cls in TOOLS.items():
        print(f"  {name:28s} {cls}")
