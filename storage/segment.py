"""LogSegment: one ``<base offset>.log`` file with its OffsetIndex and TimeIndex.

Only the active (last) segment is ever appended to, from the thread that owns
appends; every other method is safe to call from readers in any thread because
it reads ``size`` once and touches only bytes below it.
"""

from __future__ import annotations

import logging
import os
import struct
import threading

from kafka_compat.clock import now_ms
from kafka_compat.protocol.batch_header import (
    CONTROL_FLAG_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    MAGIC_OFFSET,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    crc_valid,
    header_bytes_needed,
    parse_header,
)

from . import checkpoint
from .fallocate import release_past_end, reserve_past_end
from .file_records import iter_file_batches, read_batch_header
from .index import INT32_MAX, CorruptIndexError, OffsetIndex, TimeIndex
from .log_config import LogConfig
from .open_files import POOL, SegmentFd, open_fd
from .transaction_index import TransactionIndex

_OFFSET_ENTRY = struct.Struct(">ii")     # the offset index's entry: relative offset, position
_TIME_ENTRY = struct.Struct(">qi")       # the time index's: timestamp, relative offset

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
RECOVERY_CHUNK = 8 * 1024 * 1024
RESERVE_CHUNK = 4 * 1024 * 1024   # blocks reserved past the end of the active segment at a time
_NO_LIMIT = 1 << 64                # above any int64 timestamp
_pwrite = os.pwrite
_SIZE_FIELD = struct.Struct(">i")   # a batch's length field, after its 8-byte base offset


def _batch_size(buf, at: int) -> int:
    return _SIZE_FIELD.unpack_from(buf, at + 8)[0] + 12


def filename_prefix(offset: int) -> str:
    """Kafka names segment files by base offset, zero-padded to 20 digits."""
    return f"{offset:020d}"


def segment_paths(directory: str, base_offset: int, suffix: str = "") -> tuple[str, str, str]:
    prefix = os.path.join(directory, filename_prefix(base_offset))
    return prefix + LOG_SUFFIX + suffix, prefix + INDEX_SUFFIX + suffix, prefix + TIME_INDEX_SUFFIX + suffix


def txn_index_path(directory: str, base_offset: int, suffix: str = "") -> str:
    return os.path.join(directory, filename_prefix(base_offset)) + TXN_INDEX_SUFFIX + suffix



#: attributes a segment loaded with ``lazy=True`` computes at their first read, and the method
#: that sets them (Kafka's LazyIndex, and FileRecords opened on demand)
_LAZY_FIELDS = {
    "size": "_load_size", "_reserved_to": "_load_size", "blocks": "_load_size",
    "offset_index": "_load_offset_index", "time_index": "_load_time_index", "txn_index": "_load_txn_index",
    "max_timestamp_so_far": "_load_max_timestamp", "offset_of_max_timestamp_so_far": "_load_max_timestamp",
    "append_offset_limit": "refresh_roll_limits", "roll_timestamp_limit": "refresh_roll_limits",
}
_lazy_lock = threading.RLock()   # two readers' first uses of one segment load it once


class LogSegment:
    def __init__(self, directory: str, base_offset: int, config: LogConfig, *, suffix: str = "",
                 created_ms: int | None = None, active: bool = True, lazy: bool = False):
        """``lazy``: an existing segment being loaded; nothing is opened, stat'ed or read until used
        (its size, indexes, transaction index and largest timestamp come in on first use), so a
        loaded segment costs only what the loader's checks, or its first user, read of it."""
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.index_interval_bytes = config.index_interval_bytes
        self.roll_jitter_ms = config.random_segment_jitter()
        self.created_ms = now_ms() if created_ms is None else created_ms
        log_path, self._index_path, self._time_index_path = segment_paths(directory, base_offset, suffix)
        self._txn_index_path = txn_index_path(directory, base_offset, suffix)
        self.log_path = log_path
        self.recently_used = True
        self.closed = False
        #: written by the cleaner (a .swap, or what one became on load): its batches may leave gaps
        self.cleaned = bool(suffix)
        self._preallocated = False
        #: make_active ran: indexes loaded later get room to grow
        self._active_indexes = False
        self.bytes_since_last_index_entry = 0
        self.rolling_based_timestamp: int | None = None
        self.next_offset = base_offset  # set by the loader (read_next_offset) or by appends
        #: the last batch the load's check walked (sanity_check), for the checks that follow it
        self.tail_batch: BatchHeader | None = None
        #: whether a .txnindex file exists, when the loader's listing said (None: not known)
        self.txn_index_on_disk: bool | None = None
        self.max_offset = base_offset + INT32_MAX   # offsets past it do not fit 32-bit relative offsets
        if lazy:
            self._fd: SegmentFd | None = None
            return
        existed = os.path.exists(log_path)
        self._fd = open_fd(log_path, os.O_RDWR | os.O_CREAT)
        self.size = os.fstat(self._fd).st_size
        if not existed and config.preallocate and active:
            os.posix_fallocate(self.fd, 0, config.segment_bytes)
            self._preallocated = True
        # blocks are reserved up to here (fallocate.reserve_past_end)
        self._reserved_to = config.segment_bytes if self._preallocated else self.size
        self._load_offset_index()
        self._load_time_index()
        self._load_txn_index()
        self._load_max_timestamp()
        self.refresh_roll_limits()
        POOL.opened(self)

    def __getattr__(self, name):
        loader = _LAZY_FIELDS.get(name)
        if loader is None:
            raise AttributeError(f"'LogSegment' object has no attribute {name!r}")
        with _lazy_lock:
            if name not in self.__dict__:
                getattr(self, loader)()
        return self.__dict__[name]

    def _loaded(self, name: str):
        """A lazy attribute if it was loaded, else None (without loading it)."""
        return self.__dict__.get(name)

    def _load_size(self) -> None:
        fd = self._fd
        st = os.fstat(fd) if fd is not None else os.stat(self.log_path)
        d = self.__dict__
        d.setdefault("size", st.st_size)
        d.setdefault("_reserved_to", d["size"])
        #: disk blocks of the file when its size was first read (an empty one with some has blocks
        #: reserved past its end, which recovery releases)
        d.setdefault("blocks", st.st_blocks)

    def _load_offset_index(self) -> None:
        index = OffsetIndex(self._index_path, self.base_offset, self.config.segment_index_bytes, self._note_open)
        if self._active_indexes:
            index.resize(self.config.segment_index_bytes)
        self.__dict__.setdefault("offset_index", index)

    def _load_time_index(self) -> None:
        index = TimeIndex(self._time_index_path, self.base_offset, self.config.segment_index_bytes, self._note_open)
        if self._active_indexes:
            index.resize(self.config.segment_index_bytes)
        self.__dict__.setdefault("time_index", index)

    def _load_txn_index(self) -> None:
        self.__dict__.setdefault("txn_index", TransactionIndex(self._txn_index_path, self.base_offset,
                                                               self._note_open))

    def _load_max_timestamp(self) -> None:
        ts, ts_offset = self.time_index.last_entry
        d = self.__dict__
        d.setdefault("max_timestamp_so_far", ts)
        d.setdefault("offset_of_max_timestamp_so_far", ts_offset if ts >= 0 else -1)

    # -- open files (storage/open_files.py) -------------------------------------------
    @property
    def fd(self) -> SegmentFd:
        """The ``.log`` descriptor, opened again if the open-files budget let it go."""
        self.recently_used = True
        fd = self._fd
        if fd is None:
            fd = self._fd = open_fd(self.log_path, os.O_RDWR)
            if not self.closed:      # a closed segment's late reader gets a descriptor outside the budget
                POOL.opened(self)
        return fd

    def _note_open(self) -> None:
        """An index of this segment was mapped or opened: count the segment as open."""
        self.recently_used = True
        if self._fd is None and not self.closed:
            self._fd = open_fd(self.log_path, os.O_RDWR)
            POOL.opened(self)

    def release_files(self, uncount: bool = False) -> None:
        """Drop the descriptor and index mappings (each closes when its last user lets go); with
        ``uncount``, leave the open-files budget too (the next use counts the segment again)."""
        if uncount and not self.closed:
            POOL.closed(self)
        self._fd = None
        for name in ("offset_index", "time_index"):
            index = self._loaded(name)
            if index is not None:
                index.unmap()
        txn = self._loaded("txn_index")
        if txn is not None:
            txn.release()

    # -- writing -------------------------------------------------------------------
    def append(self, data, largest_offset: int, largest_timestamp: int, offset_of_max_timestamp: int) -> None:
        """Write ``data`` (whole batches) at the end; add index entries as Kafka does.

        An entry (last offset of this append, its start position) is added once more
        than index.interval.bytes were appended since the previous one.
        """
        position = self.size
        if largest_offset > self.max_offset:
            raise OverflowError(f"offset {largest_offset} overflows segment {self.base_offset}")
        length = len(data)
        end = position + length
        if end > self._reserved_to:
            self._reserve(end)
        if self.bytes_since_last_index_entry > self.index_interval_bytes:     # the indexes grow below
            self.offset_index.ensure_room()
            self.time_index.ensure_room()
        written = _pwrite(self.fd, data, position)
        while written < length:
            written += _pwrite(self.fd, memoryview(data)[written:], position + written)
        self.size = end
        self.next_offset = largest_offset + 1
        if largest_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = largest_timestamp
            self.offset_of_max_timestamp_so_far = offset_of_max_timestamp
        since = self.bytes_since_last_index_entry
        if since > self.index_interval_bytes:
            self.offset_index.append(largest_offset, position)
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
            self.bytes_since_last_index_entry = length
            if self.indexes_full():
                self.append_offset_limit = -1   # Log.append's exact check rolls
        else:
            self.bytes_since_last_index_entry = since + length
        if not position:
            self.rolling_based_timestamp = largest_timestamp
            self.refresh_roll_limits()

    def indexes_full(self) -> bool:
        """No room for another offset index entry, or for the time index entry a roll adds."""
        offsets, times = self.offset_index, self.time_index
        return offsets.entries >= offsets.max_entries or times.entries >= times.max_entries - 1

    def refresh_roll_limits(self) -> None:
        """Precompute what Log.append compares a batch against before its exact roll checks:
        ``append_offset_limit``, the largest last offset that fits (none once an index is
        full), and ``roll_timestamp_limit``, the largest batch timestamp segment.ms allows
        (none while the first batch's timestamp is unknown or absent, so the clock decides;
        any while the segment is empty). Called wherever the facts behind them change."""
        self.append_offset_limit = -1 if self.indexes_full() else self.max_offset
        first = self.rolling_based_timestamp
        if not self.size:
            self.roll_timestamp_limit = _NO_LIMIT
        elif first is not None and first >= 0:
            self.roll_timestamp_limit = first + self.config.segment_ms - self.roll_jitter_ms
        else:
            self.roll_timestamp_limit = -_NO_LIMIT

    def _reserve(self, end: int) -> None:
        """Reserve blocks past the end of file, so writes below that point allocate nothing: up to
        ``end`` and as far again as the segment will then hold, at most RESERVE_CHUNK and never past
        segment.bytes. Never more ahead than it holds: 50,000 partitions with a few records each
        would otherwise reserve 4 MiB apiece, 200 GB, and fill the disk with nothing."""
        target = max(end, min(end + min(end, RESERVE_CHUNK), self.config.segment_bytes))
        if reserve_past_end(self.fd, self.size, target - self.size):
            self._reserved_to = target
        else:
            self._reserved_to = 1 << 62   # cannot reserve here: stop trying, writes allocate

    def time_waited_for_roll(self, now: int, message_timestamp: int) -> int:
        """Time since the first batch's timestamp (or since creation when there is none); Log.append
        measures the common case, a known first timestamp, itself."""
        ts = self.rolling_based_timestamp
        if ts is None:
            first = read_batch_header(self.fd, 0, self.size) if self.size else None
            ts = self.rolling_based_timestamp = first.max_timestamp if first else None
            self.refresh_roll_limits()
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now - self.created_ms

    def _seal(self) -> None:
        """Record the largest timestamp in the time index and cut any preallocated tail (Kafka
        does both when a segment stops being active, and on a clean close). A lazily loaded
        segment whose time index and size were never read had nothing written: it is as it was."""
        if self._loaded("max_timestamp_so_far") is not None and self.max_timestamp_so_far >= 0:
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
                                         skip_full_check=True)
        if self._loaded("_reserved_to") is None:
            return
        if self._preallocated:
            os.ftruncate(self.fd, self.size)
            self._preallocated = False
        elif self._reserved_to > self.size:
            release_past_end(self.fd, self.size)
        self._reserved_to = self.size

    def on_become_inactive(self) -> None:
        """On roll: seal, and trim both indexes to their entries."""
        self._seal()
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._create_index_files()
        self.refresh_roll_limits()

    def _create_index_files(self) -> None:
        indexes = [i for i in (self._loaded("offset_index"), self._loaded("time_index")) if i is not None]
        if indexes and self.size:   # an index never loaded is on disk as it was
            for index in indexes:
                index.create_file()

    def make_active(self) -> None:
        """Give a reopened last segment room to grow its indexes again (those not loaded yet get it
        when they are)."""
        self._active_indexes = True
        for name in ("offset_index", "time_index"):
            index = self._loaded(name)
            if index is not None:
                index.resize(self.config.segment_index_bytes)
        for name in ("append_offset_limit", "roll_timestamp_limit"):   # computed again at first use
            self.__dict__.pop(name, None)

    def flush(self) -> None:
        if self.closed:
            return
        os.fsync(self.fd)
        for name in ("offset_index", "time_index", "txn_index"):
            index = self._loaded(name)
            if index is not None:
                index.flush()

    # -- reading -------------------------------------------------------------------
    def translate_offset(self, offset: int, end: int | None = None) -> BatchHeader | None:
        """The first batch whose last offset is >= ``offset``, found from the index then scanned."""
        end = self.size if end is None else end
        for info in iter_file_batches(self.fd, self._indexed_position(offset, end), end):
            if info.last_offset >= offset:
                return info
        return None

    def last_batch_below(self, offset: int) -> BatchHeader | None:
        """The last batch whose last offset is < ``offset`` (a compaction gap may lie between them)."""
        end = self.size
        found = None
        for info in iter_file_batches(self.fd, self._indexed_position(offset - 1, end), end):
            if info.last_offset >= offset:
                break
            found = info
        return found

    def _indexed_position(self, offset: int, end: int) -> int:
        """Where to scan from for ``offset``: the index entry at or below it, 0 if none or bogus."""
        entry_offset, position = self.offset_index.lookup(offset)
        fd = self.fd
        if position:
            # an index entry must lead to a batch at or below its offset; one that does not (a
            # damaged index a clean shutdown vouched for) is not followed: scan from the start
            try:
                first = read_batch_header(fd, position, end)
            except ValueError:
                first = None
            if first is None or not self.base_offset <= first.base_offset <= entry_offset:
                log.warning("%s: index entry (%d, %d) does not point at a batch; scanning the segment",
                            self.offset_index.path, entry_offset, position)
                position = 0
        return position

    def batch_boundary_at_or_below(self, limit: int, start: int) -> int:
        """A batch start in [start, limit], found through the index; ``start`` if none is indexed."""
        position = self.offset_index.position_floor(limit)
        return position if position >= start else start

    def end_of_whole_batches(self, start: int, limit: int) -> int:
        """The largest position <= ``limit`` that ends a batch, scanning forward from ``start``."""
        position = self.batch_boundary_at_or_below(limit, start)
        for info in iter_file_batches(self.fd, position, limit):
            position = info.position + info.size
        return position

    def read_next_offset(self) -> int:
        last_indexed, position = self.offset_index.lookup(INT32_MAX + self.base_offset)
        next_offset = self.base_offset
        for info in iter_file_batches(self.fd, position, self.size):
            next_offset = info.last_offset + 1
        return next_offset

    def fetch_upper_bound_offset(self, position: int) -> int | None:
        """An offset above every record that starts before ``position`` (from the index), or None."""
        return self.offset_index.fetch_upper_bound_offset(position)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int):
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    def batches(self, start: int = 0, end: int | None = None):
        return iter_file_batches(self.fd, start, self.size if end is None else end)

    def slice_from(self, offset: int) -> tuple[int, bytes, bytes, bytes] | None:
        """The batches from the one holding ``offset`` to the end as a segment of their own: (its base offset, log,
        offset index, time index), the indexes as appends would have written them. Tiered storage: a new leader
        whose segment began before what its predecessor copied copies only the rest. None if nothing is there."""
        first = self.translate_offset(offset)
        if first is None:
            return None
        start, base = first.position, first.base_offset
        offsets, times = bytearray(), bytearray()
        since, max_ts, max_ts_offset = 0, -1, base
        for info in self.batches(start):
            if info.max_timestamp > max_ts:
                max_ts, max_ts_offset = info.max_timestamp, info.last_offset
            if since > self.index_interval_bytes:
                offsets += _OFFSET_ENTRY.pack(info.last_offset - base, info.position - start)
                times += _TIME_ENTRY.pack(max_ts, max_ts_offset - base)
                since = info.size
            else:
                since += info.size
        return base, self.read_bytes(start, self.size - start), bytes(offsets), bytes(times)

    def read_bytes(self, position: int, length: int) -> bytes:
        return os.pread(self.fd, length, position)

    def largest_timestamp(self) -> int:
        """Retention's clock for this segment: its max timestamp, else the file's mtime."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return self.last_modified()

    def last_modified(self) -> int:
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    def set_last_modified(self, ms: int) -> None:
        ns = ms * 1_000_000
        os.utime(self.log_path, ns=(ns, ns))
        for index in (self.offset_index, self.time_index):
            if index.on_disk:
                os.utime(index.path, ns=(ns, ns))

    # -- recovery ------------------------------------------------------------------
    def sanity_check(self) -> None:
        """Checks that decide whether a trusted segment's indexes are usable; sets next_offset.

        Both indexes must increase strictly and stay inside the log, and the last offset
        index entry must point at the start of a batch holding its offset.
        """
        size = self.size
        last = self.offset_index.sanity_check(size)
        position, prev_last = 0, self.base_offset - 1
        if last is not None:
            last_offset, position = last
            try:
                info = read_batch_header(self.fd, position, size)
            except ValueError:
                info = None
            if info is None or info.last_offset < last_offset or info.base_offset > last_offset:
                raise CorruptIndexError(f"{self.offset_index.path}: last entry does not point at its batch")
            prev_last = info.base_offset - 1   # the indexed batch is whole and valid: it bounds what follows
        self.next_offset = self._check_tail(position, prev_last)
        self.time_index.sanity_check(self.next_offset)
        if self._loaded("txn_index") is None and not (self.txn_index_on_disk if self.txn_index_on_disk is not None
                                                      else os.path.exists(self._txn_index_path)):
            return   # no aborted transaction in this segment; its index loads (empty) when first used
        self.txn_index.sanity_check()
        for txn in self.txn_index.all_aborted_txns():
            # each entry names the ABORT marker of its producer in this segment
            marker = self.translate_offset(txn.last_offset)
            if marker is None or marker.base_offset != txn.last_offset or marker.producer_id != txn.producer_id \
                    or not marker.attributes & CONTROL_FLAG_MASK or txn.first_offset > txn.last_offset \
                    or not 0 <= txn.last_stable_offset <= txn.last_offset + 1:
                raise CorruptIndexError(f"{self.txn_index.path}: {txn} does not name an abort marker of the log")

    def _check_tail(self, position: int, prev_last: int) -> int:
        """The offset after the last batch, checking every batch from ``position`` (the last index
        entry: at most index.interval.bytes and a batch) whole, in order and with a valid checksum,
        up to the exact end of the file; CorruptIndexError (so recovery runs) otherwise."""
        end = self.size
        chunk, at = b"", 0
        while position < end:
            left = len(chunk) - at
            if left < RECORD_BATCH_OVERHEAD or (left >= HEADER_SIZE_UP_TO_MAGIC and
                                               _batch_size(chunk, at) > left):
                # one read usually covers it all: the tail is index.interval.bytes and a batch
                chunk, at = os.pread(self.fd, min(end - position, RECOVERY_CHUNK), position), 0
                left = len(chunk)
            try:
                info = parse_header(chunk, at, position) if left >= HEADER_SIZE_UP_TO_MAGIC and \
                    left >= header_bytes_needed(chunk[at + MAGIC_OFFSET]) else None
            except ValueError as exc:
                raise CorruptIndexError(f"{self.log_path}: invalid batch at {position}: {exc}") from None
            if info is None or position + info.size > end:
                raise CorruptIndexError(f"{self.log_path}: torn batch at {position}")
            if info.size > left:
                data, at_data = os.pread(self.fd, info.size, position), 0
            else:
                data, at_data = chunk, at
            if not crc_valid(data, at_data, info.size):
                raise CorruptIndexError(f"{self.log_path}: checksum mismatch at {position}")
            bad = self._offsets_invalid(info, prev_last, None)
            if bad:
                raise CorruptIndexError(f"{self.log_path}: invalid batch at {position}: {bad}")
            prev_last = info.last_offset
            position += info.size
            at += info.size
            self.tail_batch = info
        return prev_last + 1

    def _offsets_invalid(self, info: BatchHeader, prev_last: int, limit: int | None) -> str | None:
        """Why a checksummed batch's offsets cannot be right, or None. The base offset is outside
        the checksum, so a flipped bit there shows only here. As Kafka's recovery checks: offsets
        increase, the last is not below the base, and they fit this segment (relative offsets in
        an int, below the next segment's base offset ``limit``). Beyond Kafka: in a log that is
        never compacted a v2 batch follows the previous one without a gap (the first begins at
        the segment's base offset, where a roll starts it), so a base offset moved up is caught too."""
        if info.last_offset < info.base_offset:
            return f"last offset {info.last_offset} below base offset {info.base_offset}"
        if info.base_offset <= prev_last:
            return f"offsets {info.base_offset}..{info.last_offset} do not follow {prev_last}"
        if info.last_offset - self.base_offset > INT32_MAX:
            return f"offset {info.last_offset} does not fit a segment based at {self.base_offset}"
        if limit is not None and info.last_offset >= limit:
            return f"offset {info.last_offset} is not below the next segment's base offset {limit}"
        if info.magic >= 2 and info.base_offset != prev_last + 1 and not self.gaps_possible():
            return f"offsets {info.base_offset}..{info.last_offset} leave a gap after {prev_last}"
        return None

    def gaps_possible(self) -> bool:
        """Whether batches of this segment may leave offsets out: the cleaner removes batches, so
        in a compacted log, in a cleaned segment (.swap), and in any log the cleaner ever wrote
        (its cleaner-offset-checkpoint names the partition; the policy may have changed since).
        Read only when a gap is seen, which an uncleaned log never shows."""
        if self.config.compact or self.cleaned:
            return True
        partition_dir = os.path.dirname(os.path.abspath(self.log_path))
        topic, _, number = os.path.basename(partition_dir).rpartition("-")
        try:
            cleaned = checkpoint.read_offsets(os.path.join(os.path.dirname(partition_dir),
                                                           checkpoint.CLEANER_OFFSET_CHECKPOINT))
        except (OSError, ValueError):
            return True   # unreadable: do not cut what may be a cleaned log
        return not number.isdigit() or (topic, int(number)) in cleaned

    def recover(self, limit: int | None = None, stop_at: int | None = None) -> int:
        """Check every batch, rebuild both indexes, cut the file at the first invalid byte.

        A batch is valid when its header parses, it fits in the file, its checksum matches,
        and its offsets increase and fit this segment (below ``limit``, the next segment's base
        offset, when there is one; _offsets_invalid). Returns the number of bytes cut. The
        transaction index is emptied: it needs the producer state before this segment, so
        UnifiedLog rebuilds it when it replays the recovered batches, which it does only when
        ``recovered_markers`` says there is an index to rebuild. ``recovered_epochs`` lists
        (leader epoch, first offset) where the batches' epoch went up, for the epoch cache.

        The partition leader epoch lies outside the checksum too, and epochs never go down in a
        log: a lone batch whose epoch rises above the next batch's (not below the one before
        it) is the damaged one (a flipped bit), and recovery runs again to cut before it
        (``stop_at``); any other fall cuts at the batch that falls.

        Where gaps are allowed (compaction) a base offset flipped upward passes as a gap; the
        next batch then falls back below it. When that next batch would follow the one before
        the jump, the jumped batch is the damaged one and recovery cuts before it (it lies past
        the recovery point, so nothing recovered is lost); otherwise the fall is cut. A lone
        last batch with a jump that fits the segment cannot be judged, and stays, as in Kafka.
        """
        self.tail_batch = None
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = NO_TIMESTAMP, -1
        file_size = os.fstat(self.fd).st_size
        valid = last_index_entry = 0
        prev_last = self.base_offset - 1
        epochs, latest_epoch, markers = [], -1, False
        before_raise = raised_at = None   # the epoch before the latest rise, and where the riser starts
        before_jump = jumped_at = None   # the last offset before the previous batch, if it jumped a gap
        position, chunk = 0, b""
        while True:
            if stop_at is not None and valid >= stop_at:
                break
            at = valid - position
            left = len(chunk) - at
            if left < HEADER_SIZE_UP_TO_MAGIC or left < header_bytes_needed(chunk[at + MAGIC_OFFSET]):
                # refill from the next batch; the header might straddle the chunk end
                if file_size - valid < HEADER_SIZE_UP_TO_MAGIC or len(chunk) - at == file_size - valid:
                    break
                position, chunk = valid, os.pread(self.fd, RECOVERY_CHUNK, valid)
                continue
            try:
                info = parse_header(chunk, at, valid)
            except ValueError as exc:
                log.warning("%s: invalid batch header at %d: %s", self.log_path, valid, exc)
                break
            if valid + info.size > file_size:
                log.warning("%s: torn batch at %d (%d bytes, %d in file)", self.log_path, valid, info.size,
                            file_size - valid)
                break
            if at + info.size > len(chunk):
                position, chunk = valid, os.pread(self.fd, max(RECOVERY_CHUNK, info.size), valid)
                continue
            if not crc_valid(chunk, at, info.size):
                log.warning("%s: checksum mismatch at %d", self.log_path, valid)
                break
            bad = self._offsets_invalid(info, prev_last, limit)
            if bad:
                if (jumped_at is not None and stop_at is None and info.base_offset > before_jump
                        and self._offsets_invalid(info, before_jump, limit) is None):
                    log.warning("%s: the batch at %d jumps a gap after offset %d, the next falls back to %d:"
                                " cut before it", self.log_path, jumped_at, before_jump, info.base_offset)
                    return self.recover(limit, jumped_at)
                log.warning("%s: invalid batch at %d: %s", self.log_path, valid, bad)
                break
            if info.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = info.max_timestamp, info.last_offset
            epoch = info.partition_leader_epoch if info.magic >= 2 else -1
            if 0 <= epoch < latest_epoch:
                if raised_at is not None and epoch >= before_raise and stop_at is None:
                    log.warning("%s: leader epoch %d of the batch at %d falls back to %d at %d: cut before it",
                                self.log_path, latest_epoch, raised_at, epoch, valid)
                    return self.recover(limit, raised_at)
                log.warning("%s: leader epoch %d at %d is below the earlier %d", self.log_path, epoch, valid,
                            latest_epoch)
                break
            if epoch > latest_epoch:
                # only a rise inside this segment can be undone here
                before_raise, raised_at = (latest_epoch, valid) if latest_epoch >= 0 else (None, None)
                latest_epoch = epoch
                epochs.append((latest_epoch, info.base_offset))
            elif epoch >= 0:
                raised_at = None   # two batches of the epoch: the rise was real
            if info.attributes & CONTROL_FLAG_MASK and info.magic >= 2:
                markers = True
            if valid - last_index_entry > self.index_interval_bytes:
                self.offset_index.append(info.last_offset, valid)
                self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
                last_index_entry = valid
            before_jump, jumped_at = (prev_last, valid) if info.base_offset > prev_last + 1 else (None, None)
            prev_last = info.last_offset
            valid += info.size
        truncated = file_size - valid
        if truncated:
            os.ftruncate(self.fd, valid)
        else:
            release_past_end(self.fd, valid)   # blocks an unclean shutdown left reserved
        self.size = self._reserved_to = valid
        self.next_offset = prev_last + 1
        self.recovered_epochs, self.recovered_markers = epochs, markers
        self.bytes_since_last_index_entry = valid - last_index_entry
        self.rolling_based_timestamp = None
        if self.max_timestamp_so_far >= 0:
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
                                         skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.refresh_roll_limits()
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Drop every batch from the one holding ``offset`` on; returns the bytes removed."""
        info = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.make_active()
        if info is None:
            return 0
        removed = self.size - info.position
        os.ftruncate(self.fd, info.position)
        self.size = self._reserved_to = info.position
        self.next_offset = self.read_next_offset()
        self.bytes_since_last_index_entry = 0
        self.rolling_based_timestamp = None
        if self.size == 0:
            self.created_ms = now_ms()
        self._reload_max_timestamp()
        self.refresh_roll_limits()
        return removed

    def _reload_max_timestamp(self) -> None:
        ts, offset = self.time_index.last_entry
        _, position = self.offset_index.lookup(offset)
        for info in iter_file_batches(self.fd, position, self.size):
            if info.max_timestamp > ts:
                ts, offset = info.max_timestamp, info.last_offset
        self.max_timestamp_so_far = ts
        self.offset_of_max_timestamp_so_far = offset if ts >= 0 else -1

    # -- files ---------------------------------------------------------------------
    def change_suffix(self, old: str, new: str) -> None:
        def swap(path: str) -> str:
            return (path[: -len(old)] if old and path.endswith(old) else path) + new
        new_log = swap(self.log_path)
        os.replace(self.log_path, new_log)
        self.log_path = new_log
        self.offset_index.rename(swap(self.offset_index.path))
        self.time_index.rename(swap(self.time_index.path))
        self.txn_index.rename(swap(self.txn_index.path))

    def close(self) -> None:
        """Clean close: keep the largest timestamp in the time index, trim, release files."""
        if self.closed:
            return
        self._seal()
        for name in ("offset_index", "time_index"):
            index = self._loaded(name)
            if index is not None:
                index.close()
        self._create_index_files()
        txn = self._loaded("txn_index")
        if txn is not None:
            txn.close()
        self._fd = None
        self.closed = True
        POOL.closed(self)

    def delete(self) -> None:
        """Remove the files now (the caller already waited file.delete.delay.ms)."""
        if not self.closed:
            self.offset_index.delete()
            self.time_index.delete()
            # the descriptor stays with this object: a reader still holding the segment (an older
            # segment list) reads the unlinked file through it, and it closes when they let go
            self.closed = True
            POOL.closed(self)
        self.txn_index.delete()
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def __repr__(self):
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, next_offset={self.next_offset})"
