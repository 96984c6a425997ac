"""Partition: one hosted partition, its log, its leadership and its replicas (Kafka's Partition).

Every read and write of a partition's log goes through here, so that the rules
Kafka ties to a partition hold in one place: only the leader of the current
epoch appends and serves clients; a write is stamped with the leader epoch; the
high watermark is the smallest log end offset in the ISR and only moves up on
the leader; acks=-1 needs min.insync.replicas. On a single node the ISR is this
broker alone, so the high watermark follows the log end offset at once.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

from kafka_compat.protocol.batch_header import NO_TIMESTAMP
from kafka_compat.storage.local_log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    TimestampAndOffset,
)
from kafka_compat.storage.unified_log import FetchIsolation, LogOffsetMetadata, UnifiedLog
from kafka_compat.storage.validator import CLIENT

from ..protocol.errors import ErrorCode, KafkaError
from .metadata_cache import NO_LEADER, PartitionState

UNKNOWN_OFFSET_METADATA = LogOffsetMetadata(-1)
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass
class ReplicaState:
    """What the leader knows of one follower, from its fetches (Kafka's Replica)."""

    broker_id: int
    log_end_offset: LogOffsetMetadata = UNKNOWN_OFFSET_METADATA
    log_start_offset: int = -1
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_time_ms: int = 0
    broker_epoch: int = -1


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
                 clock=now_ms, on_high_watermark_moved=None):
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
        self.remote_replicas: dict[int, ReplicaState] = {}
        self.leader_epoch_start_offset = -1

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.index}, leader={self.leader_id}, epoch={self.leader_epoch}, "
                f"isr={list(self.isr)}, hw={self.high_watermark}, leo={self.log_end_offset})")

    # -- offsets --------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

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
    def make_leader(self, state: PartitionState) -> bool:
        """Become leader in ``state.leader_epoch``; True if this broker was not the leader of that epoch.

        A new epoch starts at the log end offset (its first batch will carry it), and the
        followers' fetch states are reset, as Kafka's makeLeader does. The high watermark
        is kept, then raised as far as the ISR allows.
        """
        new_epoch = state.leader_epoch != self.leader_epoch
        was_leader = self.is_leader
        self._apply(state)
        if new_epoch:
            self.log.maybe_assign_epoch_start_offset(state.leader_epoch, self.log.log_end_offset)
            self.leader_epoch_start_offset = self.log.log_end_offset
            now = self.clock()
            self.remote_replicas = {b: ReplicaState(b, last_caught_up_time_ms=now if b in state.isr else 0)
                                    for b in state.replicas if b != self.local_broker_id}
        self.maybe_increment_leader_hw()
        return new_epoch or not was_leader

    def make_follower(self, state: PartitionState) -> bool:
        """Follow ``state.leader``; True if the leader or epoch changed (the fetcher must restart)."""
        changed = state.leader_epoch != self.leader_epoch or state.leader != self.leader_id
        self._apply(state)
        self.remote_replicas = {}
        self.leader_epoch_start_offset = -1
        return changed

    def _apply(self, state: PartitionState) -> None:
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.controller_epoch = state.controller_epoch
        self.assignment = tuple(state.replicas)
        self.isr = tuple(state.isr)

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

    def append_records_to_follower(self, records):
        """A follower's append of what it fetched: the leader's offsets and epochs are kept."""
        return self.log.append_as_follower(records)

    def truncate_to(self, offset: int) -> bool:
        return self.log.truncate_to(offset)

    def _effective_min_isr(self) -> int:
        # Kafka 3.7+: min.insync.replicas above the replication factor counts as the factor
        return min(self.min_insync_replicas, max(len(self.assignment), 1))

    # -- the high watermark ---------------------------------------------------------------
    def maybe_increment_leader_hw(self) -> bool:
        """HW = the smallest LEO over the ISR (the leader included); True if it moved up."""
        if not self.is_leader:
            return False
        new_hw = self.log.log_end_offset_metadata
        for broker_id in self.isr:
            if broker_id == self.local_broker_id:
                continue
            replica = self.remote_replicas.get(broker_id)
            if replica is None:
                continue
            if replica.log_end_offset.message_offset < new_hw.message_offset:
                new_hw = replica.log_end_offset
        return self.log.maybe_increment_high_watermark(new_hw) is not None

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, int]:
        """For DelayedProduce: (done, error) once the high watermark passes ``required_offset``."""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark >= required_offset:
            if len(self.isr) >= self._effective_min_isr():
                return True, ErrorCode.NONE
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, ErrorCode.NONE

    # -- reads ----------------------------------------------------------------------------
    def fetch_records(self, replica_id: int, fetch_offset: int, max_bytes: int, isolation: FetchIsolation,
                      current_leader_epoch: int = -1, last_fetched_epoch: int = -1,
                      min_one_message: bool = True, log_start_offset: int = -1) -> LogReadResult:
        """Read for a consumer or a follower, with Kafka's epoch, divergence and range checks."""
        from_follower = replica_id >= 0
        error = self.leader_error(current_leader_epoch,
                                  require_leader=replica_id != DEBUGGING_REPLICA_ID)
        if not error and from_follower and replica_id not in self.remote_replicas:
            error = ErrorCode.UNKNOWN_LEADER_EPOCH if current_leader_epoch >= 0 \
                else ErrorCode.NOT_LEADER_OR_FOLLOWER
        if error:
            return self._read_error(error)
        log = self.log
        if from_follower and last_fetched_epoch >= 0:
            found = log.end_offset_for_epoch(last_fetched_epoch)
            if found is None or found[0] < last_fetched_epoch or found[1] < fetch_offset:
                epoch, end = found if found is not None else (-1, -1)
                return LogReadResult(ErrorCode.NONE, None, log.high_watermark, log.log_start_offset,
                                     log.log_end_offset, log.last_stable_offset, diverging_epoch=(epoch, end))
        # offsets are read before the data, so a concurrent append cannot make HW exceed what was read
        high_watermark, log_start, log_end, lso = (log.high_watermark, log.log_start_offset, log.log_end_offset,
                                                   log.last_stable_offset)
        try:
            info = log.read(fetch_offset, max_bytes, isolation, min_one_message)
        except KafkaError as e:       # out of range: the offsets still tell the reader where to go
            return LogReadResult(e.error_code, None, high_watermark, log_start, log_end, lso, error_message=str(e))
        if from_follower:
            self._update_follower_fetch_state(replica_id, info.fetch_offset_metadata, log_start_offset, log_end)
        return LogReadResult(ErrorCode.NONE, info, high_watermark, log_start, log_end, lso)

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
        replica.log_end_offset = fetch_offset
        replica.log_start_offset = follower_start_offset
        replica.last_fetch_leader_log_end_offset = leader_end_offset
        replica.last_fetch_time_ms = now
        if self.maybe_increment_leader_hw():
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
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return ErrorCode.NONE, TimestampAndOffset(NO_TIMESTAMP, log.log_start_offset, self.leader_epoch)
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

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (-1: the high watermark).

        Returns the new low watermark; raises KafkaError (OFFSET_OUT_OF_RANGE past the HW).
        """
        if not self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        target = self.log.high_watermark if offset == -1 else offset
        if target < 0:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE)
        self.log.maybe_increment_log_start_offset(target)
        return self.low_watermark()

    def low_watermark(self) -> int:
        """The smallest log start offset among the replicas this leader hears from."""
        starts = [self.log.log_start_offset]
        starts += [r.log_start_offset for r in self.remote_replicas.values() if r.log_start_offset >= 0]
        return min(starts)

    # -- descriptions ---------------------------------------------------------------------
    def has_ongoing_transaction(self, producer_id: int) -> bool:
        """Has ``producer_id`` a transaction open on this partition (KIP-890: then its writes need no check)?"""
        entry = self.log.producer_state_manager.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset >= 0

    def active_producers(self):
        return self.log.producer_state_manager.active_producers()

    @property
    def log_size(self) -> int:
        return self.log.size

    @property
    def log_dir(self) -> str:
        return self.log.dir
