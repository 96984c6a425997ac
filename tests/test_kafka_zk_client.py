"""KafkaZkClient against a real ZooKeeper server (EmbeddedZooKeeper): the znodes Kafka would find,
the controller election and its fencing, broker registration across sessions, producer-id blocks,
watches, and what the session listener reports when ZooKeeper dies, stalls or expires a session.

Most tests share one server, each in its own chroot; the fault tests get a server of their own.
"""
from __future__ import annotations

import json
import queue
import socket
import threading
import uuid

import pytest
from kazoo.client import KazooClient

from kafka_compat.endpoint import EndPoint, SecurityProtocol
from kafka_compat.leader_and_isr import LeaderAndIsr, LeaderIsrAndControllerEpoch
from kafka_compat.testing import EmbeddedZooKeeper, zookeeper, zookeeper_missing  # noqa: F401  (fixture)
from kafka_compat.zk import zk_data as zd
from kafka_compat.zk.kafka_zk_client import (
    BrokerRegistrationError,
    ControllerMovedError,
    KafkaZkClient,
    NodeExistsError,
    NoNodeError,
    ZkRequestTimeoutError,
)
from kafka_compat.zk.zk_data import TopicPartition

pytestmark = pytest.mark.skipif(zookeeper_missing() is not None, reason=str(zookeeper_missing()))

WAIT = 20.0


@pytest.fixture(scope="module")
def server():
    with EmbeddedZooKeeper() as zk:
        yield zk


@pytest.fixture(scope="module")
def raw(server):
    """A plain kazoo client on the server's root, to look at znodes as Kafka's tools would."""
    zk = KazooClient(server.address)
    zk.start()
    yield zk
    zk.stop()
    zk.close()


@pytest.fixture
def chroot():
    return f"/kafka-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def clients(server, chroot):
    """new(...) -> a started KafkaZkClient in this test's chroot, with the top-level paths in place."""
    made = []

    def new(session_timeout_ms: int = 10000, zk_server: EmbeddedZooKeeper | None = None) -> KafkaZkClient:
        target = zk_server or server
        client = KafkaZkClient(target.connect_string(chroot if zk_server is None else ""), session_timeout_ms)
        made.append(client)
        client.start()
        client.create_top_level_paths()
        return client

    yield new
    for client in made:
        client.close()


@pytest.fixture
def client(clients):
    return clients()


def broker_info(broker_id: int, port: int = 9092) -> zd.BrokerInfo:
    endpoint = EndPoint("PLAINTEXT", "127.0.0.1", port + broker_id, SecurityProtocol.PLAINTEXT)
    return zd.BrokerInfo(broker_id, [endpoint], rack="r1")


class StateLog:
    """The session states a client's listener reported, in order."""

    def __init__(self, client: KafkaZkClient):
        self.states: queue.Queue[str] = queue.Queue()
        client.add_state_listener(self.states.put)

    def expect(self, *expected: str) -> None:
        for state in expected:
            assert self.states.get(timeout=WAIT) == state

    def until(self, wanted: str) -> list[str]:
        """The states reported up to and including ``wanted`` (which must come within WAIT)."""
        seen = []
        while not seen or seen[-1] != wanted:
            seen.append(self.states.get(timeout=WAIT))
        return seen


def expire(server: EmbeddedZooKeeper, client: KafkaZkClient, states: StateLog) -> None:
    """End the client's session on the server and wait for kazoo to open a new one."""
    server.expire_session(client.zk.client_id)
    states.expect("SUSPENDED", "LOST", "CONNECTED")


# -- connecting, top-level paths, cluster id -----------------------------------------------------


def test_chroot_is_created_and_holds_the_layout(server, raw):
    chroot = f"/deep-{uuid.uuid4().hex[:8]}/kafka"
    with KafkaZkClient(f"{server.address}{chroot}", 6000) as client:
        client.create_top_level_paths()
        assert client.connected and client.session_id
    assert raw.exists(chroot) is not None
    for path in zd.PERSISTENT_ZK_PATHS:
        data, _ = raw.get(chroot + path)
        assert data is None, path                 # created without data, as Kafka's makeSurePersistentPathExists
    assert raw.exists("/brokers") is None         # nothing outside the chroot


def test_from_config_reads_the_zookeeper_settings(server, chroot):
    client = KafkaZkClient.from_config({"zookeeper.connect": server.connect_string(chroot),
                                        "zookeeper.session.timeout.ms": 4000})
    assert (client.session_timeout_ms, client.connection_timeout_ms) == (4000, 4000)
    with client:
        assert client.zk._session_timeout == 4000          # what kazoo asked the server for
    with pytest.raises(ValueError, match="zookeeper.connect"):
        KafkaZkClient.from_config({})


def test_cluster_id_is_created_once(clients, raw, chroot):
    a, b = clients(), clients()
    assert a.create_or_get_cluster_id("first-id-aaaaaaaaaaaaa") == "first-id-aaaaaaaaaaaaa"
    assert b.create_or_get_cluster_id("other-id-bbbbbbbbbbbbb") == "first-id-aaaaaaaaaaaaa"
    assert json.loads(raw.get(chroot + "/cluster/id")[0]) == {"version": "1", "id": "first-id-aaaaaaaaaaaaa"}


# -- broker registration -------------------------------------------------------------------------


def test_broker_registration_is_a_checked_ephemeral(clients, raw, chroot):
    a, b = clients(), clients()
    info = broker_info(1)
    epoch = a.register_broker(info)
    data, stat = raw.get(chroot + "/brokers/ids/1")
    assert epoch == stat.czxid and stat.ephemeralOwner == a.session_id
    assert zd.BrokerInfo.decode(1, data).endpoints == info.endpoints
    assert json.loads(data)["port"] == 9093 and json.loads(data)["rack"] == "r1"
    # again from the same session (a retry whose answer was lost): success, same epoch
    assert a.register_broker(info) == epoch
    # another session with the same id: refused, the registration untouched
    with pytest.raises(BrokerRegistrationError, match="another broker"):
        b.register_broker(broker_info(1, port=7000))
    assert raw.get(chroot + "/brokers/ids/1") == (data, stat)
    b_epoch = b.register_broker(broker_info(2))
    assert b_epoch > epoch
    everyone = a.get_all_broker_and_epochs_in_cluster()
    assert {i: e.epoch for i, e in everyone.items()} == {1: epoch, 2: b_epoch}
    assert everyone[2].broker.endpoints == broker_info(2).endpoints
    assert a.get_sorted_broker_list() == [1, 2]
    b.close()                                     # its session ends, and its registration with it
    assert a.get_sorted_broker_list() == [1]
    assert a.get_broker(2) is None and a.get_broker(1).rack == "r1"


def test_registration_after_the_session_expired_gets_a_new_epoch(server, client, raw, chroot):
    states = StateLog(client)
    old_session = client.session_id
    epoch = client.register_broker(broker_info(3))
    expire(server, client, states)
    assert raw.exists(chroot + "/brokers/ids/3") is None          # gone with the old session
    assert client.session_id != old_session
    new_epoch = client.register_broker(broker_info(3))
    assert new_epoch > epoch
    assert raw.exists(chroot + "/brokers/ids/3").ephemeralOwner == client.session_id


def test_a_leftover_of_our_previous_session_is_replaced(client, server, raw, chroot):
    # ZooKeeper can still show an expired session's ephemeral to the new session for a moment (what Kafka's
    # KAFKA-7165 workaround handles). Stage it: another live session owns the znode, and the client is told
    # that session was the one it registered under before.
    other = KazooClient(server.address)
    other.start()
    try:
        other.create(chroot + "/brokers/ids/5", b"{}", ephemeral=True)
        client._registration_session_id = other.client_id[0]
        epoch = client.register_broker(broker_info(5))
        _, stat = raw.get(chroot + "/brokers/ids/5")
        assert stat.ephemeralOwner == client.session_id and stat.czxid == epoch
    finally:
        other.stop()
        other.close()


# -- controller election and fencing ------------------------------------------------------------


def race_for_controller(contenders: dict[int, KafkaZkClient]) -> dict[int, object]:
    """Every contender runs the election at the same moment; broker id -> (epoch, zkVersion) or the error."""
    barrier = threading.Barrier(len(contenders))
    results: dict[int, object] = {}

    def run(broker_id: int, client: KafkaZkClient) -> None:
        barrier.wait()
        try:
            results[broker_id] = client.register_controller_and_increment_controller_epoch(broker_id)
        except Exception as e:  # noqa: BLE001 - collected for the assertions
            results[broker_id] = e

    threads = [threading.Thread(target=run, args=item) for item in contenders.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    return results


def test_election_race_has_exactly_one_winner_and_epochs_grow(clients, raw, chroot):
    contenders = {i: clients() for i in range(1, 5)}
    seen_epochs = []
    for _round in range(3):
        results = race_for_controller(contenders)
        winners = {i: r for i, r in results.items() if isinstance(r, tuple)}
        assert len(winners) == 1, results
        assert all(isinstance(r, ControllerMovedError) for i, r in results.items() if i not in winners), results
        (winner, (epoch, epoch_zk_version)), = winners.items()
        data, stat = raw.get(chroot + "/controller")
        controller = json.loads(data)
        assert controller["brokerid"] == winner and controller["version"] == 2
        assert controller["kraftControllerEpoch"] == -1 and isinstance(controller["timestamp"], str)
        assert stat.ephemeralOwner == contenders[winner].session_id
        epoch_data, epoch_stat = raw.get(chroot + "/controller_epoch")
        assert (epoch_data, epoch_stat.version) == (str(epoch).encode(), epoch_zk_version)
        assert contenders[winner].get_controller_id() == winner
        seen_epochs.append(epoch)
        contenders.pop(winner).close()            # the controller dies: its /controller goes with its session
    assert seen_epochs == [1, 2, 3]               # the first controller's epoch is 1: /controller_epoch starts at 0


def test_a_replaced_controller_cannot_write(server, clients, raw, chroot):
    old, new = clients(), clients()
    old_states = StateLog(old)
    epoch, version = old.register_controller_and_increment_controller_epoch(1)
    tp = TopicPartition("fenced", 0)
    old.create_topic_assignment("fenced", zd.random_uuid(), {0: [1, 2]})
    created = old.create_topic_partition_states(
        {tp: LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(1, [1, 2]), epoch)}, version)
    assert created[tp] == LeaderAndIsr(1, 0, (1, 2), partition_epoch=0)
    old.propagate_isr_changes([tp])

    # the old controller's session expires (a long GC pause, a partition); broker 2 takes over
    expire(server, old, old_states)
    new_epoch, new_version = new.register_controller_and_increment_controller_epoch(2)
    assert new_epoch == epoch + 1 and new_version > version

    # every write the old controller still tries is refused, and nothing changes
    state_path = chroot + "/brokers/topics/fenced/partitions/0/state"
    before = raw.get(state_path)
    current = old.get_topic_partition_state(tp).leader_and_isr
    with pytest.raises(ControllerMovedError):
        old.update_leader_and_isr({tp: current.new_leader_and_isr(2, [2])}, epoch, version)
    with pytest.raises(ControllerMovedError):
        old.create_topic_partition_states({TopicPartition("fenced", 1): LeaderIsrAndControllerEpoch(
            LeaderAndIsr.initial(1, [1]), epoch)}, version)
    with pytest.raises(ControllerMovedError):
        old.set_topic_assignment("fenced", None, {0: [2, 1]}, version)
    with pytest.raises(ControllerMovedError):
        old.delete_topic_znode("fenced", version)
    with pytest.raises(ControllerMovedError):
        old.delete_isr_change_notifications(version)
    with pytest.raises(ControllerMovedError):
        old.register_controller_and_increment_controller_epoch(1)
    assert raw.get(state_path) == before
    assert raw.exists(chroot + "/brokers/topics/fenced/partitions/1") is None
    assert len(old.get_all_isr_change_notifications()) == 1

    # the new controller's writes go through
    result = new.update_leader_and_isr({tp: current.new_leader_and_isr(2, [2])}, new_epoch, new_version)
    assert result.finished[tp] == LeaderAndIsr(2, 1, (2,), partition_epoch=1) and not result.partitions_to_retry
    written = json.loads(raw.get(state_path)[0])
    assert written == {"version": 1, "leader": 2, "leader_epoch": 1, "controller_epoch": new_epoch, "isr": [2]}
    new.delete_isr_change_notifications(new_version)
    assert new.get_all_isr_change_notifications() == []


def test_partition_state_writes_are_conditional_on_the_partition_epoch(client):
    epoch, version = client.register_controller_and_increment_controller_epoch(1)
    a, b = TopicPartition("cond", 0), TopicPartition("cond", 1)
    client.create_topic_assignment("cond", None, {0: [1, 2], 1: [1, 2]})
    initial = {tp: LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(1, [1, 2]), epoch) for tp in (a, b)}
    assert client.create_topic_partition_states(initial, version) == {
        tp: LeaderAndIsr(1, 0, (1, 2)) for tp in (a, b)}
    again = client.create_topic_partition_states(initial, version)
    assert all(isinstance(r, NodeExistsError) for r in again.values())

    read = client.get_topic_partition_states([a, b])
    assert read[a] == initial[a] and read[b].leader_and_isr.partition_epoch == 0
    first = client.update_leader_and_isr({a: read[a].leader_and_isr.new_leader_and_isr(2, [2])}, epoch, version)
    assert first.finished[a].partition_epoch == 1
    # a stale write to a (read at partition epoch 0, now 1) is sent back for a retry; b's goes through
    stale = client.update_leader_and_isr({a: read[a].leader_and_isr.new_leader_and_isr(1, [1]),
                                          b: read[b].leader_and_isr.new_leader(2)}, epoch, version)
    assert stale.partitions_to_retry == [a] and list(stale.finished) == [b]
    assert stale.finished[b] == LeaderAndIsr(2, 1, (1, 2), partition_epoch=1)
    now = client.get_topic_partition_states([a, b])
    assert now[a].leader_and_isr == LeaderAndIsr(2, 1, (2,), partition_epoch=1)
    assert now[b].leader_and_isr == stale.finished[b] and now[b].controller_epoch == epoch
    assert client.get_topic_partition_state(TopicPartition("cond", 9)) is None


# -- topics, configs, deletion, notifications -----------------------------------------------------


def test_topic_assignment_and_deletion(client, raw, chroot):
    epoch, version = client.register_controller_and_increment_controller_epoch(1)
    topic_id = zd.random_uuid()
    client.create_topic_assignment("doomed", topic_id, {0: [1, 2], 1: [2, 1]})
    with pytest.raises(NodeExistsError):
        client.create_topic_assignment("doomed", None, {0: [1]})
    assert json.loads(raw.get(chroot + "/brokers/topics/doomed")[0]) == {
        "version": 3, "topic_id": zd.uuid_to_string(topic_id), "partitions": {"0": [1, 2], "1": [2, 1]},
        "adding_replicas": {}, "removing_replicas": {}}
    assert client.get_all_topics_in_cluster() == {"doomed"} and client.topic_exists("doomed")
    assert client.get_topic_assignment("doomed") == zd.TopicAssignment(
        topic_id, {0: zd.ReplicaAssignment((1, 2)), 1: zd.ReplicaAssignment((2, 1))})
    assert client.get_topic_partition_count("doomed") == 2
    client.create_topic_partition_states({TopicPartition("doomed", p): LeaderIsrAndControllerEpoch(
        LeaderAndIsr.initial(1, [1, 2]), epoch) for p in (0, 1)}, version)
    client.change_entity_config("topics", "doomed", {"retention.ms": "1000"})

    # a client asks for the deletion; asking twice is refused
    client.create_delete_topic_path("doomed")
    with pytest.raises(NodeExistsError):
        client.create_delete_topic_path("doomed")
    assert client.is_topic_marked_for_deletion("doomed") and client.get_topic_deletions() == ["doomed"]
    assert raw.get(chroot + "/admin/delete_topics/doomed")[0] is None

    # the controller removes everything, fenced
    client.delete_topic_znode("doomed", version)
    client.delete_topic_configs(["doomed"], version)
    client.delete_topic_deletions(["doomed"], version)
    assert raw.exists(chroot + "/brokers/topics/doomed") is None
    assert raw.exists(chroot + "/config/topics/doomed") is None
    assert client.get_topic_deletions() == [] and client.get_all_topics_in_cluster() == set()
    assert client.get_topic_assignment("doomed") is None


def test_topic_ids_are_given_to_old_topics(client):
    _, version = client.register_controller_and_increment_controller_epoch(1)
    client.create_topic_assignment("old", None, {0: [1]})
    old = client.get_replica_assignment_and_topic_ids_for_topics(["old", "missing"])
    assert list(old) == ["old"] and old["old"].topic_id is None
    updated = client.set_topic_ids(old, version)
    assert client.get_topic_assignment("old") == updated["old"] and len(updated["old"].topic_id) == 16


def test_topic_config_and_change_notifications(client, raw, chroot):
    assert client.get_entity_configs("topics", "cfg") == {}
    first = client.change_entity_config("topics", "cfg", {"min.insync.replicas": "2", "retention.ms": "60000"})
    assert json.loads(raw.get(chroot + "/config/topics/cfg")[0]) == {
        "version": 1, "config": {"min.insync.replicas": "2", "retention.ms": "60000"}}
    assert first == "config_change_0000000000"
    assert json.loads(raw.get(chroot + "/config/changes/" + first)[0]) == {"version": 2, "entity_path": "topics/cfg"}
    # the whole set is replaced: a key left out goes back to its default
    second = client.change_entity_config("topics", "cfg", {"retention.ms": "1"})
    assert second == "config_change_0000000001"
    assert client.get_entity_configs("topics", "cfg") == {"retention.ms": "1"}
    assert client.get_entities_configs("topics", ["cfg", "none"]) == {"cfg": {"retention.ms": "1"}, "none": {}}
    assert client.get_all_entities_with_config("topics") == ["cfg"]


def test_isr_change_and_log_dir_notifications(client):
    _, version = client.register_controller_and_increment_controller_epoch(1)
    client.propagate_isr_changes([TopicPartition("a", 0)])
    client.propagate_isr_changes([TopicPartition("a", 1), TopicPartition("b", 0)])
    seqs = client.get_all_isr_change_notifications()
    assert seqs == ["0000000000", "0000000001"]
    assert sorted(client.get_partitions_from_isr_change_notifications(seqs)) == [("a", 0), ("a", 1), ("b", 0)]
    client.delete_isr_change_notifications(version, seqs[:1])
    assert client.get_all_isr_change_notifications() == ["0000000001"]
    client.propagate_log_dir_event(3)
    events = client.get_all_log_dir_event_notifications()
    assert client.get_broker_ids_from_log_dir_events(events) == [3]
    client.delete_log_dir_event_notifications(version)
    assert client.get_all_log_dir_event_notifications() == []


def test_admin_election_and_reassignment_requests(client):
    _, version = client.register_controller_and_increment_controller_epoch(1)
    client.create_preferred_replica_election([TopicPartition("t", 0)])
    with pytest.raises(NodeExistsError):
        client.create_preferred_replica_election([TopicPartition("t", 1)])
    assert client.get_preferred_replica_election() == {("t", 0)}
    client.delete_preferred_replica_election(version)
    assert client.get_preferred_replica_election() == set()
    client.create_partition_reassignment({TopicPartition("t", 0): [3, 2]})
    assert client.reassign_partitions_in_progress()
    assert client.get_partition_reassignment() == {("t", 0): [3, 2]}
    client.delete_partition_reassignment(version)
    assert not client.reassign_partitions_in_progress()


# -- producer ids ---------------------------------------------------------------------------------


def test_producer_id_blocks_never_overlap(clients, raw, chroot):
    a, b = clients(), clients()
    blocks: list[zd.ProducerIdsBlock] = []
    lock = threading.Lock()

    def claim(client: KafkaZkClient, broker_id: int) -> None:
        for _ in range(25):
            block = client.allocate_producer_id_block(broker_id)
            with lock:
                blocks.append(block)

    threads = [threading.Thread(target=claim, args=(a, 1)), threading.Thread(target=claim, args=(b, 2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    starts = sorted(b.first_producer_id for b in blocks)
    assert starts == list(range(0, 50 * 1000, 1000))          # 50 blocks of 1000, no overlap, no gap
    assert all(b.size == 1000 for b in blocks)
    assert {b.assigned_broker_id for b in blocks} == {1, 2}
    last = json.loads(raw.get(chroot + "/latest_producer_id_block")[0])
    assert last == {"version": 1, "broker": last["broker"], "block_start": "49000", "block_end": "49999"}


def test_the_first_producer_id_block(client, raw, chroot):
    assert client.allocate_producer_id_block(4) == (4, 0, 1000)
    assert json.loads(raw.get(chroot + "/latest_producer_id_block")[0]) == {
        "version": 1, "broker": 4, "block_start": "0", "block_end": "999"}


# -- watches ------------------------------------------------------------------------------------


def test_watches_report_changes(clients):
    watcher, other = clients(), clients()
    children: queue.Queue = queue.Queue()
    controller: queue.Queue = queue.Queue()
    watch = watcher.watch_children(zd.BROKER_IDS_PATH, lambda path, names: children.put(sorted(names)))
    watcher.watch_data(zd.CONTROLLER_PATH, lambda path, data, stat: controller.put(data))
    assert children.get(timeout=WAIT) == [] and controller.get(timeout=WAIT) is None
    watcher.register_broker(broker_info(1))
    assert children.get(timeout=WAIT) == ["1"]
    other.register_broker(broker_info(2))
    assert children.get(timeout=WAIT) == ["1", "2"]
    other.register_controller_and_increment_controller_epoch(2)
    assert zd.decode_controller(controller.get(timeout=WAIT)).broker_id == 2
    other.close()
    assert children.get(timeout=WAIT) == ["1"]
    assert controller.get(timeout=WAIT) is None               # /controller went with other's session
    watch.cancel()
    watcher.register_broker(broker_info(3))
    watcher.register_controller_and_increment_controller_epoch(1)
    assert zd.decode_controller(controller.get(timeout=WAIT)).broker_id == 1
    assert children.empty()                                   # cancelled: broker 3 was not reported
    with pytest.raises(NoNodeError):
        watcher.watch_children("/no/such/path", lambda path, names: None)


# -- ZooKeeper failures as the session listener sees them -------------------------------------------


def test_requests_wait_out_a_zookeeper_crash(zookeeper, clients):  # noqa: F811 (the imported fixture)
    client = clients(session_timeout_ms=15000, zk_server=zookeeper)
    states = StateLog(client)
    session = client.session_id
    epoch = client.register_broker(broker_info(1))
    impatient = KafkaZkClient(zookeeper.connect_string(), 15000, request_timeout_ms=300).start()
    zookeeper.kill()
    states.expect("SUSPENDED")
    with pytest.raises(ZkRequestTimeoutError):
        impatient.get_sorted_broker_list()
    impatient.close()
    result: queue.Queue = queue.Queue()
    worker = threading.Thread(target=lambda: result.put(client.get_all_broker_and_epochs_in_cluster()))
    worker.start()                                # blocks: no server
    worker.join(0.5)
    assert worker.is_alive()
    zookeeper.start()
    states.expect("CONNECTED")
    got = result.get(timeout=WAIT)
    # the session outlived the crash, and so did the registration
    assert client.session_id == session and got[1].epoch == epoch


class Gate:
    """A TCP relay in front of ZooKeeper that a test can shut: while shut, every connection through it
    is closed and new ones are closed at once, so the client can reach the server only when the test says."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open = True
        self.pipes: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if not self.open:
                    client.close()
                    continue
                try:
                    server = socket.create_connection(self.upstream)
                except OSError:
                    client.close()
                    continue
                self.pipes += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def shut(self) -> None:
        with self.lock:
            self.open = False
            for s in self.pipes:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self.pipes.clear()

    def reopen(self) -> None:
        with self.lock:
            self.open = True

    def close(self) -> None:
        self.shut()
        self.listener.close()


def test_a_cut_longer_than_the_session_is_seen_as_lost(server, raw, chroot):
    # The client reaches the server through a gate. Cut off for longer than its session, it cannot
    # tell "slow" from "expired" until it is let back, and only then learns the session is gone.
    gate = Gate(("127.0.0.1", server.port))
    client = KafkaZkClient(f"127.0.0.1:{gate.port}{chroot}", 1000).start()
    try:
        client.create_top_level_paths()
        states = StateLog(client)
        session = client.session_id
        epoch = client.register_broker(broker_info(1))
        gone = threading.Event()
        assert raw.exists(f"{chroot}/brokers/ids/1", watch=lambda event: gone.set()) is not None
        gate.shut()
        states.expect("SUSPENDED")
        assert gone.wait(WAIT)                    # the server expired the session and its ephemeral node
        assert states.states.empty()              # kazoo cannot tell "slow" from "expired" on its own
        gate.reopen()
        states.expect("LOST", "CONNECTED")        # told so on reconnecting, kazoo opened a new session
        assert client.session_id != session
        assert client.get_broker(1) is None       # the ephemeral registration died with the session
        assert client.register_broker(broker_info(1)) > epoch
    finally:
        client.close()
        gate.close()
