"""EmbeddedCluster: ZooKeeper and three broker processes with ids 0..2, and the faults a test applies to them,
checked by what ZooKeeper then holds; a follower's replication metric. Also the `kafka-compat cluster`
command. (README's cluster example, which fails over, runs in tests/test_docs.py with every other example.)"""
from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from kafka_compat.testing import EmbeddedCluster, free_port, zookeeper_missing

pytestmark = pytest.mark.skipif(zookeeper_missing() is not None, reason=str(zookeeper_missing()))


def czxid(cluster: EmbeddedCluster, broker_id: int) -> int:
    return cluster.zk.get(f"/brokers/ids/{broker_id}")[1].czxid


def test_brokers_register_and_kill_restart_pause_are_seen_in_zookeeper():
    with EmbeddedCluster(3) as cluster:
        assert cluster.registered() == {0, 1, 2}
        ports = {json.loads(cluster.zk.get(f"/brokers/ids/{i}")[0])["port"] for i in range(3)}
        assert ports == {b.port for b in cluster.brokers} and len(ports) == 3
        assert cluster.bootstrap.count(",") == 2

        before = czxid(cluster, 1)
        cluster.kill(1)                                   # its session expires: the registration goes
        cluster.wait_until(lambda: 1 not in cluster.registered(), 30, "broker 1's registration to go")
        cluster.restart(1)
        cluster.wait_until(lambda: 1 in cluster.registered(), 30, "broker 1 to register again")
        assert czxid(cluster, 1) > before                 # a new broker epoch

        before = czxid(cluster, 2)
        cluster.pause(2)                                  # frozen past its session: ZooKeeper expires it
        cluster.wait_until(lambda: 2 not in cluster.registered(), 30, "broker 2's session to expire")
        cluster.resume(2)                                 # it notices, and registers under a new session
        cluster.wait_until(lambda: 2 in cluster.registered(), 30, "broker 2 to register again")
        assert czxid(cluster, 2) > before and cluster.brokers[2].running

        assert cluster.stop(0) == 0                       # SIGTERM: a clean exit
        cluster.wait_until(lambda: 0 not in cluster.registered(), 30, "broker 0 to leave")


def test_the_cluster_command_refuses_zero_brokers():
    result = subprocess.run([sys.executable, "-m", "kafka_compat", "cluster", "--brokers", "0"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "at least 1" in result.stderr


def test_a_followers_replication_bytes_in_counts_what_it_appended():
    """ReplicationBytesInPerSec on each follower is the bytes it appended from the leader: here every
    byte the leader took in for the topic (BytesInPerSec), as /metrics shows them."""
    ports = [free_port() for _ in range(3)]
    overrides = {i: {"prometheus.listener": f"http://127.0.0.1:{port}"} for i, port in enumerate(ports)}
    with EmbeddedCluster(3, {"min.insync.replicas": 2}, broker_overrides=overrides) as cluster:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
        errors = []
        for i in range(20):
            producer.produce("r", b"v" * (100 + i), on_delivery=lambda err, msg: errors.append(err))
        assert producer.flush(30) == 0 and errors == [None] * 20
        leader = cluster.leader("r", 0)

        def meter(broker: int, name: str, **labels) -> float:
            with urllib.request.urlopen(f"http://127.0.0.1:{ports[broker]}/metrics", timeout=10) as r:
                text = r.read().decode()
            for family in text_string_to_metric_families(text):
                for s in family.samples:
                    if s.name == f"kafka_server_brokertopicmetrics_{name}_total" and s.labels == labels:
                        return s.value
            return 0.0

        produced = meter(leader, "bytesin", topic="r")
        assert produced > 20 * 100
        assert meter(leader, "replicationbytesin") == 0
        for follower in set(range(3)) - {leader}:
            cluster.wait_until(lambda: meter(follower, "replicationbytesin") == produced, 30,
                               f"broker {follower} to count the {produced:.0f} bytes it replicated")
