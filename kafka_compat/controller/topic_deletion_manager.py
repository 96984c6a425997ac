"""Topic deletion, driven by the controller: Kafka's TopicDeletionManager.

A topic named under /admin/delete_topics is queued. Deleting it: its partitions go Offline then
NonExistent, every broker gets UpdateMetadata with leader -2 (clients stop using it), each replica
gets StopReplica without, then with, delete. When every replica has answered without error the
topic's znodes go (/brokers/topics/<t>, /config/topics/<t>, /admin/delete_topics/<t>).

A replica on a dead broker, or one that answered with an error, makes the topic ineligible: deletion
halts, and resumes when that broker comes back (or a reassignment of the topic finishes).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from .controller_context import ControllerContext, PartitionAndReplica, PartitionState, ReplicaState
from .partition_state_machine import PartitionStateMachine
from .replica_state_machine import ReplicaStateMachine

log = logging.getLogger(__name__)


class TopicDeletionManager:
    def __init__(self, context: ControllerContext, replica_state_machine: ReplicaStateMachine,
                 partition_state_machine: PartitionStateMachine, *, delete_topic_enable: bool,
                 delete_topic_znodes: Callable[[str], None], delete_topic_deletions: Callable[[Iterable[str]], None],
                 mute_partition_modifications: Callable[[str], None],
                 send_metadata_update: Callable[[list], None]):
        self.context = context
        self.replicas = replica_state_machine
        self.partitions = partition_state_machine
        self.enabled = delete_topic_enable
        self._delete_topic_znodes = delete_topic_znodes
        self._delete_topic_deletions = delete_topic_deletions
        self._mute_partition_modifications = mute_partition_modifications
        self._send_metadata_update = send_metadata_update

    def init(self, topics_to_be_deleted: set[str], topics_ineligible: set[str]) -> None:
        if self.enabled:
            self.context.topics_to_be_deleted |= topics_to_be_deleted
            self.context.topics_ineligible_for_deletion |= topics_ineligible & self.context.topics_to_be_deleted
        elif topics_to_be_deleted:
            log.info("controller: topic deletion is disabled; dropping the requests for %s",
                     sorted(topics_to_be_deleted))
            self._delete_topic_deletions(topics_to_be_deleted)

    def try_topic_deletion(self) -> None:
        if self.enabled:
            self._resume_deletions()

    def enqueue_topics_for_deletion(self, topics: set[str]) -> None:
        if self.enabled:
            self.context.topics_to_be_deleted |= topics
            self._resume_deletions()

    def resume_deletion_for_topics(self, topics: Iterable[str]) -> None:
        if not self.enabled:
            return
        resumed = set(topics) & self.context.topics_to_be_deleted
        if resumed:
            self.context.topics_ineligible_for_deletion -= resumed
            self._resume_deletions()

    def fail_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> None:
        if not self.enabled:
            return
        failed = [r for r in replicas if self.context.is_topic_queued_up_for_deletion(r.topic)]
        if failed:
            self.replicas.handle_state_changes(failed, ReplicaState.DELETION_INELIGIBLE)
            self.mark_topic_ineligible_for_deletion({r.topic for r in failed}, "replica deletion failure")
            self._resume_deletions()

    def complete_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> None:
        done = [r for r in replicas if self.is_topic_queued_up_for_deletion(r.topic)]
        self.replicas.handle_state_changes(done, ReplicaState.DELETION_SUCCESSFUL)
        self._resume_deletions()

    def mark_topic_ineligible_for_deletion(self, topics: Iterable[str], reason: str) -> None:
        if not self.enabled:
            return
        halted = set(topics) & self.context.topics_to_be_deleted
        if halted - self.context.topics_ineligible_for_deletion:
            log.info("controller: halted deletion of %s: %s", sorted(halted), reason)
        self.context.topics_ineligible_for_deletion |= halted

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return self.enabled and self.context.is_topic_queued_up_for_deletion(topic)

    def _is_eligible(self, topic: str) -> bool:
        ctx = self.context
        return (topic in ctx.topics_to_be_deleted
                and not ctx.is_any_replica_in_state(topic, ReplicaState.DELETION_STARTED)
                and topic not in ctx.topics_ineligible_for_deletion)

    def _complete_delete_topic(self, topic: str) -> None:
        ctx = self.context
        self._mute_partition_modifications(topic)
        self.replicas.handle_state_changes(ctx.replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL),
                                           ReplicaState.NON_EXISTENT)
        self._delete_topic_znodes(topic)
        ctx.remove_topic(topic)
        log.info("controller: deletion of topic %s completed", topic)

    def _resume_deletions(self) -> None:
        ctx = self.context
        retry, eligible = set(), set()
        for topic in sorted(ctx.topics_to_be_deleted):
            if ctx.are_all_replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL):
                self._complete_delete_topic(topic)
                continue
            if (not ctx.is_any_replica_in_state(topic, ReplicaState.DELETION_STARTED)
                    and ctx.is_any_replica_in_state(topic, ReplicaState.DELETION_INELIGIBLE)):
                retry.add(topic)
            if self._is_eligible(topic):
                eligible.add(topic)
        if retry:
            failed = [r for t in sorted(retry) for r in ctx.replicas_in_state(t, ReplicaState.DELETION_INELIGIBLE)]
            self.replicas.handle_state_changes(failed, ReplicaState.OFFLINE)
        if eligible:
            self._on_topic_deletion(eligible)

    def _on_topic_deletion(self, topics: set[str]) -> None:
        ctx = self.context
        unseen = topics - ctx.topics_with_deletion_started
        if unseen:
            partitions = [tp for t in sorted(unseen) for tp in ctx.partitions_for_topic(t)]
            self.partitions.handle_state_changes(partitions, PartitionState.OFFLINE)
            self.partitions.handle_state_changes(partitions, PartitionState.NON_EXISTENT)
            ctx.topics_with_deletion_started |= unseen
        self._send_metadata_update([tp for t in sorted(topics) for tp in ctx.partitions_for_topic(t)])
        self._on_partition_deletion(topics)

    def _on_partition_deletion(self, topics: set[str]) -> None:
        ctx = self.context
        dead, retry, ineligible = [], [], set()
        for topic in sorted(topics):
            replicas = ctx.replicas_for_topic(topic)
            alive = [r for r in replicas if ctx.is_replica_online(r.replica, r.topic_partition)]
            gone = [r for r in replicas if not ctx.is_replica_online(r.replica, r.topic_partition)]
            deleted = set(ctx.replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL))
            dead += gone
            retry += [r for r in alive if r not in deleted]
            if gone:
                ineligible.add(topic)
        self.replicas.handle_state_changes(dead, ReplicaState.DELETION_INELIGIBLE)
        self.replicas.handle_state_changes(retry, ReplicaState.OFFLINE)
        self.replicas.handle_state_changes(retry, ReplicaState.DELETION_STARTED)
        if ineligible:
            self.mark_topic_ineligible_for_deletion(ineligible, "offline replicas")
