"""LocalLog: one partition's segments, with append, read, roll, flush, retention and truncation.

Threads: appends come from one thread (the broker's event loop). Readers, the
flusher, retention and the cleaner may run anywhere. Structural changes take
``self._lock`` briefly; the segment list is copy-on-write (a new tuple pair is
swapped in with one assignment), so a reader holding the old tuple keeps
working and never waits for retention, rolling or cleaning.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import threading
from typing import Callable, NamedTuple

from crc32c import crc32c

from kafka_compat.protocol.batch_header import (
    ATTRIBUTES_OFFSET, CONTROL_FLAG_MASK, LOG_OVERHEAD, OFFSET_LENGTH_EPOCH, TIMESTAMP_TYPE_MASK, V2_APPEND_FIELDS,
)
from kafka_compat.protocol.records import batches as record_views

from .log_config import LogConfig
from kafka_compat.protocol.errors import ErrorCode, KafkaError
from kafka_compat.protocol.batch_header import NO_TIMESTAMP, BatchHeader
from .loader import load
from .scheduler import Scheduler, default_scheduler
from .index import INT32_MAX
from .segment import DELETED_SUFFIX, SWAP_SUFFIX, LogSegment, now_ms
from .validator import CLIENT, validate_and_assign

log = logging.getLogger(__name__)

# ListOffsets special timestamps (ListOffsetsRequest)
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


_new = tuple.__new__   # builds named tuples without their Python-level __new__ (hot path)
_SLOW_ATTRIBUTES = TIMESTAMP_TYPE_MASK | CONTROL_FLAG_MASK   # batches the fast path leaves to the validator


class AppendResult(NamedTuple):
    first_offset: int
    last_offset: int
    log_append_time: int          # -1 unless message.timestamp.type=LogAppendTime
    log_start_offset: int
    max_timestamp: int


class FileSlice(NamedTuple):
    """``length`` bytes at ``position`` of the open file ``fd``: whole batches, ready for sendfile."""

    fd: int
    position: int
    length: int


class FetchResult(NamedTuple):
    slices: list
    log_start_offset: int
    log_end_offset: int

    @property
    def size(self) -> int:
        return sum(s.length for s in self.slices)

    def read_bytes(self) -> bytes:
        """The slices' bytes (for tests, and TLS where sendfile cannot be used)."""
        return b"".join(os.pread(s.fd, s.length, s.position) for s in self.slices)


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int | None


class LocalLog:
    def __init__(self, directory: str, config: LogConfig | None = None, *, recovery_point: int = 0,
                 log_start_offset: int = 0, had_clean_shutdown: bool = False,
                 scheduler: Scheduler | None = None, clock: Callable[[], int] = now_ms):
        self.dir = directory
        self.name = os.path.basename(directory)
        self.topic, _, partition = self.name.rpartition("-")
        self.partition = int(partition) if partition.isdigit() else 0
        self.config = config or LogConfig()
        self.closed = False
        self._set_fast()
        self._clock = clock
        self._scheduler = scheduler or default_scheduler()
        self._lock = threading.RLock()
        loaded = load(directory, self.config, recovery_point=recovery_point, log_start_offset=log_start_offset,
                      had_clean_shutdown=had_clean_shutdown)
        self.truncated_on_load = loaded.truncated_bytes
        for segment in loaded.segments:
            segment.created_ms = clock()   # segment.ms without timestamps counts from loading, as in Kafka
        self._set_segments(loaded.segments)
        self.next_offset = loaded.next_offset
        self.recovery_point = loaded.recovery_point
        self.log_start_offset = loaded.log_start_offset
        self.last_flush_ms = clock()

    # -- segment list (copy-on-write) ---------------------------------------------------
    def _set_segments(self, segments) -> None:
        segments = tuple(segments)
        self._view = (segments, tuple(s.base_offset for s in segments))
        self._active = segments[-1]   # read by append only, under the lock like every call here

    def _set_fast(self) -> None:
        """Whether append may take its header-only path: open, and no rule reads records."""
        config = self.config
        self._fast = not (self.closed or config.reads_records or config.log_append_time)

    @property
    def recovery_point(self) -> int:
        """Offsets below it are fsynced; recovery trusts them."""
        return self._recovery_point

    @recovery_point.setter
    def recovery_point(self, offset: int) -> None:
        self._recovery_point = offset
        # flush.messages: append flushes once its last offset reaches this
        self._flush_offset = offset + self.config.flush_messages - 1

    @property
    def segments(self) -> tuple:
        return self._view[0]

    @property
    def active_segment(self) -> LogSegment:
        return self._view[0][-1]

    def segment_for(self, offset: int) -> LogSegment | None:
        """The segment whose range holds ``offset`` (binary search over base offsets)."""
        segments, bases = self._view
        i = bisect.bisect_right(bases, offset) - 1
        return segments[i] if i >= 0 else None

    @property
    def log_end_offset(self) -> int:
        return self.next_offset

    @property
    def size(self) -> int:
        return sum(s.size for s in self._view[0])

    @property
    def unflushed_messages(self) -> int:
        return self.next_offset - self.recovery_point

    # -- append ---------------------------------------------------------------------
    def append(self, records, leader_epoch: int = 0, origin: str = CLIENT) -> AppendResult:
        """Validate, assign offsets in place and write ``records`` with one write call.

        Raises a KafkaError subclass (with Kafka's error code) when validation fails. The
        shape every current client sends (one valid magic-2 CreateTime batch in a writable
        buffer, on a topic whose rules need no record reads) is accepted here from one
        unpack of its header; anything else, including every batch that breaks a rule, goes
        through validator.validate_and_assign, which raises Kafka's error for it. The roll
        and flush checks compare against limits precomputed when they change
        (LogSegment.refresh_roll_limits, recovery_point), and fall back to the exact checks
        when a limit is reached. Nothing is kept in user space: the bytes are in the page
        cache when this returns.
        """
        mv = records if type(records) is memoryview else memoryview(records)
        size = len(mv)
        lock = self._lock
        lock.acquire()   # not `with`: acquire/release in try/finally costs less per append
        try:
            config = self.config
            next_offset = self.next_offset
            try:
                (base, length, magic, crc, attrs, last_delta, max_timestamp, producer_id, base_sequence,
                 count) = V2_APPEND_FIELDS.unpack_from(mv)
                fast = (self._fast and origin is CLIENT and magic == 2 and length + LOG_OVERHEAD == size
                        and not base and not attrs & _SLOW_ATTRIBUTES and size <= config.max_message_bytes
                        and count == last_delta + 1 and last_delta >= 0 and (producer_id < 0 or base_sequence >= 0)
                        and crc == crc32c(mv[ATTRIBUTES_OFFSET:]))
                if fast:
                    OFFSET_LENGTH_EPOCH.pack_into(mv, 0, next_offset, length, leader_epoch)
            except (struct.error, TypeError, BufferError):   # short, read-only or non-contiguous buffer
                fast = False
            if fast:
                last_offset = offset_of_max = next_offset + last_delta
                log_append_time = -1
            else:
                if self.closed:
                    raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"log {self.name} is closed")
                mv, next_offset, last_offset, max_timestamp, offset_of_max, log_append_time, _ = \
                    validate_and_assign(mv, next_offset, config, self._clock(), leader_epoch, origin)
                size = len(mv)
            segment = self._active
            if (segment.size + size > config.segment_bytes or last_offset > segment.append_offset_limit
                    or max_timestamp > segment.roll_timestamp_limit):
                segment = self._maybe_roll(segment, size, last_offset, max_timestamp)
            segment.append(mv, last_offset, max_timestamp, offset_of_max)
            self.next_offset = last_offset + 1
            if last_offset >= self._flush_offset:
                self.flush()
        finally:
            lock.release()
        return _new(AppendResult, (next_offset, last_offset, log_append_time, self.log_start_offset,
                                   max_timestamp))

    def _maybe_roll(self, segment: LogSegment, size: int, last_offset: int, max_timestamp: int) -> LogSegment:
        """Kafka's LogSegment.shouldRoll: size, a relative offset past 32 bits, a full index, or
        time (from the segment's first timestamp; the clock only when it has none)."""
        config = self.config
        if size > config.segment_bytes:
            raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE, f"Message batch size is {size} bytes in append to partition "
                                          f"{self.name}, which exceeds the maximum configured segment size "
                                          f"of {config.segment_bytes}.")
        position = segment.size
        if (position > config.segment_bytes - size or last_offset - segment.base_offset > INT32_MAX
                or segment.indexes_full()):
            return self.roll()
        if position:
            first_ts = segment.rolling_based_timestamp
            if first_ts is not None and first_ts >= 0:
                waited = max_timestamp - first_ts
            else:
                waited = segment.time_waited_for_roll(self._clock(), max_timestamp)
            if waited > config.segment_ms - segment.roll_jitter_ms:
                return self.roll()
        return segment

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset; fsync the old one in the background."""
        with self._lock:
            old = self.active_segment
            new_base = self.next_offset
            if old.base_offset == new_base and old.size == 0:
                return old
            old.on_become_inactive()
            new = LogSegment(self.dir, new_base, self.config, created_ms=self._clock())
            new.next_offset = new_base
            self._set_segments(self.segments + (new,))
        self._scheduler.schedule(f"flush-{self.name}", lambda: self.flush(new_base))
        return new

    # -- flushing -------------------------------------------------------------------------
    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets below ``offset`` (default: the log end offset).

        Afterwards the recovery point is ``offset``: recovery trusts everything below it.
        """
        offset = self.next_offset if offset is None else offset
        if offset <= self.recovery_point:
            return
        for segment in self.segments:
            if segment.next_offset > self.recovery_point or segment is self.active_segment:
                if segment.base_offset < offset:
                    segment.flush()
        with self._lock:
            if offset > self.recovery_point:
                self.recovery_point = offset
        self.last_flush_ms = self._clock()

    # -- read -----------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, upper_bound: int | None = None,
             min_one_message: bool = True) -> FetchResult:
        """Whole batches from the one holding ``offset``, at most ``max_bytes`` (but the first
        batch always whole when ``min_one_message``), none at or past ``upper_bound`` (e.g. the
        high watermark). Raises OFFSET_OUT_OF_RANGE below the log start or above the log end.
        """
        segments, bases = self._view
        start_offset, end_offset = self.log_start_offset, self.next_offset
        if offset < start_offset or offset > end_offset:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"Received request for offset {offset} for partition {self.name}, but we "
                                        f"only have log segments in the range {start_offset} to {end_offset}.")
        bound = end_offset if upper_bound is None else min(upper_bound, end_offset)
        slices: list[FileSlice] = []
        if offset >= bound:
            return FetchResult(slices, start_offset, end_offset)
        remaining = max_bytes
        i = max(bisect.bisect_right(bases, offset) - 1, 0)
        first = True
        while i < len(segments) and segments[i].base_offset < bound:
            segment = segments[i]
            i += 1
            end = segment.size
            max_position = end
            if bound < segment.next_offset:
                stop_info = segment.translate_offset(bound, end)
                max_position = stop_info.position if stop_info else end
            start = 0
            if first:
                start_info = segment.translate_offset(offset, max_position)
                if start_info is None:
                    continue  # nothing at or after ``offset`` here (compacted gap): next segment
                start = start_info.position
            if start >= max_position:
                break
            if start + remaining >= max_position:
                stop = max_position
            else:
                stop = segment.end_of_whole_batches(start, start + remaining)
                if stop == start:
                    if not (first and min_one_message and not slices):
                        break
                    stop = start + (start_info.size if first else 0)
            slices.append(FileSlice(segment.fd, start, stop - start))
            remaining -= stop - start
            first = False
            if stop < max_position or remaining <= 0:
                break
        return FetchResult(slices, start_offset, end_offset)

    def batch_headers(self, from_offset: int = 0):
        """Headers of the batches from the one holding ``from_offset`` (producer-state rebuilds)."""
        segments, bases = self._view
        i = max(bisect.bisect_right(bases, from_offset) - 1, 0)
        for segment in segments[i:]:
            start_info = segment.translate_offset(from_offset) if segment.base_offset <= from_offset else None
            start = start_info.position if start_info else 0
            if segment.base_offset <= from_offset and start_info is None:
                continue
            yield from segment.batches(start)

    # -- offsets by timestamp -------------------------------------------------------------
    def fetch_offset_by_timestamp(self, target: int) -> TimestampAndOffset | None:
        """ListOffsets: earliest (-2, -4), latest (-1), max timestamp (-3), or the first record
        whose timestamp is >= ``target``; None when there is none."""
        if target in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return TimestampAndOffset(NO_TIMESTAMP, self.log_start_offset, self._epoch_at(self.log_start_offset))
        if target == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, self.next_offset, self._latest_epoch())
        if target == LATEST_TIERED_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, -1, -1)
        segments = self.segments
        if target == MAX_TIMESTAMP:
            segment = max(segments, key=lambda s: s.max_timestamp_so_far)
            wanted = segment.max_timestamp_so_far
            _, position = segment.offset_index.lookup(segment.offset_of_max_timestamp_so_far)
            for info in segment.batches(position):
                if info.max_timestamp == wanted:
                    for record in self._records(segment, info):
                        if record.timestamp == wanted:
                            return TimestampAndOffset(wanted, record.offset, info.leader_epoch)
                    return None
            return None
        start_offset = self.log_start_offset
        for segment in segments:
            # Kafka searches only the first segment whose largest timestamp reaches the target;
            # segments wholly below the log start (after DeleteRecords) are skipped here.
            if segment.next_offset <= start_offset or segment.largest_timestamp() < target:
                continue
            _, indexed_offset = segment.time_index.lookup(target)
            _, position = segment.offset_index.lookup(max(indexed_offset, start_offset))
            for info in segment.batches(position):
                if info.max_timestamp >= target:
                    for record in self._records(segment, info):
                        if record.timestamp >= target and record.offset >= start_offset:
                            return TimestampAndOffset(record.timestamp, record.offset, info.leader_epoch)
            return None
        return None

    @staticmethod
    def _records(segment: LogSegment, info: BatchHeader):
        data = memoryview(segment.read_bytes(info.position, info.size))
        for view in record_views(data):
            yield from view.records()

    def _epoch_at(self, offset: int) -> int | None:
        segment = self.segment_for(offset)
        info = segment.translate_offset(offset) if segment else None
        return info.leader_epoch if info else None

    def _latest_epoch(self) -> int | None:
        for segment in reversed(self.segments):
            last = None
            _, position = segment.offset_index.lookup(segment.next_offset)
            for last in segment.batches(position):
                pass
            if last is not None:
                return last.leader_epoch
        return None

    # -- log start offset and retention ---------------------------------------------------
    def maybe_increment_log_start_offset(self, new_start: int) -> None:
        """DeleteRecords: records below ``new_start`` become unreadable; whole segments go later."""
        with self._lock:
            if new_start > self.next_offset:
                raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"Cannot increment the log start offset to {new_start} of partition "
                                            f"{self.name} since it is larger than the log end offset "
                                            f"{self.next_offset}")
            if new_start > self.log_start_offset:
                self.log_start_offset = new_start

    def delete_old_segments(self, now: int | None = None, high_watermark: int | None = None) -> int:
        """Kafka's retention: log start offset, then retention.bytes, then retention.ms.

        Only ``cleanup.policy`` including ``delete`` applies the size and time rules. Whole
        segments are renamed ``.deleted`` and removed after file.delete.delay.ms.
        """
        now = self._clock() if now is None else now
        deleted = self._delete_while(lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset,
                                     high_watermark)
        if not self.config.delete:
            return deleted
        retention_bytes = self.config.retention_bytes
        if retention_bytes >= 0 and self.size >= retention_bytes:
            diff = [self.size - retention_bytes]

            def over_size(seg, nxt):
                if diff[0] - seg.size >= 0:
                    diff[0] -= seg.size
                    return True
                return False
            deleted += self._delete_while(over_size, high_watermark)
        retention_ms = self.config.retention_ms
        if retention_ms >= 0:
            deleted += self._delete_while(lambda seg, nxt: now - seg.largest_timestamp() > retention_ms,
                                          high_watermark)
        return deleted

    def _delete_while(self, predicate, high_watermark: int | None) -> int:
        with self._lock:
            segments = self.segments
            bound = self.next_offset if high_watermark is None else min(high_watermark, self.next_offset)
            deletable = []
            for i, segment in enumerate(segments):
                nxt = segments[i + 1] if i + 1 < len(segments) else None
                upper = nxt.base_offset if nxt is not None else self.next_offset
                if not (bound >= upper and predicate(segment, nxt)):
                    break
                if nxt is None and segment.size == 0:
                    break
                deletable.append(segment)
            if not deletable:
                return 0
            if len(deletable) == len(segments):
                new = self.roll()
                if deletable[-1] is new:
                    deletable.pop()
            survivors = [s for s in self.segments if s not in deletable]
            self.log_start_offset = max(self.log_start_offset, survivors[0].base_offset)
            self._set_segments(survivors)
        self._delete_segment_files(deletable)
        return len(deletable)

    def _delete_segment_files(self, segments) -> None:
        """Rename to ``.deleted`` now; remove after file.delete.delay.ms (readers may hold slices)."""
        for segment in segments:
            try:
                segment.change_suffix("", DELETED_SUFFIX)
            except FileNotFoundError:
                pass
        if segments:
            self._scheduler.schedule(f"delete-{self.name}", lambda: [s.delete() for s in segments],
                                     self.config.file_delete_delay_ms)

    # -- compaction support -----------------------------------------------------------------
    def replace_segments(self, new_segments: list, old_segments: list) -> bool:
        """Swap cleaned segments in for the ones they replace (the cleaner's last step).

        Returns False, changing nothing, if any old segment has left the log meanwhile
        (retention or truncation won the race). New segments carry the ``.swap`` suffix
        until they are in the list; the old files are renamed ``.deleted`` first, as Kafka
        orders it, so a crash at any point is finished or undone by the loader.
        """
        with self._lock:
            current = self.segments
            old_ids = {id(s) for s in old_segments}
            if len(old_ids & {id(s) for s in current}) != len(old_ids) or self.closed:
                return False
            kept = [s for s in current if id(s) not in old_ids]
            self._set_segments(sorted(kept + list(new_segments), key=lambda s: s.base_offset))
            for segment in old_segments:
                segment.change_suffix("", DELETED_SUFFIX)
            for segment in new_segments:
                segment.change_suffix(SWAP_SUFFIX, "")
        self._scheduler.schedule(f"delete-{self.name}", lambda: [s.delete() for s in old_segments],
                                 self.config.file_delete_delay_ms)
        return True

    # -- truncation -------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> bool:
        """Remove every offset >= ``offset`` (replication's truncation); True if anything went."""
        with self._lock:
            if offset >= self.next_offset:
                return False
            if offset < self.segments[0].base_offset:
                return self.truncate_fully_and_start_at(offset) or True
            removed = [s for s in self.segments if s.base_offset >= offset]
            kept = [s for s in self.segments if s.base_offset < offset]
            if not kept:
                return self.truncate_fully_and_start_at(offset) or True
            kept[-1].truncate_to(offset)
            self._set_segments(kept)
            self.next_offset = offset
            self.recovery_point = min(self.recovery_point, offset)
            self.log_start_offset = min(self.log_start_offset, offset)
        self._delete_segment_files(removed)
        return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        with self._lock:
            old = list(self.segments)
            for segment in old:
                segment.change_suffix("", DELETED_SUFFIX)
            self._set_segments([LogSegment(self.dir, new_offset, self.config, created_ms=self._clock())])
            self.next_offset = self.recovery_point = self.log_start_offset = new_offset
        self._scheduler.schedule(f"delete-{self.name}", lambda: [s.delete() for s in old],
                                 self.config.file_delete_delay_ms)

    # -- lifecycle --------------------------------------------------------------------------
    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            self._set_fast()
            self.recovery_point = self.recovery_point   # flush.messages may have changed
            for segment in self.segments:
                segment.config = config
                segment.index_interval_bytes = config.index_interval_bytes
                segment.refresh_roll_limits()

    def close(self) -> None:
        """Flush and close every segment (a clean close: indexes trimmed, max timestamp kept)."""
        with self._lock:
            if self.closed:
                return
            self.flush()
            for segment in self.segments:
                segment.close()
            self.closed = True
            self._set_fast()

    def delete(self) -> None:
        """Remove the whole partition directory (topic deletion)."""
        with self._lock:
            for segment in self.segments:
                segment.delete()
            self.closed = True
            self._set_fast()
        for name in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, name))
        os.rmdir(self.dir)

    def __repr__(self):
        return (f"LocalLog({self.name}, start={self.log_start_offset}, end={self.next_offset}, "
                f"segments={len(self.segments)})")

