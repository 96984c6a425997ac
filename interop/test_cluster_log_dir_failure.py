"""A leader whose log directory fails hands its leadership over (Kafka's log-dir-failure path, issue 20).

3 brokers, a topic of one partition with RF 3 led by broker 2 and min.insync.replicas=2; broker 2's
log directory is a small filesystem of its own (faults.disk.LoopDisk) that fills while an idempotent
acks=all producer writes. Two shapes, as in Kafka:

- broker 2 has a second, healthy log dir: the failed one goes offline, the broker writes a
  log_dir_event znode, the controller's LeaderAndIsr is answered KAFKA_STORAGE_ERROR for the replica
  there, which goes offline: another ISR member leads, Metadata names broker 2 as an offline replica
  while it is still registered, and DescribeLogDirs reports the dir with KAFKA_STORAGE_ERROR;
- broker 2 has only that log dir: it halts ("Shutdown broker because all log dirs ... have failed")
  and the controller moves its leadership when its session ends.

Either way the producer goes on, every acknowledged record is read back exactly once and in order,
and once the space is freed and broker 2 restarted it is back in the ISR.

Needs root (loop devices), ZooKeeper and confluent-kafka; skipped otherwise.
"""
from __future__ import annotations

import os
import socket
import threading
import time

import pytest
from cluster_support import WAIT, read_all, skip_without_cluster, wait_for_metadata

from kafka_compat.faults import disk
from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.frames import FrameReader, decode_response, encode_request
from kafka_compat.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from kafka_compat.protocol.messages.metadata import MetadataRequest
from kafka_compat.testing import EmbeddedCluster

pytestmark = [*skip_without_cluster(), pytest.mark.skipif(disk.missing() is not None, reason=str(disk.missing()))]
ck = pytest.importorskip("confluent_kafka")

TOPIC = "t"
DISK_BROKER = 2
SETTINGS = {"min.insync.replicas": 2, "default.replication.factor": 3, "zookeeper.session.timeout.ms": 4000,
            "replica.lag.time.max.ms": 6000, "auto.create.topics.enable": False, "offsets.topic.num.partitions": 1}


def call(broker, api_key: int, version: int, body):
    """One request to ``broker``, its decoded response body."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as sock:
        sock.sendall(encode_request(api_key, version, body, 1))
        frames = FrameReader()
        while not (got := frames.frames()):
            data = sock.recv(65536)
            assert data, "the broker closed the connection"
            frames.feed(data)
        return decode_response(api_key, version, got[0])[1]


def partition_metadata(broker):
    response = call(broker, 3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)]))
    return response.topics[0].partitions[0]


class Writer:
    """One idempotent acks=all producer sending 0, 1, 2, ... to the partition; what was acknowledged, in order."""

    def __init__(self, bootstrap: str):
        self.producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                     "linger.ms": 5, "delivery.timeout.ms": 300000, "log_level": 3})
        self.acked: list[tuple[int, int]] = []        # (value, offset)
        self.failed: list[str] = []
        self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked.append((int(msg.value().split(b"|")[0]), msg.offset()))
        else:
            self.failed.append(str(err))

    def _run(self) -> None:
        pad = b"|" + b"x" * 1000
        while not self.stop.is_set():
            try:
                self.producer.produce(TOPIC, str(self.sent).encode() + pad, partition=0, on_delivery=self._delivered)
                self.sent += 1
            except BufferError:
                self.producer.poll(0.1)
            self.producer.poll(0)
            if self.sent % 100 == 0:
                time.sleep(0.05)

    def acked_more_than(self, n: int, timeout: float = WAIT) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) <= n:
            assert time.monotonic() < deadline, f"no acknowledgements past {n} ({len(self.failed)} failed)"
            time.sleep(0.1)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join()
        assert self.producer.flush(WAIT) == 0


@pytest.fixture(params=["two-log-dirs", "one-log-dir"])
def cluster(request, tmp_path):
    c = EmbeddedCluster(3, SETTINGS, disks={DISK_BROKER: 32 << 20}, data_dir=str(tmp_path / "cluster"))
    b = c.brokers[DISK_BROKER]
    if request.param == "two-log-dirs":            # the small disk first: the partition's log goes there
        b.log_dir = f"{b.log_dir},{os.path.join(b.data_dir, 'logs2')}"
    c.two_dirs = request.param == "two-log-dirs"
    with c:
        wait_for_metadata(c)
        yield c


def test_a_leader_whose_log_dir_fails_hands_leadership_over(cluster):
    from confluent_kafka.admin import AdminClient, NewTopic

    disk_logs = cluster.brokers[DISK_BROKER].log_dir.split(",")[0]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=-1, replica_assignment=[[DISK_BROKER, 0, 1]],
                                  config={"segment.bytes": str(1 << 20)})])[TOPIC].result(WAIT)
    cluster.wait_until(lambda: (s := cluster.partition_state(TOPIC, 0)) and s["leader"] == DISK_BROKER
                       and len(s["isr"]) == 3, WAIT, "broker 2 leading with a full ISR")
    # ZooKeeper's state comes before the broker's LeaderAndIsr: wait for the log itself, then see where it went
    dirs = cluster.brokers[DISK_BROKER].log_dir.split(",")
    cluster.wait_until(lambda: any(os.path.isdir(os.path.join(d, f"{TOPIC}-0")) for d in dirs), WAIT,
                       "broker 2 to make the partition's log")
    assert os.path.isdir(os.path.join(disk_logs, f"{TOPIC}-0"))

    writer = Writer(cluster.bootstrap)
    writer.thread.start()
    try:
        writer.acked_more_than(500)
        cluster.fill_disk(DISK_BROKER)
        cluster.wait_until(lambda: (s := cluster.partition_state(TOPIC, 0)) and s["leader"] not in (-1, DISK_BROKER),
                           WAIT, "leadership to move off the broker with the full disk")
        state = cluster.partition_state(TOPIC, 0)
        assert DISK_BROKER not in state["isr"] and len(state["isr"]) == 2
        moved = len(writer.acked)
        writer.acked_more_than(moved + 500)        # the producer goes on with the new leader

        b = cluster.brokers[DISK_BROKER]
        if cluster.two_dirs:
            # still registered, serving its healthy dir; its replica is offline on the controller's word
            assert b.running and DISK_BROKER in cluster.registered()
            cluster.wait_until(lambda: list(partition_metadata(cluster.brokers[0]).offline_replicas) == [DISK_BROKER],
                               WAIT, "Metadata to name broker 2's replica offline")
            meta = partition_metadata(cluster.brokers[0])
            assert meta.leader_id == state["leader"] and DISK_BROKER in meta.replica_nodes
            dirs = {r.log_dir: r.error_code for r in call(b, 35, 4, DescribeLogDirsRequest(topics=None)).results}
            assert dirs == {os.path.abspath(disk_logs): ErrorCode.KAFKA_STORAGE_ERROR,
                            os.path.join(b.data_dir, "logs2"): ErrorCode.NONE}
            assert cluster.zk.get_children("/log_dir_event_notification") == []    # read and deleted
        else:
            cluster.wait_until(lambda: not b.running, WAIT, "broker 2 to halt")
            assert b.proc.returncode == 1
            assert "Shutdown broker because all log dirs in" in b.log()
    finally:
        writer.finish()
    assert writer.failed == []

    cluster.free_disk(DISK_BROKER)
    cluster.restart(DISK_BROKER)
    cluster.wait_until(lambda: len(cluster.partition_state(TOPIC, 0)["isr"]) == 3, WAIT,
                       "broker 2 back in the ISR")
    cluster.wait_until(lambda: list(partition_metadata(cluster.brokers[0]).offline_replicas) == [], WAIT,
                       "no offline replica left")

    records = read_all(cluster, TOPIC, 1)[0]
    values = [int(v.split(b"|")[0]) for _, v in records]
    assert len(values) == len(set(values)), "a record was written twice"
    offset_of = {int(v.split(b"|")[0]): o for o, v in records}
    # an offset of None: librdkafka acknowledged the record implicitly (an earlier request failed with the
    # broker, a later one succeeded); it must be in the log all the same, at the offset the log gives it
    acked = [(value, offset_of.get(value) if offset is None else offset) for value, offset in writer.acked]
    assert all(offset is not None and offset_of.get(value) == offset for value, offset in acked), \
        "an acknowledged record is lost or moved"
    assert [v for v, _ in sorted(acked, key=lambda a: a[1])] == sorted(v for v, _ in acked)   # in send order
