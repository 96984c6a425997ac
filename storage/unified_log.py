"""UnifiedLog: a partition's log as replication and transactions see it.

Kafka's UnifiedLog. It wraps the segments (LocalLog) with:
- validation and offset assignment of appends (a leader's, stamped with its leader epoch) and
  the checks of a follower's appends (the leader's offsets and epochs kept);
- the LeaderEpochFileCache (``leader-epoch-checkpoint``): where each leader epoch began;
- the ProducerStateManager: idempotent retries answered with their original offsets, fenced
  epochs and sequence gaps refused, transactions opened by data and closed by markers, and
  producer snapshots so a restart replays only the batches after the latest one;
- the high watermark, kept apart from the log end offset, and the last stable offset;
  reads stop at one of the three (FetchIsolation);
- the transaction index (aborted transactions handed to read_committed reads).

Every change happens under LocalLog's lock (``lock``); reads take none. The append path
does no per-record work: one header unpack, one dict lookup for idempotent producers, one
write; a new leader epoch costs a checkpoint write, a segment roll a producer snapshot.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import os
import struct
from operator import attrgetter
from typing import Callable, NamedTuple

from crc32c import crc32c

from kafka_compat.clock import now_ms
from kafka_compat.configdef import LONG_MAX
from kafka_compat.protocol.batch_header import (
    ATTRIBUTES_OFFSET,
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    OFFSET_LENGTH_EPOCH,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    V2_APPEND_FIELDS,
    BatchHeader,
    crc_valid,
    parse_header,
)
from kafka_compat.protocol.errors import ErrorCode, KafkaError
from kafka_compat.protocol.records import (
    ControlRecordType,
    CorruptRecordError,
    RecordBatch,
    control_record_type,
    end_transaction_marker,
    split_batches,
)

from .fetch_data_info import FetchDataInfo, FetchIsolation, FetchResult, FileSlice  # noqa: F401  (contract)
from .leader_epoch_cache import LeaderEpochFileCache
from .local_log import (  # noqa: F401  (contract)
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    LocalLog,
    TimestampAndOffset,
)
from .log_config import LogConfig
from .log_offset_metadata import UNKNOWN_FILE_POSITION, UNKNOWN_OFFSET, LogOffsetMetadata
from .producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    INT32_MAX,
    BatchMetadata,
    ProducerAppendInfo,
    ProducerStateManager,
)
from .scheduler import Scheduler
from .segment import LogSegment
from .transaction_index import AbortedTxn  # noqa: F401  (contract)
from .validator import CLIENT, REPLICATION, validate_and_assign

log = logging.getLogger(__name__)

# Every move of any log's high watermark draws a number here (next() on a count is atomic), and so does the
# high watermark checkpoint task: when its draw follows its previous one, no high watermark moved in between and
# an idle broker need not walk its partitions (see high_watermark_moves).
_HW_MOVES = itertools.count()

# Besides its snapshot at each segment's base, the producer state is snapshotted (unsynced) every this many offsets,
# the last two such kept: a follower's truncation, which reloads the latest snapshot below its target and replays
# the batches after it, then replays a few thousand batches at most instead of everything since the segment began
# (80,000 small batches took 1.5 s on a loaded machine, on the event loop, while the new leader waited for this
# follower to acknowledge: the SIGTERM failover's outliers).
PRODUCER_SNAPSHOT_INTERVAL = 4096


def high_watermark_moves() -> int:
    """A number that is exactly one more than the previous call's when no high watermark moved since."""
    return next(_HW_MOVES)

_new = tuple.__new__   # builds named tuples without their Python-level __new__ (hot path)
_SLOW_ATTRIBUTES = TIMESTAMP_TYPE_MASK | CONTROL_FLAG_MASK   # batches the fast path leaves to the validator


class LogAppendInfo(NamedTuple):
    first_offset: int             # -1 when unknown (a follower's legacy entries)
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int          # -1 unless message.timestamp.type=LogAppendTime (or a retry: its timestamp)
    log_start_offset: int
    valid_bytes: int
    duplicate: bool               # an idempotent retry, answered with the original offsets; nothing written
    leader_epoch: int             # PartitionLeaderEpoch of the last batch (-1: none)


class LogOffsetSnapshot(NamedTuple):
    log_start_offset: int
    log_end_offset: LogOffsetMetadata
    high_watermark: LogOffsetMetadata
    last_stable_offset: LogOffsetMetadata


class EpochEndOffset(NamedTuple):
    leader_epoch: int
    end_offset: int


def _of_local(name: str, doc: str | None = None) -> property:
    """A read-only attribute of the wrapped LocalLog."""
    return property(attrgetter("_local." + name), doc=doc)


def _fsync_file(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class UnifiedLog:
    def __init__(self, directory: str, config: LogConfig | None = None, *, recovery_point: int = 0,
                 log_start_offset: int = 0, had_clean_shutdown: bool = False, scheduler: Scheduler | None = None,
                 clock: Callable[[], int] = now_ms,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS):
        local = self._local = LocalLog(directory, config, recovery_point=recovery_point,
                                       log_start_offset=log_start_offset, had_clean_shutdown=had_clean_shutdown,
                                       scheduler=scheduler, clock=clock)
        self.dir, self.name, self.topic, self.partition = local.dir, local.name, local.topic, local.partition
        self._lock = local.lock
        self._clock = clock
        self._scheduler = local.scheduler
        self.leader_epoch_cache = LeaderEpochFileCache(directory, self._scheduler, self.name)
        self.producer_state_manager = ProducerStateManager(directory, producer_id_expiration_ms, self.name,
                                                           local.snapshots_on_load)
        # Kafka starts the high watermark at the log start; the partition sets it (checkpoint, leader).
        self._hw_meta = LogOffsetMetadata(local.log_start_offset)
        self.high_watermark = local.log_start_offset
        self._fus_meta: LogOffsetMetadata | None = None   # the first unstable offset with its position
        # tiered storage (set by the remote log manager): the first offset held remotely (None: nothing is),
        # and the last offset copied there (-1: none), which bounds what local retention may delete
        self.remote_log_start_offset: int | None = None
        self.highest_offset_in_remote_storage = -1
        self._checkpointed_start = log_start_offset     # a DeleteRecords into the remote part, kept over restarts
        with self._lock:
            self._load(had_clean_shutdown)
            for segment in local.segments:   # opened to be checked: each opens again at its first use
                segment.release_files(uncount=True)
        local.on_roll = self._on_roll
        self._producer_snapshot_due = local.next_offset + PRODUCER_SNAPSHOT_INTERVAL
        self._set_fast()

    # -- loading ------------------------------------------------------------------------------
    def _load(self, had_clean_shutdown: bool) -> None:
        """Bring the epoch cache and the producer state in line with the loaded segments."""
        local = self._local
        end, start = local.next_offset, local.log_start_offset
        cache = self.leader_epoch_cache
        if not cache.loaded and end > start:
            self._rebuild_leader_epochs()
        recovered = [s for s in local.segments if s.base_offset in set(local.recovered_on_load)]
        cache.assign_all(e for s in recovered for e in s.recovered_epochs
                         if cache.latest_epoch is None or e[0] > cache.latest_epoch)
        # an empty log keeps the epoch that began at its end: its leader assigns the same entry
        # again at once, which would otherwise cost each empty partition two checkpoint writes
        # (and fsyncs) per restart
        cache.truncate_from_end(end + 1 if end == start else end)
        cache.truncate_from_start(start)
        if end > start and not self._epochs_fit_log():
            self._rebuild_leader_epochs()
            cache.truncate_from_end(end)
            cache.truncate_from_start(start)
        # Recovery emptied the transaction indexes it rebuilt; the ones of segments holding
        # markers are written again by replaying from a snapshot at or below them.
        rebuild = {s.base_offset for s in recovered if s.recovered_markers}
        psm = self.producer_state_manager
        had_snapshot = psm.latest_snapshot_offset() is not None
        replay_from = psm.truncate_and_reload(start, end, self._clock(), min(rebuild) if rebuild else None)
        if not had_snapshot and had_clean_shutdown and not rebuild:
            # Kafka's upgrade case: a cleanly closed log without snapshots is not scanned; the
            # state starts empty from here.
            if end > start:
                psm.take_snapshot(end)
            return
        if replay_from < end:
            self._replay(replay_from, end, rebuild)
            psm.take_snapshot(end)

    def _batch_from(self, offset: int):
        """The first batch holding ``offset`` or after it (past segments compaction emptied)."""
        segments = self._local.segments
        first = max(bisect.bisect_right([s.base_offset for s in segments], offset) - 1, 0)
        for segment in segments[first:]:
            info = segment.translate_offset(offset)
            if info is not None:
                return info
        return None

    def _batch_before(self, offset: int):
        """The last batch ending below ``offset``, however far back compaction left it, or None."""
        segments = self._local.segments
        for i in range(bisect.bisect_right([s.base_offset for s in segments], offset - 1) - 1, -1, -1):
            info = segments[i].last_batch_below(offset)
            if info is not None:
                return info
        return None

    def _epochs_fit_log(self) -> bool:
        """Whether the epoch cache can describe this log, from a few batch headers: the latest epoch
        is the last batch's, and each entry's start offset begins a batch of at least that epoch
        (more where compaction removed its first ones) that follows a batch of a lower one. A
        checkpoint damaged into other valid-looking entries (an epoch gone, a start moved) fails."""
        local = self._local
        end, start = local.next_offset, local.log_start_offset
        last_segment = next((s for s in reversed(local.segments) if s.size), None)
        last = None
        if last_segment is not None:
            last = last_segment.tail_batch   # the load's check just walked to it
            if last is None or last.last_offset + 1 != last_segment.next_offset:   # from its last index entry
                _, position = last_segment.offset_index.lookup(last_segment.next_offset)
                for last in last_segment.batches(position):
                    pass
        if last is None or last.magic < 2 or last.partition_leader_epoch < 0:
            return True
        entries = self.leader_epoch_cache.entries
        if not entries or entries[-1][0] != last.partition_leader_epoch:
            log.warning("%s: the leader epoch checkpoint does not end with the log's epoch %d",
                        self.name, last.partition_leader_epoch)
            return False
        previous = -1
        for epoch, first in entries:
            previous, prior = epoch, previous
            if first < start:
                continue
            info = self._batch_from(first) if first < end else None
            # the last batch before an epoch's start is of the entry before (of an older one where
            # compaction removed that entry's batches); it may lie behind a gap, and a start moved
            # into a later gap must not hide it
            before = self._batch_before(first) if first > start else None
            if before is not None and before.last_offset < start:
                before = None   # below the log start (DeleteRecords): not the log's any more
            if info is None or info.base_offset < first or info.partition_leader_epoch < epoch or \
                    (info.base_offset == first and info.partition_leader_epoch != epoch) or \
                    (before is not None and (
                        before.partition_leader_epoch > prior or
                        (not local.config.compact and before.partition_leader_epoch != prior))):
                log.warning("%s: leader epoch %d does not start at offset %d of the log", self.name, epoch, first)
                return False
        return True

    def _rebuild_leader_epochs(self) -> None:
        """The checkpoint was missing or unreadable: take each epoch's first batch from the log."""
        entries = []
        for segment in self._local.segments:
            for info in segment.batches():
                epoch = info.partition_leader_epoch if info.magic >= 2 else -1
                if epoch < 0 or (entries and entries[-1][0] == epoch):
                    continue
                # epochs never fall in a log: a fall means the field of a batch before rose by damage (it
                # lies outside the checksum), so the entries above this epoch go, as Kafka's assign drops
                # conflicting ones, and an epoch seen before keeps its first start
                while entries and entries[-1][0] > epoch:
                    entries.pop()
                if not entries or entries[-1][0] != epoch:
                    entries.append((epoch, info.base_offset))
        log.warning("%s: rebuilt %d leader epoch entries from the log", self.name, len(entries))
        self.leader_epoch_cache.clear(flush=False)
        self.leader_epoch_cache.assign_all(entries)

    def _replay(self, start: int, end: int, rebuild_txn_index: set) -> None:
        """Apply the producer fields of the batches in [start, end) (Kafka's rebuildProducerState).

        In the segments named in ``rebuild_txn_index`` (recovery emptied their transaction
        indexes) also write the aborted transactions again, as Kafka's LogSegment.recover does."""
        local = self._local
        psm = self.producer_state_manager
        segments = local.segments
        first = max(0, bisect.bisect_right([s.base_offset for s in segments], start) - 1)
        for segment in segments[first:]:
            if segment.base_offset >= end:
                break
            recovered = segment.base_offset in rebuild_txn_index
            position = 0
            if segment.base_offset < start:
                info = segment.translate_offset(start)
                if info is None:
                    continue
                position = info.position
            for info in segment.batches(position):
                if info.base_offset >= end:
                    break
                if info.magic < 2 or info.producer_id < 0:
                    continue
                append_info = psm.prepare_update(info.producer_id, REPLICATION)
                try:
                    completed = self._apply_header(append_info, info, self._marker_of(segment, info),
                                                   LogOffsetMetadata(info.base_offset))
                except KafkaError as exc:
                    log.warning("%s: producer state skips the batch at offset %d: %s", self.name, info.base_offset,
                                exc)
                    continue
                psm.update(append_info)
                if completed is not None:
                    self._complete_txn(completed, segment if recovered else None)

    @staticmethod
    def _marker_of(segment: LogSegment, info: BatchHeader):
        """(control type, coordinator epoch, timestamp) of a transaction marker batch, or None."""
        if not info.is_control:
            return None
        return UnifiedLog._marker_in(memoryview(segment.read_bytes(info.position, info.size)), 0, info)

    @staticmethod
    def _marker_in(data, position: int, info: BatchHeader):
        try:
            record = next(iter(RecordBatch(data, position).records()), None)
            if record is None:
                return None   # the cleaner emptied it: the transaction is gone from the log
            control_type = control_record_type(record.key)
            if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                return None
            return control_type, end_transaction_marker(record.value)[1], record.timestamp
        except CorruptRecordError as exc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unreadable control batch at offset {info.base_offset}: "
                                                        f"{exc}") from None

    @staticmethod
    def _apply_header(append_info: ProducerAppendInfo, info: BatchHeader, marker, first_offset_metadata):
        """One batch into a ProducerAppendInfo; returns the transaction a marker completes."""
        if info.is_control:
            if marker is None:
                return None
            control_type, coordinator_epoch, timestamp = marker
            return append_info.append_end_txn_marker(control_type, coordinator_epoch, info.producer_epoch,
                                                     info.base_offset, timestamp)
        last_seq = (info.base_sequence + info.last_offset - info.base_offset) & INT32_MAX
        append_info.append_data_batch(info.producer_epoch, info.base_sequence, last_seq, info.max_timestamp,
                                      first_offset_metadata, info.last_offset, info.is_transactional)
        return None

    def _complete_txn(self, completed, segment: LogSegment | None) -> None:
        """A marker closed a transaction: an abort goes to the marker's segment's transaction index
        (``segment``; None when that index is intact already), then the state moves on."""
        psm = self.producer_state_manager
        if completed.is_aborted and segment is not None:
            segment.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                                completed.last_offset, psm.last_stable_offset(completed)))
        try:
            psm.complete_txn(completed)
        except ValueError as exc:
            log.warning("%s", exc)
        self._fus_meta = None

    # -- the segment half's facts (attrgetter properties: no Python frame per read) ------------------
    config = _of_local("config")
    closed = _of_local("closed")
    segments = _of_local("segments", "the segments, oldest first (a tuple: a reader keeps a consistent list)")
    active_segment = _of_local("active_segment")
    local_log_start_offset = _of_local("log_start_offset", "the first offset on local disk (localLogStartOffset)")
    log_end_offset = _of_local("next_offset")

    @property
    def log_start_offset(self) -> int:
        """The first readable offset: in remote storage when tiered segments hold older data than the local
        ones (Kafka's logStartOffset against its localLogStartOffset)."""
        local = self._local.log_start_offset
        remote = self.remote_log_start_offset
        return local if remote is None or remote >= local else remote
    log_end_offset_metadata = _of_local("log_end_offset_metadata")
    recovery_point = _of_local("recovery_point", "offsets below it are fsynced; recovery trusts them")
    unflushed_messages = _of_local("unflushed_messages")
    last_flush_ms = _of_local("last_flush_ms")
    truncated_on_load = _of_local("truncated_on_load", "bytes recovery cut from the segments when loading")
    size = _of_local("size")
    lock = _of_local("lock", "LocalLog's lock: held around every change")

    def segment_for(self, offset: int) -> LogSegment | None:
        return self._local.segment_for(offset)

    def _set_fast(self) -> None:
        """Whether a leader append may take the header-only path: open, and no rule reads records."""
        config = self._local.config
        self._fast = not (self._local.closed or config.reads_records or config.log_append_time)
        self._max_message_bytes = config.max_message_bytes
        self._after_max_ms = config.message_timestamp_after_max_ms

    # -- appends ------------------------------------------------------------------------------
    def append_as_leader(self, records, leader_epoch: int, origin: str = CLIENT) -> LogAppendInfo:
        """Validate ``records``, assign offsets and ``leader_epoch`` in place, check and update the
        producer state, and write them with one write call. Raises KafkaError with Kafka's code.

        The shape every current client sends (one valid magic-2 CreateTime batch in a writable
        buffer, on a topic whose rules need no record reads) is accepted from one unpack of its
        header; anything else, including every batch that breaks a rule, goes through
        validator.validate_and_assign. A retry of one of an idempotent producer's last five
        batches writes nothing and answers with that batch's offsets (``duplicate``).
        """
        mv = records if type(records) is memoryview else memoryview(records)
        size = len(mv)
        lock = self._lock
        lock.acquire()   # not `with`: acquire/release in try/finally costs less per append
        try:
            local = self._local
            next_offset = local.next_offset
            try:
                (base, length, magic, crc, attrs, last_delta, max_timestamp, producer_id, producer_epoch,
                 base_sequence, count) = V2_APPEND_FIELDS.unpack_from(mv)
                fast = (self._fast and origin is CLIENT and magic == 2 and length + LOG_OVERHEAD == size
                        and not base and not attrs & _SLOW_ATTRIBUTES and size <= self._max_message_bytes
                        and count == last_delta + 1 and last_delta >= 0 and (producer_id < 0 or base_sequence >= 0)
                        and crc == crc32c(mv[ATTRIBUTES_OFFSET:])
                        # message.timestamp.after.max.ms, on the header: the validator names the records
                        and (self._after_max_ms == LONG_MAX or max_timestamp <= self._clock() + self._after_max_ms))
                if fast:
                    OFFSET_LENGTH_EPOCH.pack_into(mv, 0, next_offset, length, leader_epoch)
            except (struct.error, TypeError, BufferError):   # short, read-only or non-contiguous buffer
                fast = False
            if not fast:
                return self._append_validated(mv, leader_epoch, origin)
            last_offset = next_offset + last_delta
            if producer_id >= 0:
                duplicate = self.producer_state_manager.check_client_batch(
                    producer_id, producer_epoch, base_sequence, last_delta, attrs & TRANSACTIONAL_FLAG_MASK,
                    next_offset)
                if duplicate is not None:
                    return self._duplicate(duplicate, size)
            if leader_epoch != self.leader_epoch_cache.latest_epoch and leader_epoch >= 0:
                self.leader_epoch_cache.assign(leader_epoch, next_offset)
            segment = local.append(mv, next_offset, last_offset, max_timestamp, last_offset)
            if producer_id >= 0:
                self.producer_state_manager.update_client_batch(
                    producer_id, producer_epoch, (base_sequence + last_delta) & INT32_MAX, next_offset, last_offset,
                    max_timestamp, LogOffsetMetadata(next_offset, segment.base_offset, segment.size - size)
                    if attrs & TRANSACTIONAL_FLAG_MASK else None)
            if last_offset >= self._producer_snapshot_due:
                self._interim_producer_snapshot()
        finally:
            lock.release()
        return _new(LogAppendInfo, (next_offset, last_offset, max_timestamp, last_offset, -1,
                                    local.log_start_offset, size, False, leader_epoch))

    def _duplicate(self, duplicate: BatchMetadata, size: int) -> LogAppendInfo:
        return LogAppendInfo(duplicate.first_offset, duplicate.last_offset, duplicate.timestamp,
                             duplicate.last_offset, duplicate.timestamp, self._local.log_start_offset, size, True, -1)

    def _append_validated(self, mv, leader_epoch: int, origin: str) -> LogAppendInfo:
        """The general leader append (lock held): Kafka's LogValidator, then the producer state."""
        local = self._local
        if local.closed:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"log {self.name} is closed")
        next_offset = local.next_offset
        result = validate_and_assign(mv, next_offset, local.config, self._clock(), leader_epoch, origin)
        data = result.data
        psm = self.producer_state_manager
        meta = result.batches[0] if result.batches else None   # magic 2: exactly one batch
        if origin == CLIENT and meta is not None and meta.producer_id >= 0:
            duplicate = psm.check_client_batch(meta.producer_id, meta.producer_epoch, meta.base_sequence,
                                               meta.last_offset_delta, meta.is_transactional, next_offset)
            if duplicate is not None:
                return self._duplicate(duplicate, len(data))
            if leader_epoch != self.leader_epoch_cache.latest_epoch and leader_epoch >= 0:
                self.leader_epoch_cache.assign(leader_epoch, next_offset)
            segment = local.append(data, next_offset, result.last_offset, result.max_timestamp,
                                   result.offset_of_max_timestamp)
            psm.update_client_batch(meta.producer_id, meta.producer_epoch,
                                    (meta.base_sequence + meta.last_offset_delta) & INT32_MAX, next_offset,
                                    result.last_offset, result.max_timestamp,
                                    LogOffsetMetadata(next_offset, segment.base_offset, segment.size - len(data))
                                    if meta.is_transactional else None)
        else:   # a coordinator's batch (a marker, or offsets), or legacy entries (no producer ids)
            producers = self._analyze_producers(data, origin) if meta is not None and meta.producer_id >= 0 else None
            if leader_epoch != self.leader_epoch_cache.latest_epoch and leader_epoch >= 0:
                self.leader_epoch_cache.assign(leader_epoch, next_offset)
            segment = local.append(data, next_offset, result.last_offset, result.max_timestamp,
                                   result.offset_of_max_timestamp)
            if producers is not None:
                self._apply_producers(producers, segment, len(data))
        if result.last_offset >= self._producer_snapshot_due:
            self._interim_producer_snapshot()
        return LogAppendInfo(next_offset, result.last_offset, result.max_timestamp, result.offset_of_max_timestamp,
                             result.log_append_time, local.log_start_offset, len(data), False, leader_epoch)

    def _analyze_producers(self, data, origin: str):
        """Check every magic-2 batch with a producer id against the producer state before the
        write (Kafka's analyzeAndValidateProducerState). Returns (append infos, completed
        transactions, [(started transaction, its position in ``data``)])."""
        psm = self.producer_state_manager
        infos: dict[int, ProducerAppendInfo] = {}
        completed, started = [], []
        mv = memoryview(data)
        position = 0
        while position + LOG_OVERHEAD < len(mv):
            info = parse_header(mv, position)
            if info.magic >= 2 and info.producer_id >= 0:
                append_info = infos.get(info.producer_id)
                if append_info is None:
                    append_info = infos[info.producer_id] = psm.prepare_update(info.producer_id, origin)
                before = len(append_info.started_transactions)
                marker = self._marker_in(mv, position, info) if info.is_control else None
                done = self._apply_header(append_info, info, marker, LogOffsetMetadata(info.base_offset))
                if done is not None:
                    completed.append(done)
                if len(append_info.started_transactions) > before:
                    started.append((append_info.started_transactions[-1], position))
            position += info.size
        return infos, completed, started

    def _apply_producers(self, producers, segment: LogSegment, size: int) -> None:
        """After the write: the producer updates, positions for the transactions begun, the
        completed transactions (aborts into the segment's transaction index)."""
        infos, completed, started = producers
        written_at = segment.size - size
        for txn, position in started:
            txn.first_offset = LogOffsetMetadata(txn.first_offset.message_offset, segment.base_offset,
                                                 written_at + position)
        psm = self.producer_state_manager
        for append_info in infos.values():
            psm.update(append_info)
        for done in completed:
            self._complete_txn(done, segment)

    def append_as_follower(self, records) -> LogAppendInfo:
        """Append a leader's batches as they are: offsets and PartitionLeaderEpoch kept.

        Each batch must pass its CRC, offsets must increase, and the first must not be below
        the log end offset (a gap above it is a compacted leader's); otherwise KafkaError. New
        epochs go to the leader epoch cache, producer state is updated leniently (REPLICATION).
        """
        mv = records if isinstance(records, memoryview) else memoryview(records)
        if mv.format != "B":
            mv = mv.cast("B")
        try:
            entries, stop = split_batches(mv)
        except CorruptRecordError as exc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{self.name}: {exc}") from None
        data = mv[:stop]
        with self._lock:
            local = self._local
            if local.closed:
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"log {self.name} is closed")
            if not entries:
                return LogAppendInfo(-1, -1, -1, -1, -1, local.log_start_offset, 0, False, -1)
            headers = []
            last_offset, max_timestamp, offset_of_max = -1, -1, -1
            for position, size, _magic in entries:
                info = parse_header(data, position)
                if not crc_valid(data, position, size):
                    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Record is corrupt in {self.name} at offset "
                                                                f"{info.base_offset}")
                if info.last_offset <= last_offset or info.last_offset < info.base_offset:
                    raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                     f"Out of order offsets found in append to {self.name}: {info.base_offset} to "
                                     f"{info.last_offset} after {last_offset}")
                last_offset = info.last_offset
                if info.max_timestamp > max_timestamp:
                    max_timestamp, offset_of_max = info.max_timestamp, info.last_offset
                headers.append(info)
            first = headers[0]
            first_offset = first.base_offset if first.magic >= 2 else -1
            if (first.base_offset if first.magic >= 2 else first.last_offset) < local.next_offset:
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                 f"Unexpected offset in append to {self.name}: first offset {first.base_offset} is "
                                 f"below the next offset {local.next_offset}")
            producers = self._analyze_producers(data, REPLICATION)
            cache = self.leader_epoch_cache
            for info in headers:
                epoch = info.partition_leader_epoch
                if info.magic >= 2 and epoch >= 0 and epoch != cache.latest_epoch:
                    cache.assign(epoch, info.base_offset)
            segment = local.append(data, first.base_offset if first.magic >= 2 else local.next_offset,
                                   last_offset, max_timestamp, offset_of_max)
            self._apply_producers(producers, segment, len(data))
            if last_offset >= self._producer_snapshot_due:
                self._interim_producer_snapshot()
            last_epoch = headers[-1].partition_leader_epoch if headers[-1].magic >= 2 else -1
            return LogAppendInfo(first_offset, last_offset, max_timestamp, offset_of_max, -1, local.log_start_offset,
                                 len(data), False, last_epoch)

    # -- leader epochs --------------------------------------------------------------------------
    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        with self._lock:
            self.leader_epoch_cache.assign(leader_epoch, start_offset)

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, leader_epoch: int) -> EpochEndOffset | None:
        """(epoch, end offset) as OffsetForLeaderEpoch answers it, or None when undefined."""
        epoch, offset = self.leader_epoch_cache.end_offset_for(leader_epoch, self._local.next_offset)
        return None if offset < 0 else EpochEndOffset(epoch, offset)

    # -- high watermark and last stable offset -----------------------------------------------------
    def _set_high_watermark(self, metadata: LogOffsetMetadata) -> None:
        if metadata.message_offset < 0:
            raise ValueError("the high watermark cannot be negative")
        if metadata.message_offset < self.high_watermark:
            log.debug("%s: high watermark moves down from %s to %s", self.name, self._hw_meta, metadata)
        self._hw_meta = metadata
        self.high_watermark = metadata.message_offset
        next(_HW_MOVES)
        self.producer_state_manager.on_high_watermark_updated(metadata.message_offset)

    def update_high_watermark(self, high_watermark) -> int:
        """Set the high watermark (an offset or LogOffsetMetadata), kept within [log start, log end];
        it may go down (a follower takes the leader's). At the log end it takes the log end's metadata."""
        with self._lock:
            local = self._local
            full = isinstance(high_watermark, LogOffsetMetadata)
            offset = high_watermark.message_offset if full else high_watermark
            if offset >= local.next_offset:
                metadata = local.log_end_offset_metadata
            elif offset < local.log_start_offset or not full:
                offset = max(offset, local.log_start_offset)
                metadata = _new(LogOffsetMetadata, (offset, UNKNOWN_OFFSET, UNKNOWN_FILE_POSITION))
            else:
                metadata = high_watermark
            self._set_high_watermark(metadata)
            return metadata.message_offset

    def maybe_increment_high_watermark(self, new: LogOffsetMetadata) -> LogOffsetMetadata | None:
        """Move the high watermark up to ``new`` (never down, never past the log end); also take
        ``new`` when it names the same offset in a newer segment (after a roll). Returns the old
        one when it moved."""
        if new.message_offset > self._local.next_offset:
            raise ValueError(f"high watermark {new} would pass the log end offset {self._local.next_offset}")
        with self._lock:
            old = self._hw_meta
            if old.message_offset < new.message_offset or (
                    old.message_offset == new.message_offset and old.on_older_segment(new)):
                self._set_high_watermark(new)
                return old
            return None

    def _full_metadata(self, metadata: LogOffsetMetadata) -> LogOffsetMetadata:
        if not metadata.message_offset_only:
            return metadata
        return self._local.convert_to_offset_metadata(metadata.message_offset)

    def _high_watermark_metadata(self) -> LogOffsetMetadata:
        metadata = self._hw_meta
        if metadata.message_offset_only:
            with self._lock:
                metadata = self._hw_meta
                if metadata.message_offset_only:
                    metadata = self._full_metadata(metadata)
                    if metadata.message_offset == self.high_watermark:
                        self._hw_meta = metadata
        return metadata

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: the first offset not yet decided (an open transaction, or a finished one
        whose marker is not below the high watermark), at most the high watermark."""
        first = self.producer_state_manager.first_unstable_offset
        hw = self.high_watermark
        if first is not None:
            offset = max(first.message_offset, self._local.log_start_offset)
            if offset < hw:
                return offset
        return hw

    def _last_stable_offset_metadata(self, full: bool = False) -> LogOffsetMetadata:
        hw = self._high_watermark_metadata() if full else self._hw_meta
        first = self.producer_state_manager.first_unstable_offset
        if first is None:
            return hw
        offset = max(first.message_offset, self._local.log_start_offset)
        if offset >= hw.message_offset:
            return hw
        if offset == first.message_offset and not first.message_offset_only:
            return first
        cached = self._fus_meta
        if cached is None or cached.message_offset != offset:
            try:
                cached = self._fus_meta = self._local.convert_to_offset_metadata(offset)
            except KafkaError:
                return LogOffsetMetadata(offset)
        return cached

    def fetch_offset_snapshot(self) -> LogOffsetSnapshot:
        """Log start, log end, high watermark and LSO, each LogOffsetMetadata with a position."""
        last_stable = self._full_metadata(self._last_stable_offset_metadata(full=True))
        return LogOffsetSnapshot(self._local.log_start_offset, self._local.log_end_offset_metadata,
                                 self._high_watermark_metadata(), last_stable)

    # -- reads --------------------------------------------------------------------------------
    def read(self, start_offset: int, max_length: int, isolation: FetchIsolation,
             min_one_message: bool) -> FetchDataInfo:
        """Whole batches from ``start_offset`` up to the bound ``isolation`` names (log end, high
        watermark, or last stable offset); TXN_COMMITTED reads also get the aborted transactions
        overlapping the data. OFFSET_OUT_OF_RANGE outside [log start, log end]."""
        if isolation == FetchIsolation.HIGH_WATERMARK:
            bound = self._hw_meta
            if bound.message_offset_only:
                bound = self._high_watermark_metadata()
        elif isolation == FetchIsolation.TXN_COMMITTED:
            bound = self._full_metadata(self._last_stable_offset_metadata(full=True))
        else:
            bound = None
        return self._local.read(start_offset, max_length, bound, min_one_message,
                                isolation == FetchIsolation.TXN_COMMITTED)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        return self._local.collect_aborted_transactions(start_offset, upper_bound_offset)

    def fetch_offset_by_timestamp(self, target: int, isolation: FetchIsolation | None = None):
        """ListOffsets: earliest (-2, -4) and latest (-1) with their leader epoch from the epoch
        cache, otherwise the first record at or after ``target`` (see LocalLog). With
        ``isolation`` (a client's request, as Kafka's Partition answers it) "latest" is the high
        watermark or the LSO, and a record found at or past that bound is not returned."""
        local = self._local
        if target in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            first = self.leader_epoch_cache.earliest_entry()
            start = local.log_start_offset
            epoch = first.epoch if first is not None and first.start_offset <= start else None
            return TimestampAndOffset(-1, start, epoch)
        bound = local.next_offset
        if isolation == FetchIsolation.HIGH_WATERMARK:
            bound = self.high_watermark
        elif isolation == FetchIsolation.TXN_COMMITTED:
            bound = self.last_stable_offset
        if target == LATEST_TIMESTAMP:
            return TimestampAndOffset(-1, bound, self.leader_epoch_cache.latest_epoch)
        found = local.fetch_offset_by_timestamp(target)
        if found is not None and isolation is not None and found.offset >= bound:
            return None
        return found

    # -- producers ------------------------------------------------------------------------------
    def active_producers(self) -> list:
        """DescribeProducers' view of the producer state (ActiveProducer records)."""
        with self._lock:
            return self.producer_state_manager.active_producers()

    def remove_expired_producers(self, now: int | None = None) -> int:
        with self._lock:
            return self.producer_state_manager.remove_expired_producers(self._clock() if now is None else now)

    def _interim_producer_snapshot(self) -> None:
        """Snapshot the producer state at the log end (lock held; see PRODUCER_SNAPSHOT_INTERVAL), and delete
        the older interim ones: those at a segment's base stay for recovery, as before."""
        local = self._local
        end = local.next_offset
        self._producer_snapshot_due = end + PRODUCER_SNAPSHOT_INTERVAL
        psm = self.producer_state_manager
        if psm.is_empty():
            return
        try:
            if psm.take_snapshot(end, sync=False) is None:
                return
        except OSError as exc:      # optional: the append it follows has succeeded, and must say so
            log.warning("%s: cannot write an interim producer snapshot at %d: %s", self.name, end, exc)
            return
        bases = {segment.base_offset for segment in local.segments}
        interim = [offset for offset in psm.snapshot_offsets if offset not in bases]
        for offset in interim[:-2]:
            psm.delete_snapshot(offset)

    def _on_roll(self, segment: LogSegment) -> None:
        """LocalLog rolled (lock held): snapshot the producer state at the new segment's base, so
        recovering that segment starts from it; fsync it with the old segment, in the background."""
        path = self.producer_state_manager.take_snapshot(segment.base_offset, sync=False)
        if path is not None:
            self._scheduler.schedule(f"flush-producer-snapshot-{self.name}", lambda: _fsync_file(path))
        if self.high_watermark >= self._local.next_offset:
            self._hw_meta = self._local.log_end_offset_metadata

    # -- log start offset, retention, compaction -------------------------------------------------
    def maybe_increment_log_start_offset(self, new_start: int) -> bool:
        """DeleteRecords: records below ``new_start`` become unreadable. Refused with
        OFFSET_OUT_OF_RANGE past the high watermark. Returns whether the start moved."""
        with self._lock:
            if new_start > self.high_watermark:
                raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                 f"Cannot increment the log start offset to {new_start} of partition {self.name} "
                                 f"since it is larger than the high watermark {self.high_watermark}")
            if new_start <= self._local.log_start_offset:
                remote = self.remote_log_start_offset
                if remote is None or new_start <= remote:
                    return False
                # within the remote part: the log starts there now, the remote log manager deletes what is below
                self.remote_log_start_offset = self._checkpointed_start = new_start
                return True
            self._local.maybe_increment_log_start_offset(new_start)
            if self.remote_log_start_offset is not None:    # the remote part is all below it now
                self.remote_log_start_offset = self._checkpointed_start = new_start
            self._after_log_start_moved()
            return True

    def _after_log_start_moved(self) -> None:
        local = self._local
        start = local.log_start_offset
        if local.recovery_point < start:
            local.recovery_point = start
        self.leader_epoch_cache.truncate_from_start(start)
        self.producer_state_manager.on_log_start_offset_incremented(start)
        self.producer_state_manager.delete_snapshots_before(start)
        self._fus_meta = None

    def delete_old_segments(self, now: int | None = None) -> int:
        """Retention (log start offset, retention.bytes, retention.ms), never past the high watermark.

        A tiered log (remote.storage.enable) keeps local.retention.* locally and deletes only segments
        already copied to remote storage (below highest_offset_in_remote_storage + 1), as Kafka does."""
        with self._lock:
            before = self._local.log_start_offset
            bound, retention = self.high_watermark, None
            config = self._local.config
            if config.remote_storage_enable:
                bound = min(bound, self.highest_offset_in_remote_storage + 1)
                ms, size = config.local_retention_ms, config.local_retention_bytes
                retention = (config.retention_ms if ms == -2 else ms, config.retention_bytes if size == -2 else size)
            deleted = self._local.delete_old_segments(now, bound, retention)
            if self._local.log_start_offset != before:
                self._after_log_start_moved()
            return deleted

    def set_remote_offsets(self, remote_start: int | None, highest: int) -> None:
        """What remote storage holds (the remote log manager's news): its first offset (None: nothing) and its last
        (-1: nothing). The log start stays where DeleteRecords moved it, this run or before a restart."""
        if remote_start is not None:
            floor = max(self._checkpointed_start, self.remote_log_start_offset or remote_start)
            remote_start = max(remote_start, min(floor, self._local.log_start_offset))
        self.remote_log_start_offset = remote_start
        self.highest_offset_in_remote_storage = highest

    def segments_to_copy(self, after_offset: int) -> list:
        """Tiered storage: the rolled segments holding offsets past ``after_offset`` whose every offset is below
        the last stable offset (so below the high watermark, and no open transaction), oldest first, each as
        (segment, end offset): what the remote log manager may copy."""
        with self._lock:
            bound = self.last_stable_offset
            segments = self._local.segments
            out = []
            for segment, nxt in zip(segments, segments[1:]):
                end = nxt.base_offset - 1
                if end <= after_offset or segment.size == 0:
                    continue
                if nxt.base_offset > bound:
                    break
                out.append((segment, end))
            return out

    def leader_epochs_between(self, start: int, end: int) -> dict[int, int]:
        """{epoch: start offset} of the epochs that have offsets in [start, end] (Kafka's segment leader epochs)."""
        out = {}
        entries = self.leader_epoch_cache.entries
        for i, entry in enumerate(entries):
            nxt = entries[i + 1].start_offset if i + 1 < len(entries) else None
            if entry.start_offset > end or (nxt is not None and nxt <= start):
                continue
            out[entry.epoch] = max(entry.start_offset, start)
        return out

    def replace_segments(self, new_segments: list, old_segments: list) -> bool:
        """The cleaner's swap; offsets held with a position in a replaced segment lose the position."""
        with self._lock:
            if not self._local.replace_segments(new_segments, old_segments):
                return False
            replaced = {s.base_offset for s in old_segments}
            if self._hw_meta.segment_base_offset in replaced:
                self._hw_meta = LogOffsetMetadata(self._hw_meta.message_offset)
            self.producer_state_manager.forget_positions(replaced)
            self._fus_meta = None
            return True

    # -- truncation ---------------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> bool:
        """Remove every offset >= ``offset`` (a follower's truncation); True if anything went.
        Leader epochs from there on go, and the producer state is reloaded from the snapshots
        below ``offset`` plus the batches after them."""
        if offset < 0:
            raise ValueError(f"cannot truncate {self.name} to a negative offset ({offset})")
        with self._lock:
            local = self._local
            if offset >= local.next_offset:
                self.leader_epoch_cache.truncate_from_end(local.next_offset)
                return False
            if offset < local.segments[0].base_offset:
                self.truncate_fully_and_start_at(offset)
                return True
            psm = self.producer_state_manager
            was_empty = psm.is_empty()
            local.truncate_to(offset)
            self.leader_epoch_cache.truncate_from_end(offset)
            replay_from = psm.truncate_and_reload(local.log_start_offset, offset, self._clock())
            if replay_from < offset and not was_empty:
                self._replay(replay_from, offset, set())
            self._fus_meta = None
            if self.high_watermark >= local.next_offset:
                self._set_high_watermark(local.log_end_offset_metadata)
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at ``offset`` (log start, end and high watermark)."""
        with self._lock:
            self._local.truncate_fully_and_start_at(offset)
            self.leader_epoch_cache.clear()
            self.producer_state_manager.truncate_fully_and_start_at(offset)
            self._fus_meta = None
            self._set_high_watermark(self._local.log_end_offset_metadata)

    def build_remote_log_aux_state(self, next_offset: int, epochs: list[tuple[int, int]], snapshot: bytes) -> None:
        """A follower below its leader's local log start (OFFSET_MOVED_TO_TIERED_STORAGE): start empty at
        ``next_offset``, the end of the tiered segment before it, with that segment's leader epochs and
        producer snapshot (Kafka's buildRemoteLogAuxState); the offsets below are remote."""
        with self._lock:
            self.truncate_fully_and_start_at(next_offset)
            self.leader_epoch_cache.assign_all([(e, o) for e, o in epochs if o < next_offset])
            self.producer_state_manager.adopt_snapshot(next_offset, snapshot, self._clock())

    # -- lifecycle ------------------------------------------------------------------------------------
    def roll(self) -> LogSegment:
        return self._local.roll()

    def flush(self, offset: int | None = None) -> None:
        self._local.flush(offset)

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self._local.update_config(config)
            self._set_fast()

    def close(self, sync: bool = True) -> None:
        """A clean close: the producer state snapshotted at the log end, epochs written, segments closed.

        An empty log writes no snapshot (loading would delete one at the log start anyway). With
        ``sync`` False the snapshot is not fsynced: LogManager syncs the file system once before
        writing the clean-shutdown marker, where an fsync per partition made stopping a broker with
        thousands of partitions take half a minute."""
        with self._lock:
            if self._local.closed:
                return
            if self._local.next_offset > self._local.log_start_offset:
                self.producer_state_manager.take_snapshot(self._local.next_offset, sync=sync)
            self.leader_epoch_cache.flush()
            self._local.close()
            self._set_fast()

    def delete(self) -> None:
        """Remove the whole partition directory (topic deletion)."""
        with self._lock:
            self._local.delete()
            self._set_fast()

    def __repr__(self) -> str:
        return (f"UnifiedLog({self.name}, start={self.log_start_offset}, hw={self.high_watermark}, "
                f"end={self.log_end_offset}, segments={len(self.segments)})")
