"""The table-driven state machines, in process and without sockets: every transition each one allows
and every one it refuses, against the tables of Kafka's sources (written out here, not imported).

- classic groups: ClassicGroupState.validPreviousStates (GroupMetadata.scala / ClassicGroupState.java);
- consumer groups (KIP-848): the state is derived from the epochs (ConsumerGroup.java);
- transactions: TransactionState.validPreviousStates (TransactionState.java, transaction.version 1);
- the controller: PartitionStateMachine.scala's and ReplicaStateMachine.scala's validPreviousStates,
  driven through the state machines with a ZooKeeper and a request batch that only record.
"""
from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from kafka_compat.controller.controller_context import (
    ControllerContext,
    PartitionAndReplica,
    PartitionState,
    ReplicaState,
)
from kafka_compat.controller.partition_state_machine import OFFLINE, PartitionStateMachine
from kafka_compat.controller.replica_state_machine import ReplicaStateMachine
from kafka_compat.group.classic.classic_group import ClassicGroup, GroupState
from kafka_compat.group.modern.consumer_group import ConsumerGroup, ConsumerGroupState
from kafka_compat.group.modern.consumer_group_member import ConsumerGroupMember, MemberState
from kafka_compat.leader_and_isr import LeaderAndIsr, LeaderIsrAndControllerEpoch
from kafka_compat.transaction.transaction_metadata import IllegalTransition, TransactionMetadata, TransactionState
from kafka_compat.zk.zk_data import ReplicaAssignment, TopicPartition

# -- classic groups -------------------------------------------------------------------------------

G = GroupState
CLASSIC_PREVIOUS = {
    G.EMPTY: {G.PREPARING_REBALANCE},
    G.PREPARING_REBALANCE: {G.STABLE, G.COMPLETING_REBALANCE, G.EMPTY},
    G.COMPLETING_REBALANCE: {G.PREPARING_REBALANCE},
    G.STABLE: {G.COMPLETING_REBALANCE},
    G.DEAD: {G.STABLE, G.PREPARING_REBALANCE, G.COMPLETING_REBALANCE, G.EMPTY, G.DEAD},
}


@pytest.mark.parametrize("source, target", list(itertools.product(GroupState, GroupState)),
                         ids=lambda s: s.value)
def test_classic_group_transition(source, target):
    group = ClassicGroup("g", state=source, clock=lambda: 1234)
    group.state_timestamp = 0
    if source in CLASSIC_PREVIOUS[target]:
        group.transition_to(target)
        assert (group.state, group.state_timestamp) == (target, 1234)
    else:
        with pytest.raises(RuntimeError):
            group.transition_to(target)
        assert (group.state, group.state_timestamp) == (source, 0)


# -- consumer groups ------------------------------------------------------------------------------

C = ConsumerGroupState


def _member(member_id: str, epoch: int, state: MemberState = MemberState.STABLE) -> ConsumerGroupMember:
    return ConsumerGroupMember(member_id, member_epoch=epoch, state=state)


@pytest.mark.parametrize("members, group_epoch, assignment_epoch, dead, expected", [
    ([], 0, 0, False, C.EMPTY),
    ([], 5, 3, False, C.EMPTY),                                   # no members: empty whatever the epochs
    ([_member("a", 3)], 4, 3, False, C.ASSIGNING),                # a new group epoch, not yet assigned
    ([_member("a", 2)], 3, 3, False, C.RECONCILING),              # a member still on an older epoch
    ([_member("a", 3, MemberState.UNREVOKED_PARTITIONS)], 3, 3, False, C.RECONCILING),
    ([_member("a", 3, MemberState.UNRELEASED_PARTITIONS)], 3, 3, False, C.RECONCILING),
    ([_member("a", 3), _member("b", 2)], 3, 3, False, C.RECONCILING),
    ([_member("a", 3), _member("b", 3)], 3, 3, False, C.STABLE),
    ([_member("a", 3)], 3, 3, True, C.DEAD),
    ([], 0, 0, True, C.DEAD),
])
def test_consumer_group_state(members, group_epoch, assignment_epoch, dead, expected):
    group = ConsumerGroup("g")
    group.members = {m.member_id: m for m in members}
    group.group_epoch, group.assignment_epoch, group.dead = group_epoch, assignment_epoch, dead
    assert group.state_string == expected


# -- transactions ---------------------------------------------------------------------------------

T = TransactionState
TXN_PREVIOUS = {
    T.EMPTY: {T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT},
    T.ONGOING: {T.ONGOING, T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT},
    T.PREPARE_COMMIT: {T.ONGOING},
    T.PREPARE_ABORT: {T.ONGOING, T.PREPARE_EPOCH_FENCE},
    T.COMPLETE_COMMIT: {T.PREPARE_COMMIT},
    T.COMPLETE_ABORT: {T.PREPARE_ABORT},
    T.DEAD: {T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT},
    T.PREPARE_EPOCH_FENCE: {T.ONGOING},
}
# how the coordinator asks for each target (CompleteCommit/CompleteAbort follow from the Prepare state)
PREPARE = {
    T.EMPTY: lambda md: md.prepare_increment_producer_epoch(60000, None, 2000),
    T.ONGOING: lambda md: md.prepare_add_partitions([("t", 1)], 2000),
    T.PREPARE_COMMIT: lambda md: md.prepare_abort_or_commit(T.PREPARE_COMMIT, 2000),
    T.PREPARE_ABORT: lambda md: md.prepare_abort_or_commit(T.PREPARE_ABORT, 2000),
    T.COMPLETE_COMMIT: lambda md: md.prepare_complete(2000),
    T.COMPLETE_ABORT: lambda md: md.prepare_complete(2000),
    T.DEAD: lambda md: md.prepare_dead(),
    T.PREPARE_EPOCH_FENCE: lambda md: md.prepare_fence_producer_epoch(),
}


def _txn(state: TransactionState) -> TransactionMetadata:
    return TransactionMetadata("txn", 1000, -1, 5, -1, 60000, state, partitions=[("t", 0)],
                               txn_start_timestamp=1000, txn_last_update_timestamp=1000)


def _txn_cases():
    for source, target in itertools.product(TransactionState, TransactionState):
        if target is T.COMPLETE_COMMIT and source is not T.PREPARE_COMMIT:
            continue            # prepare_complete aims at CompleteAbort from every other state
        if target is T.COMPLETE_ABORT and source is T.PREPARE_COMMIT:
            continue
        yield source, target


@pytest.mark.parametrize("source, target", list(_txn_cases()), ids=lambda s: s.state_name)
def test_transaction_transition(source, target):
    md = _txn(source)
    if source in TXN_PREVIOUS[target]:
        transit = PREPARE[target](md)
        assert transit.state is target and md.pending_state is target and md.state is source
        md.complete_transition(transit)
        assert md.state is target and md.pending_state is None
    else:
        with pytest.raises(IllegalTransition):
            PREPARE[target](md)
        assert md.state is source and md.pending_state is None


def test_a_pending_transaction_transition_refuses_another():
    md = _txn(T.ONGOING)
    transit = md.prepare_abort_or_commit(T.PREPARE_COMMIT, 2000)
    with pytest.raises(IllegalTransition):
        md.prepare_abort_or_commit(T.PREPARE_ABORT, 2000)
    md.complete_transition(transit)
    assert md.state is T.PREPARE_COMMIT


# -- the controller -------------------------------------------------------------------------------

P, R = PartitionState, ReplicaState
PARTITION_PREVIOUS = {
    P.NEW: {P.NON_EXISTENT},
    P.ONLINE: {P.NEW, P.ONLINE, P.OFFLINE},
    P.OFFLINE: {P.NEW, P.ONLINE, P.OFFLINE},
    P.NON_EXISTENT: {P.OFFLINE},
}
REPLICA_PREVIOUS = {
    R.NEW: {R.NON_EXISTENT},
    R.ONLINE: {R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE},
    R.OFFLINE: {R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE},
    R.DELETION_STARTED: {R.OFFLINE},
    R.DELETION_SUCCESSFUL: {R.DELETION_STARTED},
    R.DELETION_INELIGIBLE: {R.OFFLINE, R.DELETION_STARTED},
    R.NON_EXISTENT: {R.DELETION_SUCCESSFUL},
}
TP = TopicPartition("t", 0)
REPLICAS = (0, 1, 2)


class RecordingZk:
    """The partition state znodes, in memory; every write succeeds."""

    def __init__(self):
        self.states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}

    def create_topic_partition_states(self, states, expected_controller_epoch_zk_version):
        self.states.update(states)
        return {tp: s.leader_and_isr for tp, s in states.items()}

    def get_topic_partition_states(self, partitions):
        return {tp: self.states[tp] for tp in partitions if tp in self.states}

    def update_leader_and_isr(self, leader_and_isrs, controller_epoch, expected_controller_epoch_zk_version):
        for tp, lai in leader_and_isrs.items():
            self.states[tp] = LeaderIsrAndControllerEpoch(lai, controller_epoch)
        return SimpleNamespace(finished=dict(leader_and_isrs), partitions_to_retry=[])


class RecordingBatch:
    """What the state machines ask the brokers to hear."""

    def __init__(self):
        self.requests: list[tuple] = []

    def new_batch(self):
        pass

    def clear(self):
        self.requests.clear()

    def send_requests_to_brokers(self, controller_epoch):
        pass

    def add_leader_and_isr_request_for_brokers(self, brokers, tp, state, is_new):
        self.requests.append(("LeaderAndIsr", tuple(brokers), tp, is_new))

    def add_stop_replica_request_for_brokers(self, brokers, tp, delete_partition):
        self.requests.append(("StopReplica", tuple(brokers), tp, delete_partition))

    def add_update_metadata_request_for_brokers(self, brokers, partitions):
        self.requests.append(("UpdateMetadata", tuple(brokers), tuple(partitions)))


def _controller(with_leadership: bool):
    ctx = ControllerContext()
    ctx.epoch = 3
    ctx.set_live_brokers({b: (None, 100 + b) for b in REPLICAS})
    ctx.all_topics.add(TP.topic)
    ctx.update_partition_full_replica_assignment(TP, ReplicaAssignment(REPLICAS))
    zk, batch = RecordingZk(), RecordingBatch()
    if with_leadership:
        state = LeaderIsrAndControllerEpoch(LeaderAndIsr(0, 4, REPLICAS), 3)
        zk.states[TP] = state
        ctx.put_partition_leadership_info(TP, state)
    return ctx, zk, batch


@pytest.mark.parametrize("source, target", list(itertools.product(PartitionState, PartitionState)),
                         ids=lambda s: s.value)
def test_partition_state_machine_transition(source, target):
    ctx, zk, batch = _controller(with_leadership=source in (P.ONLINE, P.OFFLINE))
    ctx.partition_states[TP] = source
    machine = PartitionStateMachine(ctx, zk, batch, lambda topics: dict.fromkeys(topics, False))
    machine.handle_state_changes([TP], target, OFFLINE if target is P.ONLINE else None)
    if source in PARTITION_PREVIOUS[target]:
        assert ctx.partition_states[TP] is target
        if target is P.ONLINE:              # a leader written to ZooKeeper and sent to the replicas
            assert zk.states[TP].leader_and_isr.leader in REPLICAS
            assert [r[0] for r in batch.requests] == ["LeaderAndIsr"]
            assert batch.requests[0][3] is (source is P.NEW)
    else:
        assert ctx.partition_states[TP] is source and batch.requests == []


@pytest.mark.parametrize("source, target", list(itertools.product(ReplicaState, ReplicaState)),
                         ids=lambda s: s.value)
def test_replica_state_machine_transition(source, target):
    ctx, zk, batch = _controller(with_leadership=True)
    replica = PartitionAndReplica(TP, 1)
    ctx.replica_states[replica] = source
    ReplicaStateMachine(ctx, zk, batch).handle_state_changes([replica], target)
    if source not in REPLICA_PREVIOUS[target]:
        assert ctx.replica_states[replica] is source and batch.requests == []
        assert ctx.partition_replica_assignment(TP) == REPLICAS
    elif target is R.NON_EXISTENT:          # out of the assignment and forgotten
        assert replica not in ctx.replica_states and ctx.partition_replica_assignment(TP) == (0, 2)
    else:
        assert ctx.replica_states[replica] is target
        kinds = [r[0] for r in batch.requests]
        if target is R.OFFLINE:             # stopped, out of the ISR, the others told
            assert kinds == ["StopReplica", "LeaderAndIsr"] and 1 not in zk.states[TP].leader_and_isr.isr
        elif target is R.DELETION_STARTED:
            assert batch.requests == [("StopReplica", (1,), TP, True)]
        elif target in (R.NEW, R.ONLINE) and source is not R.NEW:
            assert batch.requests == [("LeaderAndIsr", (1,), TP, target is R.NEW)]
