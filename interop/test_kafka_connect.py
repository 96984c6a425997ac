"""Kafka Connect 4.4 in distributed mode against kafka-compat: two workers, a file source and a file sink.

Two `ConnectDistributed` JVMs (one group, their config/offset/status topics on the broker, each its own REST
port on loopback) run FileStreamSource (a file into a one-partition topic) and FileStreamSink (the topic into
another file); the connectors are created through the REST API. Half of the source file is written, we wait
until lines reach the sink file, SIGKILL the worker that runs the source task, append the other half and
wait (bounded) until the survivor has taken the tasks over and copied everything.

Connect's file connectors are at least once: a task that dies redoes the work since its last offset flush
(source: file positions; sink: consumer offsets), so the sink file may repeat lines. What must hold: every
line of the source is in the sink, nothing else is, and the source's lines appear in the sink in their order
(as a subsequence: one partition, replays only go back to a committed position). Without a kill the sink
must equal the source exactly; that is checked first, on the first half.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid

import jvm_apps
import pytest

from kafka_compat.testing import EmbeddedBroker, free_port, zookeeper_missing

pytestmark = pytest.mark.skipif(jvm_apps.missing("connect") is not None, reason=str(jvm_apps.missing("connect")))
ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

WAIT = float(os.environ.get("CONNECT_WAIT", 240))
LINES = 400


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker({"group.initial.rebalance.delay.ms": 0}) as b:
        yield b


@pytest.fixture(scope="module")
def cluster():
    missing = zookeeper_missing()
    if missing:
        pytest.skip(missing)
    from cluster_support import new_cluster
    with new_cluster() as c:
        yield c


@pytest.fixture(scope="module", params=["broker", "cluster"])
def target(request):
    """(bootstrap, replication factor) of one broker or the cluster."""
    if request.param == "broker":
        return request.getfixturevalue("broker").bootstrap, 1
    return request.getfixturevalue("cluster").bootstrap, 3


class Worker:
    """One ConnectDistributed JVM with its worker properties file; output goes to a log we show on failure."""

    def __init__(self, classpath: str, bootstrap: str, group: str, rf: int, name: str):
        self.dir = tempfile.mkdtemp(prefix=f"connect-{name}-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        props = {
            "bootstrap.servers": bootstrap, "group.id": group,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": f"{group}-configs", "config.storage.replication.factor": rf,
            "offset.storage.topic": f"{group}-offsets", "offset.storage.replication.factor": rf,
            "offset.storage.partitions": 3,
            "status.storage.topic": f"{group}-status", "status.storage.replication.factor": rf,
            "status.storage.partitions": 1,
            "listeners": self.url, "rest.advertised.host.name": "127.0.0.1", "rest.advertised.port": self.port,
            # a dead worker's tasks move after the session timeout plus this delay (default five minutes)
            "scheduled.rebalance.max.delay.ms": 3000, "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
            "offset.flush.interval.ms": 1000,
        }
        self.props_path = os.path.join(self.dir, "worker.properties")
        with open(self.props_path, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in props.items())
        self.log_path = os.path.join(self.dir, "out.log")
        self._log = open(self.log_path, "wb")
        level = os.environ.get("CONNECT_LOG", "warn")
        self.proc = subprocess.Popen(
            ["java", "-Xmx384m", "-XX:TieredStopAtLevel=1", f"-Dorg.slf4j.simpleLogger.defaultLogLevel={level}",
             "-cp", classpath, "org.apache.kafka.connect.cli.ConnectDistributed", self.props_path],
            stdout=self._log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read()[-6000:].decode(errors="replace")

    def request(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read().decode()
            return json.loads(text) if text else None

    def ready(self) -> bool:
        try:
            return "version" in self.request("GET", "/")
        except (OSError, ValueError):
            return False

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def sink_lines(path: str) -> list[str]:
    """The sink file's complete lines (a worker killed mid-write may leave the last one unterminated)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return []
    return text.split("\n")[:-1]


def is_subsequence(want: list[str], got: list[str]) -> bool:
    it = iter(got)
    return all(line in it for line in want)


@pytest.mark.parametrize("task", ["source", "sink"])
def test_connect_distributed_file_source_and_sink_survive_a_worker_kill(target, task):
    """``task``: whose worker is killed, the source task's or the sink task's (both, when they share one)."""
    bootstrap, rf = target
    classpath = jvm_apps.connect_classpath()
    tag = uuid.uuid4().hex[:6]
    topic = f"connect-lines-{tag}"
    admin = AdminClient({"bootstrap.servers": bootstrap})        # alive until its future is done
    admin.create_topics([NewTopic(topic, 1, rf)])[topic].result(WAIT)
    del admin
    work = tempfile.mkdtemp(prefix=f"connect-files-{tag}-")
    source, sink = os.path.join(work, "source.txt"), os.path.join(work, "sink.txt")
    lines = [f"line {i:04d} {uuid.uuid4().hex}" for i in range(LINES)]
    with open(source, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines[:LINES // 2])
    workers = [Worker(classpath, bootstrap, f"connect-{tag}", rf, f"{tag}-{n}") for n in range(2)]

    last_error = [""]

    def wait(cond, what, among=workers):
        deadline = time.monotonic() + WAIT
        while True:
            try:
                if cond():
                    return
            except urllib.error.HTTPError as e:  # REST answers 409/404/500 while the group rebalances
                last_error[0] = f"{e.code} {e.read()[:500]!r}"
            except (OSError, ValueError, KeyError, IndexError) as e:
                last_error[0] = repr(e)
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- worker {n}\n{w.log()}" for n, w in enumerate(workers))
                raise AssertionError(f"timed out waiting for {what} (last: {last_error[0]}); sink has {len(sink_lines(sink))} lines\n{logs}")
            for w in among:
                assert w.proc.poll() is None, f"a worker exited with {w.proc.returncode}:\n{w.log()}"
            time.sleep(0.5)

    def put(name: str, config: dict) -> bool:
        workers[0].request("PUT", f"/connectors/{name}/config", config)
        return True

    try:
        wait(lambda: all(w.ready() for w in workers), "both workers' REST APIs")
        wait(lambda: put(f"src-{tag}", {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                                        "tasks.max": "1", "file": source, "topic": topic}), "the source connector")
        wait(lambda: put(f"sink-{tag}", {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                                         "tasks.max": "1", "file": sink, "topics": topic}), "the sink connector")
        wait(lambda: len(sink_lines(sink)) >= LINES // 2, "the first half in the sink file")
        assert sink_lines(sink) == lines[:LINES // 2], "without a failure the sink must be the source exactly"

        name = f"src-{tag}" if task == "source" else f"sink-{tag}"

        def task_worker() -> int:
            status = workers[1].request("GET", f"/connectors/{name}/status")
            return next(n for n, w in enumerate(workers) if status["tasks"][0]["worker_id"].endswith(f":{w.port}"))
        victim = None

        def found() -> bool:
            nonlocal victim
            victim = task_worker()
            return True
        wait(found, f"the worker running the {task} task")
        # the task's position flushed (the source's file position in the offset topic, the sink's consumer
        # offset in its group) and read back: what a worker taking over resumes from. Without this wait
        # the kill may land before the first flush and everything is replayed.
        first_half = os.path.getsize(source)

        def flushed() -> bool:
            offsets = workers[1].request("GET", f"/connectors/{name}/offsets")["offsets"]
            if task == "source":
                return any(o["offset"].get("position") == first_half for o in offsets)
            return any(o["offset"].get("kafka_offset") == LINES // 2 for o in offsets)
        wait(flushed, f"the {task}'s flushed offset")
        workers[victim].kill()
        survivor = workers[1 - victim]
        with open(source, "a", encoding="utf-8") as f:
            for line in lines[LINES // 2:]:
                f.write(line + "\n")
                f.flush()
        wait(lambda: set(sink_lines(sink)) >= set(lines), f"all {LINES} lines in the sink file", among=[survivor])
        time.sleep(2)                           # let a replay finish writing before the final read
        got = sink_lines(sink)
        assert set(got) == set(lines), f"lines in the sink that the source never had: {set(got) - set(lines)}"
        assert is_subsequence(lines, got), "the sink lost the source's order"
        duplicates = len(got) - len(set(got))
        print(f"sink: {len(got)} lines for {LINES}, {duplicates} repeated (at least once)")
    finally:
        for w in workers:
            w.close()
        shutil.rmtree(work, ignore_errors=True)
