"""Fetch from follower (KIP-392) on a three-broker cluster, brokers in racks RACK0-2 with Kafka's
RackAwareReplicaSelector: the leader sends a consumer that names a follower's rack to that follower
(Fetch's PreferredReadReplica), which then serves it up to its high watermark; a consumer without a rack,
or in the leader's rack, keeps reading from the leader. librdkafka reports the bytes it received per
broker in its statistics, which is what tells where the records came from (as librdkafka's own
0101_fetch_from_follower checks).
"""
from __future__ import annotations

import json
import uuid

import pytest
from cluster_support import WAIT, ReadyCluster, skip_without_cluster, wait_for_full_isr

pytestmark = skip_without_cluster()
ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

COUNT = 300
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@pytest.fixture(scope="module")
def cluster():
    settings = {"min.insync.replicas": 2, "default.replication.factor": 3, "replica.selector.class": SELECTOR,
                "group.initial.rebalance.delay.ms": 0}
    with ReadyCluster(3, settings, broker_overrides={i: {"broker.rack": f"RACK{i}"} for i in range(3)}) as c:
        yield c


@pytest.fixture(scope="module")
def topic(cluster):
    """A one-partition topic on all three brokers holding COUNT acknowledged records."""
    name = f"fff-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, 1, 3)])[name].result(WAIT)
    wait_for_full_isr(cluster, name, 0, 3)
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(COUNT):
        producer.produce(name, value=f"record-{i:04d}".encode() + b"x" * 200, partition=0)
    assert producer.flush(WAIT) == 0
    return name


def consume_all(cluster, topic: str, rack: str | None) -> tuple[list[bytes], dict[int, int]]:
    """Every record of ``topic`` read by a consumer in ``rack``, and the bytes it received per broker id."""
    received: dict[int, int] = {}

    def on_stats(text):
        for broker in json.loads(text)["brokers"].values():
            if broker["nodeid"] >= 0:
                received[broker["nodeid"]] = broker["rxbytes"]

    conf = {"bootstrap.servers": cluster.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "statistics.interval.ms": 200,
            "stats_cb": on_stats}
    if rack is not None:
        conf["client.rack"] = rack
    consumer = ck.Consumer(conf)
    consumer.assign([ck.TopicPartition(topic, 0, 0)])
    values = []
    try:
        for _ in range(600):
            if len(values) >= COUNT:
                break
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                values.append(msg.value())
        before = dict(received)
        for _ in range(20):                      # statistics taken after the last record arrived
            consumer.poll(0.2)
            if received != before:
                break
    finally:
        consumer.close()
    return values, dict(received)


def expected() -> list[bytes]:
    return [f"record-{i:04d}".encode() + b"x" * 200 for i in range(COUNT)]


def test_a_consumer_in_a_followers_rack_reads_from_that_follower(cluster, topic):
    leader = cluster.wait_for_leader(topic, 0)
    follower = next(b for b in range(3) if b != leader)
    values, received = consume_all(cluster, topic, f"RACK{follower}")
    assert values == expected()
    data = COUNT * 200
    assert received.get(follower, 0) > data, received
    assert all(received.get(b, 0) < received[follower] for b in range(3) if b != follower), received


def test_a_consumer_without_a_rack_or_in_the_leaders_rack_reads_from_the_leader(cluster, topic):
    leader = cluster.wait_for_leader(topic, 0)
    for rack in (None, f"RACK{leader}", "elsewhere"):
        values, received = consume_all(cluster, topic, rack)
        assert values == expected()
        assert received.get(leader, 0) > COUNT * 200, (rack, received)
        assert all(received.get(b, 0) < COUNT * 200 for b in range(3) if b != leader), (rack, received)
