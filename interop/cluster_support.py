"""What the cluster tests share: the cluster they run, waits on what ZooKeeper says, and reading partitions back.

Everything waits on outcomes (a leader named in ZooKeeper, an ISR grown back, a record read), with
generous limits that only guard against hangs; nothing asserts how long anything took.
"""
from __future__ import annotations

import glob
import os
import socket
import time

import pytest

from kafka_compat.testing import EmbeddedCluster, zookeeper_missing

WAIT = 120.0


def skip_without_cluster():
    """Marks for a module that needs ZooKeeper."""
    missing = zookeeper_missing()
    return [pytest.mark.skipif(missing is not None, reason=str(missing))]


class ReadyCluster(EmbeddedCluster):
    """An EmbeddedCluster whose start also waits until every broker has heard from the controller."""

    def start(self, timeout: float = WAIT) -> "ReadyCluster":
        super().start(timeout)
        wait_for_metadata(self)
        return self


def new_cluster(broker_overrides: dict[int, dict] | None = None, **overrides) -> EmbeddedCluster:
    settings = {"min.insync.replicas": 2, "default.replication.factor": 3, "zookeeper.session.timeout.ms": 4000,
                "replica.lag.time.max.ms": 10000, "group.initial.rebalance.delay.ms": 0}
    settings.update(overrides)
    return ReadyCluster(3, settings, broker_overrides=broker_overrides)


def controller_known_by(broker) -> int:
    """The controller id a broker's Metadata answer names (-1: it has had no UpdateMetadata yet)."""
    from kafka_compat.protocol.frames import FrameReader, decode_response, encode_request
    from kafka_compat.protocol.messages.metadata import MetadataRequest
    try:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            sock.sendall(encode_request(3, 12, MetadataRequest(topics=[]), 1))
            frames = FrameReader()
            while not (got := frames.frames()):
                data = sock.recv(65536)
                if not data:
                    return -1
                frames.feed(data)
            return decode_response(3, 12, got[0])[1].controller_id
    except OSError:
        return -1


def wait_for_metadata(cluster: EmbeddedCluster) -> None:
    """Until every running broker names the same live controller (clients' admin calls need one)."""
    def agreed():
        known = {controller_known_by(b) for b in cluster.brokers if b.running}
        return len(known) == 1 and known.pop() >= 0
    try:
        cluster.wait_until(agreed, WAIT, "every broker to know the controller")
    except TimeoutError as e:
        raise TimeoutError(f"{e}\n{cluster.logs()}") from None


def create_topic(cluster: EmbeddedCluster, topic: str, partitions: int = 3, replication_factor: int = 3,
                 configs: dict | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replication_factor, config=configs or {})])[topic].result(WAIT)
    for p in range(partitions):
        wait_for_full_isr(cluster, topic, p, replication_factor)


def wait_for_full_isr(cluster: EmbeddedCluster, topic: str, partition: int, size: int = 3) -> list[int]:
    def full():
        state = cluster.partition_state(topic, partition)
        return state is not None and state["leader"] >= 0 and len(state["isr"]) >= size
    cluster.wait_until(full, WAIT, f"{topic}-{partition} to have {size} in-sync replicas")
    return cluster.partition_state(topic, partition)["isr"]


def wait_all_registered(cluster: EmbeddedCluster) -> None:
    cluster.wait_until(lambda: cluster.registered() == set(range(len(cluster.brokers))), WAIT,
                       "every broker to be registered")
    wait_for_metadata(cluster)


def read_all(cluster: EmbeddedCluster, topic: str, partitions: int,
             config: dict | None = None) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of every partition from the beginning to the high watermark: {partition: [(offset, value)]}.
    ``config``: more consumer settings (a secured cluster's login)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"read-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "enable.partition.eof": True, **(config or {})})
    try:
        ends = {}
        deadline = time.monotonic() + WAIT
        for p in range(partitions):
            while p not in ends:
                try:
                    ends[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                except ck_exception():          # a broker just started may not know the topic yet
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got: dict[int, list] = {p: [] for p in range(partitions)}
        done = {p for p, high in ends.items() if high == 0}
        deadline = time.monotonic() + WAIT
        while len(done) < partitions and time.monotonic() < deadline:
            m = consumer.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF and m.offset() >= ends[m.partition()]:
                    done.add(m.partition())
                continue
            got[m.partition()].append((m.offset(), m.value()))
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
        assert len(done) == partitions, f"could not read to the end: {ends}, read {[len(v) for v in got.values()]}"
        return got
    finally:
        consumer.close()


def ck_exception():
    from confluent_kafka import KafkaException
    return KafkaException


def segment_bytes(cluster: EmbeddedCluster, broker: int, topic: str, partition: int) -> bytes:
    """The partition's records as this broker's segment files hold them (preallocated tails cut off)."""
    data = b"".join(open(f, "rb").read() for f in sorted(glob.glob(os.path.join(
        cluster.brokers[broker].data_dir, "logs", f"{topic}-{partition}", "*.log"))))
    end = 0
    while end + 12 <= len(data):                      # batch: base offset (8), length (4), then length bytes
        length = int.from_bytes(data[end + 8:end + 12], "big", signed=True)
        if length <= 0 or end + 12 + length > len(data):
            break
        end += 12 + length
    return data[:end]
