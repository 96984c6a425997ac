"""The corruption campaign against a real broker: damaged files before a restart, read back by a real client.

The storage side runs by the hundred in-process (tests/storage/test_storage_corruption.py); here
the damage a broker's owner meets most gets one real restart each, including the files only the
broker reads (meta.properties, replication-offset-checkpoint), and confluent-kafka consumes
everything with its checksum checks on: every record returned must be one that was produced, in
order, and nothing acknowledged before a clean shutdown may be missing.
"""

from __future__ import annotations

import os
import random
import shutil

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_compat.testing import EmbeddedBroker

PARTITIONS, PER_PARTITION = 3, 300
OVERRIDES = {"log.segment.bytes": 8192, "log.index.interval.bytes": 512}


def _values(p: int) -> list[bytes]:
    return [f"p{p}-{i:05d}-".encode() + bytes(40) for i in range(PER_PARTITION)]


def _garble(path: str, rng: random.Random) -> None:
    data = bytearray(open(path, "rb").read() or b"\0")
    for _ in range(max(1, len(data) // 8)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    open(path, "wb").write(bytes(data))


def _files(logs: str, suffix: str) -> list[str]:
    return sorted(os.path.join(logs, f"camp-{p}", f) for p in range(PARTITIONS)
                  for f in os.listdir(os.path.join(logs, f"camp-{p}")) if f.endswith(suffix))


def _consume(bootstrap: str) -> dict[int, list[bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "camp", "enable.auto.commit": False,
                  "check.crcs": True, "fetch.wait.max.ms": 50})
    c.assign([TopicPartition("camp", p, 0) for p in range(PARTITIONS)])
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    idle = 0
    while idle < 4 and sum(map(len, got.values())) < PARTITIONS * PER_PARTITION:
        msgs = c.consume(1000, 0.5)
        idle = 0 if msgs else idle + 1
        for m in msgs:
            assert m.error() is None, m.error()     # a CRC error would show here
            got[m.partition()].append(m.value())
    c.close()
    return got


# (case, damage(logs dir, rng), clean shutdown marker kept, expected: "all", "prefix" or "refused")
CASES = [
    ("recovery-point-offset-checkpoint garbage", lambda d, r: _garble(f"{d}/recovery-point-offset-checkpoint", r),
     True, "all"),
    ("log-start-offset-checkpoint garbage", lambda d, r: _garble(f"{d}/log-start-offset-checkpoint", r),
     False, "all"),
    ("replication-offset-checkpoint garbage", lambda d, r: _garble(f"{d}/replication-offset-checkpoint", r),
     True, "all"),
    ("every .index garbled", lambda d, r: [_garble(f, r) for f in _files(d, ".index")], True, "all"),
    ("producer snapshots garbled", lambda d, r: [_garble(f, r) for f in _files(d, ".snapshot")], False, "all"),
    ("a torn tail after a crash", lambda d, r: [os.truncate(f, os.path.getsize(f) - r.randint(1, 300))
                                                for f in _files(d, ".log")[-1:]], False, "prefix"),
    ("garbage inside the last segment after a crash",
     lambda d, r: _garble(_files(d, ".log")[-1], r), False, "prefix"),
    ("meta.properties garbage", lambda d, r: open(f"{d}/meta.properties", "wb").write(os.urandom(80)),
     True, "refused"),
    ("meta.properties of another node", lambda d, r: open(f"{d}/meta.properties", "w").write(
        "version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=7\n"), True, "refused"),
]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A broker's data directory after producing to 3 partitions and a clean shutdown."""
    root = tmp_path_factory.mktemp("camp")
    broker = EmbeddedBroker(OVERRIDES, data_dir=str(root / "broker"))
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("camp", PARTITIONS, 1)])["camp"].result(60)
        p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 2})
        for i in range(PER_PARTITION):
            for part in range(PARTITIONS):
                p.produce("camp", _values(part)[i], partition=part)
            if i % 50 == 0:
                p.flush(30)
        assert p.flush(60) == 0
        assert _consume(broker.bootstrap) == {part: _values(part) for part in range(PARTITIONS)}
    finally:
        broker.stop()
    logs = str(root / "broker" / "logs")
    assert os.path.exists(os.path.join(logs, ".kafka_cleanshutdown"))
    shutil.copytree(logs, str(root / "pristine"))
    yield str(root / "pristine"), str(root / "broker")
    shutil.rmtree(str(root), ignore_errors=True)


@pytest.mark.parametrize("case,damage,clean,expect", CASES, ids=[c[0] for c in CASES])
def test_damaged_file_before_restart(pristine, case, damage, clean, expect):
    source, data_dir = pristine
    logs = os.path.join(data_dir, "logs")
    shutil.rmtree(logs)
    shutil.copytree(source, logs)
    if not clean:
        os.unlink(os.path.join(logs, ".kafka_cleanshutdown"))
    damage(logs, random.Random(case))
    broker = EmbeddedBroker(OVERRIDES, data_dir=data_dir)
    if os.path.exists(broker.log_path):
        os.unlink(broker.log_path)
    try:
        if expect == "refused":
            with pytest.raises(RuntimeError, match="broker exited"):
                broker.start()
            assert "meta.properties" in broker.log() and "Traceback" not in broker.log()
            return
        broker.start()
        got = _consume(broker.bootstrap)
        for part in range(PARTITIONS):
            want = _values(part)
            if expect == "all":
                assert got[part] == want, f"partition {part}: {len(got[part])} of {len(want)} records"
            else:   # a crash's damage: what is served is a prefix of what was produced
                assert got[part] == want[: len(got[part])]
        assert "Traceback" not in broker.log()
    finally:
        broker.stop()
