"""Partition: one hosted partition, its log, its leadership and its replicas (Kafka's Partition).

Every read and write of a partition's log goes through here, so that the rules
Kafka ties to a partition hold in one place: only the leader of the current
epoch appends and serves clients; a write is stamped with the leader epoch; the
high watermark is the smallest log end offset in the ISR and only moves up on
the leader; acks=-1 needs min.insync.replicas. On a single node the ISR is this
broker alone, so the high watermark follows the log end offset at once.

In a cluster the leader also keeps the ISR (Kafka 3.x, KIP-497): a follower that
has caught up into the current leader epoch is proposed for the ISR, one that has
not caught up for replica.lag.time.max.ms is proposed for removal, and the
proposal goes to the controller through the AlterPartitionManager. While it is
pending, the "maximal" ISR (committed plus any replica being added) holds back
the high watermark and decides acks=-1, so an expansion counts at once and a
shrink only once the controller has committed it.

A replica moving to another log dir of this broker (AlterReplicaLogDirs) has a future log beside its
log: the ReplicaAlterLogDirsManager's threads copy into it with `copy_to_future_log` while the
partition goes on serving from its log, and `maybe_replace_current_with_future_log` swaps the two on
the event loop once the future log has everything (Kafka's maybeReplaceCurrentWithFutureReplica).
``future_lock`` (Kafka's futureLogLock) keeps a copy step, a truncation and the swap apart.
"""
from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Callable, NamedTuple

from kafka_compat.protocol.batch_header import NO_TIMESTAMP
from kafka_compat.storage.fetch_data_info import FetchDataInfo, FetchResult
from kafka_compat.storage.local_log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    TimestampAndOffset,
)
from kafka_compat.storage.unified_log import FetchIsolation, LogOffsetMetadata, UnifiedLog
from kafka_compat.storage.validator import CLIENT

from ..clock import monotonic_ms
from ..protocol.errors import ErrorCode, KafkaError
from ..sentinels import DEBUGGING_REPLICA_ID, NO_LEADER
from .alter_partition_listener import IsrChangeMeters
from .metadata_cache import PartitionLeadership

logger = logging.getLogger(__name__)

UNKNOWN_OFFSET_METADATA = LogOffsetMetadata(-1)

# AlterPartition answers (Partition.handleAlterPartitionError): the controller says the change was not
# applied and our partition epoch is right, so go back to the committed ISR ...
_ALTER_REVERT = frozenset({ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA})
# ... our state is stale: stay pending until a LeaderAndIsr brings the new state ...
_ALTER_AWAIT_METADATA = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                                   ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION,
                                   ErrorCode.INVALID_REQUEST, ErrorCode.NEW_LEADER_ELECTED})
# ... anything else (no controller, a network error, NOT_CONTROLLER) is sent again.



@dataclass
class Replica:
    """What the leader knows of one follower, from its fetches (Kafka's Replica)."""

    broker_id: int
    log_end_offset: LogOffsetMetadata = UNKNOWN_OFFSET_METADATA
    log_start_offset: int = -1
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_time_ms: int = 0
    broker_epoch: int = -1
    refused: bool = False       # the controller's last answer on adding it was INELIGIBLE_REPLICA

    def is_caught_up(self, leader_end_offset: int, now: int, max_lag_ms: int) -> bool:
        """At the leader's end, or there within the last replica.lag.time.max.ms."""
        return (self.log_end_offset.message_offset == leader_end_offset
                or now - self.last_caught_up_time_ms <= max_lag_ms)


@dataclass(frozen=True)
class PendingIsrChange:
    """An ISR change sent to the controller and not answered yet (PendingExpandIsr / PendingShrinkIsr)."""

    new_isr: tuple[int, ...]                  # what was proposed
    maximal_isr: tuple[int, ...]              # what counts meanwhile: committed ISR plus any replica being added
    committed_isr: tuple[int, ...]            # what to go back to if the controller refuses
    leader_epoch: int
    partition_epoch: int


class EpochEndOffset(NamedTuple):
    error_code: int
    leader_epoch: int
    end_offset: int


class LogReadResult(NamedTuple):
    """One partition's part of a fetch: what was read and the offsets to report beside it."""

    error_code: int
    info: object                    # FetchDataInfo, or None on error / divergence
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int
    diverging_epoch: tuple[int, int] | None = None      # (epoch, end offset) for a follower
    preferred_read_replica: int = -1
    error_message: str | None = None


class Partition:
    def __init__(self, topic: str, index: int, topic_id: bytes, local_broker_id: int, log: UnifiedLog,
                 clock=monotonic_ms, on_high_watermark_moved=None, *, alter_partition_manager=None,
                 replica_lag_time_max_ms: int = 30000, is_broker_alive: Callable[[int], bool] | None = None,
                 isr_change_meters: IsrChangeMeters | None = None):
        """``alter_partition_manager`` sends ISR changes to the controller (None on a single node, where
        the ISR never changes); ``is_broker_alive`` says whether a follower may join the ISR (ZooKeeper
        mode: it is a live broker in the metadata cache); ``isr_change_meters`` count each committed
        shrink or expansion and each refused change (the replica manager's metrics)."""
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.local_broker_id = local_broker_id
        self.log = log
        self.clock = clock
        # called with the partition's key when a follower's fetch moves the HW: delayed produces may complete
        self.on_high_watermark_moved = on_high_watermark_moved or (lambda key: None)
        self.key = (topic, index)               # the purgatories' watch key, built once
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.controller_epoch = -1
        self.assignment: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.remote_replicas: dict[int, Replica] = {}
        self.leader_epoch_start_offset = -1
        self.alter_partition_manager = alter_partition_manager
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.is_broker_alive = is_broker_alive or (lambda broker_id: True)
        self.pending_isr: PendingIsrChange | None = None
        self.isr_change_meters = isr_change_meters or IsrChangeMeters()
        # Not acting as leader although the last LeaderAndIsr made us one: our ZooKeeper session is in
        # doubt or gone, and another broker may lead by now. Only a LeaderAndIsr (or the session coming
        # back unchanged) ends it.
        self.fenced = False
        self.future_log: UnifiedLog | None = None    # the replica being moved to another log dir
        self.future_lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.index}, leader={self.leader_id}, epoch={self.leader_epoch}, "
                f"isr={list(self.isr)}, hw={self.high_watermark}, leo={self.log_end_offset})")

    # -- offsets --------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id and not self.fenced

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR that holds back the high watermark and answers acks=-1 (committed plus pending additions)."""
        return self.pending_isr.maximal_isr if self.pending_isr is not None else self.isr

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    @property
    def min_insync_replicas(self) -> int:
        """The topic's min.insync.replicas (its log config carries the broker default or the override)."""
        return self.log.config.min_insync_replicas

    # -- leadership (LeaderAndIsr, or the local controller) ------------------------------
    def make_leader(self, state: PartitionLeadership) -> bool:
        """Become leader in ``state.leader_epoch``; True if this broker was not the leader of that epoch.

        A new epoch starts at the log end offset (its first batch will carry it), and the
        followers' fetch states are reset, as Kafka's makeLeader does: their log end offsets
        are unknown until they fetch again, which holds the high watermark where it is. The
        high watermark is kept, then raised as far as the ISR allows.
        """
        new_epoch = state.leader_epoch != self.leader_epoch
        was_leader = self.is_leader
        self._apply(state)
        self.fenced = False
        now = self.clock()
        if new_epoch or self.leader_epoch_start_offset < 0:
            self.log.maybe_assign_epoch_start_offset(state.leader_epoch, self.log.log_end_offset)
            self.leader_epoch_start_offset = self.log.log_end_offset
        if new_epoch or not was_leader:
            self.remote_replicas = {b: Replica(b, last_caught_up_time_ms=now if b in state.isr else 0)
                                    for b in state.replicas if b != self.local_broker_id}
        else:
            for b in state.replicas:
                if b != self.local_broker_id and b not in self.remote_replicas:
                    self.remote_replicas[b] = Replica(b)
            for b in set(self.remote_replicas) - set(state.replicas):
                del self.remote_replicas[b]
        self.maybe_increment_leader_hw()
        return new_epoch or not was_leader

    def make_follower(self, state: PartitionLeadership) -> bool:
        """Follow ``state.leader``; True if the leader or epoch changed (the fetcher must restart)."""
        changed = state.leader_epoch != self.leader_epoch or state.leader != self.leader_id or self.fenced
        self._apply(state)
        self.fenced = False
        self.remote_replicas = {}
        self.leader_epoch_start_offset = -1
        return changed

    def _apply(self, state: PartitionLeadership) -> None:
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.controller_epoch = state.controller_epoch
        self.assignment = tuple(state.replicas)
        self.isr = tuple(state.isr)
        self.pending_isr = None                 # a LeaderAndIsr supersedes any change in flight

    def fence(self) -> bool:
        """Stop acting as leader (and answering as one) until told again; True if we were leading."""
        was_leader = self.is_leader
        self.fenced = True
        self.pending_isr = None
        return was_leader

    def unfence(self) -> bool:
        """Lead again in the state we had (our ZooKeeper session survived); True if we lead now."""
        self.fenced = False
        return self.is_leader

    # -- checks ---------------------------------------------------------------------------
    def leader_epoch_error(self, current_leader_epoch: int) -> int:
        """KIP-320: a client's epoch older than ours is fenced, a newer one is unknown to us yet."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch > self.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.FENCED_LEADER_EPOCH

    def leader_error(self, current_leader_epoch: int = -1, require_leader: bool = True) -> int:
        code = self.leader_epoch_error(current_leader_epoch)
        if code:
            return code
        if require_leader and not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    # -- writes ---------------------------------------------------------------------------
    def append_records_to_leader(self, records, origin: str = CLIENT, required_acks: int = 1):
        """Append as the leader: (LogAppendInfo, high watermark moved). Raises KafkaError.

        acks=-1 with fewer in-sync replicas than min.insync.replicas is refused before
        anything is written (NOT_ENOUGH_REPLICAS), as Kafka's appendRecordsToLeader does.
        """
        if not self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"Leader not local for partition {self.topic}-{self.index} on broker "
                             f"{self.local_broker_id}")
        if required_acks == -1 and len(self.isr) < self._effective_min_isr():
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                             f"The size of the current ISR {set(self.isr)} is insufficient to satisfy the min.isr "
                             f"requirement of {self.min_insync_replicas} for partition {self.topic}-{self.index}")
        info = self.log.append_as_leader(records, self.leader_epoch, origin)
        return info, self.maybe_increment_leader_hw()

    # -- the follower's side (the replica fetcher) ----------------------------------------
    def append_records_to_follower(self, records):
        """A follower's append of what it fetched: the leader's offsets and epochs are kept."""
        return self.log.append_as_follower(records)

    def update_follower_high_watermark(self, leader_high_watermark: int, leader_log_start_offset: int) -> None:
        """After a fetch: HW = min(leader's HW, our LEO) (it may go down), and the leader's log start."""
        log = self.log
        log.update_high_watermark(min(leader_high_watermark, log.log_end_offset))
        if leader_log_start_offset > log.log_start_offset:
            try:
                log.maybe_increment_log_start_offset(min(leader_log_start_offset, log.high_watermark))
            except KafkaError:          # past our HW for now: the next fetch raises it again
                pass

    def truncate_to(self, offset: int) -> bool:
        if self.future_log is None:
            return self.log.truncate_to(offset)
        with self.future_lock:     # what the future log copied past the new end goes too
            truncated = self.log.truncate_to(offset)
            if self.future_log is not None and self.future_log.log_end_offset > offset:
                self.future_log.truncate_to(offset)
            return truncated

    def truncate_fully_and_start_at(self, offset: int) -> None:
        if self.future_log is None:
            self.log.truncate_fully_and_start_at(offset)
            return
        with self.future_lock:
            self.log.truncate_fully_and_start_at(offset)
            if self.future_log is not None:
                self.future_log.truncate_fully_and_start_at(offset)

    def build_remote_log_aux_state(self, next_offset: int, epochs: list[tuple[int, int]], snapshot: bytes) -> None:
        """A follower starting at its leader's local log start, the part below in remote storage (KIP-405)."""
        if self.future_log is None:
            self.log.build_remote_log_aux_state(next_offset, epochs, snapshot)
            return
        with self.future_lock:
            self.log.build_remote_log_aux_state(next_offset, epochs, snapshot)
            if self.future_log is not None:
                self.future_log.build_remote_log_aux_state(next_offset, epochs, snapshot)

    # -- moving to another log dir (AlterReplicaLogDirs) ------------------------------------
    @property
    def future_log_dir(self) -> str | None:
        """The log dir the replica is moving to, or None."""
        future = self.future_log
        return os.path.dirname(future.dir) if future is not None else None

    def future_replica_dir_changed(self, directory: str) -> bool:
        """Kafka's futureReplicaDirChanged: a move is under way, to another dir than ``directory``."""
        target = self.future_log_dir
        return target is not None and target != directory

    def set_future_log(self, future: UnifiedLog) -> None:
        with self.future_lock:
            self.future_log = future

    def remove_future_log(self) -> UnifiedLog | None:
        """The move stops (the caller deletes the future log, or keeps it for the next start)."""
        with self.future_lock:
            future, self.future_log = self.future_log, None
            return future

    @property
    def future_log_end_offset(self) -> int:
        future = self.future_log
        return future.log_end_offset if future is not None else -1

    @property
    def future_log_size(self) -> int:
        future = self.future_log
        return future.size if future is not None else 0

    def copy_to_future_log(self, max_bytes: int) -> int:
        """One step of the move (a mover thread): the next batches of the log, at most ``max_bytes`` (one
        batch at least), appended to the future log as a follower appends what it fetched (offsets,
        epochs and producer state kept). The future log follows the log's start and high watermark, and
        starts over from the log's start when it cannot continue (retention passed its end, or it ends
        past the log). Returns the bytes copied (0: it has everything; -1: no move)."""
        with self.future_lock:
            future, current = self.future_log, self.log
            if future is None:
                return -1
            end = future.log_end_offset
            if end < current.log_start_offset or end > current.log_end_offset:
                future.truncate_fully_and_start_at(current.log_start_offset)
                end = current.log_start_offset
            copied = 0
            if end < current.log_end_offset:
                try:
                    # no more than a segment holds: an append must fit in one
                    info = current.read(end, min(max_bytes, future.config.segment_bytes), FetchIsolation.LOG_END,
                                        True)
                except KafkaError:         # retention moved the start past ``end`` meanwhile: the next step starts over
                    return 0
                data = info.records.read_bytes()
                if data:
                    future.append_as_follower(data)
                    copied = len(data)
            future.update_high_watermark(min(current.high_watermark, future.log_end_offset))
            start = min(current.log_start_offset, future.high_watermark)
            if start > future.log_start_offset:
                future.maybe_increment_log_start_offset(start)
            return copied

    def flush_future_log(self) -> None:
        future = self.future_log
        if future is not None:
            future.flush()

    def maybe_replace_current_with_future_log(self, replace: Callable[[], UnifiedLog], max_tail_bytes: int) -> bool:
        """On the event loop (no append can come between the check and the swap): if the future log is
        at most ``max_tail_bytes`` behind, copy the rest and let ``replace()`` (the LogManager's swap)
        make it the log. True if the log was replaced."""
        current, copied = self.log, 0
        while self.future_log is not None and self.future_log_end_offset < current.log_end_offset:
            if copied >= max_tail_bytes:
                return False       # still far behind: the mover goes on
            step = self.copy_to_future_log(max_tail_bytes - copied)
            if step <= 0:
                return False
            copied += step
        with self.future_lock:
            future = self.future_log
            if future is None or future.log_end_offset != current.log_end_offset or current is not self.log:
                return False
            # an epoch this broker started leading without writing in it yet is in no batch: carry it over
            for entry in current.leader_epoch_cache.entries:
                if future.latest_epoch is None or entry.epoch > future.latest_epoch:
                    future.maybe_assign_epoch_start_offset(entry.epoch, entry.start_offset)
            self.log = replace()
            self.future_log = None
            return True

    @property
    def latest_epoch(self) -> int | None:
        return self.log.latest_epoch

    def end_offset_for_epoch(self, epoch: int):
        """(largest epoch <= ``epoch``, its end offset) in our log, or None."""
        return self.log.end_offset_for_epoch(epoch)

    def _effective_min_isr(self) -> int:
        # Kafka 3.7+: min.insync.replicas above the replication factor counts as the factor
        return min(self.min_insync_replicas, max(len(self.assignment), 1))

    # -- the high watermark ---------------------------------------------------------------
    def maybe_increment_leader_hw(self) -> bool:
        """Kafka 3.8's maybeIncrementLeaderHW; True if the high watermark moved up.

        HW = the smallest LEO over the leader and every follower that is in the maximal ISR,
        or caught up and eligible to join it (so a follower about to join is not left
        behind). It does not move while the committed ISR is smaller than the effective
        min.insync.replicas (KAFKA-15583), and never moves down.
        """
        if not self.is_leader or len(self.isr) < self._effective_min_isr():
            return False
        log = self.log
        new_hw = log.log_end_offset_metadata
        leader_end = new_hw.message_offset
        maximal = self.maximal_isr
        now = None
        for broker_id, replica in self.remote_replicas.items():
            if replica.log_end_offset.message_offset >= new_hw.message_offset:
                continue
            if broker_id not in maximal:
                if now is None:
                    now = self.clock()
                if (replica.refused or not replica.is_caught_up(leader_end, now, self.replica_lag_time_max_ms)
                        or not self.is_broker_alive(broker_id)):
                    continue
            new_hw = replica.log_end_offset
        return log.maybe_increment_high_watermark(new_hw) is not None

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, int]:
        """For DelayedProduce: (done, error) once the high watermark passes ``required_offset``;
        the maximal ISR must then still satisfy min.insync.replicas."""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark >= required_offset:
            if len(self.maximal_isr) >= self._effective_min_isr():
                return True, ErrorCode.NONE
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, ErrorCode.NONE

    # -- the ISR (leader only) ------------------------------------------------------------
    def _follower_in_sync(self, replica: Replica) -> bool:
        """Kafka's isFollowerInSync: at or past the HW, and caught up into the current leader epoch."""
        end = replica.log_end_offset.message_offset
        return end >= self.log.high_watermark and 0 <= self.leader_epoch_start_offset <= end

    def maybe_expand_isr(self, replica: Replica) -> bool:
        """Propose ``replica`` for the ISR if it has caught up; True if a change was sent."""
        if (self.pending_isr is not None or not self.is_leader or replica.broker_id in self.isr
                or self.alter_partition_manager is None or not self.is_broker_alive(replica.broker_id)
                or not self._follower_in_sync(replica)):
            return False
        new_isr = self.isr + (replica.broker_id,)
        self._submit_isr_change(PendingIsrChange(new_isr, new_isr, self.isr, self.leader_epoch,
                                                 self.partition_epoch))
        return True

    def out_of_sync_replicas(self, now: int | None = None) -> list[int]:
        """ISR followers whose LEO differs from ours and who have not caught up for replica.lag.time.max.ms."""
        if not self.is_leader or self.pending_isr is not None:
            return []
        now = self.clock() if now is None else now
        end = self.log.log_end_offset
        out = []
        for broker_id in self.isr:
            if broker_id == self.local_broker_id:
                continue
            replica = self.remote_replicas.get(broker_id)
            if replica is None or not replica.is_caught_up(end, now, self.replica_lag_time_max_ms):
                out.append(broker_id)
        return out

    def maybe_shrink_isr(self) -> bool:
        """The isr-expiration task's check; True if a smaller ISR was proposed. The HW keeps counting
        the lagging followers until the controller has committed the change."""
        if self.alter_partition_manager is None:
            return False
        out = self.out_of_sync_replicas()
        if not out:
            return False
        new_isr = tuple(b for b in self.isr if b not in out)
        logger.info("%s-%d: shrinking ISR from %s to %s (replicas %s lag)", self.topic, self.index, list(self.isr),
                 list(new_isr), out)
        self._submit_isr_change(PendingIsrChange(new_isr, self.isr, self.isr, self.leader_epoch,
                                                 self.partition_epoch))
        return True

    def _submit_isr_change(self, change: PendingIsrChange, retry: bool = False) -> None:
        self.pending_isr = change
        future = self.alter_partition_manager.submit(self, change, retry)
        future.add_done_callback(lambda f: self._on_isr_change_answered(change, f))

    def _on_isr_change_answered(self, change: PendingIsrChange, future) -> None:
        """Kafka's handleAlterPartitionUpdate / handleAlterPartitionError."""
        if self.pending_isr is not change:
            return                              # a LeaderAndIsr came first: this answer is out of date
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:
            self.isr_change_meters.mark_failed()
            code = error.error_code if isinstance(error, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
            if code in _ALTER_REVERT:
                logger.info("%s-%d: controller refused ISR %s (%s); back to %s", self.topic, self.index,
                         list(change.new_isr), ErrorCode(code).name, list(change.committed_isr))
                self.pending_isr = None
                # a refused expansion leaves the maximal ISR, and an ineligible replica (a broker in controlled
                # shutdown, typically: KRaft's isReplicaIsrEligible) no longer counts as about to join either:
                # the high watermark stops waiting for it now, not once it has left the live brokers, and no
                # fetch of its may come to move it (its fetchers are stopping)
                if code == ErrorCode.INELIGIBLE_REPLICA:
                    for broker_id in set(change.new_isr) - set(change.committed_isr):
                        if (replica := self.remote_replicas.get(broker_id)) is not None:
                            replica.refused = True
                if self.maybe_increment_leader_hw():
                    self.on_high_watermark_moved(self.key)
            elif code in _ALTER_AWAIT_METADATA:
                logger.info("%s-%d: ISR change to %s failed with %s; waiting for new metadata", self.topic,
                         self.index, list(change.new_isr), ErrorCode(code).name)
            else:
                self._submit_isr_change(change, retry=True)
            return
        leader_epoch, isr, partition_epoch = future.result()
        if leader_epoch != self.leader_epoch or partition_epoch < self.partition_epoch:
            return                              # stale: stay pending until a LeaderAndIsr
        if len(change.new_isr) < len(change.committed_isr):
            self.isr_change_meters.mark_shrink()
        elif len(change.new_isr) > len(change.committed_isr):
            self.isr_change_meters.mark_expand()
        self.isr = tuple(isr)
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        for broker_id in self.isr:
            if (replica := self.remote_replicas.get(broker_id)) is not None:
                replica.refused = False
        logger.info("%s-%d: ISR is now %s (partition epoch %d)", self.topic, self.index, list(self.isr),
                 partition_epoch)
        if self.maybe_increment_leader_hw():
            self.on_high_watermark_moved(self.key)

    # -- reads ----------------------------------------------------------------------------
    def fetch_records(self, replica_id: int, fetch_offset: int, max_bytes: int, isolation: FetchIsolation,
                      current_leader_epoch: int = -1, last_fetched_epoch: int = -1,
                      min_one_message: bool = True, log_start_offset: int = -1,
                      fetch_only_from_leader: bool = True) -> LogReadResult:
        """Read for a consumer or a follower, with Kafka's epoch, divergence and range checks; a
        follower serves consumers too when not ``fetch_only_from_leader`` (KIP-392), up to its HW."""
        from_follower = replica_id >= 0
        error = self.leader_error(current_leader_epoch,
                                  require_leader=replica_id != DEBUGGING_REPLICA_ID and fetch_only_from_leader)
        if not error and self.fenced and replica_id != DEBUGGING_REPLICA_ID:
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER       # our ZooKeeper session is in doubt: serve nobody
        if not error and from_follower and replica_id not in self.remote_replicas:
            error = ErrorCode.UNKNOWN_LEADER_EPOCH if current_leader_epoch >= 0 \
                else ErrorCode.NOT_LEADER_OR_FOLLOWER
        if error:
            return self._read_error(error)
        log = self.log
        if from_follower and log.config.remote_storage_enable \
                and log.log_start_offset <= fetch_offset < log.local_log_start_offset:
            # KIP-405: a follower below our local log start builds its log from there and the remote part
            return LogReadResult(ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE, None, log.high_watermark,
                                 log.log_start_offset, log.log_end_offset, log.last_stable_offset,
                                 error_message=f"{fetch_offset} is below the local log start")
        if from_follower and last_fetched_epoch >= 0:
            # Kafka's readRecords: an epoch we cannot place, or a fetch below our start, is out of range;
            # a follower whose last epoch ends earlier here (or that we never had) has diverged from us
            found = log.end_offset_for_epoch(last_fetched_epoch)
            if found is None or fetch_offset < log.log_start_offset:
                return LogReadResult(ErrorCode.OFFSET_OUT_OF_RANGE, None, log.high_watermark, log.log_start_offset,
                                     log.log_end_offset, log.last_stable_offset,
                                     error_message=f"cannot place epoch {last_fetched_epoch} at {fetch_offset}")
            if found[0] < last_fetched_epoch or found[1] < fetch_offset:
                return LogReadResult(ErrorCode.NONE, None, log.high_watermark, log.log_start_offset,
                                     log.log_end_offset, log.last_stable_offset, diverging_epoch=tuple(found))
        # offsets are read before the data, so a concurrent append cannot make HW exceed what was read
        high_watermark, log_start, log_end, lso = (log.high_watermark, log.log_start_offset, log.log_end_offset,
                                                   log.last_stable_offset)
        if from_follower and fetch_offset == log_end:
            # a follower at our end, as most partitions of its session are on most fetches: nothing to read
            info = FetchDataInfo(log.log_end_offset_metadata, FetchResult([], log_start, log_end), None)
        else:
            try:
                info = log.read(fetch_offset, max_bytes, isolation, min_one_message)
            except KafkaError as e:       # out of range: the offsets still tell the reader where to go
                return LogReadResult(e.error_code, None, high_watermark, log_start, log_end, lso,
                                     error_message=str(e))
        if from_follower:
            self._update_follower_fetch_state(replica_id, info.fetch_offset_metadata, log_start_offset, log_end)
        return LogReadResult(ErrorCode.NONE, info, high_watermark, log_start, log_end, lso)

    def preferred_read_replica(self, client_rack: str, fetch_offset: int, rack_of: Callable[[int], str | None]) -> int:
        """Kafka's RackAwareReplicaSelector, asked by the leader: -1 (read here) unless another in-sync
        replica in the consumer's rack holds ``fetch_offset`` and the leader is not in that rack; then
        the furthest along of them. ``rack_of(broker id)`` is None for a broker that is not alive."""
        if not client_rack or not self.is_leader or rack_of(self.local_broker_id) == client_rack:
            return -1
        best, best_key = -1, None
        for replica in self.remote_replicas.values():
            end = replica.log_end_offset.message_offset
            if replica.broker_id not in self.isr or rack_of(replica.broker_id) != client_rack \
                    or not replica.log_start_offset <= fetch_offset <= end:
                continue
            key = (end, replica.last_caught_up_time_ms)
            if best_key is None or key > best_key:
                best, best_key = replica.broker_id, key
        return best

    def _read_error(self, code: int, message: str | None = None) -> LogReadResult:
        return LogReadResult(code, None, -1, -1, -1, -1, error_message=message)

    def _update_follower_fetch_state(self, replica_id: int, fetch_offset: LogOffsetMetadata,
                                     follower_start_offset: int, leader_end_offset: int) -> None:
        """Kafka's updateFollowerFetchState: the follower's LEO is where it fetched from."""
        replica = self.remote_replicas[replica_id]
        now = self.clock()
        if fetch_offset.message_offset >= leader_end_offset:
            replica.last_caught_up_time_ms = max(replica.last_caught_up_time_ms, now)
        elif fetch_offset.message_offset >= replica.last_fetch_leader_log_end_offset:
            replica.last_caught_up_time_ms = max(replica.last_caught_up_time_ms, replica.last_fetch_time_ms)
        moved = replica.log_end_offset.message_offset != fetch_offset.message_offset
        start_moved = replica.log_start_offset != follower_start_offset
        replica.log_end_offset = fetch_offset
        replica.log_start_offset = follower_start_offset
        replica.last_fetch_leader_log_end_offset = leader_end_offset
        replica.last_fetch_time_ms = now
        self.maybe_expand_isr(replica)
        if moved and self.maybe_increment_leader_hw() or start_moved:
            # a waiting DeleteRecords completes when every replica's log start has reached its offset
            self.on_high_watermark_moved(self.key)

    def fetch_offset_snapshot(self):
        return self.log.fetch_offset_snapshot()

    # -- offsets questions (ListOffsets, OffsetForLeaderEpoch, DeleteRecords) -------------
    def fetch_offset_for_timestamp(self, timestamp: int, isolation: FetchIsolation,
                                   current_leader_epoch: int = -1, fetch_only_from_leader: bool = True):
        """(error, TimestampAndOffset | None) as ListOffsets answers.

        Latest is the last offset the reader may fetch (LSO for read_committed, else the high
        watermark); a timestamp lookup never names an offset at or past it, as Kafka's does.
        """
        error = self.leader_error(current_leader_epoch, fetch_only_from_leader)
        if error:
            return error, None
        log = self.log
        fetchable = (log.last_stable_offset if isolation == FetchIsolation.TXN_COMMITTED
                     else log.high_watermark if isolation == FetchIsolation.HIGH_WATERMARK else log.log_end_offset)
        if timestamp == LATEST_TIMESTAMP:
            return ErrorCode.NONE, TimestampAndOffset(NO_TIMESTAMP, fetchable, self.leader_epoch)
        if timestamp == EARLIEST_TIMESTAMP:
            return ErrorCode.NONE, TimestampAndOffset(NO_TIMESTAMP, log.log_start_offset, self.leader_epoch)
        if timestamp == EARLIEST_LOCAL_TIMESTAMP:       # the first offset on this broker's disk (KIP-405)
            return ErrorCode.NONE, TimestampAndOffset(NO_TIMESTAMP, log.local_log_start_offset, self.leader_epoch)
        if timestamp == LATEST_TIERED_TIMESTAMP:        # the last offset in remote storage, -1 for none
            highest = log.highest_offset_in_remote_storage if log.config.remote_storage_enable else -1
            epoch = log.leader_epoch_cache.epoch_for_offset(highest) if highest >= 0 else None
            return ErrorCode.NONE, TimestampAndOffset(NO_TIMESTAMP, highest, -1 if epoch is None else epoch)
        found = log.fetch_offset_by_timestamp(timestamp)
        if found is not None and found.offset >= fetchable and timestamp >= 0:
            found = None
        return ErrorCode.NONE, found

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int,
                                     fetch_only_from_leader: bool = True) -> EpochEndOffset:
        """OffsetForLeaderEpoch: the end of ``leader_epoch`` (the largest epoch <= it) in this log."""
        error = self.leader_error(current_leader_epoch, fetch_only_from_leader)
        if error:
            return EpochEndOffset(error, -1, -1)
        found = self.log.end_offset_for_epoch(leader_epoch)
        if found is None:
            return EpochEndOffset(ErrorCode.NONE, -1, -1)
        return EpochEndOffset(ErrorCode.NONE, found[0], found[1])

    # -- tiered storage (the remote log manager's questions and news) ----------------------------
    def set_remote_offsets(self, remote_start: int | None, highest: int) -> None:
        """What is in remote storage: its first offset (None: nothing) and its last (-1: nothing)."""
        self.log.set_remote_offsets(remote_start, highest)

    def delete_old_segments(self) -> int:
        """Retention now (a tiered log's local retention, once segments are copied)."""
        return self.log.delete_old_segments()

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (-1: the high watermark).

        Returns the offset every replica's log start must reach before the answer (Kafka's
        DelayedDeleteRecords waits for the low watermark); raises KafkaError (OFFSET_OUT_OF_RANGE past
        the HW).
        """
        if not self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        target = self.log.high_watermark if offset == -1 else offset
        if target < 0:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE)
        self.log.maybe_increment_log_start_offset(target)
        return max(target, self.log.log_start_offset)

    def low_watermark(self) -> int:
        """The smallest log start offset among the replicas on live brokers (Kafka's lowWatermarkIfLeader):
        a dead broker's replica does not hold DeleteRecords up."""
        starts = [self.log.log_start_offset]
        starts += [r.log_start_offset for r in self.remote_replicas.values()
                   if r.log_start_offset >= 0 and self.is_broker_alive(r.broker_id)]
        return min(starts)

    # -- descriptions ---------------------------------------------------------------------
    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Has ``producer_id`` a transaction open on this partition at ``producer_epoch`` (KIP-890: then its
        writes need no check)? Under transactions v2 a write at the next epoch, while the previous transaction's
        marker is still to come, belongs to the next transaction and is checked (Kafka's hasOngoingTransaction)."""
        entry = self.log.producer_state_manager.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset >= 0 and entry.producer_epoch == producer_epoch

    def active_producers(self):
        return self.log.producer_state_manager.active_producers()

    @property
    def log_size(self) -> int:
        return self.log.size

    @property
    def log_dir(self) -> str:
        return self.log.dir
