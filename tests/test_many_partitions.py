"""Many partitions under a small descriptor limit, and a disk that runs out, against a real broker.

The broker keeps a budget of open segment files (storage/open_files.py): partitions past it
hold no descriptor until used. These tests start it with RLIMIT_NOFILE far below what one
descriptor per partition would need, and check that produce and fetch reach every
partition, that restarts (clean and unclean) load them all, and that a full disk fails the
request that met it with KAFKA_STORAGE_ERROR and a message, never the broker.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import tempfile

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_compat.testing import EmbeddedBroker

NOFILE = 400          # the budget is (400 - 256) // 2 = 72 open segments
TOPICS, PER_TOPIC = 6, 100


def _low_nofile():
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


def _create(bootstrap: str, topics: dict[str, int]) -> dict[str, Exception | None]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()], operation_timeout=60,
                                  request_timeout=120)
    out = {}
    for name, f in futures.items():
        try:
            f.result(120)
            out[name] = None
        except KafkaException as e:
            out[name] = e.args[0]
    return out


def _produce_each(bootstrap: str, partitions: list[tuple[str, int]], tag: bytes) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    failures = []
    for topic, index in partitions:
        p.produce(topic, value=tag + f"{topic}/{index}".encode(), partition=index,
                  on_delivery=lambda err, msg: err and failures.append(err))
    assert p.flush(120) == 0
    assert failures == []


def _consume_all(bootstrap: str, partitions: list[tuple[str, int]], expected_each: int) -> dict:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "many", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 50, "check.crcs": True})
    c.assign([TopicPartition(t, i, 0) for t, i in partitions])
    seen: dict[tuple[str, int], list[bytes]] = {}
    want = len(partitions) * expected_each
    got = 0
    for _ in range(2000):
        if got >= want:
            break
        for m in c.consume(500, 0.5):
            assert m.error() is None, m.error()
            seen.setdefault((m.topic(), m.partition()), []).append(m.value())
            got += 1
    c.close()
    return seen


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_many_partitions_under_a_low_descriptor_limit_produce_fetch_and_restart():
    with EmbeddedBroker(preexec_fn=_low_nofile) as broker:
        topics = {f"many-{t}": PER_TOPIC for t in range(TOPICS)}
        assert _create(broker.bootstrap, topics) == {t: None for t in topics}
        partitions = [(t, i) for t in topics for i in range(PER_TOPIC)]
        assert len(partitions) > NOFILE   # one descriptor per partition could not fit
        _produce_each(broker.bootstrap, partitions, b"a:")
        assert _open_fds(broker.proc.pid) < NOFILE
        seen = _consume_all(broker.bootstrap, partitions, 1)
        assert seen == {(t, i): [f"a:{t}/{i}".encode()] for t, i in partitions}

        broker.restart()          # clean: every partition loads within the limit
        _produce_each(broker.bootstrap, partitions, b"b:")
        broker.kill()             # unclean: every partition recovers within the limit
        broker.start(timeout=120)
        seen = _consume_all(broker.bootstrap, partitions, 2)
        assert seen == {(t, i): [f"a:{t}/{i}".encode(), f"b:{t}/{i}".encode()] for t, i in partitions}
        assert _open_fds(broker.proc.pid) < NOFILE
        assert "Traceback" not in broker.log()


@pytest.fixture
def small_disk():
    """A tmpfs with few inodes: creating partitions runs out of space part way (needs mount rights)."""
    path = tempfile.mkdtemp(prefix="kafka-compat-small-disk-")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,nr_inodes=160", "tmpfs", path],
                          capture_output=True)
    if done.returncode:
        os.rmdir(path)
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
    yield path
    subprocess.run(["umount", "-l", path], check=False)
    shutil.rmtree(path, ignore_errors=True)


def test_full_disk_fails_create_topics_with_storage_error_and_broker_restarts(small_disk):
    broker = EmbeddedBroker(data_dir=small_disk)
    broker.log_path = os.path.join(tempfile.gettempdir(), f"kafka-compat-small-disk-{os.getpid()}.log")
    try:
        broker.start()
        assert _create(broker.bootstrap, {"fits": 3}) == {"fits": None}
        _produce_each(broker.bootstrap, [("fits", i) for i in range(3)], b"x:")
        errors = _create(broker.bootstrap, {f"big-{n}": 40 for n in range(6)})
        failed = {name: e for name, e in errors.items() if e is not None}
        assert failed, errors                               # the inodes ran out part way
        for e in failed.values():
            assert e.code() == 56, e                        # KAFKA_STORAGE_ERROR
            assert "No space left" in e.str() and "big-" in e.str(), e.str()
        created = [name for name, e in errors.items() if e is None]
        # the broker still serves, and a failed topic left nothing behind
        meta = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30).topics
        assert set(meta) >= {"fits", *created} and not set(failed) & set(meta)
        broker.restart()
        assert _consume_all(broker.bootstrap, [("fits", i) for i in range(3)], 1) == {
            ("fits", i): [f"x:fits/{i}".encode()] for i in range(3)}
        assert "Traceback" not in broker.log()
    finally:
        broker.close()
        if os.environ.get("KEEP_LOG") is None and os.path.exists(broker.log_path):
            os.unlink(broker.log_path)
