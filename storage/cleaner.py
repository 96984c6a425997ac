"""LogCleaner: compaction for cleanup.policy=compact (and compact,delete), after Kafka's.

One round on a log:
1. the dirty section runs from the cleaner checkpoint (or the log start) to the first
   uncleanable offset: the active segment, the last stable offset (so never past the high
   watermark), an optional ``upper_bound``, and any segment newer than min.compaction.lag.ms
   all stop it;
2. a log is cleaned when dirty bytes / all bytes exceeds min.cleanable.dirty.ratio;
3. an offset map (key -> last offset) is built over the dirty section;
4. every segment below the end of the map is rewritten, in groups that fit one segment:
   a record survives if it is the newest for its key, and a tombstone also survives
   until its batch's delete horizon (set to now + delete.retention.ms the first time a
   cleaned batch keeps a tombstone) has passed. Untouched batches are copied byte for
   byte; offsets never change; the last batch of each producer id is kept even when it
   empties, as a header-only batch, so idempotent producers' sequence state survives;
5. the cleaned segments are swapped in (copy-on-write), so appends and reads never wait.
Transactions, as Kafka's CleanedTransactionMetadata: records of aborted transactions never
enter the offset map (they cannot make a committed value of their key disappear) and their
batches are removed; an ABORT marker is kept (with its ``.txnindex`` entry) while data of its
transaction remains in the cleaned segments, a COMMIT marker while its transaction's batches were
seen in the same pass. A marker no longer needed gets a delete horizon like a tombstone and goes
once delete.retention.ms has passed; the last batch of a producer is kept, emptied, as always.
"""

from __future__ import annotations

import logging
import os
import threading

from kafka_compat.clock import now_ms
from kafka_compat.protocol.compression import NONE
from kafka_compat.protocol.records import (
    LOG_APPEND_TIME,
    ControlRecordType,
    CorruptRecordError,
    LegacyMessage,
    RecordBatch,
    build_batch,
    build_legacy_message_set,
    control_record_type,
)

from . import checkpoint
from .index import INT32_MAX
from .segment import CLEANED_SUFFIX, SWAP_SUFFIX, LogSegment
from .unified_log import UnifiedLog

log = logging.getLogger(__name__)


class CleaningAborted(Exception):
    """The log changed under the cleaner (retention, truncation, deletion); try again later."""


class OffsetMap:
    """Key -> last offset for the dirty section, capped like Kafka's dedupe buffer."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self.map: dict[bytes, int] = {}
        self.latest_offset = -1

    def __len__(self):
        return len(self.map)


class CleanerStats:
    def __init__(self):
        self.records_read = self.records_retained = 0
        self.bytes_read = self.bytes_written = 0


def cleanable_range(log_: UnifiedLog, checkpointed: int | None, now: int, upper_bound: int | None = None):
    """(first_dirty_offset, first_uncleanable_offset), as LogCleanerManager.cleanableOffsets."""
    start = log_.log_start_offset
    first_dirty = start if checkpointed is None else checkpointed
    if first_dirty < start or first_dirty > log_.log_end_offset:
        first_dirty = start
    segments = log_.segments
    candidates = [segments[-1].base_offset, log_.last_stable_offset]
    if upper_bound is not None:
        candidates.append(upper_bound)
    lag = max(log_.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for seg in segments[:-1]:
            if seg.next_offset > first_dirty and seg.largest_timestamp() > now - lag:
                candidates.append(seg.base_offset)
                break
    return first_dirty, max(first_dirty, min(candidates))


def dirty_ratio(log_: UnifiedLog, first_dirty: int, first_uncleanable: int) -> tuple[float, int]:
    """(cleanable bytes / total bytes up to the first uncleanable segment, cleanable bytes)."""
    clean = dirty = 0
    for seg in log_.segments:
        if seg.base_offset >= first_uncleanable:
            break
        if seg.next_offset <= first_dirty:
            clean += seg.size
        else:
            dirty += seg.size
    total = clean + dirty
    return (dirty / total if total else 0.0), dirty


class CleanedTransactionMetadata:
    """What one cleaning pass knows of transactions (Kafka's CleanedTransactionMetadata): the aborted
    ones its batches may belong to, which of those still hold data, and the committed ones seen."""

    def __init__(self):
        self._aborted: list = []                    # AbortedTxn, by first offset, not reached yet
        self._ongoing_aborted: dict[int, list] = {}    # producer id -> [AbortedTxn, last batch offset seen]
        self._ongoing_committed: set[int] = set()
        self.cleaned_index = None                   # the cleaned segment's TransactionIndex

    def add_aborted_transactions(self, txns) -> None:
        known = {(t.producer_id, t.first_offset) for t in self._aborted}
        self._aborted.extend(t for t in txns if (t.producer_id, t.first_offset) not in known)
        self._aborted.sort(key=lambda t: t.first_offset)

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0].first_offset <= offset:
            txn = self._aborted.pop(0)
            self._ongoing_aborted.setdefault(txn.producer_id, [txn, None])

    def on_batch_read(self, info) -> bool:
        """A data batch: True when it belongs to an aborted transaction (its records may all go)."""
        self._consume_aborted_up_to(info.last_offset)
        if not info.is_transactional:
            return False
        ongoing = self._ongoing_aborted.get(info.producer_id)
        if ongoing is not None:
            ongoing[1] = info.last_offset
            return True
        self._ongoing_committed.add(info.producer_id)
        return False

    def on_control_batch_read(self, info, control_type: int | None) -> bool:
        """A marker: True when nothing of its transaction is left, so the marker itself may go."""
        self._consume_aborted_up_to(info.last_offset)
        if control_type is None:
            return True                                     # an already emptied control batch
        if control_type == ControlRecordType.ABORT:
            ongoing = self._ongoing_aborted.pop(info.producer_id, None)
            if ongoing is not None and ongoing[1] is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(ongoing[0])
                return False
            return True
        if control_type == ControlRecordType.COMMIT:
            if info.producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(info.producer_id)
                return False
            return True
        return False


class Cleaner:
    """Cleans one log at a time; pure work with no thread of its own."""

    def __init__(self, clock=now_ms, max_map_entries: int = 1 << 20):
        self.clock = clock
        self.max_map_entries = max_map_entries
        self._stop = threading.Event()

    def abort(self) -> None:
        self._stop.set()

    def _check(self) -> None:
        if self._stop.is_set():
            raise CleaningAborted("cleaner shutting down")

    # -- map ------------------------------------------------------------------------
    def build_offset_map(self, log_: UnifiedLog, start: int, end: int) -> OffsetMap:
        offset_map = OffsetMap(self.max_map_entries)
        aborted: dict[int, list] = {}
        for txn in log_.collect_aborted_transactions(start, end):
            aborted.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
        for seg in log_.segments:
            if seg.next_offset <= start or seg.base_offset >= end:
                continue
            if len(offset_map) and len(offset_map) + self._records_upper_bound(seg) > offset_map.max_entries:
                break   # the map is full: this round stops before the segment, as Kafka's does
            for info in seg.batches():
                self._check()
                if info.last_offset < start:
                    continue
                if info.base_offset >= end:
                    break
                if not info.is_control and not (info.is_transactional and any(
                        first <= info.base_offset < last for first, last in aborted.get(info.producer_id, ()))):
                    for record in _records(seg, info):
                        if record.key is not None and start <= record.offset < end:
                            offset_map.map[bytes(record.key)] = record.offset
                offset_map.latest_offset = info.last_offset
        return offset_map

    @staticmethod
    def _records_upper_bound(seg: LogSegment) -> int:
        return max(seg.next_offset - seg.base_offset, 0)

    # -- one round ----------------------------------------------------------------------
    def clean(self, log_: UnifiedLog, first_dirty: int, first_uncleanable: int,
              producer_last_offsets: dict[int, int] | None = None) -> tuple[int, CleanerStats]:
        """Compact ``log_`` up to ``first_uncleanable`` (never past its last stable offset); returns
        (next dirty offset, stats)."""
        first_uncleanable = min(first_uncleanable, log_.last_stable_offset)
        now = self.clock()
        stats = CleanerStats()
        offset_map = self.build_offset_map(log_, first_dirty, first_uncleanable)
        end_offset = offset_map.latest_offset + 1 if offset_map.latest_offset >= 0 else first_dirty
        if end_offset <= first_dirty:
            return first_dirty, stats
        if producer_last_offsets is None:
            producer_last_offsets = last_batches_of_producers(log_)
        clean_before = [s for s in log_.segments if s.next_offset <= first_dirty]
        legacy_horizon = clean_before[-1].last_modified() - log_.config.delete_retention_ms if clean_before else 0
        for group in group_segments(log_, end_offset):
            self._check()
            self.clean_segments(log_, group, offset_map, now, legacy_horizon, end_offset,
                                producer_last_offsets, stats)
        return end_offset, stats

    def clean_segments(self, log_: UnifiedLog, group: list, offset_map: OffsetMap, now: int, legacy_horizon: int,
                       round_end: int, producer_last_offsets: dict, stats: CleanerStats) -> None:
        config = log_.config
        cleaned = LogSegment(log_.dir, group[0].base_offset, config, suffix=CLEANED_SUFFIX, active=False,
                             created_ms=now)
        txns = CleanedTransactionMetadata()
        txns.cleaned_index = cleaned.txn_index
        try:
            for i, seg in enumerate(group):
                upper = group[i + 1].base_offset if i + 1 < len(group) else seg.next_offset
                txns.add_aborted_transactions(log_.collect_aborted_transactions(seg.base_offset, upper))
                retain_legacy_deletes = seg.last_modified() > legacy_horizon
                for info in seg.batches():
                    self._check()
                    stats.bytes_read += info.size
                    out = self._filter_batch(seg, info, offset_map, now, config.delete_retention_ms,
                                             retain_legacy_deletes, round_end, producer_last_offsets, stats, txns)
                    if out is not None:
                        data, max_ts, offset_of_max = out
                        cleaned.append(data, info.last_offset, max_ts, offset_of_max)
                        stats.bytes_written += len(data)
            cleaned.on_become_inactive()
            cleaned.flush()
            cleaned.set_last_modified(group[-1].last_modified())
            cleaned.change_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
            if not log_.replace_segments([cleaned], group):
                raise CleaningAborted(f"{log_.name}: segments changed during cleaning")
        except BaseException:
            cleaned.delete()
            raise

    def _filter_batch(self, seg, info, offset_map, now, delete_retention_ms, retain_legacy_deletes, round_end,
                      producer_last_offsets, stats, txns: CleanedTransactionMetadata):
        """The bytes that replace one batch (None: drop it), with its max timestamp and offset."""
        raw = memoryview(seg.read_bytes(info.position, info.size))
        last_of_producer = info.magic >= 2 and info.producer_id >= 0 and \
            producer_last_offsets.get(info.producer_id) == info.last_offset
        if info.is_control:
            return self._filter_marker(info, raw, now, delete_retention_ms, last_of_producer, txns)
        if info.magic >= 2 and txns.on_batch_read(info):
            # an aborted transaction's batch: its records go (the header stays if it is the producer's last)
            stats.records_read += info.last_offset - info.base_offset + 1
            return self._empty(info) if last_of_producer else None
        view = RecordBatch(raw) if info.magic >= 2 else LegacyMessage(raw)
        try:
            records = list(view.records())
        except CorruptRecordError as exc:
            log.warning("%s: keeping unreadable batch at %d: %s", seg.log_path, info.position, exc)
            return raw, info.max_timestamp, info.last_offset
        stats.records_read += len(records)
        horizon = view.delete_horizon_ms if info.magic >= 2 and view.has_delete_horizon else None
        kept = []
        for record in records:
            if record.offset > offset_map.latest_offset:
                kept.append(record)
                continue
            if record.key is None:
                continue
            if record.offset < offset_map.map.get(bytes(record.key), -1):
                continue
            if record.value is None:
                retain = (horizon is None or now < horizon) if info.magic >= 2 else retain_legacy_deletes
                if not retain:
                    continue
            kept.append(record)
        stats.records_retained += len(kept)
        has_tombstone = any(r.value is None for r in kept)
        needs_horizon = info.magic >= 2 and has_tombstone and horizon is None
        if len(kept) == len(records) and not needs_horizon:
            return raw, info.max_timestamp, info.last_offset
        if not kept:
            keep_empty = info.magic >= 2 and (last_of_producer or info.next_offset == round_end)
            return self._empty(info) if keep_empty else None
        if info.magic >= 2:
            data = build_batch(
                [(r.key, r.value, r.headers, r.timestamp) for r in kept], base_offset=info.base_offset,
                compression=info.compression, timestamp_type=LOG_APPEND_TIME if info.log_append_time else 0,
                producer_id=info.producer_id, producer_epoch=info.producer_epoch,
                base_sequence=info.base_sequence, partition_leader_epoch=info.partition_leader_epoch,
                is_transactional=info.is_transactional, offset_deltas=[r.offset - info.base_offset for r in kept],
                last_offset_delta=info.last_offset - info.base_offset,
                delete_horizon_ms=(now + delete_retention_ms) if needs_horizon else horizon,
                max_timestamp=info.max_timestamp if info.log_append_time else None)
            max_ts = RecordBatch(data).max_timestamp
            return data, max_ts, info.last_offset
        # Legacy wrapper losing some inner records: keep the survivors as single uncompressed
        # messages so their offsets stay exactly as they were.
        timestamp_type = LOG_APPEND_TIME if info.log_append_time else 0
        parts = [build_legacy_message_set([(r.key, r.value, (), r.timestamp)], magic=info.magic,
                                          compression=NONE, base_offset=r.offset, timestamp_type=timestamp_type)
                 for r in kept]
        max_ts = max(r.timestamp for r in kept)
        return b"".join(parts), max_ts, kept[-1].offset

    @staticmethod
    def _empty(info, is_control: bool = False):
        """A batch's header without records: its offsets, producer and sequence stay known."""
        data = build_batch([], base_offset=info.base_offset, last_offset_delta=info.last_offset - info.base_offset,
                           producer_id=info.producer_id, producer_epoch=info.producer_epoch,
                           base_sequence=info.base_sequence, partition_leader_epoch=info.partition_leader_epoch,
                           timestamp_type=LOG_APPEND_TIME if info.log_append_time else 0,
                           base_timestamp=info.max_timestamp, max_timestamp=info.max_timestamp,
                           is_transactional=info.is_transactional, is_control=is_control)
        return data, info.max_timestamp, info.last_offset

    def _filter_marker(self, info, raw, now, delete_retention_ms, last_of_producer, txns):
        """A transaction marker stays while its transaction has data here; then, like a tombstone, it
        gets a delete horizon and goes once that has passed."""
        view = RecordBatch(raw)
        try:
            record = next(iter(view.records()), None)
            control_type = None if record is None else control_record_type(record.key)
        except (CorruptRecordError, ValueError, TypeError):
            return raw, info.max_timestamp, info.last_offset
        if not txns.on_control_batch_read(info, control_type):
            return raw, info.max_timestamp, info.last_offset
        if record is None:
            return (raw, info.max_timestamp, info.last_offset) if last_of_producer else None
        if not view.has_delete_horizon:
            data = build_batch([(record.key, record.value, record.headers, record.timestamp)],
                               base_offset=info.base_offset, producer_id=info.producer_id,
                               producer_epoch=info.producer_epoch, base_sequence=info.base_sequence,
                               partition_leader_epoch=info.partition_leader_epoch, is_transactional=True,
                               is_control=True, offset_deltas=[record.offset - info.base_offset],
                               last_offset_delta=info.last_offset - info.base_offset,
                               delete_horizon_ms=now + delete_retention_ms)
            return data, info.max_timestamp, info.last_offset
        if now < view.delete_horizon_ms:
            return raw, info.max_timestamp, info.last_offset
        return self._empty(info, is_control=True) if last_of_producer else None


def _records(seg: LogSegment, info):
    raw = memoryview(seg.read_bytes(info.position, info.size))
    view = RecordBatch(raw) if info.magic >= 2 else LegacyMessage(raw)
    try:
        return list(view.records())
    except CorruptRecordError:
        return []


def last_batches_of_producers(log_: UnifiedLog) -> dict[int, int]:
    """producer id -> last offset of its last batch, from batch headers only."""
    last: dict[int, int] = {}
    for seg in log_.segments:
        for info in seg.batches():
            if info.magic >= 2 and info.producer_id >= 0:
                last[info.producer_id] = info.last_offset
    return last


def group_segments(log_: UnifiedLog, end_offset: int) -> list[list]:
    """Kafka's groupSegmentsBySize: runs whose log and index sizes fit one segment."""
    config = log_.config
    segments = [s for s in log_.segments if s.base_offset < end_offset]
    groups = []
    while segments:
        group = [segments.pop(0)]
        log_size = group[0].size
        index_size = group[0].offset_index.size_in_bytes()
        time_size = group[0].time_index.size_in_bytes()
        while segments:
            nxt = segments[0]
            last_offset = (segments[1].base_offset - 1) if len(segments) > 1 else nxt.next_offset - 1
            if not (log_size + nxt.size <= config.segment_bytes
                    and index_size + nxt.offset_index.size_in_bytes() <= config.segment_index_bytes
                    and time_size + nxt.time_index.size_in_bytes() <= config.segment_index_bytes
                    and (nxt.size == 0 or last_offset - group[0].base_offset <= INT32_MAX)):
                break
            group.append(segments.pop(0))
            log_size += nxt.size
            index_size += nxt.offset_index.size_in_bytes()
            time_size += nxt.time_index.size_in_bytes()
        groups.append(group)
    return groups


class LogCleaner:
    """The background cleaner thread: picks the dirtiest compacted log and cleans it.

    ``logs_by_dir()`` returns {log dir: [UnifiedLog, ...]}; the cleaner keeps Kafka's
    ``cleaner-offset-checkpoint`` in each log dir.
    """

    def __init__(self, logs_by_dir, clock=now_ms, backoff_ms: int = 15000, max_map_entries: int = 1 << 20,
                 upper_bound=None):
        self.logs_by_dir = logs_by_dir
        self.cleaner = Cleaner(clock, max_map_entries)
        self.clock = clock
        self.backoff_ms = backoff_ms
        self.upper_bound = upper_bound or (lambda log_: None)
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._lock = threading.Lock()

    def _checkpoints(self, directory: str) -> dict:
        return checkpoint.read_offsets(os.path.join(directory, checkpoint.CLEANER_OFFSET_CHECKPOINT))

    def _save(self, directory: str, key, offset: int) -> None:
        path = os.path.join(directory, checkpoint.CLEANER_OFFSET_CHECKPOINT)
        offsets = checkpoint.read_offsets(path)
        offsets[key] = offset
        checkpoint.write_offsets(path, offsets)

    def clean_once(self) -> bool:
        """Clean the dirtiest log that needs it; False when none does."""
        with self._lock:
            now = self.clock()
            best = None
            for directory, logs in self.logs_by_dir().items():
                done = self._checkpoints(directory)
                for lg in logs:
                    if not lg.config.compact or lg.closed:
                        continue
                    key = (lg.topic, lg.partition)
                    first_dirty, uncleanable = cleanable_range(lg, done.get(key), now, self.upper_bound(lg))
                    ratio, dirty = dirty_ratio(lg, first_dirty, uncleanable)
                    if dirty > 0 and ratio > lg.config.min_cleanable_dirty_ratio:
                        if best is None or ratio > best[0]:
                            best = (ratio, directory, lg, key, first_dirty, uncleanable)
            if best is None:
                return False
            _, directory, lg, key, first_dirty, uncleanable = best
            try:
                end, stats = self.cleaner.clean(lg, first_dirty, uncleanable)
            except CleaningAborted as exc:
                log.info("cleaning of %s aborted: %s", lg.name, exc)
                return False
            self._save(directory, key, end)
            log.info("cleaned %s up to %d: %d of %d records kept", lg.name, end, stats.records_retained,
                     stats.records_read)
            return True

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                worked = self.clean_once()
            except Exception:
                log.exception("log cleaner failed")
                worked = False
            if not worked:
                self._wake.wait(self.backoff_ms / 1000.0)
                self._wake.clear()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kafka-log-cleaner-thread-0", daemon=True)
            self._thread.start()

    def shutdown(self) -> None:
        self._stopped.set()
        self.cleaner.abort()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
