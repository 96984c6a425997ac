"""A three-broker ZooKeeper-mode cluster (EmbeddedCluster, a real ZooKeeper) under faults, checked by outcomes:

- the znodes hold Kafka's JSON, as Kafka's tools (and ducktape) read them;
- min.insync.replicas=2 with one replica left: acks=all is refused and nothing is written, acks=1 works;
- SIGTERM on a leader: a controlled shutdown moves leadership first and the producer sees no error;
- a follower that diverged (the old leader's unacknowledged tail) truncates and then holds the same bytes;
- a consumer group survives the death of its coordinator's broker without losing or re-reading past a commit;
- a Fetch v16 to a broker that does not lead the partition names the leader and its address (KIP-951).

The fault suite with many leader and controller kills is interop/test_cluster_faults.py.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest
from cluster_support import (
    WAIT,
    create_topic,
    new_cluster,
    read_all,
    segment_bytes,
    skip_without_cluster,
    wait_all_registered,
    wait_for_full_isr,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from wire import WireClient  # noqa: E402

from kafka_compat.protocol.errors import ErrorCode  # noqa: E402
from kafka_compat.protocol.messages.fetch import FetchRequest  # noqa: E402
from kafka_compat.zk.zk_data import uuid_from_string  # noqa: E402

pytestmark = skip_without_cluster()
ck = pytest.importorskip("confluent_kafka")


@pytest.fixture(scope="module")
def cluster():
    with new_cluster() as c:
        yield c


def restart_all(cluster) -> None:
    for i, b in enumerate(cluster.brokers):
        if not b.running:
            cluster.start_broker(i)
    wait_all_registered(cluster)


def test_znodes_hold_kafkas_json(cluster):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
    create_topic(cluster, "znodes", partitions=2, configs={"retention.ms": "3600000"})
    zk = cluster.zk
    topic = json.loads(zk.get("/brokers/topics/znodes")[0])
    assert topic["version"] == 3 and set(topic) >= {"partitions", "topic_id", "adding_replicas", "removing_replicas"}
    assert sorted(topic["partitions"]) == ["0", "1"] and all(sorted(r) == [0, 1, 2] for r in topic["partitions"].values())
    assert len(topic["topic_id"]) == 22 and topic["adding_replicas"] == topic["removing_replicas"] == {}
    controller = json.loads(zk.get("/controller")[0])
    assert controller["brokerid"] in (0, 1, 2) and controller["timestamp"].isdigit()
    controller_epoch = int(zk.get("/controller_epoch")[0])
    assert controller_epoch >= 1
    for p in (0, 1):
        state = json.loads(zk.get(f"/brokers/topics/znodes/partitions/{p}/state")[0])
        assert state["version"] == 1 and state["leader"] == topic["partitions"][str(p)][0]   # the preferred replica
        assert sorted(state["isr"]) == [0, 1, 2] and state["leader_epoch"] >= 0
        assert state["controller_epoch"] <= controller_epoch
    for i in range(3):
        broker = json.loads(zk.get(f"/brokers/ids/{i}")[0])
        port = cluster.brokers[i].port
        assert broker["version"] == 5 and broker["endpoints"] == [f"PLAINTEXT://127.0.0.1:{port}"]
        assert (broker["host"], broker["port"], broker["jmx_port"]) == ("127.0.0.1", port, -1)
        assert broker["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
        assert broker["timestamp"].isdigit() and "rack" not in broker
    cluster_id = json.loads(zk.get("/cluster/id")[0])
    assert cluster_id["version"] == "1" and len(cluster_id["id"]) == 22
    assert json.loads(zk.get("/config/topics/znodes")[0]) == {"version": 1, "config": {"retention.ms": "3600000"}}

    # a config change: the new overrides, then a sequential notification naming the topic
    before = set(zk.get_children("/config/changes"))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    change = ConfigResource(ConfigResource.Type.TOPIC, "znodes", incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([change])[change].result(WAIT)
    assert json.loads(zk.get("/config/topics/znodes")[0])["config"] == {"retention.ms": "7200000"}
    (notification,) = set(zk.get_children("/config/changes")) - before
    assert notification.startswith("config_change_") and len(notification) == len("config_change_") + 10
    assert json.loads(zk.get(f"/config/changes/{notification}")[0]) == {"version": 2, "entity_path": "topics/znodes"}

    # an idempotent producer's id comes from a block taken at /latest_producer_id_block
    p = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    p.produce("znodes", b"x", partition=0)
    assert p.flush(30) == 0
    block = json.loads(zk.get("/latest_producer_id_block")[0])
    assert block["version"] == 1 and block["broker"] in (0, 1, 2)
    assert int(block["block_end"]) - int(block["block_start"]) + 1 == 1000

    # deleting is a request at /admin/delete_topics/<t> that the controller carries out and removes
    admin.delete_topics(["znodes"])["znodes"].result(WAIT)
    cluster.wait_until(lambda: not zk.exists("/brokers/topics/znodes") and not zk.exists("/config/topics/znodes")
                       and zk.get_children("/admin/delete_topics") == [], WAIT, "the deletion to finish")


def test_a_fetch_from_a_broker_without_the_partition_names_its_leader(cluster):
    """KIP-951: the consumer's Fetch v16 to a broker that holds no replica answers NOT_LEADER_OR_FOLLOWER with
    the leader and epoch ZooKeeper holds (CurrentLeader, from that broker's metadata cache) and the leader's
    address (NodeEndpoints), so the consumer moves there without a metadata round trip."""
    create_topic(cluster, "current-leader", partitions=1, replication_factor=1)
    state = cluster.partition_state("current-leader", 0)
    leader = state["leader"]
    elsewhere = next(i for i in range(3) if i != leader)
    topic_id = uuid_from_string(json.loads(cluster.zk.get("/brokers/topics/current-leader")[0])["topic_id"])
    body = FetchRequest(max_wait_ms=0, min_bytes=0, topics=[FetchRequest.FetchTopic(topic_id=topic_id, partitions=[
        FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    client = WireClient("127.0.0.1", cluster.brokers[elsewhere].port)

    def known():        # once that broker's UpdateMetadata has brought the topic
        response = client.call(1, 16, body)
        return response if response.responses[0].partitions[0].error_code != ErrorCode.UNKNOWN_TOPIC_ID else None
    try:
        answer = cluster.wait_until(known, WAIT, "the topic in that broker's metadata")
    finally:
        client.close()
    part = answer.responses[0].partitions[0]
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (leader, state["leader_epoch"])
    assert [(n.node_id, n.host, n.port) for n in answer.node_endpoints] == \
        [(leader, "127.0.0.1", cluster.brokers[leader].port)]


def test_min_insync_replicas_with_one_replica_alive(cluster):
    from confluent_kafka import Producer
    create_topic(cluster, "minisr", partitions=1)
    leader = cluster.wait_for_leader("minisr", 0)
    others = [i for i in range(3) if i != leader]
    try:
        for i in others:
            cluster.kill(i)
        # the controller sees them gone (sessions expire) and shrinks the ISR to the leader
        cluster.wait_until(lambda: cluster.partition_state("minisr", 0)["isr"] == [leader], WAIT, "the ISR to shrink")

        def produce(acks: str) -> tuple:
            results = []
            p = Producer({"bootstrap.servers": cluster.brokers[leader].bootstrap, "acks": acks,
                          "enable.idempotence": False, "retries": 0, "message.timeout.ms": 10000})
            p.produce("minisr", b"x", partition=0, on_delivery=lambda e, m: results.append(e))
            p.flush(30)
            return results[0].code() if results[0] else None

        refused = produce("all")
        accepted = produce("1")
        low, high = _watermarks(cluster.brokers[leader].bootstrap, "minisr")
    finally:
        restart_all(cluster)
    assert refused == ck.KafkaError.NOT_ENOUGH_REPLICAS
    assert accepted is None                       # acks=1 is written...
    # ...and, under min.insync.replicas (Kafka 3.7+), not yet visible: the HW waits for the ISR to grow back
    wait_for_full_isr(cluster, "minisr", 0)
    got = read_all(cluster, "minisr", 1)
    assert [v for _, v in got[0]] == [b"x"] and (low, high) == (0, 0)


def _watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    finally:
        c.close()


def test_controlled_shutdown_moves_leadership_before_the_leader_stops(cluster):
    from confluent_kafka import Producer
    create_topic(cluster, "graceful", partitions=1)
    leader = cluster.wait_for_leader("graceful", 0)
    errors, acked, stop = [], [], threading.Event()
    # a broker going away is reported to error_cb as a transport event; only fatal ones count as errors
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                         "error_cb": lambda e: e.fatal() and errors.append(e)})

    def keep_producing():
        i = 0
        while not stop.is_set():
            producer.produce("graceful", b"%d" % i, partition=0,
                             on_delivery=lambda e, m: (errors if e else acked).append(e or m.offset()))
            producer.poll(0)
            i += 1
            time.sleep(0.005)

    thread = threading.Thread(target=keep_producing)
    thread.start()
    try:
        cluster.wait_until(lambda: len(acked) > 50, WAIT, "records to flow")
        assert cluster.stop(leader) == 0                     # SIGTERM: controlled shutdown, then exit
        moved_to = cluster.leader("graceful", 0)
        before = len(acked)
        cluster.wait_until(lambda: len(acked) > before + 50, WAIT, "records to flow to the new leader")
    finally:
        stop.set()
        thread.join()
        producer.flush(60)
        restart_all(cluster)
    assert moved_to not in (leader, -1)                      # leadership had moved when the process exited
    assert errors == []               # no failed delivery: retriable NOT_LEADER answers stay in the client
    got = read_all(cluster, "graceful", 1)
    assert sorted(o for o, _ in got[0]) == sorted(acked) == list(range(len(acked)))


@pytest.mark.parametrize("stopped", ["controller", "other"])
def test_a_controlled_shutdown_reaches_every_broker_before_the_leader_exits(cluster, stopped):
    """A leader SIGTERMed (the controller itself, or another broker) exits only once the other brokers have the
    UpdateMetadata naming its successor: a client asking any of them right after the exit is sent there (not
    to the broker that is gone, which librdkafka would wait on, drop, and re-query a second later). Nor may it
    leave the new leader's acks=all waiting on it (it fetches from its successor until it stops, and is proposed
    for the ISR): records flow at once."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    controller = json.loads(cluster.zk.get("/controller")[0])["brokerid"]
    leader = controller if stopped == "controller" else (controller + 1) % 3
    others = [b for b in range(3) if b != leader]
    topic = f"moved-{stopped}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[leader, *others]])])[topic].result(WAIT)
    wait_for_full_isr(cluster, topic, 0, 3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    try:
        assert cluster.wait_for_leader(topic, 0) == leader
        assert cluster.stop(leader) == 0
        named = {}
        for b in others:         # each remaining broker, asked alone, the moment the process has exited
            metadata = AdminClient({"bootstrap.servers": cluster.brokers[b].bootstrap}).list_topics(topic, timeout=30)
            named[b] = metadata.topics[topic].partitions[0].leader
        delivered = []
        for i in range(20):
            producer.produce(topic, b"%d" % i, partition=0, on_delivery=lambda e, m: delivered.append(e))
        assert producer.flush(30) == 0
    finally:
        restart_all(cluster)
    assert set(named.values()) <= set(others) and len(set(named.values())) == 1, named
    assert delivered == [None] * 20


def test_a_diverged_follower_truncates_and_then_holds_the_leaders_bytes(cluster):
    """The leader takes acks=1 records its paused follower never fetches, then dies; the follower becomes
    leader (it was in the ISR) and takes new records. The old leader comes back, finds its tail diverges
    (DivergingEpoch), truncates, and ends with the same bytes as the new leader."""
    from confluent_kafka import Producer
    create_topic(cluster, "diverge", partitions=1, replication_factor=2, configs={"min.insync.replicas": "1"})
    state = cluster.partition_state("diverge", 0)
    old, follower = state["leader"], [b for b in state["isr"] if b != state["leader"]][0]

    def produce(broker: int, values):
        p = Producer({"bootstrap.servers": cluster.brokers[broker].bootstrap, "acks": "1",
                      "enable.idempotence": False})
        for v in values:
            p.produce("diverge", v, partition=0)
        assert p.flush(30) == 0

    try:
        produce(old, [b"shared-%d" % i for i in range(20)])
        cluster.wait_until(lambda: _log_end(cluster, follower, "diverge") == 20, WAIT, "the follower to catch up")
        cluster.pause(follower)
        # the follower's last fetch waits at the leader for up to replica.fetch.wait.max.ms (500 ms) and would
        # carry the next records: let it be answered (empty) before writing what the follower must not get
        time.sleep(2)
        produce(old, [b"lost-%d" % i for i in range(7)])     # acks=1: only the old leader has these
        cluster.kill(old)
        cluster.resume(follower)
        new = cluster.wait_for_leader("diverge", 0, exclude={old})
        assert new == follower
        produce(new, [b"new-%d" % i for i in range(5)])
        cluster.start_broker(old)
        wait_for_full_isr(cluster, "diverge", 0, 2)
        cluster.wait_until(lambda: segment_bytes(cluster, old, "diverge", 0) ==
                           segment_bytes(cluster, new, "diverge", 0), WAIT, "the logs to agree")
    finally:
        for i in range(3):
            cluster.resume(i)
        restart_all(cluster)
    values = [v for _, v in read_all(cluster, "diverge", 1)[0]]
    assert values == [b"shared-%d" % i for i in range(20)] + [b"new-%d" % i for i in range(5)]


def _log_end(cluster, broker: int, topic: str) -> int:
    data = segment_bytes(cluster, broker, topic, 0)
    end, pos = 0, 0
    while pos + 12 <= len(data):
        base = int.from_bytes(data[pos:pos + 8], "big")
        length = int.from_bytes(data[pos + 8:pos + 12], "big")
        last_delta = int.from_bytes(data[pos + 23:pos + 27], "big")
        end = base + last_delta + 1
        pos += 12 + length
    return end


def test_a_consumer_group_survives_its_coordinators_broker_dying(cluster):
    """Every record consumed, nothing re-read at or below a committed offset, across a coordinator kill."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    create_topic(cluster, "grouped", partitions=3)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(600):
        p.produce("grouped", b"%d" % i, partition=i % 3)
    assert p.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "survivors", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    consumer.subscribe(["grouped"])
    seen: list[tuple[int, int]] = []
    committed: dict[int, int] = {}
    killed = None
    try:
        deadline = time.monotonic() + WAIT
        while len({o for o in seen}) < 600 and time.monotonic() < deadline:
            m = consumer.poll(1.0)
            if m is None or m.error():
                continue
            seen.append((m.partition(), m.offset()))
            if len(seen) % 20 == 0:
                consumer.commit(asynchronous=False)
                committed = {tp.partition: tp.offset for tp in consumer.committed(
                    [TopicPartition("grouped", q) for q in range(3)], timeout=30) if tp.offset >= 0}
            if killed is None and len(seen) >= 200 and committed:
                killed = _coordinator(cluster, "survivors")
                commits_at_kill = dict(committed)
                seen_at_kill = len(seen)
                cluster.kill(killed)
    finally:
        consumer.close()
        restart_all(cluster)
    assert killed is not None
    assert {(q, o) for q, o in seen} == {(i % 3, i // 3) for i in range(600)}       # nothing lost
    reread = [(q, o) for q, o in seen[seen_at_kill:] if o < commits_at_kill.get(q, 0)]
    assert reread == [], f"re-read below the commits {commits_at_kill}"


def _coordinator(cluster, group: str) -> int:
    """The group's coordinator as Kafka places it: the leader of its __consumer_offsets partition."""
    partitions = len(cluster.zk.get_children("/brokers/topics/__consumer_offsets/partitions"))
    h = 0
    for ch in group.encode():          # Java's String.hashCode
        h = (31 * h + ch) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return cluster.leader("__consumer_offsets", (h & 0x7FFFFFFF) % partitions)


def test_a_preferred_leader_election_moves_leadership_back(cluster):
    """ElectLeaders reaches the controller's broker, and its answer comes once the election is made."""
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient
    create_topic(cluster, "preferred", partitions=1)
    preferred = json.loads(cluster.zk.get("/brokers/topics/preferred")[0])["partitions"]["0"][0]
    assert cluster.leader("preferred", 0) == preferred
    try:
        assert cluster.stop(preferred) == 0                # controlled shutdown: another replica leads
        cluster.start_broker(preferred)
        wait_for_full_isr(cluster, "preferred", 0)
        moved_to = cluster.leader("preferred", 0)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        answer = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("preferred", 0)]).result(WAIT)
    finally:
        restart_all(cluster)
    assert moved_to != preferred
    assert [(tp.topic, tp.partition, error) for tp, error in answer.items()] == [("preferred", 0, None)]
    assert cluster.leader("preferred", 0) == preferred
