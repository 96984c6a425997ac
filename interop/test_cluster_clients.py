"""The six clients' round trips (interop/test_clients.py) against a three-broker cluster instead of one broker.

Their topics (3 partitions each) get their leaders spread over the brokers, so every client routes produce,
fetch, ListOffsets and admin calls by the cluster's metadata: CreateTopics and DeleteTopics reach the
controller's broker, the rest each partition's leader.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from cluster_support import create_topic, new_cluster, skip_without_cluster
from test_clients import (  # noqa: F401  (collected again here, with this module's `broker`)
    test_aiokafka,
    test_confluent_kafka,
    test_java_client,
    test_kafka_python,
    test_kafkajs,
    test_kcat,
)

pytestmark = skip_without_cluster()


class ClusterAsBroker:
    """What the round trips ask of `broker`: where to connect, and where a partition's segments are."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap

    def partition_dir(self, topic: str, partition: int) -> Path:
        leader = self.cluster.wait_for_leader(topic, partition)
        return Path(self.cluster.brokers[leader].data_dir, "logs", f"{topic}-{partition}")


@pytest.fixture(scope="module")
def cluster():
    with new_cluster(**{"min.insync.replicas": 1}) as c:
        yield c


@pytest.fixture(scope="module")
def broker(cluster):
    return ClusterAsBroker(cluster)


def test_leaders_are_spread_over_the_brokers(cluster):
    create_topic(cluster, "spread", partitions=3, replication_factor=1)
    assert sorted(cluster.leader("spread", p) for p in range(3)) == [0, 1, 2]
