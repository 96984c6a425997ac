"""What a log read returns (Kafka's FetchIsolation and FetchDataInfo), as file slices.

Record bytes stay in the segment files: a read hands out (fd, position, length) slices of
whole batches that the network layer sends with sendfile.
"""

from __future__ import annotations

import os
from enum import IntEnum
from typing import NamedTuple

from .log_offset_metadata import LogOffsetMetadata


class FetchIsolation(IntEnum):
    """How far a read may go: the log end (followers), the high watermark (consumers), or the
    last stable offset (read_committed consumers)."""

    LOG_END = 0
    HIGH_WATERMARK = 1
    TXN_COMMITTED = 2


class FileSlice(NamedTuple):
    """``length`` bytes at ``position`` of the open file ``fd``: whole batches, ready for sendfile."""

    fd: int
    position: int
    length: int


#: a read smaller than this comes back as bytes, not file slices: the fetch path would copy it
#: anyway (splicing costs more than copying that little), and holding no descriptor lets a fetch
#: of thousands of small partitions stay within the open-files budget (storage/open_files.py)
COPY_BELOW_BYTES = 16384


class FetchResult(NamedTuple):
    slices: list
    log_start_offset: int
    log_end_offset: int
    data: bytes | None = None      # the records themselves, for a read below COPY_BELOW_BYTES

    @property
    def size(self) -> int:
        if self.data is not None:
            return len(self.data)
        slices = self.slices
        if not slices:          # a read at the end, as most partitions of a session are on most fetches
            return 0
        return sum(s.length for s in slices)

    def read_bytes(self) -> bytes:
        """The records' bytes (for small reads, tests, and TLS where sendfile cannot be used)."""
        if self.data is not None:
            return self.data
        return b"".join(os.pread(s.fd, s.length, s.position) for s in self.slices)


class FetchDataInfo(NamedTuple):
    fetch_offset_metadata: LogOffsetMetadata   # where the read started (segment base + position)
    records: FetchResult
    aborted_transactions: list | None          # AbortedTxn entries for TXN_COMMITTED reads, else None
