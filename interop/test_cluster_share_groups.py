"""Share groups (KIP-932) on the three-broker cluster: the group's coordinator is one broker, its share
partitions live on the leaders of the topic's partitions, spread over all three, and their state at the
share coordinator: the leader of the share partition's `__share_group_state` partition. Three
KafkaShareConsumers (Java client 4.x) read a six-partition RF3 topic written before they started (the
group set to earliest through the GROUP config resource, which reaches every broker through ZooKeeper):
every record is delivered once, and acknowledgements reach the leaders that hold the records.

Then the faults: the SIGKILL of a share partition's leader, and separately of its share coordinator's
broker. The new leader reads the share partition's state from the coordinator (the new coordinator
loads it from its replica of `__share_group_state`): no acknowledgement kept before the kill is lost,
so a record comes back only if it was not acknowledged, and every record is accepted exactly once."""
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
from test_share_groups import BROKER, LOCK_MS, deliveries, set_group_config, share_member, wire  # noqa: E402

from kafka_compat.group.coordinator_records import partition_for as group_partition  # noqa: E402
from kafka_compat.protocol.errors import ErrorCode  # noqa: E402
from kafka_compat.protocol.messages.find_coordinator import FindCoordinatorRequest  # noqa: E402
from kafka_compat.protocol.messages.metadata import MetadataRequest  # noqa: E402
from kafka_compat.protocol.messages.read_share_group_state import ReadShareGroupStateRequest  # noqa: E402
from kafka_compat.server.share.share_coordinator_shard import coordinator_key, partition_for  # noqa: E402

pytestmark = skip_without_cluster()
PARTITIONS = 6
OFFSETS, SHARE_STATE = "__consumer_offsets", "__share_group_state"


SETTINGS = {**{k: int(v) for k, v in BROKER.items()}, "share.coordinator.state.topic.num.partitions": 3}


@pytest.fixture(scope="module")
def cluster():
    c = new_cluster(**SETTINGS)
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


# ------------------------------------------------------------ the share coordinator through SIGKILLs
def find_coordinator(cluster, key_type: int, key: str, skip=()) -> int:
    """The coordinator a live broker names for ``key`` (FindCoordinator v6), once it names one."""
    def found():
        for i, b in enumerate(cluster.brokers):
            if i in skip:
                continue
            c = wire(b)
            try:
                answer = c.call(10, 6, FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]))
            finally:
                c.close()
            got = answer.coordinators[0]
            return got.node_id if got.error_code == ErrorCode.NONE and got.node_id not in skip else None
    return wait_until(lambda: (node := found()) is not None and (node,), f"a coordinator for {key}")[0]


def topic_id(cluster, topic: str) -> bytes:
    c = wire(cluster.brokers[0])
    try:
        answer = c.call(3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                               allow_auto_topic_creation=False))
    finally:
        c.close()
    return bytes(answer.topics[0].topic_id)


def events(members, kind: str) -> list[dict]:
    return [e for m in members for e in list(m.events) if e["event"] == kind]


def unconfirmed(members) -> set[str]:
    """Values a member accepted whose commit then failed (the kill took the answer): kept or not, the client
    cannot know, and Kafka's broker would not deliver a kept one again either."""
    out = set()
    for m in members:
        failed = [e for e in list(m.events) if e["event"] == "commit-failed"]
        for r in [e for e in list(m.events) if e["event"] == "record" and e["ack"] == "ACCEPT"]:
            if any(f["t"] >= r["t"] and f.get("p", r["p"]) == r["p"] for f in failed):
                out.add(r["v"])
    return out


def settled(members, values) -> bool:
    accepted = {e["v"] for e in events(members, "accepted")}
    return all(v in accepted for v in set(values) - unconfirmed(members))


def check_acknowledgements_kept(members, values) -> None:
    """Every value delivered; accepted exactly once (or its commit's answer lost with the killed broker);
    none delivered again after its acceptance was confirmed."""
    accepted = Counter(e["v"] for e in events(members, "accepted"))
    missing = set(values) - set(accepted)
    assert missing <= unconfirmed(members), f"never accepted: {sorted(missing)[:10]}"
    assert set(values) <= {r["v"] for r in deliveries(members)}
    twice = [v for v, n in accepted.items() if n > 1]
    assert twice == [], "accepted twice: " + "; ".join(
        f"{m.name} {e}" for m in members for e in list(m.events) if e.get("v") in twice[:3])
    first_accept = {}
    for e in events(members, "accepted"):
        first_accept.setdefault(e["v"], e["t"])
    again = [r for r in deliveries(members) if r["v"] in first_accept and r["t"] > first_accept[r["v"]]]
    assert again == [], f"delivered again after its acknowledgement was kept: {again[:5]}"


def placed(cluster, topic, tid, group, p) -> tuple[int, int, int]:
    """(leader of the share partition, its share coordinator, the group's coordinator) as ZooKeeper says."""
    return (cluster.leader(topic, p),
            cluster.leader(SHARE_STATE, partition_for(group, tid, p, SETTINGS["share.coordinator.state.topic.num.partitions"])),
            cluster.leader(OFFSETS, group_partition(group, SETTINGS["offsets.topic.num.partitions"])))


def pick_group(cluster, topic, tid, pick_victim):
    """A group id, a partition and the broker to kill, such that the kill hits what the test is about and not
    the group coordinator (share group membership is not kept in `__consumer_offsets` yet)."""
    find_coordinator(cluster, 0, "share-kill-warm")                      # both internal topics exist now
    find_coordinator(cluster, 2, coordinator_key("share-kill-warm", tid, 0))
    base = unique("share-kill")
    for n in range(100):
        group = f"{base}-{n}"
        for p in range(PARTITIONS):
            victim = pick_victim(p, *placed(cluster, topic, tid, group, p))
            if victim is not None:
                return group, p, victim
    raise AssertionError("no group id places the fault")


def run_through_a_kill(cluster, tmp_path, pick_victim) -> None:
    """Explicit members read the first records, ``pick_victim(partition, its leader, its share coordinator,
    the group coordinator)`` names the broker to SIGKILL (None: try another partition), more records are
    written after the kill; then every acknowledgement must have been kept."""
    java4 = peers.require(peers.java4_classpath(), "the Java client 4.x")
    from confluent_kafka import Producer

    topic = unique("share-kill")
    create_topic(cluster, topic, PARTITIONS, 3)
    tid = topic_id(cluster, topic)
    group, p, victim = pick_group(cluster, topic, tid, pick_victim)
    set_group_config(cluster.brokers[0], group, "share.auto.offset.reset", "earliest")
    time.sleep(1)       # the group config reaches the other brokers through ZooKeeper's notifications
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    before, after = [f"a-{i}" for i in range(300)], [f"b-{i}" for i in range(300)]
    for i, v in enumerate(before):
        producer.produce(topic, value=v.encode(), partition=i % PARTITIONS)
    assert producer.flush(WAIT) == 0
    boot = type("Bootstrap", (), {"bootstrap": cluster.bootstrap})
    members = [share_member(java4, boot, topic, group, f"{group}-m{i}", tmp_path, "explicit") for i in range(3)]
    try:
        wait_until(lambda: len(events(members, "accepted")) >= len(before) // 2, "half the records accepted", members)
        assert (cluster.leader(topic, p), find_coordinator(cluster, 2, coordinator_key(group, tid, p)),
                find_coordinator(cluster, 0, group)) == placed(cluster, topic, tid, group, p)
        cluster.kill(victim)
        print(f"killed broker {victim} at {time.time():.3f} (partition {p})")
        for i, v in enumerate(after):
            producer.produce(topic, value=v.encode(), partition=i % PARTITIONS)
        assert producer.flush(WAIT) == 0
        wait_until(lambda: settled(members, before + after), "every record accepted", members)
        time.sleep(LOCK_MS / 1000 + 1)      # a lost acknowledgement would bring records back now
        check_acknowledgements_kept(members, before + after)
    finally:
        for m in members:
            m.close()


def test_acknowledgements_survive_the_sigkill_of_the_share_partition_leader(tmp_path):
    with new_cluster(**SETTINGS) as cluster:
        run_through_a_kill(cluster, tmp_path, lambda p, leader, coordinator, group:
                           leader if leader not in (coordinator, group) else None)


def test_acknowledgements_survive_the_sigkill_of_the_share_coordinator(tmp_path):
    with new_cluster(**SETTINGS) as cluster:
        run_through_a_kill(cluster, tmp_path, lambda p, leader, coordinator, group:
                           coordinator if coordinator not in (leader, group) else None)


def test_share_state_rpcs_at_a_broker_that_is_not_the_coordinator(cluster):
    """A share-state RPC at a broker not leading the key's `__share_group_state` partition: NOT_COORDINATOR."""
    topic, group = unique("share-nc"), unique("share-nc")
    create_topic(cluster, topic, 1, 3)
    tid = topic_id(cluster, topic)
    coordinator = find_coordinator(cluster, 2, coordinator_key(group, tid, 0))
    other = next(i for i in range(len(cluster.brokers)) if i != coordinator)
    R = ReadShareGroupStateRequest

    def read_at(broker: int) -> int:
        c = wire(cluster.brokers[broker])
        try:
            answer = c.call(84, 0, R(group_id=group, topics=[R.ReadStateData(topic_id=tid, partitions=[
                R.PartitionData(partition=0, leader_epoch=0)])]))
        finally:
            c.close()
        return answer.results[0].partitions[0].error_code
    assert read_at(other) == ErrorCode.NOT_COORDINATOR
    assert read_at(coordinator) == ErrorCode.INVALID_REQUEST, "never initialized"
