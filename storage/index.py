"""OffsetIndex and TimeIndex: Kafka's sparse, memory-mapped, big-endian index files.

Offset index entry (8 bytes): relative offset int32, file position int32.
Time index entry (12 bytes): timestamp int64, relative offset int32.
A new index file is preallocated to segment.index.bytes (rounded down to whole
entries) and mapped; it is trimmed to its entries when its segment stops being
active, which is also how a reopened index knows its entry count.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import struct
import threading
import weakref
from operator import ge, gt, lt

from kafka_compat.protocol.batch_header import NO_TIMESTAMP

from .open_files import open_fd

INT32_MAX = (1 << 31) - 1
#: index bytes given disk blocks ahead at a time (_Index.ensure_room)
ALLOCATE_CHUNK = 4096


_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_libc.msync.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_MAP_FAILED = ctypes.c_void_p(-1).value
_MS_SYNC = 4


def _map(fd: int, length: int):
    """Map an index file for random access; the mapping needs no descriptor once made.

    Python's mmap keeps a duplicate of the file's descriptor for as long as the map lives,
    which would cost an index two descriptors where Kafka's cost none; the map is made with
    libc instead and handed out as a ctypes array (struct packs and unpacks it in place), and
    it is unmapped when the last reference to it (or to a memoryview of it) goes.

    A new index is a sparse file, and a page fault on a file mapping reads ahead
    (device read_ahead_kb, 8 MiB on some VMs): the first entry would fill the
    page cache with megabytes of zeroes for every index, a third of a small
    segment's own size. Entries are appended a page at a time and looked up by
    binary search, so one page per fault is all an index ever needs (MADV_RANDOM).
    """
    addr = _libc.mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
    if addr in (None, _MAP_FAILED):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    _libc.madvise(addr, length, mmap.MADV_RANDOM)
    buf = (ctypes.c_char * length).from_address(addr)
    weakref.finalize(buf, _libc.munmap, addr, length)
    return buf


def _msync(buf) -> None:
    if _libc.msync(ctypes.addressof(buf), len(buf), _MS_SYNC):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class CorruptIndexError(Exception):
    """An index file is not a valid sparse index; the caller rebuilds it from the log."""


class _Index:
    ENTRY = struct.Struct(">ii")
    KEY = 0      # field searched by lookup()
    OFFSET = 0   # field holding the relative offset

    def __init__(self, path: str, base_offset: int, max_index_size: int, on_map=None):
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self._lock = threading.Lock()
        self._mm = None
        #: called whenever the file gets mapped, so the open-files budget counts its segment
        self._on_map = on_map
        size = self.ENTRY.size
        try:
            self._length = os.stat(path).st_size
            created = False
        except FileNotFoundError:
            if max_index_size < size:
                raise ValueError(f"invalid max index size {max_index_size}") from None
            created = True
            self._length = max_index_size - max_index_size % size
        #: the file's length on disk; growing it to ``_length`` waits for the first mapping, so a
        #: partition that is loaded and closed without an entry never resizes its index files
        self._file_length = 0 if created else self._length
        #: whether the file exists: a new index creates it at its first mapping, so a partition
        #: that never gets an entry never pays for creating two files it does not need
        self.on_disk = not created
        #: the file's bytes known to have disk blocks under them (see ensure_room)
        self._allocated = 0
        self.max_entries = self._length // size
        # A pre-existing file is taken as valid to its end (Kafka does the same); recovery
        # rebuilds the indexes of every segment it checks.
        self.entries = 0 if created else self.max_entries
        if created:
            self._after_entries_change()
        # else the facts about the last entry are read when first asked for (__getattr__): a
        # loaded index that is only checked, or never used, costs no read of its own for them

    #: attributes _after_entries_change sets, computed at their first read
    _LAST_ENTRY_FIELDS: tuple = ()

    def __getattr__(self, name):
        if name in self._LAST_ENTRY_FIELDS:
            self._after_entries_change()
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _mapped(self):
        """The mapping, made now if the file is not mapped (first use, or released by the budget)."""
        with self._lock:
            mm = self._mm
            if mm is None:
                fd = open_fd(self.path, os.O_RDWR | os.O_CREAT)
                if not self.on_disk or self._file_length != self._length:
                    os.ftruncate(fd, self._length)
                    self.on_disk, self._file_length = True, self._length
                mm = self._mm = _map(fd, self._length)
                del fd
        if self._on_map is not None:
            self._on_map()
        return mm

    def unmap(self) -> None:
        """Let the mapping go (its dirty pages stay in the page cache); a reader holding it keeps it."""
        with self._lock:
            self._mm = None

    def ensure_room(self) -> None:
        """Give the next entry's bytes disk blocks (ALLOCATE_CHUNK at a time) before it is written
        through the mapping: a store into a hole of a full filesystem is a SIGBUS, which would kill the
        broker, where this is an OSError (ENOSPC) for the append, before anything was written."""
        end = (self.entries + 1) * self.ENTRY.size
        if end > self._allocated:
            self._allocate(end)

    def _allocate(self, end: int) -> None:
        if not self.on_disk or self._file_length != self._length:
            self._mapped()                          # creates the file, or grows it to its length
        start = self._allocated - self._allocated % 4096
        target = min(max(end, start + ALLOCATE_CHUNK), self._length)
        fd = open_fd(self.path, os.O_RDWR)
        os.posix_fallocate(fd, start, target - start)
        del fd
        self._allocated = target

    # -- helpers -----------------------------------------------------------------
    def _entry(self, n: int) -> tuple:
        return self.ENTRY.unpack_from(self._mm or self._mapped(), n * self.ENTRY.size)

    def _last_raw(self) -> tuple:
        """The last entry, read without mapping the file when it is not mapped (loading a log maps
        nothing, so an idle partition costs no mapping)."""
        n = self.entries - 1
        if self._mm is not None:
            return self._entry(n)
        step = self.ENTRY.size
        fd = open_fd(self.path, os.O_RDONLY)
        raw = os.pread(fd, step, n * step)
        del fd
        if len(raw) < step:
            raise CorruptIndexError(f"{self.path}: shorter than its entries")
        return self.ENTRY.unpack(raw)

    def _after_entries_change(self) -> None:
        """Refresh cached facts about the last entry."""

    def _largest_lower_bound(self, target: int, field: int) -> int:
        """Slot of the last entry whose ``field`` is <= target, or -1."""
        n = self.entries
        if n == 0:
            return -1
        unpack = self.ENTRY.unpack_from
        mm, step = self._mm or self._mapped(), self.ENTRY.size
        if unpack(mm, 0)[field] > target:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid * step)[field] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def relative(self, offset: int) -> int:
        rel = offset - self.base_offset
        if rel < 0 or rel > INT32_MAX:
            raise OverflowError(f"offset {offset} does not fit an index based at {self.base_offset}")
        return rel

    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def size_in_bytes(self) -> int:
        return self.entries * self.ENTRY.size

    # -- file management ---------------------------------------------------------------
    def resize(self, new_size: int) -> bool:
        """Set the file length to ``new_size`` rounded down to whole entries; map again when next used.
        A file that grows and is not mapped grows at its next mapping (_mapped)."""
        step = self.ENTRY.size
        rounded = new_size - new_size % step
        with self._lock:
            if rounded == self._length:
                return False
            grow_later = rounded > self._file_length and self._mm is None
            if self.on_disk and rounded != self._file_length and not grow_later:
                fd = open_fd(self.path, os.O_RDWR)
                os.ftruncate(fd, rounded)
                del fd
                self._file_length = rounded
            self._mm = None
            self._length = rounded
            self._allocated = 0
            self.max_entries = rounded // step
            self.entries = min(self.entries, self.max_entries)
            self._forget_last_entry()
            return True

    def create_file(self) -> None:
        """Write the file out (trimmed to its entries) if it was never created: a segment holding
        records keeps both index files, as Kafka's do, so loading it needs no rebuild."""
        with self._lock:
            if self.on_disk:
                return
            fd = open_fd(self.path, os.O_RDWR | os.O_CREAT)
            self._length = self._file_length = self.entries * self.ENTRY.size
            os.ftruncate(fd, self._length)
            del fd
            self.max_entries = self.entries
            self.on_disk = True

    def trim_to_valid_size(self) -> None:
        self.resize(self.entries * self.ENTRY.size)

    def reset(self) -> None:
        """Drop every entry and preallocate again (used before rebuilding)."""
        self.truncate_to_entries(0)
        self.resize(self.max_index_size)

    def truncate_to_entries(self, n: int) -> None:
        self.entries = n
        self._forget_last_entry()

    def _forget_last_entry(self) -> None:
        """The entries changed: the facts about the last one are read again when next asked for."""
        for name in self._LAST_ENTRY_FIELDS:
            self.__dict__.pop(name, None)

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset`` (Kafka's truncateTo)."""
        slot = self._largest_lower_bound(offset - self.base_offset, self.OFFSET)
        if slot < 0:
            keep = 0
        elif self._entry(slot)[self.OFFSET] == offset - self.base_offset:
            keep = slot
        else:
            keep = slot + 1
        self.truncate_to_entries(keep)

    def flush(self) -> None:
        with self._lock:
            if self._mm is not None:
                _msync(self._mm)

    def close(self, trim: bool = True) -> None:
        if trim and self.on_disk:
            self.trim_to_valid_size()
        self.unmap()

    def rename(self, new_path: str) -> None:
        if os.path.exists(self.path):
            os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self.close(trim=False)
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def _decode(self, raw: tuple) -> tuple:
        raise NotImplementedError

    def entry(self, n: int) -> tuple:
        if n >= self.entries:
            raise IndexError(n)
        return self._decode(self._entry(n))

    def _checked_columns(self) -> list | None:
        """All entries decoded at C speed, one tuple per field; None when empty."""
        if self._length % self.ENTRY.size:
            raise CorruptIndexError(f"{self.path}: length {self._length} is not a multiple of {self.ENTRY.size}")
        n = self.entries
        if not n:
            return None
        fields = self.ENTRY.format.lstrip(">")
        buf = self._mm
        if buf is None:   # one read, no mapping: a load checks every partition's indexes, most stay idle
            fd = open_fd(self.path, os.O_RDONLY)
            buf = os.pread(fd, n * self.ENTRY.size, 0)
            del fd
            if len(buf) < n * self.ENTRY.size:
                raise CorruptIndexError(f"{self.path}: shorter than its entries")
        flat = struct.unpack_from(">" + fields * n, buf, 0)
        return [flat[i:: len(fields)] for i in range(len(fields))]


class OffsetIndex(_Index):
    """Maps the last offset of an indexed batch to the file position where that batch starts."""

    ENTRY = _OFFSET_ENTRY
    KEY = 0
    OFFSET = 0
    _LAST_ENTRY_FIELDS = ("last_offset",)

    def _after_entries_change(self) -> None:
        self.last_offset = self.base_offset + self._last_raw()[0] if self.entries else self.base_offset

    def append(self, offset: int, position: int) -> None:
        n = self.entries
        if n >= self.max_entries:
            raise ValueError(f"attempt to append to a full index ({n} entries)")
        if n and offset <= self.last_offset:
            raise ValueError(f"index offset {offset} not above the last one {self.last_offset}")
        rel = offset - self.base_offset
        if rel < 0 or rel > INT32_MAX:
            raise OverflowError(f"offset {offset} does not fit an index based at {self.base_offset}")
        if (n + 1) * 8 > self._allocated:
            self.ensure_room()
        _OFFSET_ENTRY.pack_into(self._mm or self._mapped(), n * 8, rel, position)
        self.entries = n + 1
        self.last_offset = offset

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below ``target_offset``, else (base, 0)."""
        slot = self._largest_lower_bound(target_offset - self.base_offset, 0)
        return (self.base_offset, 0) if slot < 0 else self.entry(slot)

    def _decode(self, raw: tuple) -> tuple[int, int]:
        return self.base_offset + raw[0], raw[1]

    def position_floor(self, limit: int) -> int:
        """The largest indexed batch position <= ``limit``, or -1 (positions increase too)."""
        slot = self._largest_lower_bound(limit, 1)
        return -1 if slot < 0 else self._entry(slot)[1]

    def fetch_upper_bound_offset(self, position: int) -> int | None:
        """The offset of the first entry at or after ``position``, or None (Kafka's
        fetchUpperBoundOffset: an offset no record before ``position`` reaches)."""
        slot = self._largest_lower_bound(position - 1, 1) + 1
        return self.base_offset + self._entry(slot)[0] if slot < self.entries else None

    def sanity_check(self, log_size: int) -> tuple[int, int] | None:
        """Raise CorruptIndexError unless offsets and positions strictly increase within the log;
        returns the last entry (offset, position), None when empty (one read checks and gives it)."""
        columns = self._checked_columns()
        if columns is None:
            return None
        rels, positions = columns
        if rels[0] < 0 or not all(map(lt, rels, rels[1:])):
            raise CorruptIndexError(f"{self.path}: offsets do not increase")
        if positions[0] < 0 or positions[-1] >= max(log_size, 1) or not all(map(lt, positions, positions[1:])):
            raise CorruptIndexError(f"{self.path}: positions do not increase within the log")
        self.last_offset = self.base_offset + rels[-1]
        return self.last_offset, positions[-1]


class TimeIndex(_Index):
    """Maps the largest timestamp seen so far to the last offset of the batch holding it."""

    ENTRY = _TIME_ENTRY
    KEY = 0
    OFFSET = 1
    _LAST_ENTRY_FIELDS = ("last_entry",)

    def _after_entries_change(self) -> None:
        if self.entries:
            self.last_entry = self._decode(self._last_raw())
        else:
            self.last_entry = (NO_TIMESTAMP, self.base_offset)

    def is_full(self) -> bool:
        # Kafka keeps the last slot for the entry written when the segment rolls.
        return self.entries >= self.max_entries - 1

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        n = self.entries
        if not skip_full_check and n >= self.max_entries - 1:
            raise ValueError(f"attempt to append to a full time index ({n} entries)")
        last_ts, last_offset = self.last_entry
        if n and offset < last_offset:
            raise ValueError(f"time index offset {offset} below the last one {last_offset}")
        if timestamp > last_ts and n < self.max_entries:
            if (n + 1) * 12 > self._allocated:
                self.ensure_room()
            _TIME_ENTRY.pack_into(self._mm or self._mapped(), n * 12, timestamp, self.relative(offset))
            self.entries = n + 1
            self.last_entry = (timestamp, offset)

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp <= target, else (-1, base)."""
        slot = self._largest_lower_bound(target_timestamp, 0)
        return (NO_TIMESTAMP, self.base_offset) if slot < 0 else self.entry(slot)

    def _decode(self, raw: tuple) -> tuple[int, int]:
        return raw[0], self.base_offset + raw[1]

    def sanity_check(self, next_offset: int) -> None:
        """Raise CorruptIndexError unless timestamps strictly increase and offsets stay in the log."""
        columns = self._checked_columns()
        if columns is None:
            return
        stamps, rels = columns
        if not all(map(gt, stamps[1:], stamps)) or not all(map(ge, rels[1:], rels)):
            raise CorruptIndexError(f"{self.path}: entries do not increase")
        if rels[0] < 0 or self.base_offset + rels[-1] >= max(next_offset, self.base_offset + 1):
            raise CorruptIndexError(f"{self.path}: offsets beyond the log")
        self.last_entry = (stamps[-1], self.base_offset + rels[-1])
