"""Transactions v2 (KIP-890 part 2) with the Java 4.x client, on a single node and on three brokers.

interop/test_transactions_clients.py's consume-transform-produce copier (every third transaction aborted,
then redone) runs with kafka-clients 4.x at transaction.version 2 and at 1; the outcome is checked the same
way (read_committed sees each record once, in order; the group's offsets are the committed ones). Besides:

- at 2 the client adds nothing itself: the brokers count no AddPartitionsToTxn (client versions 0-3) and no
  AddOffsetsToTxn, every transaction ends with EndTxn v5, and the producer epoch is bumped once per
  transaction (DescribeTransactions; DescribeProducers on the output shows the last marker's epoch);
- at 1 the same client adds partitions and offsets itself, ends with EndTxn v4 and keeps its epoch;
- transaction.version raised from 1 to 2 in the middle of a run loses nothing, and on three brokers neither
  does the SIGKILL of the transaction coordinator's broker in the middle of a v2 run;
- confluent-kafka (librdkafka speaks transactions v1 only) still works with 2 finalized.
"""
from __future__ import annotations

import glob
import json
import os
import subprocess
import time
import urllib.request

import peers
import pytest
from cluster_support import skip_without_cluster
from prometheus_client.parser import text_string_to_metric_families
from test_transactions_clients import (
    COUNT,
    PARTITIONS,
    check_outcome,
    compile_copier,
    copy_with_confluent,
    create_topics,
    produce_input,
    unique,
)
from wire import WireClient

from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest
from kafka_compat.protocol.messages.describe_producers import DescribeProducersRequest
from kafka_compat.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kafka_compat.protocol.messages.update_features import UpdateFeaturesRequest as U
from kafka_compat.testing import EmbeddedBroker, free_port

UPGRADE, SAFE_DOWNGRADE = 1, 2
BROKER = {"group.initial.rebalance.delay.ms": "0"}
REQUESTS = "kafka_network_requestmetrics_requests_total"


@pytest.fixture(scope="module")
def java4_copier(tmp_path_factory):
    peers.require(peers.java4_classpath(), "the Java client 4.x")
    jars = os.pathsep.join(sorted(glob.glob(str(peers.JAVA4_JAR_DIR / "*.jar"))))
    return compile_copier(jars, tmp_path_factory.mktemp("java4-txn"))


class Node:
    """One broker, or three, with their metrics endpoints: what the tests ask of either."""

    def __init__(self, brokers, metrics_urls):
        self.brokers, self.metrics_urls = brokers, metrics_urls

    @property
    def bootstrap(self) -> str:
        """Every broker: the reader after a SIGKILL must not bootstrap from the killed one alone."""
        return ",".join(b.bootstrap for b in self.brokers)

    def requests(self) -> dict[tuple[str, int], float]:
        """(request, version) -> count, summed over the brokers."""
        out: dict[tuple[str, int], float] = {}
        for url in self.metrics_urls:
            with urllib.request.urlopen(url, timeout=30) as r:
                text = r.read().decode()
            for family in text_string_to_metric_families(text):
                for s in family.samples:
                    if s.name == REQUESTS:
                        key = (s.labels["request"], int(s.labels["version"]))
                        out[key] = out.get(key, 0) + s.value
        return out

    def ask_each(self, api_key: int, version: int, body, ok):
        """The first broker's answer that ``ok`` accepts (the coordinator's, a leader's)."""
        for b in self.brokers:
            c = WireClient("127.0.0.1", b.port)
            try:
                r = c.call(api_key, version, body)
            finally:
                c.close()
            if ok(r):
                return r
        raise AssertionError(f"no broker answered API {api_key} as wanted")

    def set_transaction_version(self, level: int) -> None:
        kind = UPGRADE if level >= 2 else SAFE_DOWNGRADE
        body = U(timeout_ms=10000, validate_only=False, feature_updates=[
            U.FeatureUpdateKey(feature="transaction.version", max_version_level=level, upgrade_type=kind)])
        r = self.ask_each(57, 1, body, lambda r: r.error_code != 41)        # the controller's answer
        assert r.error_code == 0, r
        deadline = time.monotonic() + 30      # every broker follows (/feature's watch in a cluster)
        while not all(self.finalized_transaction_version(b) == level for b in self.brokers):
            assert time.monotonic() < deadline, f"the brokers never finalized transaction.version {level}"
            time.sleep(0.1)

    @staticmethod
    def finalized_transaction_version(broker) -> int:
        c = WireClient("127.0.0.1", broker.port)
        try:
            r = c.call(18, 4, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        finally:
            c.close()
        return {f.name: f.max_version_level for f in r.finalized_features}.get("transaction.version", 0)

    def describe_transaction(self, txn_id: str):
        r = self.ask_each(65, 0, DescribeTransactionsRequest(transactional_ids=[txn_id]),
                          lambda r: r.transaction_states[0].error_code == 0)
        return r.transaction_states[0]

    def producer_epochs(self, topic: str, producer_id: int) -> list[int]:
        """The producer's epoch on each partition of ``topic`` (DescribeProducers, asked of each leader)."""
        epochs = []
        for p in range(PARTITIONS):
            body = DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(name=topic,
                                                                                          partition_indexes=[p])])
            r = self.ask_each(61, 0, body, lambda r: r.topics[0].partitions[0].error_code == 0)
            epochs += [s.producer_epoch for s in r.topics[0].partitions[0].active_producers
                       if s.producer_id == producer_id]
        return epochs


@pytest.fixture(scope="module")
def single():
    port = free_port()
    with EmbeddedBroker({**BROKER, "prometheus.listener": f"http://127.0.0.1:{port}"}) as b:
        yield Node([b], [f"http://127.0.0.1:{port}/metrics"])


@pytest.fixture(scope="module", name="cluster")
def cluster_fixture():
    missing = [m for m in skip_without_cluster() if m.args[0]]
    if missing:
        pytest.skip(missing[0].kwargs["reason"])
    from cluster_support import ReadyCluster
    ports = [free_port() for _ in range(3)]
    settings = {"min.insync.replicas": 2, "default.replication.factor": 3, "zookeeper.session.timeout.ms": 6000,
                "replica.lag.time.max.ms": 10000, "group.initial.rebalance.delay.ms": 0,
                "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2}
    with ReadyCluster(3, settings, broker_overrides={
            i: {"prometheus.listener": f"http://127.0.0.1:{port}"} for i, port in enumerate(ports)}) as c:
        node = Node(c.brokers, [f"http://127.0.0.1:{port}/metrics" for port in ports])
        node.cluster = c
        yield node


@pytest.fixture(params=["single", "cluster"])
def node(request):
    return request.getfixturevalue(request.param)


def run_copier(node: Node, classpath: str, txn_id: str, pause_ms: int = 0, during=None) -> tuple[dict, dict]:
    """Copy a fresh input topic; ``during(progress)`` is called on each commit line. (result, topics)."""
    topics = {"input": unique("v2in"), "output": unique("v2out"), "group": unique("v2copier")}
    create_topics(node.bootstrap, topics["input"], topics["output"], replication=len(node.brokers))
    source = produce_input(node.bootstrap, topics["input"])
    proc = subprocess.Popen(["java", "-cp", classpath, "TransactionalCopy", node.bootstrap, topics["input"],
                             topics["output"], topics["group"], txn_id, str(COUNT), str(pause_ms)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line.strip())
            if during is not None and line.startswith('{"progress"'):
                during(json.loads(line)["progress"])
        proc.wait(300)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = proc.stderr.read()
    assert proc.returncode == 0, "\n".join(lines[-20:]) + stderr[-3000:]
    result = json.loads(lines[-1])
    assert result["committed"] == COUNT and result["aborted"] > 0
    check_outcome(node.bootstrap, source, topics["output"], topics["group"], topics["input"], result["aborted"])
    return result, topics


def delta(before: dict, after: dict, request: str, versions=range(0, 32)) -> float:
    return sum(after.get((request, v), 0) - before.get((request, v), 0) for v in versions)


def test_java4_at_transaction_version_2_bumps_the_epoch_per_transaction_and_adds_nothing_itself(node,
                                                                                                java4_copier):
    node.set_transaction_version(2)
    txn_id = unique("v2txn")
    before = node.requests()
    result, topics = run_copier(node, java4_copier, txn_id)
    after = node.requests()
    transactions = result["transactions"]
    # client versions only: brokers ask each other with v4 (verify) and v5 (add) in a cluster
    assert delta(before, after, "AddPartitionsToTxn", range(0, 4)) == 0
    assert delta(before, after, "AddOffsetsToTxn") == 0
    if len(node.brokers) > 1:       # leaders add partitions at a coordinator on another broker: v5, no VerifyOnly
        assert delta(before, after, "AddPartitionsToTxn", [5]) > 0
    # every transaction ends with v5 (a retried request counts again) and commits its offsets with v5 or v6
    assert delta(before, after, "EndTxn", range(0, 5)) == 0 and delta(before, after, "EndTxn", [5]) >= transactions
    assert delta(before, after, "TxnOffsetCommit", range(0, 5)) == 0
    assert delta(before, after, "TxnOffsetCommit", [5, 6]) >= transactions      # v6: Kafka 4.4, topic ids
    described = node.describe_transaction(txn_id)
    assert (described.transaction_state, described.producer_epoch) == ("CompleteCommit", transactions)
    epochs = node.producer_epochs(topics["output"], described.producer_id)
    assert epochs and max(epochs) == transactions       # the last marker's: the last transaction's bumped epoch


def test_java4_at_transaction_version_1_keeps_the_epoch_and_adds_partitions_itself(node, java4_copier):
    node.set_transaction_version(1)
    try:
        txn_id = unique("v1txn")
        before = node.requests()
        result, topics = run_copier(node, java4_copier, txn_id)
        after = node.requests()
        assert delta(before, after, "AddPartitionsToTxn", range(0, 4)) > 0
        assert delta(before, after, "AddOffsetsToTxn") >= result["transactions"]      # retries count again
        assert delta(before, after, "EndTxn", [5]) == 0
        assert delta(before, after, "EndTxn", range(0, 5)) >= result["transactions"]
        described = node.describe_transaction(txn_id)
        assert (described.transaction_state, described.producer_epoch) == ("CompleteCommit", 0)
        assert set(node.producer_epochs(topics["output"], described.producer_id)) == {0}
    finally:
        node.set_transaction_version(2)


def test_an_upgrade_to_transaction_version_2_in_the_middle_of_a_run_loses_nothing(node, java4_copier):
    node.set_transaction_version(1)
    upgraded = []

    def upgrade_once(progress: int) -> None:
        if not upgraded:
            node.set_transaction_version(2)
            upgraded.append(progress)
    try:
        result, _ = run_copier(node, java4_copier, unique("uptxn"), pause_ms=200, during=upgrade_once)
    finally:
        node.set_transaction_version(2)
    assert upgraded and upgraded[0] < COUNT          # the level changed while transactions ran


def test_confluent_kafka_keeps_transactions_v1_with_version_2_finalized(node):
    node.set_transaction_version(2)
    topics = {"input": unique("ckin"), "output": unique("ckout"), "group": unique("ckcopier")}
    create_topics(node.bootstrap, topics["input"], topics["output"], replication=len(node.brokers))
    source = produce_input(node.bootstrap, topics["input"])
    before = node.requests()
    result = copy_with_confluent(node.bootstrap, topics["input"], topics["output"], topics["group"])
    after = node.requests()
    assert result["committed"] == COUNT and result["aborted"] > 0
    check_outcome(node.bootstrap, source, topics["output"], topics["group"], topics["input"], result["aborted"])
    assert delta(before, after, "AddPartitionsToTxn", range(0, 4)) > 0       # librdkafka adds them itself
    assert delta(before, after, "EndTxn", [5]) == 0


def test_the_coordinators_broker_killed_in_a_v2_run_loses_nothing(cluster, java4_copier):
    from kafka_compat.transaction import TRANSACTION_STATE_TOPIC_NAME
    from kafka_compat.transaction.transaction_log import partition_for
    cluster.set_transaction_version(2)
    txn_id = unique("killtxn")
    killed = []

    def kill_the_coordinator(progress: int) -> None:
        if not killed:
            coordinator = cluster.cluster.wait_for_leader(TRANSACTION_STATE_TOPIC_NAME, partition_for(txn_id, 50))
            cluster.cluster.kill(coordinator)
            killed.append(coordinator)
    try:
        result, _ = run_copier(cluster, java4_copier, txn_id, pause_ms=300, during=kill_the_coordinator)
    finally:
        if killed:
            cluster.cluster.restart(killed[0])
    assert killed
    described = cluster.describe_transaction(txn_id)
    assert described.producer_epoch >= result["transactions"]       # no transaction ended without its bump
