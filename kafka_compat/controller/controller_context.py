"""What the active controller knows of the cluster: Kafka's ControllerContext.

Loaded from ZooKeeper when a broker becomes the controller and kept current by the controller's
events alone (one thread owns it, so it has no locks): live brokers and their epochs, topics and
their ids, every partition's replica assignment and leadership, the state each partition and
replica is in (the two state machines), and the bookkeeping of topic deletion and reassignment.
"""
from __future__ import annotations

import enum
import logging
from collections.abc import Hashable, Iterable
from typing import NamedTuple

from ..leader_and_isr import LeaderIsrAndControllerEpoch
from ..sentinels import EPOCH_DURING_DELETE, NO_EPOCH
from ..zk.zk_data import BrokerInfo, ReplicaAssignment, TopicPartition

log = logging.getLogger(__name__)


class PartitionState(enum.Enum):
    """A partition's state in the controller's partition state machine, with the states it may come from."""

    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"
    NON_EXISTENT = "NonExistentPartition"

    @property
    def valid_previous_states(self) -> frozenset["PartitionState"]:
        return _PARTITION_PREVIOUS[self]


_PARTITION_PREVIOUS = {
    PartitionState.NEW: frozenset({PartitionState.NON_EXISTENT}),
    PartitionState.ONLINE: frozenset({PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.OFFLINE: frozenset({PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.NON_EXISTENT: frozenset({PartitionState.OFFLINE}),
}


class ReplicaState(enum.Enum):
    """A replica's state in the controller's replica state machine, with the states it may come from."""

    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"

    @property
    def valid_previous_states(self) -> frozenset["ReplicaState"]:
        return _REPLICA_PREVIOUS[self]


_LIVE_OR_INELIGIBLE = frozenset({ReplicaState.NEW, ReplicaState.ONLINE, ReplicaState.OFFLINE,
                                 ReplicaState.DELETION_INELIGIBLE})
_REPLICA_PREVIOUS = {
    ReplicaState.NEW: frozenset({ReplicaState.NON_EXISTENT}),
    ReplicaState.ONLINE: _LIVE_OR_INELIGIBLE,
    ReplicaState.OFFLINE: _LIVE_OR_INELIGIBLE,
    ReplicaState.DELETION_STARTED: frozenset({ReplicaState.OFFLINE}),
    ReplicaState.DELETION_SUCCESSFUL: frozenset({ReplicaState.DELETION_STARTED}),
    ReplicaState.DELETION_INELIGIBLE: frozenset({ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED}),
    ReplicaState.NON_EXISTENT: frozenset({ReplicaState.DELETION_SUCCESSFUL}),
}


def valid_transitions(items: Iterable[Hashable], states: dict, target, initial) -> list:
    """The items (partitions or replicas) whose state, `initial` when unknown, may move to `target`;
    the others are logged and left alone."""
    valid = []
    for item in items:
        current = states.setdefault(item, initial)
        if current in target.valid_previous_states:
            valid.append(item)
        else:
            log.error("controller: %s cannot move from %s to %s", item, current.value, target.value)
    return valid


class PartitionAndReplica(NamedTuple):
    topic_partition: TopicPartition
    replica: int

    @property
    def topic(self) -> str:
        return self.topic_partition.topic


EMPTY_ASSIGNMENT = ReplicaAssignment(())


class ControllerContext:
    def __init__(self) -> None:
        self.epoch = 0
        self.epoch_zk_version = 0
        self.shutting_down_broker_ids: set[int] = set()
        self._live_brokers: dict[int, BrokerInfo] = {}
        self._live_broker_epochs: dict[int, int] = {}
        self.all_topics: set[str] = set()
        self.topic_ids: dict[str, bytes] = {}
        self.topic_names: dict[bytes, str] = {}
        self.partition_assignments: dict[str, dict[int, ReplicaAssignment]] = {}
        self._leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self.partitions_being_reassigned: set[TopicPartition] = set()
        self.partition_states: dict[TopicPartition, PartitionState] = {}
        self.replica_states: dict[PartitionAndReplica, ReplicaState] = {}
        self.replicas_on_offline_dirs: dict[int, set[TopicPartition]] = {}
        self.topics_to_be_deleted: set[str] = set()
        self.topics_with_deletion_started: set[str] = set()
        self.topics_ineligible_for_deletion: set[str] = set()

    def reset(self) -> None:
        """Forget everything: the controller resigned."""
        self.__init__()

    # -- brokers ------------------------------------------------------------------------------

    def set_live_brokers(self, brokers: dict[int, tuple[BrokerInfo, int]]) -> None:
        self._live_brokers.clear()
        self._live_broker_epochs.clear()
        self.add_live_brokers(brokers)

    def add_live_brokers(self, brokers: dict[int, tuple[BrokerInfo, int]]) -> None:
        for broker_id, (info, epoch) in brokers.items():
            self._live_brokers[broker_id] = info
            self._live_broker_epochs[broker_id] = epoch

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            self._live_brokers.pop(broker_id, None)
            self._live_broker_epochs.pop(broker_id, None)

    def update_broker_metadata(self, info: BrokerInfo) -> None:
        if info.id in self._live_brokers:
            self._live_brokers[info.id] = info

    @property
    def live_broker_ids(self) -> set[int]:
        """Registered brokers that are not shutting down: the ones that may lead."""
        return set(self._live_broker_epochs) - self.shutting_down_broker_ids

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self._live_broker_epochs)

    @property
    def live_or_shutting_down_brokers(self) -> list[BrokerInfo]:
        return [self._live_brokers[i] for i in sorted(self._live_brokers)]

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return self._live_brokers.get(broker_id)

    def broker_epoch(self, broker_id: int) -> int | None:
        return self._live_broker_epochs.get(broker_id)

    def is_replica_online(self, broker_id: int, tp: TopicPartition, include_shutting_down: bool = False) -> bool:
        alive = (broker_id in self._live_broker_epochs if include_shutting_down
                 else broker_id in self._live_broker_epochs and broker_id not in self.shutting_down_broker_ids)
        return alive and tp not in self.replicas_on_offline_dirs.get(broker_id, ())

    # -- topics and assignments ---------------------------------------------------------------

    def add_topic_id(self, topic: str, topic_id: bytes) -> None:
        self.topic_ids[topic] = topic_id
        self.topic_names[topic_id] = topic

    def partition_replica_assignment(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.partition_full_replica_assignment(tp).replicas

    def partition_full_replica_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        return self.partition_assignments.get(tp.topic, {}).get(tp.partition, EMPTY_ASSIGNMENT)

    def update_partition_full_replica_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        self.partition_assignments.setdefault(tp.topic, {})[tp.partition] = assignment

    @property
    def all_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, parts in self.partition_assignments.items() for p in parts]

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in self.partition_assignments.get(topic, {})]

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, parts in self.partition_assignments.items()
                for p, a in parts.items() if broker_id in a.replicas]

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> list[PartitionAndReplica]:
        ids = set(broker_ids)
        return [PartitionAndReplica(TopicPartition(t, p), r) for t, parts in self.partition_assignments.items()
                for p, a in parts.items() for r in a.replicas if r in ids]

    def replicas_for_topic(self, topic: str) -> list[PartitionAndReplica]:
        return [PartitionAndReplica(TopicPartition(topic, p), r)
                for p, a in self.partition_assignments.get(topic, {}).items() for r in a.replicas]

    def replicas_for_partitions(self, partitions: Iterable[TopicPartition]) -> list[PartitionAndReplica]:
        return [PartitionAndReplica(tp, r) for tp in partitions for r in self.partition_replica_assignment(tp)]

    def online_and_offline_replicas(self) -> tuple[list[PartitionAndReplica], list[PartitionAndReplica]]:
        online, offline = [], []
        for t, parts in self.partition_assignments.items():
            for p, a in parts.items():
                tp = TopicPartition(t, p)
                for r in a.replicas:
                    (online if self.is_replica_online(r, tp) else offline).append(PartitionAndReplica(tp, r))
        return online, offline

    def remove_topic(self, topic: str) -> None:
        self.topics_to_be_deleted.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)
        self.all_topics.discard(topic)
        topic_id = self.topic_ids.pop(topic, None)
        if topic_id is not None:
            self.topic_names.pop(topic_id, None)
        for p in self.partition_assignments.pop(topic, {}):
            tp = TopicPartition(topic, p)
            self._leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.partitions_being_reassigned.discard(tp)
        for replica in [r for r in self.replica_states if r.topic == topic]:
            del self.replica_states[replica]

    # -- leadership ---------------------------------------------------------------------------

    def put_partition_leadership_info(self, tp: TopicPartition, info: LeaderIsrAndControllerEpoch) -> None:
        self._leadership[tp] = info

    def partition_leadership_info(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        return self._leadership.get(tp)

    def clear_partition_leadership_info(self) -> None:
        self._leadership.clear()

    def leader_epoch(self, tp: TopicPartition) -> int:
        if tp.topic in self.topics_to_be_deleted:
            return EPOCH_DURING_DELETE
        info = self._leadership.get(tp)
        return NO_EPOCH if info is None else info.leader_and_isr.leader_epoch

    def partitions_with_leaders(self) -> list[TopicPartition]:
        return [tp for tp in self._leadership if tp.topic not in self.topics_to_be_deleted]

    def partitions_with_offline_leader(self) -> list[TopicPartition]:
        return [tp for tp, info in self._leadership.items()
                if not self.is_replica_online(info.leader_and_isr.leader, tp)
                and tp.topic not in self.topics_to_be_deleted]

    def partition_leaders_on_broker(self, broker_id: int) -> list[TopicPartition]:
        """Partitions the broker leads that another replica could take over (replication factor above one)."""
        return [tp for tp, info in self._leadership.items()
                if tp.topic not in self.topics_to_be_deleted and info.leader_and_isr.leader == broker_id
                and len(self.partition_replica_assignment(tp)) > 1]

    # -- state machines -----------------------------------------------------------------------

    def partitions_in_states(self, states: Iterable[PartitionState], topic: str | None = None) -> list[TopicPartition]:
        wanted = set(states)
        return [tp for tp, s in self.partition_states.items() if s in wanted and (topic is None or tp.topic == topic)]

    def replicas_in_state(self, topic: str, state: ReplicaState) -> list[PartitionAndReplica]:
        return [r for r in self.replicas_for_topic(topic) if self.replica_states.get(r) == state]

    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        return all(self.replica_states.get(r) == state for r in self.replicas_for_topic(topic))

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        return any(self.replica_states.get(r) == state for r in self.replicas_for_topic(topic))

    # -- deletion -----------------------------------------------------------------------------

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        return topic in self.topics_with_deletion_started
