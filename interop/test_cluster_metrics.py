"""The replication metrics of a three-broker cluster, scraped from each broker's Prometheus endpoint.

A follower of an RF3 topic dies and misses records: its leader drops it from the ISR once it has not
caught up for replica.lag.time.max.ms (2 s here, well inside the 20 s ZooKeeper session, so the shrink is the
leader's own AlterPartition, which is what IsrShrinksPerSec counts, not the controller's removal of
a dead broker). Then the leader reports the partition under-replicated and, with the topic's
min.insync.replicas=3, under its min ISR; the cluster has exactly one active controller and no
offline partition. The follower starts again, catches up and rejoins: IsrExpandsPerSec counts it
and nothing is under-replicated any more. `promtool check metrics` accepts every scrape.
"""
from __future__ import annotations

import shutil
import subprocess
import urllib.request

import pytest
from cluster_support import WAIT, ReadyCluster, create_topic, skip_without_cluster, wait_for_full_isr

from kafka_compat.testing import free_port

pytestmark = skip_without_cluster()
ck = pytest.importorskip("confluent_kafka")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

TOPIC = "replicated"
RM = "kafka_server_replicamanager_"


@pytest.fixture(scope="module")
def cluster():
    ports = [free_port() for _ in range(3)]
    settings = {"default.replication.factor": 3, "min.insync.replicas": 2, "replica.lag.time.max.ms": 2000,
                "zookeeper.session.timeout.ms": 20000, "group.initial.rebalance.delay.ms": 0}
    with ReadyCluster(3, settings, broker_overrides={
            i: {"prometheus.listener": f"http://127.0.0.1:{port}"} for i, port in enumerate(ports)}) as c:
        c.metrics_urls = [f"http://127.0.0.1:{port}/metrics" for port in ports]
        yield c


def scrape(cluster, broker: int) -> dict[str, float]:
    """Broker ``broker``'s unlabelled samples by name, after promtool accepted the whole page."""
    with urllib.request.urlopen(cluster.metrics_urls[broker], timeout=30) as r:
        text = r.read().decode()
    promtool = shutil.which("promtool")
    if promtool is not None:
        check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
    return {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples
            if not s.labels}


def scrape_live(cluster) -> dict[int, dict[str, float]]:
    return {i: scrape(cluster, i) for i, b in enumerate(cluster.brokers) if b.running}


def produce(cluster, n: int, acks: str) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": acks})
    errors = []
    for i in range(n):
        p.produce(TOPIC, f"r{i}".encode(), on_delivery=lambda err, _m: err and errors.append(err))
    assert p.flush(WAIT) == 0 and errors == []


def test_isr_shrink_and_expand_show_in_the_replication_metrics(cluster):
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus; interop/setup.sh does)")
    create_topic(cluster, TOPIC, partitions=1, configs={"min.insync.replicas": "3"})
    produce(cluster, 100, "all")
    state = cluster.partition_state(TOPIC, 0)
    leader, controller = state["leader"], cluster.controller()
    follower = next(b for b in state["isr"] if b not in (leader, controller))
    before = scrape_live(cluster)
    assert [before[i][RM + "partitioncount"] for i in range(3)] == [1, 1, 1]
    assert [before[i][RM + "leadercount"] for i in range(3)] == [int(i == leader) for i in range(3)]
    assert before[leader][RM + "underreplicatedpartitions"] == 0
    assert before[leader][RM + "underminisrpartitioncount"] == 0

    cluster.kill(follower)
    produce(cluster, 100, "1")                  # a follower at the leader's end never lags: it must miss these
    cluster.wait_until(lambda: follower not in cluster.partition_state(TOPIC, 0)["isr"], WAIT,
                       f"the leader to drop broker {follower} from the ISR")
    shrunk = scrape_live(cluster)
    assert shrunk[leader][RM + "underreplicatedpartitions"] == 1
    assert shrunk[leader][RM + "underminisrpartitioncount"] == 1
    assert shrunk[leader][RM + "isrshrinks_total"] >= before[leader][RM + "isrshrinks_total"] + 1
    assert [i for i, m in shrunk.items() if m["kafka_controller_kafkacontroller_activecontrollercount"] == 1] \
        == [controller]
    assert shrunk[controller]["kafka_controller_kafkacontroller_offlinepartitionscount"] == 0
    for i in shrunk:                                    # a follower never counts a partition as under-replicated
        if i != leader:
            assert shrunk[i][RM + "underreplicatedpartitions"] == 0

    # a new process may register only once the dead one's session has expired (Kafka refuses it too)
    cluster.wait_until(lambda: follower not in cluster.registered(), WAIT, f"broker {follower}'s session to expire")
    cluster.start_broker(follower)
    wait_for_full_isr(cluster, TOPIC, 0, 3)
    expanded = scrape_live(cluster)
    assert expanded[leader][RM + "isrexpands_total"] >= shrunk[leader][RM + "isrexpands_total"] + 1
    assert expanded[leader][RM + "underreplicatedpartitions"] == 0
    assert expanded[leader][RM + "underminisrpartitioncount"] == 0
    assert expanded[follower][RM + "partitioncount"] == 1 and expanded[follower][RM + "leadercount"] == 0
    assert sum(m["kafka_controller_kafkacontroller_activecontrollercount"] for m in expanded.values()) == 1
