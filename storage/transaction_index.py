"""TransactionIndex: a segment's ``.txnindex``, the aborted transactions whose ABORT marker it holds.

Kafka's TransactionIndex and AbortedTxn. The file is a flat array of 34-byte big-endian
entries, ordered by LastOffset:

    Version int16 (0), ProducerId int64, FirstOffset int64,
    LastOffset int64 (the marker's offset), LastStableOffset int64 (the LSO when it was written)

A read_committed fetch gets the aborted transactions that overlap what it read, so the
consumer can drop their records. The file exists only once a segment has had an abort;
recovery rebuilds it from the log (the ABORT markers and the producer state before them).
"""

from __future__ import annotations

import logging
import os
import struct
from typing import NamedTuple

from .index import CorruptIndexError
from .open_files import open_fd

log = logging.getLogger(__name__)

CURRENT_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size   # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def pack(self) -> bytes:
        return _ENTRY.pack(CURRENT_VERSION, *self)


def parse_entries(data: bytes, where: str = "transaction index") -> list[tuple[int, AbortedTxn]]:
    """(position, AbortedTxn) of each whole entry in ``data``; a partial tail is left out."""
    out = []
    for i, (version, *fields) in enumerate(_ENTRY.iter_unpack(data[: len(data) - len(data) % ENTRY_SIZE])):
        if version > CURRENT_VERSION:
            raise CorruptIndexError(f"{where}: unexpected aborted transaction version {version}")
        out.append((i * ENTRY_SIZE, AbortedTxn(*fields)))
    return out


class TransactionIndex:
    def __init__(self, path: str, start_offset: int, on_open=None):
        self.path = path
        #: called whenever the file gets opened, so the open-files budget counts its segment
        self._on_open = on_open
        self.start_offset = start_offset
        self._fd: int | None = None
        self._exists = False
        self._size = 0
        self._last_offset: int | None = None
        if os.path.exists(path):
            self._open()
            torn = self._size % ENTRY_SIZE
            if torn:
                log.warning("%s: dropping %d bytes of a partial entry at the end", path, torn)
                self._size -= torn
                os.ftruncate(self._fd, self._size)
            try:
                entries = self.all_aborted_txns()
            except CorruptIndexError as exc:   # sanity_check says so again; recovery rebuilds the file
                log.warning("%s", exc)
                entries = []
            self._last_offset = entries[-1].last_offset if entries else None

    def _open(self) -> int:
        fd = self._fd
        if fd is None:
            fd = self._fd = open_fd(self.path, os.O_RDWR | os.O_CREAT)
            if not self._exists:
                self._size = os.fstat(fd).st_size
                self._exists = True
            if self._on_open is not None:
                self._on_open()
        return fd

    def release(self) -> None:
        """Let the descriptor go (the open-files budget); the next use opens the file again."""
        self._fd = None

    @property
    def exists(self) -> bool:
        return self._exists

    @property
    def size_in_bytes(self) -> int:
        return self._size

    def append(self, txn: AbortedTxn) -> None:
        if self._last_offset is not None and txn.last_offset <= self._last_offset:
            raise ValueError(f"{self.path}: last offsets must increase, {txn.last_offset} follows "
                             f"{self._last_offset}")
        fd = self._open()
        os.pwrite(fd, txn.pack(), self._size)
        self._size += ENTRY_SIZE
        self._last_offset = txn.last_offset

    def _entries(self):
        """(position, AbortedTxn) of every whole entry."""
        if not self._exists or not self._size:
            return ()
        return parse_entries(os.pread(self._open(), self._size, 0), self.path)

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return [txn for _, txn in self._entries()]

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound_offset), and whether the search is complete:
        once an entry's LSO reaches the upper bound, no later segment can hold an overlapping one."""
        found = []
        for _, txn in self._entries():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or above ``offset``."""
        last = None
        for position, txn in self._entries():
            if txn.last_offset >= offset:
                os.ftruncate(self._open(), position)
                self._size = position
                self._last_offset = last
                return
            last = txn.last_offset

    def reset(self) -> None:
        if self._exists:
            os.ftruncate(self._open(), 0)
        self._size = 0
        self._last_offset = None

    def sanity_check(self) -> None:
        """Kafka's check (no entry ends below the segment), and what no entry Kafka writes can hold: negative
        fields, a start after its end, entries out of order; a damaged entry would otherwise make read_committed
        consumers skip committed records."""
        previous = -1
        for _, txn in self._entries():
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(f"{self.path}: aborted transaction {txn} ends below the segment's base "
                                        f"offset {self.start_offset}")
            if min(txn) < 0 or txn.first_offset > txn.last_offset or txn.last_offset < previous:
                raise CorruptIndexError(f"{self.path}: aborted transaction {txn} cannot have been written")
            previous = txn.last_offset

    def flush(self) -> None:
        if self._exists:
            os.fsync(self._open())

    def close(self) -> None:
        self._fd = None

    def rename(self, new_path: str) -> None:
        if os.path.exists(self.path):
            os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self.close()
        self._exists = False
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
