"""LocalLog: one partition's segments, with the write, read, roll, flush, retention and truncation of bytes.

Kafka's LocalLog: it knows segments and offsets, not producers, epochs or the high
watermark; UnifiedLog (unified_log.py) wraps it with those, validates and assigns offsets,
and holds ``lock`` around every call that changes it.

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
import threading
from typing import Callable, NamedTuple

from kafka_compat.clock import now_ms
from kafka_compat.protocol.batch_header import NO_TIMESTAMP, BatchHeader
from kafka_compat.protocol.errors import ErrorCode, KafkaError
from kafka_compat.protocol.records import batches as record_views

from .fetch_data_info import COPY_BELOW_BYTES, FetchDataInfo, FetchResult, FileSlice
from .index import INT32_MAX
from .loader import load
from .log_config import LogConfig
from .log_offset_metadata import LogOffsetMetadata
from .scheduler import Scheduler, default_scheduler
from .segment import DELETED_SUFFIX, SWAP_SUFFIX, LogSegment

log = logging.getLogger(__name__)
_new = tuple.__new__

# ListOffsets special timestamps (ListOffsetsRequest)
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


#: a replica being moved to another log dir of its broker: ``<topic>-<partition>.<unique id>-future``
#: (Kafka's UnifiedLog.logFutureDirName; the unique id is a UUID without its dashes)
FUTURE_DIR_SUFFIX = "-future"


def topic_partition_of(name: str) -> tuple[str, int]:
    """(topic, partition) of a partition directory's name, a future replica's too (Kafka's
    parseTopicPartitionName); a name that is neither gives partition 0."""
    if name.endswith(FUTURE_DIR_SUFFIX) and "." in name:
        name = name[:name.rindex(".")]
    topic, _, partition = name.rpartition("-")
    return topic, int(partition) if partition.isdigit() else 0


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
        self.topic, self.partition = topic_partition_of(self.name)
        self.is_future = self.name.endswith(FUTURE_DIR_SUFFIX)
        self.config = config or LogConfig()
        self.closed = False
        self._clock = clock
        self._scheduler = scheduler or default_scheduler()
        self._lock = threading.RLock()
        loaded = load(directory, self.config, recovery_point=recovery_point, log_start_offset=log_start_offset,
                      had_clean_shutdown=had_clean_shutdown)
        self.truncated_on_load = loaded.truncated_bytes
        self.recovered_on_load = loaded.recovered   # base offsets of the segments recovery rebuilt
        self.snapshots_on_load = loaded.snapshot_offsets   # producer snapshots found (for UnifiedLog)
        #: called with the new segment, under the lock, whenever the log rolls (UnifiedLog's producer snapshot)
        self.on_roll: Callable[[LogSegment], None] | None = None
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
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        active = self._active
        # read for every partition at every leadership change and fetch: no Python-level __new__
        return _new(LogOffsetMetadata, (self.next_offset, active.base_offset, active.size))

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    @property
    def scheduler(self) -> Scheduler:
        return self._scheduler

    @property
    def size(self) -> int:
        return sum(s.size for s in self._view[0])

    @property
    def unflushed_messages(self) -> int:
        return self.next_offset - self.recovery_point

    # -- append ---------------------------------------------------------------------
    def append(self, data, first_offset: int, last_offset: int, max_timestamp: int,
               offset_of_max_timestamp: int) -> LogSegment:
        """Write validated batches whose offsets are assigned, with one write call (Kafka's
        LocalLog.append, with UnifiedLog.maybeRoll before it). Returns the segment written to.

        The caller holds ``lock``. The roll and flush checks compare against limits
        precomputed when they change (LogSegment.refresh_roll_limits, recovery_point), and
        fall back to the exact checks when a limit is reached. Nothing is kept in user
        space: the bytes are in the page cache when this returns.
        """
        segment = self._active
        size = len(data)
        if (segment.size + size > self.config.segment_bytes or last_offset > segment.append_offset_limit
                or max_timestamp > segment.roll_timestamp_limit):
            segment = self._maybe_roll(segment, size, first_offset, last_offset, max_timestamp)
        segment.append(data, last_offset, max_timestamp, offset_of_max_timestamp)
        self.next_offset = last_offset + 1
        if last_offset >= self._flush_offset:
            self.flush()
        return segment

    def _maybe_roll(self, segment: LogSegment, size: int, first_offset: int, last_offset: int,
                    max_timestamp: int) -> LogSegment:
        """Kafka's LogSegment.shouldRoll: size, a relative offset past 32 bits, a full index, or
        time (from the segment's first timestamp; the clock only when it has none)."""
        config = self.config
        if size > config.segment_bytes:
            raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE,
                             f"Message batch size is {size} bytes in append to partition "
                             f"{self.name}, which exceeds the maximum configured segment size "
                                          f"of {config.segment_bytes}.")
        position = segment.size
        if (position > config.segment_bytes - size or last_offset - segment.base_offset > INT32_MAX
                or segment.indexes_full()):
            return self.roll(first_offset)
        if position:
            first_ts = segment.rolling_based_timestamp
            if first_ts is not None and first_ts >= 0:
                waited = max_timestamp - first_ts
            else:
                waited = segment.time_waited_for_roll(self._clock(), max_timestamp)
            if waited > config.segment_ms - segment.roll_jitter_ms:
                return self.roll(first_offset)
        return segment

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (or at ``expected_next_offset`` when a
        follower's batches start above it); fsync the old one in the background."""
        with self._lock:
            old = self.active_segment
            new_base = self.next_offset if expected_next_offset is None else max(self.next_offset, expected_next_offset)
            if old.base_offset == new_base and old.size == 0:
                return old
            old.on_become_inactive()
            new = LogSegment(self.dir, new_base, self.config, created_ms=self._clock())
            new.next_offset = new_base
            self._set_segments(self.segments + (new,))
            if self.on_roll is not None:
                self.on_roll(new)
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
    def read(self, offset: int, max_bytes: int, max_offset_metadata: LogOffsetMetadata | None = None,
             min_one_message: bool = True, include_aborted_txns: bool = False) -> FetchDataInfo:
        """Whole batches from the one holding ``offset``, at most ``max_bytes`` (but the first
        batch always whole when ``min_one_message``), none at or past ``max_offset_metadata``
        (default: the log end). A bound with a position in a segment is used without an index
        lookup. Raises OFFSET_OUT_OF_RANGE below the log start or above the log end.
        ``include_aborted_txns`` adds the aborted transactions overlapping what was read.
        """
        segments, bases = self._view
        start_offset, end_offset = self.log_start_offset, self.next_offset
        if offset < start_offset or offset > end_offset:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"Received request for offset {offset} for partition {self.name}, but we only have "
                             f"log segments in the range {start_offset} to {end_offset}.")
        if max_offset_metadata is None or max_offset_metadata.message_offset >= end_offset:
            max_offset_metadata = self.log_end_offset_metadata
        bound = max_offset_metadata.message_offset
        slices: list[FileSlice] = []
        aborted = [] if include_aborted_txns else None
        if offset >= bound:
            meta = max_offset_metadata if offset == bound else self.convert_to_offset_metadata(offset)
            return FetchDataInfo(meta, FetchResult(slices, start_offset, end_offset), aborted)
        bound_base = -1 if max_offset_metadata.message_offset_only else max_offset_metadata.segment_base_offset
        remaining = max_bytes
        i = max(bisect.bisect_right(bases, offset) - 1, 0)
        fetch_meta = None
        last_segment = last_stop = None
        while i < len(segments) and segments[i].base_offset < bound:
            segment = segments[i]
            i += 1
            end = segment.size
            max_position = end
            if segment.base_offset == bound_base:
                max_position = max_offset_metadata.relative_position_in_segment
            elif bound < segment.next_offset:
                stop_info = segment.translate_offset(bound, end)
                max_position = stop_info.position if stop_info else end
            start = 0
            if fetch_meta is None:
                start_info = segment.translate_offset(offset, max_position)
                if start_info is None:
                    continue  # nothing at or after ``offset`` here (compacted gap): next segment
                start = start_info.position
                fetch_meta = LogOffsetMetadata(offset, segment.base_offset, start)
            if start >= max_position:
                break
            if start + remaining >= max_position:
                stop = max_position
            else:
                stop = segment.end_of_whole_batches(start, start + remaining)
                if stop == start:
                    if not (min_one_message and not slices):
                        break
                    stop = start + start_info.size
            slices.append(FileSlice(segment.fd, start, stop - start))
            last_segment, last_stop = segment, stop
            remaining -= stop - start
            if stop < max_position or remaining <= 0:
                break
        if fetch_meta is None:   # every record from ``offset`` on was compacted away
            fetch_meta = self.log_end_offset_metadata
        if include_aborted_txns and last_segment is not None:
            upper = last_segment.fetch_upper_bound_offset(last_stop)
            if upper is None:
                j = bisect.bisect_right(bases, last_segment.base_offset)
                upper = bases[j] if j < len(bases) else end_offset
            aborted = self.collect_aborted_transactions(offset, upper)
        if slices and sum(s.length for s in slices) < COPY_BELOW_BYTES:
            data = b"".join([os.pread(s.fd, s.length, s.position) for s in slices])
            return FetchDataInfo(fetch_meta, FetchResult([], start_offset, end_offset, data), aborted)
        return FetchDataInfo(fetch_meta, FetchResult(slices, start_offset, end_offset), aborted)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list:
        """Aborted transactions overlapping [start_offset, upper_bound_offset), from the segment
        holding ``start_offset`` on, until an entry's LSO shows no later one can overlap."""
        segments, bases = self._view
        found = []
        for segment in segments[max(bisect.bisect_right(bases, start_offset) - 1, 0):]:
            txns, complete = segment.collect_aborted_txns(start_offset, upper_bound_offset)
            found += txns
            if complete:
                break
        return found

    def convert_to_offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where ``offset``'s batch starts; raises OFFSET_OUT_OF_RANGE outside the log."""
        if offset == self.next_offset:
            return self.log_end_offset_metadata
        return self.read(offset, 1, None, False).fetch_offset_metadata

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
                raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                 f"Cannot increment the log start offset to {new_start} of partition "
                                 f"{self.name} since it is larger than the log end offset "
                                            f"{self.next_offset}")
            if new_start > self.log_start_offset:
                self.log_start_offset = new_start

    def delete_old_segments(self, now: int | None = None, high_watermark: int | None = None,
                            retention: tuple[int, int] | None = None) -> int:
        """Kafka's retention: log start offset, then retention.bytes, then retention.ms.

        Only ``cleanup.policy`` including ``delete`` applies the size and time rules. Whole
        segments are renamed ``.deleted`` and removed after file.delete.delay.ms. ``retention``
        (ms, bytes) stands for the config's when given (a tiered log's local retention).
        """
        now = self._clock() if now is None else now
        deleted = self._delete_while(lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset,
                                     high_watermark)
        if not self.config.delete:
            return deleted
        retention_ms, retention_bytes = retention or (self.config.retention_ms, self.config.retention_bytes)
        if retention_bytes >= 0 and self.size >= retention_bytes:
            diff = [self.size - retention_bytes]

            def over_size(seg, nxt):
                if diff[0] - seg.size >= 0:
                    diff[0] -= seg.size
                    return True
                return False
            deleted += self._delete_while(over_size, high_watermark)
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

    def delete(self) -> None:
        """Remove the whole partition directory (topic deletion)."""
        with self._lock:
            for segment in self.segments:
                segment.delete()
            self.closed = True
        for name in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, name))
        os.rmdir(self.dir)

    def __repr__(self):
        return (f"LocalLog({self.name}, start={self.log_start_offset}, end={self.next_offset}, "
                f"segments={len(self.segments)})")

