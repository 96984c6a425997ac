"""The consumer group protocol (KIP-848) with real clients: the Java client 4.2.1 and confluent-kafka.

Members are processes that commit before they report (test_groups_support.py), so
"every record consumed, none twice past a commit" is checked exactly. A producer
keeps writing while the group changes, so a member that keeps partitions through
a rebalance must keep reporting records from them while it runs.
"""
from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402
from test_groups_support import (  # noqa: E402
    Member,
    balanced,
    consumed,
    expect_each_once,
    new_topic,
    produce,
    python_member,
    unique,
    wait_until,
)

from kafka_compat.testing import EmbeddedBroker  # noqa: E402

# Short consumer-protocol timeouts so a crash is noticed in seconds (Kafka's floor is 45 s).
BROKER = {"group.initial.rebalance.delay.ms": "100", "group.min.session.timeout.ms": "1000",
          "offsets.topic.num.partitions": "5", "group.consumer.min.session.timeout.ms": "2000",
          "group.consumer.session.timeout.ms": "4000", "group.consumer.min.heartbeat.interval.ms": "100",
          "group.consumer.heartbeat.interval.ms": "300"}


def confluent_supports_consumer_protocol() -> bool:
    try:
        import confluent_kafka
    except ImportError:
        return False
    return confluent_kafka.libversion()[1] >= 0x020C0000      # librdkafka 2.12: KIP-848 GA


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # a data directory pytest keeps, so broker.log is there after a failure
    with EmbeddedBroker(BROKER, data_dir=str(tmp_path_factory.mktemp("kip848-broker"))) as b:
        yield b


@pytest.fixture(scope="module")
def java4():
    return peers.require(peers.java4_classpath(), "the Java client 4.x")


def java4_member(classpath, broker, topic, group, name, log_dir, protocol="consumer", assignor="range",
                 instance: str | None = None) -> Member:
    return Member("java-4.2.1", ["java", "-Xmx256m", "-cp", classpath, "GroupMember", broker.bootstrap, topic,
                                 group, name, protocol, assignor, *([instance] if instance else [])], name, log_dir)


def confluent_member(broker, topic, group, name, log_dir, protocol="consumer", assignor="range",
                     instance: str | None = None) -> Member:
    if protocol == "consumer" and not confluent_supports_consumer_protocol():
        pytest.skip("the installed librdkafka predates the consumer protocol (2.12)")
    return python_member("confluent-kafka", broker.bootstrap, topic, group, name, log_dir, protocol=protocol,
                         assignor=assignor, instance=instance)


class Producing:
    """Writes records with distinct values round-robin over the partitions until stopped."""

    def __init__(self, broker, topic: str, partitions: int, tag: str):
        from confluent_kafka import Producer
        self.producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        self.topic, self.partitions, self.tag = topic, partitions, tag
        self.values: set[str] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        i = 0
        while not self.stop.wait(0.004):
            value = f"{self.tag}-{i}"
            self.producer.produce(self.topic, value=value.encode(), partition=i % self.partitions)
            self.values.add(value)
            i += 1
            if i % 50 == 0:
                self.producer.poll(0)
        self.producer.flush(30)

    def finish(self) -> set[str]:
        self.stop.set()
        self.thread.join(60)
        return set(self.values)


def even(members, partitions: int) -> bool:
    """Balanced (they cover the topic without overlap) and no member holds two more than another."""
    if not balanced(members, partitions):
        return False
    sizes = [len(m.assignment) for m in members]
    return max(sizes) - min(sizes) <= 1


def polled_between(member: Member, start: float, end: float, partitions) -> int:
    """Records of `partitions` the member reported from polls between two wall times."""
    with member.lock:
        return sum(1 for t, records in member.polls if start <= t <= end
                   for p, _, _ in records if p in partitions)


def test_three_members_java_and_confluent_share_twelve_partitions(broker, java4, tmp_path):
    topic, group = new_topic(broker, 12), unique("kip848")
    producing = Producing(broker, topic, 12, "live")
    a = java4_member(java4, broker, topic, group, "java-a", tmp_path)
    b = confluent_member(broker, topic, group, "confluent-b", tmp_path)
    c = java4_member(java4, broker, topic, group, "java-c", tmp_path)
    everyone = [a, b, c]
    try:
        wait_until(lambda: even([a, b, c], 12), "three members to share twelve partitions", everyone)

        c.kill()        # a crash: its session expires and its partitions move
        wait_until(lambda: even([a, b], 12), "the two survivors to take the crashed member's share", [a, b])

        held_a, held_b = set(a.assignment), set(b.assignment)
        import time
        joined_at = time.time()
        d = confluent_member(broker, topic, group, "confluent-d", tmp_path)
        everyone.append(d)
        wait_until(lambda: even([a, b, d], 12), "the late member to get a share", [a, b, d])
        wait_until(lambda: d.records, "the late member to consume", [d])
        with d.lock:
            first_d = d.polls[0][0]
        # Members that kept partitions went on consuming them while the late member came in.
        for m, before in ((a, held_a), (b, held_b)):
            kept = before & set(m.assignment)
            assert kept, f"{m.name} kept none of its partitions"
            assert polled_between(m, joined_at, first_d, kept) > 0, f"{m.name} stopped during the rebalance"

        b.close()       # a graceful leave
        wait_until(lambda: even([a, d], 12), "two members to share after the leave", [a, d])
        expect_each_once(everyone, producing.finish())
    finally:
        producing.stop.set()
        for m in everyone:
            m.stop()


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_rolling_upgrade_to_the_consumer_protocol_and_back(broker, java4, tmp_path, assignor):
    topic, group = new_topic(broker, 6), unique("rolling")
    produced: set[str] = set()

    def classic(name):
        return confluent_member(broker, topic, group, name, tmp_path, protocol="classic", assignor=assignor)

    def modern(name, i):
        if i % 2:
            return java4_member(java4, broker, topic, group, name, tmp_path)
        return confluent_member(broker, topic, group, name, tmp_path)

    members = [classic(f"classic-{i}") for i in range(3)]
    everyone = list(members)
    try:
        wait_until(lambda: balanced(members, 6), "three classic members", members)
        produced |= produce(broker, topic, "classic")
        expect_each_once(everyone, produced)
        for step, make in (("up", lambda i: modern(f"consumer-{i}", i)), ("down", lambda i: classic(f"back-{i}"))):
            for i in range(3):
                members[i].close()
                members[i] = make(i)
                everyone.append(members[i])
                wait_until(lambda: even(members, 6), f"the group to settle after {step} {i}", members)
                produced |= produce(broker, topic, f"{step}-{i}")
                expect_each_once(everyone, produced)
            kind = group_type(broker, group)
            assert kind == ("consumer" if step == "up" else "classic"), (step, kind)
    finally:
        for m in everyone:
            m.stop()


def group_type(broker, group: str) -> str | None:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_groups().result(30)
    for g in listed.valid:
        if g.group_id == group:
            return str(getattr(g, "type", None)).split(".")[-1].lower()
    return None


@pytest.mark.parametrize("client", ["java", "confluent"])
def test_a_regex_subscription_picks_up_a_topic_created_later(broker, tmp_path, client):
    prefix = unique("rx")
    first = new_named_topic(broker, f"{prefix}-a", 2)
    group = unique("regex")
    if client == "java":
        # subscribe(SubscriptionPattern): the broker resolves it (RE2J syntax)
        m = java4_member(peers.require(peers.java4_classpath(), "the Java client 4.x"), broker, f"/{prefix}-.*/",
                         group, "java-regex", tmp_path)
    else:
        # librdkafka sends a "^" subscription as SubscribedTopicRegex
        m = confluent_member(broker, f"^{prefix}-.*", group, "confluent-regex", tmp_path)
    try:
        produced = produce(broker, first, "first", count=20, partitions=2)
        expect_each_once([m], produced)
        later = new_named_topic(broker, f"{prefix}-b", 3)
        produced |= produce(broker, later, "later", count=30, partitions=3)
        expect_each_once([m], produced)
        assert {v for _, _, v in consumed([m])} == produced
    finally:
        m.stop()


def new_named_topic(broker, name: str, partitions: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


@pytest.mark.parametrize("client", ["java", "confluent"])
def test_a_static_member_restarts_into_its_own_partitions(tmp_path, client):
    """A static member that closes (a temporary leave, epoch -2) and comes back under the same
    instance id within the session gets its partitions again; the other member is not disturbed."""
    # its own broker: the member must be back within the session, so give it a long one
    props = {**BROKER, "group.consumer.session.timeout.ms": "30000"}
    with EmbeddedBroker(props, data_dir=str(tmp_path / "broker")) as broker:
        topic, group = new_topic(broker, 6), unique("static")

        def start(name, instance):
            if client == "java":
                return java4_member(peers.require(peers.java4_classpath(), "the Java client 4.x"), broker, topic,
                                    group, name, tmp_path, instance=instance)
            return confluent_member(broker, topic, group, name, tmp_path, instance=instance)

        a, b = start("static-a", "instance-a"), start("static-b", "instance-b")
        everyone = [a, b]
        try:
            wait_until(lambda: even([a, b], 6), "two static members to share six partitions", everyone)
            produced = produce(broker, topic, "before", count=30, partitions=6)
            expect_each_once(everyone, produced)
            held_b, assignments_of_a = list(b.assignment), len(a.assignments)
            b.close()
            produced |= produce(broker, topic, "away", count=30, partitions=6)
            b2 = start("static-b-again", "instance-b")
            everyone.append(b2)
            wait_until(lambda: b2.assignment, "the static member to come back", everyone[::2])
            assert sorted(b2.assignment) == sorted(held_b)
            produced |= produce(broker, topic, "back", count=30, partitions=6)
            expect_each_once(everyone, produced)
            # the partitions waited for their member: nobody else read what was written while it was away
            assert {v for _, _, v in b2.records if v.startswith("away")} == \
                {v for v in produced if v.startswith("away") and int(v.split("-")[1]) % 6 in held_b}
            assert len(a.assignments) == assignments_of_a, "the other member was rebalanced"
        finally:
            for m in everyone:
                m.stop()


def test_members_carry_on_across_a_broker_restart(tmp_path, java4):
    """The group's members, epochs and assignments are reloaded from __consumer_offsets: after a
    restart the members heartbeat on with the epochs they had, keep their partitions (no new
    assignment reaches them) and no record is lost or read twice past a commit."""
    props = {**BROKER, "group.consumer.session.timeout.ms": "30000"}
    with EmbeddedBroker(props, data_dir=str(tmp_path / "broker")) as broker:
        topic, group = new_topic(broker, 6), unique("restart")
        a = java4_member(java4, broker, topic, group, "java-a", tmp_path)
        b = confluent_member(broker, topic, group, "confluent-b", tmp_path)
        everyone = [a, b]
        try:
            wait_until(lambda: even(everyone, 6), "two members to share six partitions", everyone)
            produced = produce(broker, topic, "before", count=30, partitions=6)
            expect_each_once(everyone, produced)
            before = {m.name: (list(m.assignment), len(m.assignments)) for m in everyone}
            epochs = member_epochs(broker, group)
            assert set(epochs) == {"java-a", "confluent-b"} and min(epochs.values()) > 0
            broker.restart()
            produced |= produce(broker, topic, "after", count=30, partitions=6)
            expect_each_once(everyone, produced)
            assert {m.name: (list(m.assignment), len(m.assignments)) for m in everyone} == before
            assert member_epochs(broker, group) == epochs
        finally:
            for m in everyone:
                m.stop()


def member_epochs(broker, group: str) -> dict[str, int]:
    """ConsumerGroupDescribe's member epochs by client id."""
    from kafka_compat.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from wire import WireClient

    host, port = broker.bootstrap.split(":")
    client = WireClient(host, int(port))
    try:
        (described,) = client.call(69, 0, ConsumerGroupDescribeRequest(group_ids=[group])).groups
    finally:
        client.close()
    assert described.error_code == 0, described
    return {m.client_id: m.member_epoch for m in described.members}


def test_added_partitions_reach_members_and_the_range_assignor_they_asked_for(broker, java4, tmp_path):
    """Partitions added while the group runs are assigned without a restart, by the server-side
    assignor the members name (group.remote.assignor=range: each member a contiguous range)."""
    from confluent_kafka.admin import AdminClient, NewPartitions
    topic, group = new_topic(broker, 2), unique("grow")
    a = java4_member(java4, broker, topic, group, "java-range", tmp_path, assignor="server:range")
    b = confluent_member(broker, topic, group, "confluent-range", tmp_path, assignor="server:range")
    everyone = [a, b]
    try:
        wait_until(lambda: even(everyone, 2), "two members to share two partitions", everyone)
        produced = produce(broker, topic, "two", count=10, partitions=2)
        expect_each_once(everyone, produced)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_partitions([NewPartitions(topic, 6)])[topic].result(30)
        wait_until(lambda: even(everyone, 6), "the four new partitions to be assigned", everyone)
        for m in everyone:
            assert m.assignment == list(range(m.assignment[0], m.assignment[0] + 3)), (m.name, m.assignment)
        produced |= produce(broker, topic, "six", count=60, partitions=6)
        expect_each_once(everyone, produced)
    finally:
        for m in everyone:
            m.stop()
