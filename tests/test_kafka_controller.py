"""The ZooKeeper-mode controller (KafkaController) against a real ZooKeeper and fake brokers.

Every test runs its brokers in a chroot of one shared ZooKeeper server. The brokers are `Node`s
(tests/controller_cluster.py): a real ZooKeeper session with /brokers/ids/<id>, a socket server that
decodes the controllers' LeaderAndIsr / UpdateMetadata / StopReplica and answers them, and the node's
KafkaController. What the tests check is what Kafka's tools and brokers would see: the znodes' JSON
(read back with a plain kazoo client) and the control requests on the wire.
"""
from __future__ import annotations

import json
import threading

import pytest
from controller_cluster import (  # noqa: F401  (the fixtures)
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    cluster_fixture,
    hold,
    raw_fixture,
    server_fixture,
    wait_until,
)

from kafka_compat.controller.controller_context import PartitionAndReplica, ReplicaState
from kafka_compat.controller.kafka_controller import PREFERRED_ELECTION, UNCLEAN_ELECTION
from kafka_compat.protocol.errors import ErrorCode, KafkaError
from kafka_compat.protocol.messages.alter_partition import AlterPartitionRequest
from kafka_compat.testing import zookeeper_missing
from kafka_compat.zk import zk_data as zd
from kafka_compat.zk.zk_data import TopicPartition

pytestmark = pytest.mark.skipif(zookeeper_missing() is not None, reason=str(zookeeper_missing()))


def result(future, timeout: float = 20.0):
    return future.result(timeout)


# -- election, failover, fencing ------------------------------------------------------------------


def test_one_of_racing_brokers_wins_and_another_takes_over_when_its_session_ends(cluster):
    nodes = [cluster.start(i, with_controller=False) for i in (1, 2, 3)]
    barrier = threading.Barrier(3)

    def start(node):
        barrier.wait()
        node.start_controller()
    threads = [threading.Thread(target=start, args=(n,)) for n in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winner = cluster.active()
    assert cluster.znode("/controller")["brokerid"] == winner.broker_id
    assert cluster.znode("/controller")["version"] == 2
    assert cluster.get("/controller_epoch")[0] == b"1"
    wait_until(lambda: all(n.controller.active_controller_id == winner.broker_id for n in nodes),
               what="every broker to know the controller")
    assert sum(n.controller.is_active for n in nodes) == 1

    cluster.kill(winner.broker_id)
    successor = wait_until(lambda: next((n for n in cluster.nodes.values() if n.controller.is_active), None),
                           what="a new controller")
    assert successor.broker_id != winner.broker_id
    assert cluster.znode("/controller")["brokerid"] == successor.broker_id
    assert cluster.get("/controller_epoch")[0] == b"2"
    assert successor.controller.epoch == 2
    # the new controller tells the survivors, with its epoch, that the old one is gone
    for n in cluster.nodes.values():
        update = wait_until(lambda n=n: n.fake.requests(UPDATE_METADATA, controller_epoch=2), what="UpdateMetadata")
        assert sorted(b.id for b in update[0].body.live_brokers) == sorted(cluster.nodes)
        assert update[0].body.controller_id == successor.broker_id


def test_a_deposed_controller_cannot_write(cluster):
    """Broker 1 is the controller; its event thread is held while /controller is removed and broker 2
    takes over. The AlterPartition that broker 1 then processes fails on the epoch check."""
    first = cluster.start(1)
    assert cluster.active() is first
    second = cluster.start(2)
    cluster.create_topic("t", {0: [1, 2]})
    cluster.wait_state("t", 0, leader=1, isr=[1, 2])
    gate = hold(first.controller)
    shrink = AlterPartitionRequest(broker_id=1, broker_epoch=first.broker_epoch, topics=[
        AlterPartitionRequest.TopicData(topic_name="t", partitions=[AlterPartitionRequest.PartitionData(
            partition_index=0, leader_epoch=0, new_isr=[1], partition_epoch=0)])])
    answer = first.controller.alter_partition(shrink, 1)
    cluster.raw.delete(cluster.chroot + "/controller")
    wait_until(lambda: second.controller.is_active, what="broker 2 to take over")
    assert cluster.get("/controller_epoch")[0] == b"2"
    gate.set()
    with pytest.raises(KafkaError) as e:
        result(answer)
    assert e.value.error_code == ErrorCode.NOT_CONTROLLER
    wait_until(lambda: not first.controller.is_active, what="broker 1 to resign")
    assert first.controller.active_controller_id == 2
    state, stat = cluster.get(zd.topic_partition_state_path("t", 0))
    assert json.loads(state)["isr"] == [1, 2] and stat.version == 0


# -- topics -----------------------------------------------------------------------------------


def test_a_new_topic_gets_leaders_isrs_and_the_brokers_hear_of_it(cluster):
    nodes = [cluster.start(i) for i in (1, 2, 3)]
    controller = cluster.active()
    topic_id = cluster.create_topic("orders", {0: [1, 2], 1: [2, 3], 2: [3, 1]})
    for p, leader, isr in ((0, 1, [1, 2]), (1, 2, [2, 3]), (2, 3, [3, 1])):
        state = cluster.wait_state("orders", p)
        assert state == {"version": 1, "leader": leader, "leader_epoch": 0,
                         "controller_epoch": controller.controller.epoch, "isr": isr}
        assert cluster.get(zd.topic_partition_path("orders", p))[0] in (b"", None)
    for node in nodes:
        for p in range(3):
            replicas = {0: [1, 2], 1: [2, 3], 2: [3, 1]}[p]
            if node.broker_id not in replicas:
                continue
            states = wait_until(lambda n=node, p=p: n.fake.leader_and_isr_states("orders", p), what="LeaderAndIsr")
            assert states[0].is_new and states[0].replicas == replicas and states[0].leader == replicas[0]
        lisr = node.fake.requests(LEADER_AND_ISR)[-1]
        assert lisr.api_version == 7 and lisr.body.broker_epoch == node.broker_epoch
        assert {t.topic_id for t in lisr.body.topic_states} == {topic_id}
        assert {b.broker_id for b in lisr.body.live_leaders} <= {1, 2, 3}
        for p in range(3):
            meta = wait_until(lambda n=node, p=p: n.fake.metadata_states("orders", p), what="UpdateMetadata")
            assert meta[-1].leader == {0: 1, 1: 2, 2: 3}[p] and meta[-1].offline_replicas == []
        assert node.fake.requests(UPDATE_METADATA)[-1].api_version == 8


def test_added_partitions_are_brought_online(cluster):
    cluster.start(1)
    cluster.start(2)
    cluster.active()
    topic_id = cluster.create_topic("grow", {0: [1, 2]})
    cluster.wait_state("grow", 0, leader=1)
    cluster.nodes[1].zk.set_topic_assignment("grow", topic_id, {0: [1, 2], 1: [2, 1], 2: [1, 2]})
    assert cluster.wait_state("grow", 1)["leader"] == 2
    assert cluster.wait_state("grow", 2)["isr"] == [1, 2]
    assert cluster.znode(zd.topic_path("grow"))["partitions"] == {"0": [1, 2], "1": [2, 1], "2": [1, 2]}


# -- failover and broker failures -----------------------------------------------------------------


def test_a_new_controller_sends_update_metadata_before_leader_and_isr(cluster):
    for i in (1, 2, 3):
        cluster.start(i)
    old = cluster.active()
    cluster.create_topic("t", {0: [1, 2, 3], 1: [2, 3, 1]})
    cluster.wait_state("t", 1, leader=2)
    cluster.kill(old.broker_id)
    new = wait_until(lambda: next((n for n in cluster.nodes.values() if n.controller.is_active), None))
    for node in cluster.nodes.values():
        wait_until(lambda n=node: n.fake.requests(LEADER_AND_ISR, controller_epoch=2), what="LeaderAndIsr")
        from_new = node.fake.requests(controller_epoch=2)
        assert from_new[0].api_key == UPDATE_METADATA
        assert sorted(b.id for b in from_new[0].body.live_brokers) == sorted(cluster.nodes)
        first_lisr = next(i for i, r in enumerate(from_new) if r.api_key == LEADER_AND_ISR)
        assert first_lisr > 0
        assert {r.body.controller_id for r in from_new} == {new.broker_id}


def test_when_a_leader_dies_the_first_live_isr_member_leads_and_the_dead_leave_the_isr(cluster):
    cluster.controlled_by(3, 1, 2)
    cluster.create_topic("t", {0: [1, 2, 3]})
    cluster.wait_state("t", 0, leader=1, isr=[1, 2, 3])
    cluster.kill(1)
    state = cluster.wait_state("t", 0, leader=2)
    # one write: the election already leaves the dead broker out of the ISR, so going offline changes nothing
    assert state == {"version": 1, "leader": 2, "leader_epoch": 1, "controller_epoch": 1, "isr": [2, 3]}
    for node in cluster.nodes.values():
        latest = wait_until(lambda n=node: [s for s in n.fake.leader_and_isr_states("t", 0) if s.leader_epoch == 1],
                            what="LeaderAndIsr with the new epoch")
        assert latest[-1].leader == 2 and latest[-1].isr == [2, 3] and latest[-1].replicas == [1, 2, 3]
        meta = wait_until(lambda n=node: [m for m in n.fake.metadata_states("t", 0) if m.offline_replicas],
                          what="UpdateMetadata with offline replicas")
        assert meta[-1].offline_replicas == [1]


def test_a_log_dir_failure_moves_leadership_off_the_broker_and_marks_its_replica_offline(cluster):
    """Kafka's LogDirEventNotification: the controller reads and deletes the notification, sends LeaderAndIsr
    for every replica of the broker; the replica answered KAFKA_STORAGE_ERROR goes offline (out of the ISR,
    StopReplica, offline in UpdateMetadata) and another ISR member leads. Its other replicas stay online."""
    controller = cluster.controlled_by(3, 1, 2)
    cluster.create_topic("t", {0: [1, 2, 3], 1: [2, 1, 3]})
    cluster.wait_state("t", 0, leader=1, isr=[1, 2, 3])
    cluster.wait_state("t", 1, leader=2, isr=[2, 1, 3])
    asked = len(cluster.nodes[1].fake.requests(LEADER_AND_ISR))
    cluster.nodes[1].fake.offline_partitions.add(("t", 0))      # the log dir holding t-0 failed
    cluster.nodes[1].zk.propagate_log_dir_event(1)
    state = cluster.wait_state("t", 0, leader=2)
    assert state["isr"] == [2, 3] and state["leader_epoch"] == 1
    assert cluster.state("t", 1)["leader"] == 2 and cluster.state("t", 1)["isr"] == [2, 1, 3]
    assert len(cluster.nodes[1].fake.requests(LEADER_AND_ISR)) > asked        # it was asked about every replica
    ctx = controller.context
    t0_on_1 = PartitionAndReplica(TopicPartition("t", 0), 1)
    wait_until(lambda: ctx.replica_states.get(t0_on_1) is ReplicaState.OFFLINE, what="the replica offline")
    assert ctx.replicas_on_offline_dirs[1] == {TopicPartition("t", 0)}
    assert ctx.replica_states[PartitionAndReplica(TopicPartition("t", 1), 1)] is ReplicaState.ONLINE
    assert not ctx.is_replica_online(1, TopicPartition("t", 0)) and ctx.is_replica_online(1, TopicPartition("t", 1))
    wait_until(lambda: [s for s in cluster.nodes[1].fake.stop_replicas("t", 0) if not s.delete_partition],
               what="StopReplica to broker 1")
    for node in cluster.nodes.values():
        meta = wait_until(lambda n=node: [m for m in n.fake.metadata_states("t", 0) if m.offline_replicas],
                          what="UpdateMetadata with the offline replica")
        assert meta[-1].offline_replicas == [1] and meta[-1].leader == 2
    assert cluster.raw.get_children(cluster.chroot + zd.LOG_DIR_EVENT_NOTIFICATION_PATH) == []


def test_the_isr_is_never_emptied_and_unclean_election_follows_the_topic_config(cluster):
    cluster.controlled_by(3, 1)
    cluster.create_topic("t", {0: [1, 2]})          # broker 2 is down: ISR [1]
    cluster.wait_state("t", 0, leader=1, isr=[1])
    cluster.start(2, with_controller=False)
    wait_until(lambda: cluster.nodes[2].fake.leader_and_isr_states("t", 0), what="LeaderAndIsr to broker 2")
    cluster.kill(1)
    # no live ISR member and unclean election off: no leader, and the last ISR member stays
    assert cluster.wait_state("t", 0, leader=-1) == {"version": 1, "leader": -1, "leader_epoch": 1,
                                                     "controller_epoch": 1, "isr": [1]}
    meta = wait_until(lambda: [m for m in cluster.nodes[2].fake.metadata_states("t", 0) if m.leader == -1])
    assert meta[-1].offline_replicas == [1]
    cluster.nodes[2].zk.change_entity_config("topics", "t", {"unclean.leader.election.enable": "true"})
    cluster.active().controller.enable_topic_unclean_leader_election("t")
    assert cluster.wait_state("t", 0, leader=2) == {"version": 1, "leader": 2, "leader_epoch": 2,
                                                    "controller_epoch": 1, "isr": [2], "leader_recovery_state": 1}
    lisr = wait_until(lambda: [s for s in cluster.nodes[2].fake.leader_and_isr_states("t", 0) if s.leader == 2])
    assert lisr[-1].leader_recovery_state == 1 and lisr[-1].isr == [2]


def test_the_broker_default_enables_unclean_election(cluster):
    cluster.controlled_by(3, 1, config={"unclean_leader_election_enable": True})
    cluster.create_topic("t", {0: [1, 2]})
    cluster.wait_state("t", 0, leader=1, isr=[1])
    cluster.start(2, with_controller=False)
    cluster.kill(1)
    assert cluster.wait_state("t", 0, leader=2)["isr"] == [2]


def test_a_returning_broker_gets_its_partitions_and_offline_ones_come_back(cluster):
    cluster.controlled_by(3, 1)
    cluster.create_topic("t", {0: [1]})
    cluster.wait_state("t", 0, leader=1)
    cluster.kill(1)
    cluster.wait_state("t", 0, leader=-1, isr=[1])
    back = cluster.start(1, with_controller=False)
    assert cluster.wait_state("t", 0, leader=1, isr=[1])["leader_epoch"] == 2
    meta = wait_until(lambda: back.fake.metadata_states("t", 0), what="the full metadata for the new broker")
    states = wait_until(lambda: [s for s in back.fake.leader_and_isr_states("t", 0) if s.leader == 1])
    assert states[-1].leader_epoch == 2 and meta[-1].partition_index == 0


def test_a_dead_follower_leaves_the_isr_in_a_new_leader_epoch(cluster):
    cluster.controlled_by(3, 1, 2)
    cluster.create_topic("t", {0: [1, 2, 3]})
    cluster.wait_state("t", 0, leader=1, isr=[1, 2, 3])
    cluster.nodes[3].controller.shutdown()
    cluster.start(4)                                # the controller moves to broker 4 ...
    wait_until(lambda: cluster.nodes[4].controller.is_active is False and cluster.nodes[4].controller.active_controller_id == 3)
    cluster.kill(3)                                 # ... when broker 3, a follower, dies
    assert cluster.wait_state("t", 0, isr=[1, 2]) == {"version": 1, "leader": 1, "leader_epoch": 1,
                                                      "controller_epoch": 2, "isr": [1, 2]}
    for survivor in (1, 2):
        states = wait_until(lambda b=survivor: [s for s in cluster.nodes[b].fake.leader_and_isr_states("t", 0)
                                                if s.leader_epoch == 1])
        assert states[-1].isr == [1, 2] and states[-1].leader == 1


# -- controlled shutdown ------------------------------------------------------------------------


def test_controlled_shutdown_moves_leadership_and_takes_the_broker_out_of_isrs(cluster):
    controller = cluster.controlled_by(3, 1, 2)
    one = cluster.nodes[1]
    cluster.create_topic("led", {0: [1, 2]})
    cluster.create_topic("followed", {0: [2, 1]})
    cluster.create_topic("alone", {0: [1]})
    cluster.wait_state("led", 0, leader=1, isr=[1, 2])
    cluster.wait_state("followed", 0, leader=2, isr=[2, 1])
    cluster.wait_state("alone", 0, leader=1)
    with pytest.raises(KafkaError) as e:
        result(controller.controlled_shutdown(1, one.broker_epoch - 1))
    assert e.value.error_code == ErrorCode.STALE_BROKER_EPOCH
    with pytest.raises(KafkaError) as e:
        result(controller.controlled_shutdown(9, -1))
    assert e.value.error_code == ErrorCode.BROKER_NOT_AVAILABLE
    remaining = result(controller.controlled_shutdown(1, one.broker_epoch))
    assert remaining == []                          # "alone" (replication factor 1) does not count
    assert cluster.state("led", 0) == {"version": 1, "leader": 2, "leader_epoch": 1, "controller_epoch": 1,
                                       "isr": [2]}
    assert cluster.state("followed", 0) == {"version": 1, "leader": 2, "leader_epoch": 1, "controller_epoch": 1,
                                            "isr": [2]}
    assert cluster.state("alone", 0)["leader"] == 1
    stops = wait_until(lambda: one.fake.stop_replicas("followed", 0), what="StopReplica for the followed partition")
    # (Kafka sends it twice: once for the shutdown, once as the replica goes offline; never with delete)
    assert {(s.delete_partition, s.leader_epoch) for s in stops} == {(False, 0)}
    assert one.fake.stop_replicas("led", 0) == []
    to_two = wait_until(lambda: [s for s in cluster.nodes[2].fake.leader_and_isr_states("led", 0) if s.leader == 2])
    assert to_two[-1].isr == [2]
    # the shutting-down broker is offline in the metadata from now on
    meta = wait_until(lambda: [m for m in cluster.nodes[2].fake.metadata_states("led", 0) if m.offline_replicas])
    assert meta[-1].offline_replicas == [1]


# -- AlterPartition -------------------------------------------------------------------------------


def _alter(node, topic, partition, leader_epoch, isr, partition_epoch, version=2, topic_id=None, broker_epoch=None,
           recovery=0):
    data = AlterPartitionRequest.PartitionData(partition_index=partition, leader_epoch=leader_epoch,
                                               leader_recovery_state=recovery, partition_epoch=partition_epoch)
    if version >= 3:
        data.new_isr_with_epochs = [AlterPartitionRequest.BrokerState(broker_id=b) for b in isr]
    else:
        data.new_isr = isr
    return AlterPartitionRequest(broker_id=node.broker_id,
                                 broker_epoch=node.broker_epoch if broker_epoch is None else broker_epoch,
                                 topics=[AlterPartitionRequest.TopicData(topic_name=topic, topic_id=topic_id,
                                                                         partitions=[data])])


def _partition_answer(response):
    assert response.error_code == ErrorCode.NONE
    [topic] = response.topics
    [partition] = topic.partitions
    return partition


def test_alter_partition_accepts_a_leaders_isr_change_and_rejects_stale_ones(cluster):
    controller = cluster.controlled_by(3, 1, 2)
    one = cluster.nodes[1]
    topic_id = cluster.create_topic("t", {0: [1, 2, 3]})
    cluster.wait_state("t", 0, leader=1, isr=[1, 2, 3])

    stale_broker = result(controller.alter_partition(_alter(one, "t", 0, 0, [1, 2], 0, 2, topic_id, broker_epoch=1), 2))
    assert stale_broker.error_code == ErrorCode.STALE_BROKER_EPOCH and stale_broker.topics == []

    shrunk = _partition_answer(result(controller.alter_partition(_alter(one, "t", 0, 0, [1, 2], 0, 2, topic_id), 2)))
    assert (shrunk.error_code, shrunk.leader_id, shrunk.leader_epoch, shrunk.isr, shrunk.partition_epoch) == (
        ErrorCode.NONE, 1, 0, [1, 2], 1)
    state, stat = cluster.get(zd.topic_partition_state_path("t", 0))
    assert json.loads(state) == {"version": 1, "leader": 1, "leader_epoch": 0, "controller_epoch": 1, "isr": [1, 2]}
    assert stat.version == 1
    for node in cluster.nodes.values():           # every broker hears of the new ISR
        wait_until(lambda n=node: [m for m in n.fake.metadata_states("t", 0) if m.isr == [1, 2] and m.zk_version == 1])

    again = _partition_answer(result(controller.alter_partition(_alter(one, "t", 0, 0, [1, 2], 0, 2, topic_id), 2)))
    assert (again.error_code, again.isr, again.partition_epoch) == (ErrorCode.NONE, [1, 2], 1)   # a retry: same answer

    def code(request, version=2):
        return _partition_answer(result(controller.alter_partition(request, version))).error_code
    assert code(_alter(one, "t", 0, 0, [1], 0, 2, topic_id)) == ErrorCode.INVALID_UPDATE_VERSION
    assert code(_alter(one, "t", 0, 1, [1], 1, 2, topic_id)) == ErrorCode.NOT_CONTROLLER   # a newer leader epoch
    assert code(_alter(one, "t", 0, 0, [1], 2, 2, topic_id)) == ErrorCode.NOT_CONTROLLER   # a newer partition epoch
    assert code(_alter(one, "t", 0, 0, [1, 2, 9], 1, 2, topic_id)) == ErrorCode.INELIGIBLE_REPLICA
    assert code(_alter(one, "t", 0, 0, [1, 2, 9], 1, 1), 1) == ErrorCode.OPERATION_NOT_ATTEMPTED
    assert code(_alter(one, "t", 0, 0, [1, 2], 1, 2, topic_id, recovery=1)) == ErrorCode.INVALID_REQUEST
    assert code(_alter(one, "nope", 0, 0, [1], 1, 1), 1) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert code(_alter(one, "t", 0, 0, [1, 2, 3], 1, 3, topic_id), 3) == ErrorCode.NONE        # v3: ISR with epochs
    unknown_id = result(controller.alter_partition(_alter(one, "t", 0, 0, [1], 2, 2, zd.random_uuid()), 2))
    assert unknown_id.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    # a leader change fences the old leader's requests
    cluster.kill(1)
    cluster.wait_state("t", 0, leader=2)
    assert code(_alter(cluster.nodes[2], "t", 0, 0, [2, 3], 2, 2, topic_id)) == ErrorCode.FENCED_LEADER_EPOCH
    assert cluster.state("t", 0)["isr"] == [2, 3]


def test_a_broker_that_is_not_the_controller_answers_not_controller(cluster):
    cluster.start(3)
    cluster.active()
    other = cluster.start(1)
    wait_until(lambda: other.controller.active_controller_id == 3)
    answer = result(other.controller.alter_partition(_alter(other, "t", 0, 0, [1], 0), 2))
    assert answer.error_code == ErrorCode.NOT_CONTROLLER
    for future in (other.controller.controlled_shutdown(1, other.broker_epoch),
                   other.controller.list_partition_reassignments(None),
                   other.controller.alter_partition_reassignments({TopicPartition("t", 0): [1]})):
        with pytest.raises(KafkaError) as e:
            result(future)
        assert e.value.error_code == ErrorCode.NOT_CONTROLLER
    elected = result(other.controller.elect_leaders([TopicPartition("t", 0)], PREFERRED_ELECTION))
    assert elected[TopicPartition("t", 0)].error_code == ErrorCode.NOT_CONTROLLER


# -- reassignment ---------------------------------------------------------------------------------


def test_reassignment_grows_to_the_union_waits_for_the_isr_then_elects_and_shrinks(cluster):
    cluster.start(4)
    controller = cluster.active().controller
    for i in (1, 2, 3):
        cluster.start(i, with_controller=False)
    topic_id = cluster.create_topic("t", {0: [1, 2], 1: [2, 1]})
    cluster.wait_state("t", 0, leader=1, isr=[1, 2])
    tp = TopicPartition("t", 0)
    errors = result(controller.alter_partition_reassignments({tp: [2, 3], TopicPartition("t", 7): [1],
                                                              TopicPartition("t", 1): [2, 9]}))
    assert errors[tp] is None
    assert errors[TopicPartition("t", 7)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert errors[TopicPartition("t", 1)].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT     # 9 is not alive
    # phase A: the target replicas are added, the epoch bumped, the new replica started
    assert cluster.znode(zd.topic_path("t")) == {
        "version": 3, "topic_id": zd.uuid_to_string(topic_id), "partitions": {"0": [2, 3, 1], "1": [2, 1]},
        "adding_replicas": {"0": [3]}, "removing_replicas": {"0": [1]}}
    assert cluster.state("t", 0) == {"version": 1, "leader": 1, "leader_epoch": 1, "controller_epoch": 1,
                                     "isr": [1, 2]}
    new = wait_until(lambda: cluster.nodes[3].fake.leader_and_isr_states("t", 0))
    assert new[-1].is_new and new[-1].replicas == [2, 3, 1] and new[-1].adding_replicas == [3]
    listed = result(controller.list_partition_reassignments(None))
    assert listed == {tp: zd.ReplicaAssignment((2, 3, 1), (3,), (1,))}
    assert result(controller.list_partition_reassignments([TopicPartition("t", 1)])) == {}
    # the leader reports broker 3 caught up: phase B
    joined = _partition_answer(result(controller.alter_partition(
        _alter(cluster.nodes[1], "t", 0, 1, [1, 2, 3], 1, 2, topic_id), 2)))
    assert joined.error_code == ErrorCode.NONE
    final = cluster.wait_state("t", 0, leader=2)
    assert final["isr"] == [2, 3] and final["controller_epoch"] == 1
    assert cluster.znode(zd.topic_path("t")) == {
        "version": 3, "topic_id": zd.uuid_to_string(topic_id), "partitions": {"0": [2, 3], "1": [2, 1]},
        "adding_replicas": {}, "removing_replicas": {}}
    removed = wait_until(lambda: [s for s in cluster.nodes[1].fake.stop_replicas("t", 0) if s.delete_partition])
    assert removed
    assert result(controller.list_partition_reassignments(None)) == {}
    led = wait_until(lambda: [s for s in cluster.nodes[3].fake.leader_and_isr_states("t", 0) if s.leader == 2])
    assert led[-1].replicas == [2, 3] and led[-1].adding_replicas == [] and led[-1].removing_replicas == []
    # cancelling what is not being reassigned
    none = result(controller.alter_partition_reassignments({tp: None}))
    assert none[tp].error_code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_a_cancelled_reassignment_goes_back_to_the_original_replicas(cluster):
    controller = cluster.controlled_by(3, 1, 2)
    topic_id = cluster.create_topic("t", {0: [1, 2]})
    cluster.wait_state("t", 0, leader=1)
    tp = TopicPartition("t", 0)
    assert result(controller.alter_partition_reassignments({tp: [1, 3]})) == {tp: None}
    assert cluster.znode(zd.topic_path("t"))["adding_replicas"] == {"0": [3]}
    assert result(controller.alter_partition_reassignments({tp: None})) == {tp: None}
    assert cluster.znode(zd.topic_path("t")) == {
        "version": 3, "topic_id": zd.uuid_to_string(topic_id), "partitions": {"0": [1, 2]},
        "adding_replicas": {}, "removing_replicas": {}}
    stopped = wait_until(lambda: [s for s in cluster.nodes[3].fake.stop_replicas("t", 0) if s.delete_partition])
    assert stopped
    assert result(controller.list_partition_reassignments(None)) == {}


def test_a_new_controller_resumes_a_reassignment(cluster):
    cluster.controlled_by(3, 1, 2)
    first = cluster.nodes[3]
    topic_id = cluster.create_topic("t", {0: [1, 2]})
    cluster.wait_state("t", 0, leader=1)
    tp = TopicPartition("t", 0)
    assert result(first.controller.alter_partition_reassignments({tp: [2, 3]})) == {tp: None}
    cluster.nodes[2].start_controller()
    cluster.kill(3)                                   # the controller dies mid-reassignment; broker 3 with it
    second = cluster.nodes[2].controller
    wait_until(lambda: second.is_active)
    assert result(second.list_partition_reassignments(None)) == {tp: zd.ReplicaAssignment((2, 3, 1), (3,), (1,))}
    cluster.start(3, with_controller=False)
    # the new controller bumped the leader epoch to resume, and again when broker 3 came back
    wait_until(lambda: [s for s in cluster.nodes[3].fake.leader_and_isr_states("t", 0) if s.is_new])
    state, stat = cluster.get(zd.topic_path("t") + "/partitions/0/state")
    epoch = json.loads(state)["leader_epoch"]
    answer = _partition_answer(result(second.alter_partition(_alter(cluster.nodes[1], "t", 0, epoch, [1, 2, 3],
                                                                    stat.version, 2, topic_id), 2)))
    assert answer.error_code == ErrorCode.NONE
    assert cluster.wait_state("t", 0, leader=2)["isr"] == [2, 3]
    assert cluster.znode(zd.topic_path("t"))["partitions"] == {"0": [2, 3]}


# -- preferred and unclean elections ----------------------------------------------------------------


def _move_leadership_away_from_1(cluster, topic_id):
    """Broker 1 dies and comes back; broker 2 leads and lets it back into the ISR."""
    cluster.kill(1)
    cluster.wait_state("t", 0, leader=2, isr=[2])
    back = cluster.start(1, with_controller=False)
    wait_until(lambda: back.fake.leader_and_isr_states("t", 0), what="the controller to see broker 1 back")
    state, stat = cluster.get(zd.topic_partition_state_path("t", 0))
    epoch = json.loads(state)["leader_epoch"]
    answer = _partition_answer(result(cluster.active().controller.alter_partition(
        _alter(cluster.nodes[2], "t", 0, epoch, [2, 1], stat.version, 2, topic_id), 2)))
    assert answer.error_code == ErrorCode.NONE


def test_preferred_leader_election_on_request(cluster):
    controller = cluster.controlled_by(3, 1, 2)
    topic_id = cluster.create_topic("t", {0: [1, 2], 1: [2, 1]})
    cluster.wait_state("t", 0, leader=1)
    cluster.wait_state("t", 1, leader=2)
    _move_leadership_away_from_1(cluster, topic_id)
    elected = result(controller.elect_leaders([TopicPartition("t", 0), TopicPartition("t", 1),
                                               TopicPartition("t", 5)], PREFERRED_ELECTION))
    assert elected[TopicPartition("t", 0)] == 1
    assert elected[TopicPartition("t", 1)].error_code == ErrorCode.ELECTION_NOT_NEEDED
    assert elected[TopicPartition("t", 5)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert cluster.state("t", 0)["leader"] == 1 and cluster.state("t", 0)["isr"] == [2, 1]
    wait_until(lambda: [s for s in cluster.nodes[1].fake.leader_and_isr_states("t", 0) if s.leader == 1
                        and s.leader_epoch == cluster.state("t", 0)["leader_epoch"]])


def test_preferred_election_is_refused_when_the_preferred_replica_is_out_of_the_isr(cluster):
    controller = cluster.controlled_by(3, 1, 2)
    cluster.create_topic("t", {0: [1, 2]})
    cluster.wait_state("t", 0, leader=1)
    cluster.kill(1)
    cluster.wait_state("t", 0, leader=2, isr=[2])
    cluster.start(1, with_controller=False)
    elected = result(controller.elect_leaders([TopicPartition("t", 0)], PREFERRED_ELECTION))
    assert elected[TopicPartition("t", 0)].error_code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert cluster.state("t", 0)["leader"] == 2


def test_an_unclean_election_on_request(cluster):
    controller = cluster.controlled_by(3, 1)
    cluster.create_topic("t", {0: [1, 2]})
    cluster.wait_state("t", 0, leader=1, isr=[1])
    cluster.start(2, with_controller=False)
    cluster.kill(1)
    cluster.wait_state("t", 0, leader=-1)
    elected = result(controller.elect_leaders([TopicPartition("t", 0)], UNCLEAN_ELECTION))
    assert elected == {TopicPartition("t", 0): 2}
    assert cluster.state("t", 0)["isr"] == [2] and cluster.state("t", 0)["leader_recovery_state"] == 1


def test_the_automatic_rebalance_moves_leadership_back_to_preferred_replicas(cluster):
    cluster.controlled_by(3, 1, 2, config={"auto_leader_rebalance_enable": True,
                                           "leader_imbalance_check_interval_seconds": 1}, first_rebalance_delay_s=0.1)
    topic_id = cluster.create_topic("t", {0: [1, 2]})
    cluster.wait_state("t", 0, leader=1)
    _move_leadership_away_from_1(cluster, topic_id)
    wait_until(lambda: cluster.state("t", 0)["leader"] == 1, what="the rebalance to move leadership back")


# -- topic deletion -------------------------------------------------------------------------------


def test_topic_deletion_stops_and_deletes_every_replica_then_removes_the_znodes(cluster):
    cluster.controlled_by(3, 1, 2)
    cluster.create_topic("doomed", {0: [1, 2], 1: [2, 3]})
    cluster.nodes[1].zk.change_entity_config("topics", "doomed", {"retention.ms": "1000"})
    cluster.create_topic("kept", {0: [1, 2]})
    cluster.wait_state("doomed", 1, leader=2)
    cluster.wait_state("kept", 0, leader=1)
    cluster.nodes[1].zk.create_delete_topic_path("doomed")
    # the topic znode first, then its configs, then the deletion request
    wait_until(lambda: not cluster.exists("/admin/delete_topics/doomed"), what="the deletion to finish")
    assert not cluster.exists(zd.topic_path("doomed")) and not cluster.exists("/config/topics/doomed")
    assert cluster.exists(zd.topic_path("kept")) and cluster.exists("/config/topics/kept")
    for broker, partitions in ((1, [0]), (2, [0, 1]), (3, [1])):
        fake = cluster.nodes[broker].fake
        for p in partitions:
            stops = fake.stop_replicas("doomed", p)
            # first without delete, then with; the leader epoch is -2 while the topic is being deleted
            assert [(s.delete_partition, s.leader_epoch) for s in stops][-2:] == [(False, -2), (True, -2)]
        deleting = [m for p in (0, 1) for m in fake.metadata_states("doomed", p)]
        assert deleting and deleting[-1].leader == -2
        assert fake.requests(STOP_REPLICA)[-1].api_version == 4


def test_deleting_a_topic_with_a_dead_replica_waits_for_the_broker_to_come_back(cluster):
    cluster.controlled_by(3, 1, 2)
    cluster.create_topic("doomed", {0: [1, 2]})
    cluster.wait_state("doomed", 0, leader=1, isr=[1, 2])
    cluster.kill(2)
    cluster.wait_state("doomed", 0, isr=[1])
    cluster.nodes[1].zk.create_delete_topic_path("doomed")
    wait_until(lambda: [s for s in cluster.nodes[1].fake.stop_replicas("doomed", 0) if s.delete_partition],
               what="the live replica to be deleted")
    wait_until(lambda: [m for m in cluster.nodes[3].fake.metadata_states("doomed", 0) if m.leader == -2])
    assert cluster.exists(zd.topic_path("doomed")) and cluster.exists("/admin/delete_topics/doomed")
    back = cluster.start(2, with_controller=False)
    wait_until(lambda: not cluster.exists("/admin/delete_topics/doomed"), what="the deletion to resume and finish")
    assert not cluster.exists(zd.topic_path("doomed"))
    assert [s.delete_partition for s in back.fake.stop_replicas("doomed", 0)][-1] is True


def test_a_replica_that_fails_to_delete_is_retried(cluster):
    cluster.controlled_by(3, 1)
    one = cluster.nodes[1]
    one.fake.stop_replica_error = ErrorCode.KAFKA_STORAGE_ERROR
    cluster.create_topic("doomed", {0: [1]})
    cluster.wait_state("doomed", 0, leader=1)
    one.zk.create_delete_topic_path("doomed")
    wait_until(lambda: [s for s in one.fake.stop_replicas("doomed", 0) if s.delete_partition])
    assert cluster.exists(zd.topic_path("doomed"))
    one.fake.stop_replica_error = ErrorCode.NONE
    # broker 1 restarts: the controller tries again
    cluster.kill(1)
    cluster.start(1, with_controller=False)
    wait_until(lambda: not cluster.exists(zd.topic_path("doomed")), what="the retried deletion")


def test_deletion_of_an_unknown_topic_is_dropped_and_disabled_deletion_is_refused(cluster):
    cluster.start(1, config={"delete_topic_enable": False})
    cluster.active()
    cluster.create_topic("t", {0: [1]})
    cluster.wait_state("t", 0, leader=1)
    cluster.nodes[1].zk.create_delete_topic_path("ghost")
    cluster.nodes[1].zk.create_delete_topic_path("t")
    wait_until(lambda: not cluster.exists("/admin/delete_topics/ghost") and not cluster.exists("/admin/delete_topics/t"))
    assert cluster.exists(zd.topic_path("t"))


def test_a_controller_whose_session_expires_resigns_registers_again_and_follows_the_new_one(cluster, server):
    first = cluster.start(1)
    assert cluster.active() is first
    second = cluster.start(2)
    old_epoch = first.broker_epoch
    server.expire_session(first.zk.zk.client_id)
    wait_until(lambda: second.controller.is_active, what="broker 2 to take over")
    assert cluster.get("/controller_epoch")[0] == b"2"
    wait_until(lambda: first.broker_epoch > old_epoch and first.controller.active_controller_id == 2,
               what="broker 1 to register again and follow broker 2")
    assert not first.controller.is_active
    assert cluster.get("/brokers/ids/1")[1].czxid == first.broker_epoch
    update = wait_until(lambda: [r for r in first.fake.requests(UPDATE_METADATA, controller_epoch=2)
                                 if r.body.broker_epoch == first.broker_epoch], what="UpdateMetadata for the new epoch")
    assert sorted(b.id for b in update[-1].body.live_brokers) == [1, 2]


def test_a_bounced_broker_is_handled_as_a_failure_then_a_startup(cluster):
    controller = cluster.controlled_by(3, 1, 2)
    cluster.create_topic("t", {0: [1, 2]})
    cluster.wait_state("t", 0, leader=1, isr=[1, 2])
    gate = hold(controller)
    cluster.kill(1)
    back = cluster.start(1, with_controller=False)       # registered again before the controller looks
    gate.set()
    state = cluster.wait_state("t", 0, leader=2)
    assert state["isr"] == [2] and state["leader_epoch"] == 1
    told = wait_until(lambda: [r for r in back.fake.requests(LEADER_AND_ISR) if r.body.broker_epoch == back.broker_epoch])
    [partition] = [p for t in told[-1].body.topic_states for p in t.partition_states]
    assert (partition.leader, partition.isr, partition.replicas) == (2, [2], [1, 2])


def test_a_request_a_broker_does_not_answer_is_sent_again_and_nothing_overtakes_it(cluster):
    controller = cluster.controlled_by(3, 1)
    one = cluster.nodes[1]
    wait_until(lambda: one.fake.requests(UPDATE_METADATA), what="broker 1's welcome")
    before = len(one.fake.requests())
    one.fake.drop_next = 2
    cluster.create_topic("t", {0: [1]})
    cluster.wait_state("t", 0, leader=1)
    # the LeaderAndIsr is taken and dropped twice, then answered; the UpdateMetadata of the same event waits
    received = wait_until(lambda: len(one.fake.requests()) >= before + 4 and one.fake.requests()[before:])
    assert [r.api_key for r in received] == [LEADER_AND_ISR, LEADER_AND_ISR, LEADER_AND_ISR, UPDATE_METADATA]
    assert controller.is_active


# -- metrics ------------------------------------------------------------------------------------------

def test_controller_metrics_count_the_active_controller_offline_and_imbalanced_partitions(cluster):
    """Kafka's ActiveControllerCount (1 on the controller's broker, 0 on the others), OfflinePartitionsCount
    and PreferredReplicaImbalanceCount, kept by the controller after each event."""
    cluster.controlled_by(3, 1, 2, 4)
    standby = cluster.nodes[4].start_controller()
    active = cluster.active().controller
    cluster.create_topic("m", {0: [1], 1: [2, 1], 2: [3]})
    cluster.wait_state("m", 0, leader=1)
    cluster.wait_state("m", 1, leader=2)
    wait_until(lambda: (active.metrics.active_controller_count, standby.metrics.active_controller_count) == (1, 0),
               what="one active controller")
    assert (active.metrics.offline_partitions_count, active.metrics.preferred_replica_imbalance_count) == (0, 0)
    cluster.kill(2)                   # m-1 moves to broker 1 (not its preferred replica)
    cluster.wait_state("m", 1, leader=1)
    wait_until(lambda: active.metrics.preferred_replica_imbalance_count == 1, what="one imbalanced partition")
    cluster.kill(1)                   # m-0 and m-1 lose their last live replica: offline
    cluster.wait_state("m", 0, leader=-1)
    wait_until(lambda: active.metrics.offline_partitions_count == 2, what="two offline partitions")
    assert active.metrics.active_controller_count == 1
    assert (standby.metrics.active_controller_count, standby.metrics.offline_partitions_count) == (0, 0)
    active.shutdown()
    assert (active.metrics.active_controller_count, active.metrics.offline_partitions_count) == (0, 0)


def test_a_late_session_expiry_gives_up_a_controllership_the_new_session_won(cluster):
    """Kazoo may report LOST after an event of the new session won /controller. The Expire then empties the
    context; the controllership must go with it, or the next reelection adopts /controller with epoch 0 and
    every broker refuses its requests (seen in a fault campaign: no metadata for a restarted broker)."""
    first = cluster.start(1)
    assert cluster.active() is first
    second = cluster.start(2)
    cluster.create_topic("t", {0: [1, 2]})
    cluster.wait_state("t", 0, leader=1)
    first.controller._on_zk_state("LOST")           # what kazoo delivers, in this order, for an expiry
    first.controller._on_zk_state("CONNECTED")
    def elected_again():
        epoch = int(cluster.get("/controller_epoch")[0])
        return epoch >= 2 and next((n for n in (first, second) if n.controller.is_active
                                    and n.controller.epoch == epoch), None)
    active = wait_until(elected_again, what="a new election, won by a controller that knows its epoch")
    told = wait_until(lambda: second.fake.requests(UPDATE_METADATA, controller_epoch=active.controller.epoch),
                      what="UpdateMetadata of the active controller's epoch")
    assert sorted(b.id for b in told[-1].body.live_brokers) == [1, 2]
