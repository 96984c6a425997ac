"""The consumer group protocol (KIP-848) on a three-broker cluster: the group's coordinator follows
the leadership of its `__consumer_offsets` partition.

Three members (confluent-kafka and the Java client 4.2.1, `group.protocol=consumer`) share an RF3
topic of twelve partitions while a producer keeps writing. The broker hosting the group's
coordinator is SIGKILLed: the partition's new leader loads the group from its replica of the log
(members, epochs, target and current assignments) and the members heartbeat on there. The killed
broker is restarted and, once back in sync, made leader again by a preferred election: a second,
clean move back. After each move ConsumerGroupDescribe at the new coordinator shows the group as it
was (group epoch, assignment epoch, every member's epoch and partitions), and in the end every
acknowledged record was consumed, none twice past a commit.
"""
from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402
from cluster_support import WAIT, create_topic, new_cluster, skip_without_cluster, wait_for_full_isr  # noqa: E402
from test_consumer_protocol import confluent_member, even, java4_member  # noqa: E402
from test_groups_support import expect_each_once, unique, wait_until  # noqa: E402

from kafka_compat.group.coordinator_records import partition_for  # noqa: E402

pytestmark = skip_without_cluster()

OFFSETS = "__consumer_offsets"
OFFSETS_PARTITIONS = 3
# Consumer-protocol sessions long enough to ride out a coordinator's death (the controller notices it when
# its ZooKeeper session of 4 s expires); members heartbeat every 500 ms.
SETTINGS = {"offsets.topic.num.partitions": OFFSETS_PARTITIONS, "group.consumer.min.session.timeout.ms": 2000,
            "group.consumer.session.timeout.ms": 20000, "group.consumer.min.heartbeat.interval.ms": 100,
            "group.consumer.heartbeat.interval.ms": 500, "group.min.session.timeout.ms": 1000}


class Producing:
    """An idempotent producer writing distinct values round-robin over the partitions until stopped; only
    values the cluster acknowledged count (a leader's death makes it retry, never write twice)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, tag: str):
        from confluent_kafka import Producer
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
        self.topic, self.partitions, self.tag = topic, partitions, tag
        self.acked: set[str] = set()
        self.sent = 0
        self.failed: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked.add(msg.value().decode())
        else:
            self.failed.append(f"{msg.value().decode()}: {err}")

    def _run(self) -> None:
        while not self.stop.wait(0.01):
            i = self.sent
            self.producer.produce(self.topic, value=f"{self.tag}-{i}".encode(), partition=i % self.partitions,
                                  on_delivery=self._delivered)
            self.sent = i + 1
            self.producer.poll(0)
        self.producer.flush(WAIT)

    def finish(self) -> set[str]:
        self.stop.set()
        self.thread.join(WAIT + 10)
        assert not self.failed, f"the producer gave up on records: {self.failed[:5]}"
        return set(self.acked)


def coordinator_of(cluster, group: str) -> int:
    """The broker leading the group's `__consumer_offsets` partition, as ZooKeeper names it."""
    return cluster.wait_for_leader(OFFSETS, partition_for(group, OFFSETS_PARTITIONS), WAIT)


def describe(cluster, group: str):
    """ConsumerGroupDescribe at the group's coordinator, retried while the group moves or loads:
    (group epoch, assignment epoch, {client id: (member epoch, sorted partitions)})."""
    from kafka_compat.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest

    found = {}

    def described() -> bool:
        broker = cluster.brokers[coordinator_of(cluster, group)]
        try:
            (g,) = call(broker.port, ConsumerGroupDescribeRequest(group_ids=[group]), 0).groups
        except OSError:
            return False
        if g.error_code != 0:
            return False        # NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS: not there yet
        found["group"] = (g.group_epoch, g.assignment_epoch, {
            m.client_id: (m.member_epoch, sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions))
            for m in g.members})
        return True

    cluster.wait_until(described, WAIT, f"the coordinator of {group} to describe it")
    return found["group"]


def call(port: int, body, version: int):
    """One request to the broker on `port`, its decoded response body."""
    import socket

    from kafka_compat.protocol.frames import FrameReader, decode_response, encode_request
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(encode_request(body.API_KEY, version, body, 1))
        frames = FrameReader()
        while not (got := frames.frames()):
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("the broker closed the connection")
            frames.feed(data)
    return decode_response(body.API_KEY, version, got[0])[1]


def committed_since(members, producing: Producing, what: str) -> None:
    """Until every member has reported (so committed, with its member epoch, at the coordinator now in
    charge) records written from now on: all of them heartbeat and commit there."""
    mark = producing.sent

    def each_one() -> bool:
        for m in members:
            with m.lock:
                if not any(int(v.rsplit("-", 1)[1]) >= mark for _, _, v in m.records[-200:]):
                    return False
        return True
    wait_until(each_one, f"every member to commit at the coordinator {what}", members)


def reported(members) -> dict[str, tuple]:
    """What each member says it holds, in describe()'s shape."""
    return {m.name: sorted(m.assignment or []) for m in members}


def test_the_group_follows_its_coordinator_through_a_kill_and_back(tmp_path):
    java4 = peers.require(peers.java4_classpath(), "the Java client 4.x")
    with new_cluster(**SETTINGS) as cluster:
        topic, group = unique("kip848-cluster"), unique("kip848-move")
        create_topic(cluster, topic, 12, 3)
        producing = Producing(cluster.bootstrap, topic, 12, "live")
        members = [confluent_member(cluster, topic, group, "confluent-a", tmp_path),
                   java4_member(java4, cluster, topic, group, "java-b", tmp_path),
                   confluent_member(cluster, topic, group, "confluent-c", tmp_path)]
        try:
            wait_until(lambda: even(members, 12), "three members to share twelve partitions", members)
            before = describe(cluster, group)
            group_epoch, assignment_epoch, described = before
            assert group_epoch > 0 and assignment_epoch == group_epoch, before
            assert {n: p for n, (_, p) in described.items()} == reported(members), before

            first = coordinator_of(cluster, group)
            cluster.kill(first)
            moved_to = cluster.wait_for_leader(OFFSETS, partition_for(group, OFFSETS_PARTITIONS), WAIT,
                                               exclude={first})
            committed_since(members, producing, f"on broker {moved_to}")
            assert describe(cluster, group) == before, f"the group changed moving from {first} to {moved_to}"

            cluster.restart(first)
            wait_for_full_isr(cluster, OFFSETS, partition_for(group, OFFSETS_PARTITIONS))
            elect_preferred(cluster, first, partition_for(group, OFFSETS_PARTITIONS))
            committed_since(members, producing, f"back on broker {first}")
            assert describe(cluster, group) == before, f"the group changed moving back to {first}"
            assert reported(members) == {n: p for n, (_, p) in described.items()}, "a member was rebalanced"

            expect_each_once(members, producing.finish())
            assert all(m.alive for m in members)
        finally:
            producing.stop.set()
            for m in members:
                m.stop()


def elect_preferred(cluster, broker: int, partition: int) -> None:
    """Move the partition's leadership back to `broker` (its preferred replica) with ElectLeaders."""
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    replicas = json.loads(cluster.zk.get(f"/brokers/topics/{OFFSETS}")[0])["partitions"][str(partition)]
    assert replicas[0] == broker, f"broker {broker} is not the preferred replica of {OFFSETS}-{partition}: {replicas}"

    def elected() -> bool:
        if cluster.leader(OFFSETS, partition) == broker:
            return True
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        try:
            admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(OFFSETS, partition)]).result(30)
        except Exception:
            pass            # e.g. the restarted broker is not in the ISR yet: try again
        return cluster.leader(OFFSETS, partition) == broker

    cluster.wait_until(elected, WAIT, f"broker {broker} to lead {OFFSETS}-{partition} again")
