"""Consumer groups with the Python clients: kafka-python, confluent-kafka (librdkafka) and aiokafka.

Each member runs in its own process (see test_groups_support.py), so a crash is
a real SIGKILL without LeaveGroup. Membership changes happen while the group is
quiet; records are produced once the group is balanced again, and every record
must then be consumed by exactly one member. Broker timeouts are short
(`group.min.session.timeout.ms=1000`, members use 3 s sessions) so that a crash
is noticed in seconds; the tests assert what happened, never how fast.
"""
from __future__ import annotations

import functools

import pytest

kafka = pytest.importorskip("kafka")

from test_groups_support import (  # noqa: E402
    BROKER,
    PARTITIONS,
    balanced,
    expect_each_once,
    group_description,
    membership_scenario,
    new_topic,
    produce,
    python_member,
    restart_scenario,
    resume_scenario,
    static_restart_scenario,
    unique,
    wait_until,
)

from kafka_compat.testing import EmbeddedBroker  # noqa: E402

CLIENTS = ["kafka-python", "confluent-kafka", "aiokafka"]


def client_installed(name: str) -> None:
    pytest.importorskip({"kafka-python": "kafka", "confluent-kafka": "confluent_kafka",
                         "aiokafka": "aiokafka"}[name])


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker(BROKER) as b:
        yield b


def starter(client, broker, topic, group, tmp_path, **kw):
    """A function that starts one more member of `group`, written with `client`."""
    return lambda: python_member(client, broker.bootstrap, topic, group, unique(client), tmp_path, **kw)


@pytest.mark.parametrize("client", CLIENTS)
def test_three_members_then_leave_crash_and_join_rebalance_without_loss(broker, tmp_path, client):
    client_installed(client)
    topic = new_topic(broker)
    membership_scenario(broker, topic, starter(client, broker, topic, f"group-{client}", tmp_path))


@pytest.mark.parametrize("client", CLIENTS)
def test_a_restarted_consumer_resumes_from_its_committed_offsets(broker, tmp_path, client):
    client_installed(client)
    topic = new_topic(broker)
    resume_scenario(broker, topic, starter(client, broker, topic, f"resume-{client}", tmp_path))


@pytest.mark.parametrize("client", CLIENTS)
def test_committed_offsets_survive_a_broker_restart(tmp_path, client):
    client_installed(client)
    with EmbeddedBroker(BROKER) as broker:
        topic = new_topic(broker)
        restart_scenario(broker, topic, starter(client, broker, topic, f"restart-{client}", tmp_path))


def test_mixed_group_of_two_clients_agrees_on_range(broker, tmp_path):
    client_installed("confluent-kafka")
    topic, group = new_topic(broker), "mixed"
    members = [starter(c, broker, topic, group, tmp_path)()
               for c in ("kafka-python", "confluent-kafka", "kafka-python")]
    try:
        wait_until(lambda: balanced(members, PARTITIONS), "both clients to share the partitions", members)
        described = group_description(broker, group)
        assert described["protocol_data"] == "range" and len(described["members"]) == 3
        # range hands each member a contiguous block of partitions
        assert sorted(tuple(m.assignment) for m in members) == [(0, 1), (2, 3), (4, 5)]
        expect_each_once(members, produce(broker, topic, "mixed"))
    finally:
        for m in members:
            m.stop()


def test_static_member_restarts_within_its_session_and_keeps_its_partitions(broker, tmp_path):
    client_installed("confluent-kafka")
    topic, group = new_topic(broker), "static"
    start = functools.partial(python_member, "confluent-kafka", broker.bootstrap, topic, group,
                              log_dir=tmp_path, session_ms=10000)
    static_restart_scenario(broker, topic, group,
                            lambda instance: start(name=unique(instance), instance=instance))
