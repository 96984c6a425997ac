"""Consumer groups with the Python clients: kafka-python, confluent-kafka (librdkafka) and aiokafka.

Each member runs in its own process (see test_groups_support.py), so a crash is
a real SIGKILL without LeaveGroup. Membership changes happen while the group is
quiet; records are produced once the group is balanced again, and every record
must then be consumed by exactly one member. Broker timeouts are short
(`group.min.session.timeout.ms=1000`, members use 3 s sessions) so that a crash
is noticed in seconds; the tests assert what happened, never how fast.
"""
from __future__ import annotations

import itertools

import pytest

kafka = pytest.importorskip("kafka")

from kafka import KafkaAdminClient, KafkaProducer  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402

from kafka_compat.testing import EmbeddedBroker  # noqa: E402

from test_groups_support import Member, balanced, consumed, wait_until  # noqa: E402

PARTITIONS = 6
CLIENTS = ["kafka-python", "confluent-kafka", "aiokafka"]
BROKER = {"group.initial.rebalance.delay.ms": "100", "group.min.session.timeout.ms": "1000",
          "offsets.topic.num.partitions": "5"}
_names = itertools.count()


def client_installed(name: str) -> None:
    pytest.importorskip({"kafka-python": "kafka", "confluent-kafka": "confluent_kafka",
                         "aiokafka": "aiokafka"}[name])


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker(BROKER) as b:
        yield b


def new_topic(broker, partitions: int = PARTITIONS) -> str:
    name = f"groups-{next(_names)}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()
    return name


def produce(broker, topic: str, tag: str, count: int = 60, partitions: int = PARTITIONS) -> set[str]:
    """`count` records spread over every partition; returns their values."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    values = [f"{tag}-{i}" for i in range(count)]
    for i, v in enumerate(values):
        producer.send(topic, value=v.encode(), partition=i % partitions)
    producer.flush()
    producer.close()
    return set(values)


def expect_each_once(members, produced: set[str]) -> None:
    """Wait until every produced record was reported, then check none was reported twice."""
    wait_until(lambda: produced <= {v for _, _, v in consumed(members)}, "every record to be consumed",
               [m for m in members if m.alive])
    values = [v for _, _, v in consumed(members)]
    dupes = {v for v in values if values.count(v) > 1}
    assert not dupes, f"consumed more than once: {sorted(dupes)[:10]}"
    assert set(values) == produced


def start(client, broker, topic, group, tmp_path, n=1, **kw) -> list[Member]:
    return [Member(client, broker.bootstrap, topic, group, f"{client}-{next(_names)}", tmp_path, **kw)
            for _ in range(n)]


def group_description(broker, group: str) -> dict:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        return admin.describe_groups([group])[group]
    finally:
        admin.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_three_members_then_leave_crash_and_join_rebalance_without_loss(broker, tmp_path, client):
    client_installed(client)
    topic, group = new_topic(broker), f"group-{client}"
    members = start(client, broker, topic, group, tmp_path, n=3)
    everyone = list(members)
    produced: set[str] = set()
    try:
        wait_until(lambda: balanced(members, PARTITIONS), "three members to share the six partitions", members)
        assert all(len(m.assignment) == 2 for m in members)
        produced |= produce(broker, topic, "three")
        expect_each_once(everyone, produced)

        # a member leaves (LeaveGroup): the other two take over its partitions
        leaving, members = members[0], members[1:]
        leaving.close()
        wait_until(lambda: balanced(members, PARTITIONS), "two members to take over", members)
        produced |= produce(broker, topic, "after-leave")
        expect_each_once(everyone, produced)

        # a member crashes (no LeaveGroup): its session expires and the survivor takes everything
        crashed, members = members[0], members[1:]
        crashed.kill()
        wait_until(lambda: balanced(members, PARTITIONS), "the survivor to own every partition", members)
        produced |= produce(broker, topic, "after-crash")
        expect_each_once(everyone, produced)

        # a member joins: the group splits the partitions again
        joined = start(client, broker, topic, group, tmp_path)[0]
        everyone.append(joined)
        members.append(joined)
        wait_until(lambda: balanced(members, PARTITIONS), "the newcomer to get a share", members)
        produced |= produce(broker, topic, "after-join")
        expect_each_once(everyone, produced)
        assert all(m.assignments for m in everyone)
        # every membership change was a rebalance the survivor went through
        assert len(members[0].assignments) >= 4
    finally:
        for m in everyone:
            m.stop()


def consume_alone(client, broker, topic, group, tmp_path, produced: set[str]) -> None:
    """One member consumes exactly `produced`, commits, and closes."""
    m = start(client, broker, topic, group, tmp_path)[0]
    try:
        expect_each_once([m], produced)
    finally:
        m.stop()


@pytest.mark.parametrize("client", CLIENTS)
def test_a_restarted_consumer_resumes_from_its_committed_offsets(broker, tmp_path, client):
    client_installed(client)
    topic, group = new_topic(broker), f"resume-{client}"
    consume_alone(client, broker, topic, group, tmp_path, produce(broker, topic, "first"))
    # auto.offset.reset=earliest: without the committed offsets it would read "first" again
    consume_alone(client, broker, topic, group, tmp_path, produce(broker, topic, "second"))


def test_mixed_group_of_two_clients_agrees_on_range(broker, tmp_path):
    client_installed("confluent-kafka")
    topic, group = new_topic(broker), "mixed"
    members = (start("kafka-python", broker, topic, group, tmp_path)
               + start("confluent-kafka", broker, topic, group, tmp_path)
               + start("kafka-python", broker, topic, group, tmp_path))
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


@pytest.mark.parametrize("client", CLIENTS)
def test_committed_offsets_survive_a_broker_restart(tmp_path, client):
    client_installed(client)
    with EmbeddedBroker(BROKER) as broker:
        topic, group = new_topic(broker), f"restart-{client}"
        consume_alone(client, broker, topic, group, tmp_path, produce(broker, topic, "before"))
        broker.restart()
        consume_alone(client, broker, topic, group, tmp_path, produce(broker, topic, "after"))


def test_static_member_restarts_within_its_session_and_keeps_its_partitions(broker, tmp_path):
    client_installed("confluent-kafka")
    topic, group = new_topic(broker), "static"
    static = start("confluent-kafka", broker, topic, group, tmp_path, instance="static-1", session_ms=10000)[0]
    other = start("confluent-kafka", broker, topic, group, tmp_path, instance="static-2", session_ms=10000)[0]
    members = [static, other]
    everyone = list(members)
    try:
        wait_until(lambda: balanced(members, PARTITIONS), "two static members to share the partitions", members)
        held = list(static.assignment)
        seen_by_other = len(other.assignments)
        produced = produce(broker, topic, "before")
        expect_each_once(everyone, produced)
        before = {m["member_id"] for m in group_description(broker, group)["members"]}

        static.kill()       # static members never send LeaveGroup; here it crashes outright
        back = start("confluent-kafka", broker, topic, group, tmp_path, instance="static-1", session_ms=10000)[0]
        everyone.append(back)
        wait_until(lambda: back.assignment is not None, "the restarted member to get its assignment", [back])
        assert back.assignment == held
        produced |= produce(broker, topic, "after")
        expect_each_once(everyone, produced)
        # no rebalance: the other member was never given a new assignment
        assert len(other.assignments) == seen_by_other
        after = {m["member_id"] for m in group_description(broker, group)["members"]}
        assert len(after) == 2 and after != before
    finally:
        for m in everyone:
            m.stop()
