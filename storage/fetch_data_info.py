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


class FetchDataInfo(NamedTuple):
    fetch_offset_metadata: LogOffsetMetadata   # where the read started (segment base + position)
    records: FetchResult
    aborted_transactions: list | None          # AbortedTxn entries for TXN_COMMITTED reads, else None
