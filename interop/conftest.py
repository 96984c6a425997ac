"""Session-wide fixtures of the interop suites: Apache Kafka as the reference broker, and the
conformance tally that the differential tests add to (see interop/conformance.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import conformance  # noqa: E402
import reference  # noqa: E402


def _reference(request, brokers: int, zookeeper: bool = False):
    if not reference.available(zookeeper):
        pytest.skip("Apache Kafka is not resolved (run: bash interop/maven.sh kafka kafka3)")
    ref = (reference.start_zookeeper_mode if zookeeper else reference.start_kraft)(brokers)
    request.addfinalizer(ref.stop)
    return ref


@pytest.fixture(scope="session")
def reference_kafka(request):
    """Apache Kafka 4.x, one KRaft node (broker and controller), started once per session."""
    return _reference(request, 1)


@pytest.fixture(scope="session")
def reference_kafka_cluster(request):
    """Apache Kafka 4.x, three KRaft nodes, started once per session."""
    return _reference(request, 3)


@pytest.fixture(scope="session")
def reference_kafka_zookeeper(request):
    """Apache Kafka 3.9 in ZooKeeper mode, three brokers: the reference for our ZooKeeper cluster."""
    return _reference(request, 3, zookeeper=True)


@pytest.fixture(scope="session")
def reference_kafka_secured(request):
    """Apache Kafka 4.x, one KRaft node with a SASL_PLAINTEXT listener and the StandardAuthorizer."""
    if not reference.available():
        pytest.skip("Apache Kafka is not resolved (run: bash interop/maven.sh kafka)")
    ref = reference.start_kraft(1, secured=True)
    request.addfinalizer(ref.stop)
    return ref


@pytest.fixture(scope="session")
def conformance_secured_broker():
    """kafka-compat set as reference_kafka_secured is: PLAINTEXT and SASL_PLAINTEXT, PLAIN users, ACLs."""
    from kafka_compat.testing import EmbeddedBroker

    settings = {"broker.id": 0, "inter.broker.listener.name": "PLAINTEXT", **reference.small_cluster(1),
                **reference.secured_settings("kafka.security.authorizer.AclAuthorizer")}
    with EmbeddedBroker(settings, listeners={"PLAINTEXT": "PLAINTEXT", "SASL_PLAINTEXT": "SASL_PLAINTEXT"}) as b:
        yield b


@pytest.fixture(scope="session")
def conformance_tally():
    return conformance.Tally()


@pytest.fixture(scope="session")
def conformance_broker():
    """kafka-compat as the conformance tests compare it: one node, set as the reference Kafka is (node 0,
    its threads and internal topics' replication, no initial rebalance delay)."""
    from kafka_compat.testing import EmbeddedBroker, free_port

    port = free_port()
    settings = {"broker.id": 0, "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "inter.broker.listener.name": "PLAINTEXT", **reference.small_cluster(1)}
    with EmbeddedBroker(settings, port=port) as b:
        yield b


@pytest.fixture(scope="session")
def conformance_cluster():
    """Our three-broker ZooKeeper cluster as the cluster conformance tests compare it with Kafka 3.9's:
    brokers 0-2, the reference's threads and internal topics' replication."""
    from cluster_support import ReadyCluster, skip_without_cluster

    for mark in skip_without_cluster():
        if mark.args[0]:
            pytest.skip(mark.kwargs["reason"])
    with ReadyCluster(3, reference.small_cluster(3)) as c:
        yield c


@pytest.fixture
def cluster_pair(request, conformance_cluster, reference_kafka_zookeeper, conformance_tally):
    """One connection to broker 0 of each three-broker cluster: ours and Kafka 3.9 in ZooKeeper mode."""
    p = conformance.Pair(conformance_cluster.brokers[0], reference_kafka_zookeeper, conformance_tally,
                         "cluster " + request.node.name)
    p.replication_factor = 3
    yield p
    p.close()


@pytest.fixture
def pair(request, conformance_broker, reference_kafka, conformance_tally):
    """One connection to each broker, compared as conformance.Pair does."""
    p = conformance.Pair(conformance_broker, reference_kafka, conformance_tally, request.node.name)
    yield p
    p.close()


def pytest_sessionfinish(session, exitstatus):
    tally = getattr(session.config, "_conformance_tally", None)
    if tally is not None and tally.by_api:
        conformance.REPORT.unlink(missing_ok=True)
        session.config._conformance_report = tally.merge_into()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    report = getattr(config, "_conformance_report", None)
    if report:
        terminalreporter.write_sep("-", "conformance with Apache Kafka: fields per API")
        terminalreporter.write_line(conformance.table(report))


@pytest.fixture(autouse=True, scope="session")
def _keep_tally(request, conformance_tally):
    request.config._conformance_tally = conformance_tally
