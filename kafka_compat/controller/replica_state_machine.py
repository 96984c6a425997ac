"""The controller's replica state machine: Kafka's ZkReplicaStateMachine.

Each (partition, broker) replica is New, Online, Offline, in one of the three deletion states, or
NonExistent. The transitions queue what the brokers must hear in the current request batch:

- New / Online: LeaderAndIsr to the replica (New: as a new replica; never to one asked to lead);
- Offline: StopReplica (no delete) to it, and its removal from the ISR in ZooKeeper (no leader if
  it led; an ISR of one keeps its last member), then LeaderAndIsr to the other replicas;
- ReplicaDeletionStarted: StopReplica with delete; NonExistent: out of the assignment.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence

from ..leader_and_isr import LeaderIsrAndControllerEpoch
from ..zk.kafka_zk_client import ControllerMovedError, KafkaZkClient
from ..zk.zk_data import TopicPartition
from . import election
from .controller_channel_manager import ControllerBrokerRequestBatch
from .controller_context import ControllerContext, PartitionAndReplica, ReplicaState, valid_transitions

log = logging.getLogger(__name__)


class ReplicaStateMachine:
    def __init__(self, context: ControllerContext, zk_client: KafkaZkClient, batch: ControllerBrokerRequestBatch):
        self.context = context
        self.zk = zk_client
        self.batch = batch

    def startup(self) -> None:
        """Replicas on live brokers go Online (LeaderAndIsr to them), the others Offline."""
        ctx = self.context
        for tp in ctx.all_partitions:
            for r in ctx.partition_replica_assignment(tp):
                ctx.replica_states[PartitionAndReplica(tp, r)] = (
                    ReplicaState.ONLINE if ctx.is_replica_online(r, tp) else ReplicaState.DELETION_INELIGIBLE)
        online, offline = ctx.online_and_offline_replicas()
        self.handle_state_changes(online, ReplicaState.ONLINE)
        self.handle_state_changes(offline, ReplicaState.OFFLINE)

    def handle_state_changes(self, replicas: Sequence[PartitionAndReplica], target: ReplicaState) -> None:
        if not replicas:
            return
        self.batch.new_batch()
        try:
            by_broker: dict[int, list[PartitionAndReplica]] = {}
            for r in replicas:
                by_broker.setdefault(r.replica, []).append(r)
            for broker_id, rs in by_broker.items():
                self._do_handle_state_changes(broker_id, rs, target)
        except ControllerMovedError:
            self.batch.clear()
            raise
        except Exception:
            log.exception("controller: moving replicas to %s failed", target.value)
            self.batch.clear()
            return
        self.batch.send_requests_to_brokers(self.context.epoch)

    def _do_handle_state_changes(self, broker_id: int, replicas: list[PartitionAndReplica],
                                 target: ReplicaState) -> None:
        ctx = self.context
        valid = valid_transitions(replicas, ctx.replica_states, target, ReplicaState.NON_EXISTENT)
        handler = {
            ReplicaState.NEW: self._to_new,
            ReplicaState.ONLINE: self._to_online,
            ReplicaState.OFFLINE: self._to_offline,
            ReplicaState.DELETION_STARTED: self._to_deletion_started,
        }.get(target)
        if handler is not None:
            handler(broker_id, valid)
        elif target is ReplicaState.NON_EXISTENT:
            for r in valid:
                tp = r.topic_partition
                remaining = ctx.partition_full_replica_assignment(tp).remove_replica(r.replica)
                ctx.update_partition_full_replica_assignment(tp, remaining)
                ctx.replica_states.pop(r, None)
        else:
            for r in valid:
                ctx.replica_states[r] = target

    def _to_new(self, broker_id: int, replicas: list[PartitionAndReplica]) -> None:
        ctx = self.context
        for r in replicas:
            tp = r.topic_partition
            info = ctx.partition_leadership_info(tp)
            if info is not None:
                if info.leader_and_isr.leader == broker_id:
                    log.error("controller: replica %d of %s cannot become New: it is asked to lead", broker_id, tp)
                    continue
                self.batch.add_leader_and_isr_request_for_brokers([broker_id], tp, info, is_new=True)
            ctx.replica_states[r] = ReplicaState.NEW

    def _to_online(self, broker_id: int, replicas: list[PartitionAndReplica]) -> None:
        ctx = self.context
        for r in replicas:
            tp = r.topic_partition
            if ctx.replica_states[r] is ReplicaState.NEW:
                assignment = ctx.partition_full_replica_assignment(tp)
                if broker_id not in assignment.replicas:
                    log.error("controller: adding replica %d that is not part of %s's assignment", broker_id, tp)
                    ctx.update_partition_full_replica_assignment(
                        tp, type(assignment)(assignment.replicas + (broker_id,), assignment.adding_replicas,
                                             assignment.removing_replicas))
            else:
                info = ctx.partition_leadership_info(tp)
                if info is not None:
                    self.batch.add_leader_and_isr_request_for_brokers([broker_id], tp, info, is_new=False)
            ctx.replica_states[r] = ReplicaState.ONLINE

    def _to_offline(self, broker_id: int, replicas: list[PartitionAndReplica]) -> None:
        ctx = self.context
        for r in replicas:
            self.batch.add_stop_replica_request_for_brokers([broker_id], r.topic_partition, delete_partition=False)
        with_leadership = [r.topic_partition for r in replicas if ctx.partition_leadership_info(r.topic_partition)]
        updated = self._remove_replicas_from_isr(broker_id, with_leadership)
        for tp, state in updated.items():
            if not ctx.is_topic_queued_up_for_deletion(tp.topic):
                recipients = [b for b in ctx.partition_replica_assignment(tp) if b != broker_id]
                self.batch.add_leader_and_isr_request_for_brokers(recipients, tp, state, is_new=False)
            ctx.replica_states[PartitionAndReplica(tp, broker_id)] = ReplicaState.OFFLINE
        for r in replicas:
            if ctx.partition_leadership_info(r.topic_partition) is None:
                self.batch.add_update_metadata_request_for_brokers(ctx.live_or_shutting_down_broker_ids,
                                                                   [r.topic_partition])
                ctx.replica_states[r] = ReplicaState.OFFLINE

    def _to_deletion_started(self, broker_id: int, replicas: list[PartitionAndReplica]) -> None:
        for r in replicas:
            self.context.replica_states[r] = ReplicaState.DELETION_STARTED
            self.batch.add_stop_replica_request_for_brokers([broker_id], r.topic_partition, delete_partition=True)

    def _remove_replicas_from_isr(self, replica_id: int, partitions: list[TopicPartition]
                                  ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Take the replica out of each partition's ISR in ZooKeeper (retrying partitions whose znode
        moved meanwhile); the partitions' states afterwards, including those it was not in."""
        ctx = self.context
        results: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        remaining = partitions
        while remaining:
            current = self.zk.get_topic_partition_states(remaining)
            adjusted = {}
            for tp in remaining:
                state = current.get(tp)
                if state is None:
                    if not ctx.is_topic_queued_up_for_deletion(tp.topic):
                        log.error("controller: replica %d of %s cannot go offline: the partition has no state znode",
                                  replica_id, tp)
                    continue
                if state.controller_epoch > ctx.epoch:
                    log.error("controller: the state of %s was written by a newer controller (epoch %d > %d)",
                              tp, state.controller_epoch, ctx.epoch)
                    continue
                new = election.remove_replica_from_isr(state.leader_and_isr, replica_id)
                if new is None:
                    results[tp] = LeaderIsrAndControllerEpoch(state.leader_and_isr, ctx.epoch)
                    ctx.put_partition_leadership_info(tp, results[tp])
                else:
                    adjusted[tp] = new
            if not adjusted:
                break
            update = self.zk.update_leader_and_isr(adjusted, ctx.epoch, ctx.epoch_zk_version)
            for tp, result in update.finished.items():
                if isinstance(result, Exception):
                    log.error("controller: removing replica %d from the ISR of %s failed: %r", replica_id, tp, result)
                    continue
                results[tp] = LeaderIsrAndControllerEpoch(result, ctx.epoch)
                ctx.put_partition_leadership_info(tp, results[tp])
            remaining = list(update.partitions_to_retry)
        return results
