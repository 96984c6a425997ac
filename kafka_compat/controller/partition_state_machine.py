"""The controller's partition state machine: Kafka's ZkPartitionStateMachine.

A partition is New (assigned, no state znode yet), Online (it has a live leader), Offline (its
leader died) or NonExistent (deleted). Moving one Online writes its state znode, conditionally on
the zkVersion just read and fenced by the controller epoch, and queues LeaderAndIsr for its replicas
(plus UpdateMetadata for every broker) in the current request batch:

- New -> Online: the first live replica leads, every live replica is in the ISR, epoch 0;
- Offline/Online -> Online: a leader elected by one of Kafka's strategies (offline, with unclean
  election per topic config; reassignment; preferred replica; controlled shutdown), epoch + 1.

A partition no strategy can lead stays where it is and its znode is left unchanged.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..leader_and_isr import LeaderAndIsr, LeaderIsrAndControllerEpoch
from ..zk.kafka_zk_client import ControllerMovedError, KafkaZkClient
from ..zk.zk_data import TopicPartition
from . import election
from .controller_channel_manager import ControllerBrokerRequestBatch
from .controller_context import ControllerContext, PartitionState, valid_transitions

log = logging.getLogger(__name__)


class StateChangeFailedError(Exception):
    """A partition could not be moved to the state asked for (no eligible leader, no state znode, or
    a newer controller wrote the znode)."""


@dataclass(frozen=True)
class ElectionStrategy:
    """Kafka's PartitionLeaderElectionStrategy. `allow_unclean` (offline only) forces an unclean
    election whatever the topic says, as an ElectLeaders request of type UNCLEAN does."""

    kind: str
    allow_unclean: bool = False


OFFLINE = ElectionStrategy("offline")
OFFLINE_ALLOW_UNCLEAN = ElectionStrategy("offline", allow_unclean=True)
REASSIGN = ElectionStrategy("reassign")
PREFERRED = ElectionStrategy("preferred")
CONTROLLED_SHUTDOWN = ElectionStrategy("controlled-shutdown")

# per partition: the written state, or why it failed
Results = dict[TopicPartition, LeaderAndIsr | Exception]


class PartitionStateMachine:
    def __init__(self, context: ControllerContext, zk_client: KafkaZkClient, batch: ControllerBrokerRequestBatch,
                 unclean_leader_election_enabled: Callable[[Iterable[str]], Mapping[str, bool]],
                 leader_recovery_supported: bool = True):
        """`unclean_leader_election_enabled(topics)` answers each topic's unclean.leader.election.enable
        (its override in /config/topics, else the broker's default); it may raise."""
        self.context = context
        self.zk = zk_client
        self.batch = batch
        self._unclean_enabled = unclean_leader_election_enabled
        self.leader_recovery_supported = leader_recovery_supported

    def startup(self) -> None:
        ctx = self.context
        for tp in ctx.all_partitions:
            info = ctx.partition_leadership_info(tp)
            if info is None:
                ctx.partition_states[tp] = PartitionState.NEW
            elif ctx.is_replica_online(info.leader_and_isr.leader, tp):
                ctx.partition_states[tp] = PartitionState.ONLINE
            else:
                ctx.partition_states[tp] = PartitionState.OFFLINE
        self.trigger_online_partition_state_change()

    def trigger_online_partition_state_change(self, topic: str | None = None) -> Results:
        """Elect leaders for every New or Offline partition (of `topic`) whose topic is not being deleted."""
        ctx = self.context
        partitions = [tp for tp in ctx.partitions_in_states((PartitionState.OFFLINE, PartitionState.NEW), topic)
                      if not ctx.is_topic_queued_up_for_deletion(tp.topic)]
        return self.handle_state_changes(partitions, PartitionState.ONLINE, OFFLINE)

    def handle_state_changes(self, partitions: Sequence[TopicPartition], target: PartitionState,
                             strategy: ElectionStrategy | None = None) -> Results:
        """Move the partitions to `target` and send the resulting requests; the elections' results."""
        if not partitions:
            return {}
        self.batch.new_batch()
        try:
            results = self._do_handle_state_changes(list(partitions), target, strategy)
        except ControllerMovedError:
            self.batch.clear()
            raise
        except Exception as e:
            log.exception("controller: moving partitions to %s failed", target.value)
            self.batch.clear()
            return {tp: e for tp in partitions}
        self.batch.send_requests_to_brokers(self.context.epoch)
        return results

    def _do_handle_state_changes(self, partitions: list[TopicPartition], target: PartitionState,
                                 strategy: ElectionStrategy | None) -> Results:
        ctx = self.context
        valid = valid_transitions(partitions, ctx.partition_states, target, PartitionState.NON_EXISTENT)
        if target is not PartitionState.ONLINE:
            for tp in valid:
                ctx.partition_states[tp] = target
            return {}
        new = [tp for tp in valid if ctx.partition_states[tp] is PartitionState.NEW]
        to_elect = [tp for tp in valid if ctx.partition_states[tp] in (PartitionState.OFFLINE, PartitionState.ONLINE)]
        for tp in self._initialize_leader_and_isr(new):
            ctx.partition_states[tp] = PartitionState.ONLINE
        if not to_elect:
            return {}
        if strategy is None:
            raise ValueError("an election strategy is needed to move partitions online")
        results = self._elect_leaders(to_elect, strategy)
        for tp, result in results.items():
            if isinstance(result, LeaderAndIsr):
                ctx.partition_states[tp] = PartitionState.ONLINE
        return results

    def _initialize_leader_and_isr(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        ctx = self.context
        states = {}
        for tp in partitions:
            assignment = ctx.partition_replica_assignment(tp)
            online = [r for r in assignment if ctx.is_replica_online(r, tp)]
            initial = election.initial_leader_and_isr(assignment, online)
            if initial is None:
                log.error("controller: no replica of new partition %s (assigned %s) is alive", tp, list(assignment))
                continue
            states[tp] = LeaderIsrAndControllerEpoch(initial, ctx.epoch)
        if not states:
            return []
        created = self.zk.create_topic_partition_states(states, ctx.epoch_zk_version)
        done = []
        for tp, result in created.items():
            if isinstance(result, Exception):
                log.error("controller: creating the state of partition %s failed: %r", tp, result)
                continue
            state = LeaderIsrAndControllerEpoch(result, ctx.epoch)
            ctx.put_partition_leadership_info(tp, state)
            self.batch.add_leader_and_isr_request_for_brokers(result.isr, tp, state, is_new=True)
            done.append(tp)
        return done

    def _elect_leaders(self, partitions: list[TopicPartition], strategy: ElectionStrategy) -> Results:
        finished: Results = {}
        remaining = partitions
        while remaining:
            done, remaining = self._try_elect_leaders(remaining, strategy)
            for tp, result in done.items():
                if isinstance(result, Exception):
                    log.warning("controller: electing a leader for %s failed: %s", tp, result)
            finished.update(done)
        return finished

    def _try_elect_leaders(self, partitions: list[TopicPartition], strategy: ElectionStrategy
                           ) -> tuple[Results, list[TopicPartition]]:
        """One round: read the states, elect, write conditionally; those whose znode moved meanwhile
        come back to be retried."""
        ctx = self.context
        failed: Results = {}
        try:
            current = self.zk.get_topic_partition_states(partitions)
        except ControllerMovedError:
            raise
        except Exception as e:
            return {tp: e for tp in partitions}, []
        valid: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in partitions:
            state = current.get(tp)
            if state is None:
                failed[tp] = StateChangeFailedError(f"LeaderAndIsr information doesn't exist for partition {tp}")
            elif state.controller_epoch > ctx.epoch:
                failed[tp] = StateChangeFailedError(
                    f"aborted leader election for {tp}: its state was written by a newer controller "
                    f"(epoch {state.controller_epoch} > {ctx.epoch})")
            else:
                valid[tp] = state.leader_and_isr
        if not valid:
            return failed, []
        elected: dict[TopicPartition, LeaderAndIsr] = {}
        recipients: dict[TopicPartition, list[int]] = {}
        unclean = self._unclean_election_flags(valid, strategy, failed)
        for tp, lai in valid.items():
            if tp in failed:
                continue
            result = self._elect(tp, lai, strategy, unclean.get(tp, False))
            if result.leader_and_isr is None:
                failed[tp] = StateChangeFailedError(f"failed to elect a leader for {tp} under strategy {strategy.kind}")
            else:
                elected[tp] = result.leader_and_isr
                recipients[tp] = result.live_replicas
        if not elected:
            return failed, []
        update = self.zk.update_leader_and_isr(elected, ctx.epoch, ctx.epoch_zk_version)
        for tp, result in update.finished.items():
            if isinstance(result, LeaderAndIsr):
                state = LeaderIsrAndControllerEpoch(result, ctx.epoch)
                ctx.put_partition_leadership_info(tp, state)
                self.batch.add_leader_and_isr_request_for_brokers(recipients[tp], tp, state, is_new=False)
        failed.update(update.finished)
        return failed, list(update.partitions_to_retry)

    def _unclean_election_flags(self, valid: dict[TopicPartition, LeaderAndIsr], strategy: ElectionStrategy,
                                failed: Results) -> dict[TopicPartition, bool]:
        """For the offline strategy: whether each partition with no live ISR member may elect uncleanly."""
        if strategy.kind != "offline":
            return {}
        ctx = self.context
        no_live_isr = [tp for tp, lai in valid.items() if not any(ctx.is_replica_online(r, tp) for r in lai.isr)]
        if not no_live_isr:
            return {}
        if strategy.allow_unclean:
            return dict.fromkeys(no_live_isr, True)
        topics = {tp.topic for tp in no_live_isr}
        try:
            enabled = self._unclean_enabled(topics)
        except ControllerMovedError:
            raise
        except Exception as e:
            for tp in no_live_isr:
                failed[tp] = e
            return {}
        return {tp: bool(enabled.get(tp.topic, False)) for tp in no_live_isr}

    def _elect(self, tp: TopicPartition, lai: LeaderAndIsr, strategy: ElectionStrategy,
               unclean: bool) -> election.ElectionResult:
        ctx = self.context
        assignment = ctx.partition_full_replica_assignment(tp)
        online = [r for r in assignment.replicas if ctx.is_replica_online(r, tp)]
        if strategy.kind == "offline":
            return election.leader_for_offline(lai, assignment.replicas, online, unclean,
                                               self.leader_recovery_supported)
        if strategy.kind == "reassign":
            target = assignment.target_replicas
            return election.leader_for_reassign(lai, target, [r for r in target if ctx.is_replica_online(r, tp)])
        if strategy.kind == "preferred":
            return election.leader_for_preferred_replica(lai, assignment.replicas, online)
        live_or_shutting_down = [r for r in assignment.replicas
                                 if ctx.is_replica_online(r, tp, include_shutting_down=True)]
        return election.leader_for_controlled_shutdown(lai, assignment.replicas, live_or_shutting_down,
                                                       ctx.shutting_down_broker_ids)
