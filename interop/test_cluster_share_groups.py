"""Share groups (KIP-932) on the three-broker cluster: the group's coordinator is one broker, its share
partitions live on the leaders of the topic's partitions, spread over all three. Three KafkaShareConsumers
(Java client 4.x) read a six-partition RF3 topic written before they started (the group set to earliest
through the GROUP config resource, which reaches every broker through ZooKeeper): every record is
delivered once, and acknowledgements reach the leaders that hold the records."""
from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402
from cluster_support import WAIT, create_topic, new_cluster, skip_without_cluster  # noqa: E402
from test_groups_support import unique, wait_until  # noqa: E402
from test_share_groups import BROKER, LOCK_MS, deliveries, set_group_config, share_member  # noqa: E402

pytestmark = skip_without_cluster()
PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster():
    c = new_cluster(**{k: int(v) for k, v in BROKER.items()})
    with c:
        yield c


def test_share_group_over_three_brokers(cluster, tmp_path):
    java4 = peers.require(peers.java4_classpath(), "the Java client 4.x")
    from confluent_kafka import Producer

    topic = unique("share-rf3")
    create_topic(cluster, topic, PARTITIONS, 3)
    leaders = {cluster.partition_state(topic, p)["leader"] for p in range(PARTITIONS)}
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    values = [f"v-{i}" for i in range(300)]
    for i, v in enumerate(values):
        producer.produce(topic, value=v.encode(), partition=i % PARTITIONS)
    assert producer.flush(WAIT) == 0
    group = unique("share")
    set_group_config(cluster.brokers[0], group, "share.auto.offset.reset", "earliest")
    time.sleep(1)       # the group config reaches the other brokers through ZooKeeper's notifications
    boot = type("Bootstrap", (), {"bootstrap": cluster.bootstrap})
    members = [share_member(java4, boot, topic, group, f"{group}-m{i}", tmp_path, "implicit") for i in range(3)]
    try:
        wait_until(lambda: {r["v"] for r in deliveries(members)} >= set(values), "every record delivered", members)
        time.sleep(LOCK_MS / 1000 + 1)      # an acknowledgement lost on its way would bring records back now
        assert Counter(r["v"] for r in deliveries(members)) == Counter(values), "each record once"
        assert len(leaders) > 1, "the share partitions are spread over several brokers"
    finally:
        for m in members:
            m.close()
