"""Fixed-offset batch headers: the only part of a batch the log engine reads on its hot paths.

Magic 2 (DefaultRecordBatch) header, 61 bytes:
  0 BaseOffset q, 8 Length i, 12 PartitionLeaderEpoch i, 16 Magic b, 17 CRC I (CRC-32C of 21..end),
  21 Attributes h, 23 LastOffsetDelta i, 27 BaseTimestamp q, 35 MaxTimestamp q, 43 ProducerId q,
  51 ProducerEpoch h, 53 BaseSequence i, 57 RecordsCount i.
Legacy magic 0/1 entry: 0 Offset q, 8 MessageSize i, 12 Crc I (CRC-32 of 16..end), 16 Magic b,
  17 Attributes b, [18 Timestamp q in v1], then key and value.
Everything here reads headers only, so it costs O(batches), never O(records).
"""

from __future__ import annotations

import os
import struct
import zlib
from typing import NamedTuple

from crc32c import crc32c

from kafka_compat.protocol.records import (
    ATTRIBUTES_OFFSET, COMPRESSION_CODEC_MASK, CONTROL_FLAG_MASK, CRC_OFFSET, LEGACY_ATTRIBUTES_OFFSET,
    LEGACY_CRC_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD, RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1, TIMESTAMP_TYPE_MASK, TRANSACTIONAL_FLAG_MASK,
)

V0_HEADER_SIZE = LOG_OVERHEAD + 6         # through Attributes
V1_HEADER_SIZE = V0_HEADER_SIZE + 8       # through the timestamp
HEADER_UP_TO_MAGIC = MAGIC_OFFSET + 1
_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qiib")          # offset, size, epoch-or-crc, magic
_LEGACY_V1_HEADER = struct.Struct(">qiIbbq")
_CRC = struct.Struct(">I")


class BatchInfo(NamedTuple):
    """What the log needs to know of one batch (magic 2) or one legacy outer entry."""

    position: int           # where the batch starts in its segment file
    size: int               # total bytes, LOG_OVERHEAD included
    base_offset: int        # for legacy entries: equal to last_offset (the wrapper does not say)
    last_offset: int
    magic: int
    attributes: int
    max_timestamp: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int      # -1 for legacy entries

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def is_control(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def is_transactional(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def log_append_time(self) -> bool:
        return self.magic >= 1 and bool(self.attributes & TIMESTAMP_TYPE_MASK)


def header_bytes_needed(magic: int) -> int:
    return RECORD_BATCH_OVERHEAD if magic >= 2 else (V1_HEADER_SIZE if magic == 1 else V0_HEADER_SIZE)


def parse_header(buf, at: int, position: int) -> BatchInfo:
    """Parse the header starting at ``buf[at]``; ``position`` is its place in the file.

    The caller has checked that the header bytes (header_bytes_needed) are present.
    Raises ValueError on an unknown magic or a size too small to hold a header.
    """
    base, length, _, magic = _PREFIX.unpack_from(buf, at)
    size = length + LOG_OVERHEAD
    if magic == 2:
        if size < RECORD_BATCH_OVERHEAD:
            raise ValueError(f"batch size {size} below the header size")
        (_, _, epoch, _, _, attrs, last_delta, _, max_ts, pid, pepoch, seq, count) = _V2_HEADER.unpack_from(buf, at)
        return BatchInfo(position, size, base, base + last_delta, 2, attrs, max_ts, epoch, pid, pepoch, seq, count)
    if magic == 1:
        if size < LOG_OVERHEAD + RECORD_OVERHEAD_V1:
            raise ValueError(f"message size {size} below the v1 minimum")
        _, _, _, _, attrs, ts = _LEGACY_V1_HEADER.unpack_from(buf, at)
        return BatchInfo(position, size, base, base, 1, attrs, ts, -1, -1, -1, -1, -1)
    if magic == 0:
        if size < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
            raise ValueError(f"message size {size} below the v0 minimum")
        attrs = buf[at + LEGACY_ATTRIBUTES_OFFSET]
        return BatchInfo(position, size, base, base, 0, attrs, NO_TIMESTAMP, -1, -1, -1, -1, -1)
    raise ValueError(f"unknown magic {magic}")


def crc_valid(buf, at: int, size: int) -> bool:
    """Check the stored checksum of the batch ``buf[at:at+size]`` (CRC-32C for v2, CRC-32 legacy)."""
    mv = memoryview(buf)
    if mv[at + MAGIC_OFFSET] >= 2:
        return _CRC.unpack_from(mv, at + CRC_OFFSET)[0] == crc32c(mv[at + ATTRIBUTES_OFFSET: at + size])
    return _CRC.unpack_from(mv, at + LEGACY_CRC_OFFSET)[0] == zlib.crc32(mv[at + MAGIC_OFFSET: at + size])


def read_batch_info(fd: int, position: int, end: int) -> BatchInfo | None:
    """Header of the batch at ``position`` of a segment file, or None at the end (or a torn header)."""
    if end - position < HEADER_UP_TO_MAGIC:
        return None
    head = os.pread(fd, min(RECORD_BATCH_OVERHEAD, end - position), position)
    if len(head) < HEADER_UP_TO_MAGIC or len(head) < header_bytes_needed(head[MAGIC_OFFSET]):
        return None
    return parse_header(head, 0, position)


SCAN_CHUNK = 8192


def iter_file_batches(fd: int, start: int, end: int):
    """Yield the headers of consecutive batches in ``[start, end)`` of a segment file.

    Stops quietly at a partial batch; the file is assumed already valid (recovery checks it).
    Reads SCAN_CHUNK bytes at a time and walks every header inside a chunk before reading
    again: an offset index entry comes every index.interval.bytes (4096), so one read
    usually covers the whole scan from an entry to the batch a fetch wants, where reading
    header by header cost a pread for each of the many small batches a tailing consumer
    meets in between.
    """
    position = start
    chunk, chunk_start = b"", start
    while end - position >= HEADER_UP_TO_MAGIC:
        at = position - chunk_start
        if len(chunk) - at < RECORD_BATCH_OVERHEAD and chunk_start + len(chunk) < end:
            chunk, chunk_start, at = os.pread(fd, min(SCAN_CHUNK, end - position), position), position, 0
        if len(chunk) - at < HEADER_UP_TO_MAGIC or len(chunk) - at < header_bytes_needed(chunk[at + MAGIC_OFFSET]):
            return
        info = parse_header(chunk, at, position)
        if position + info.size > end:
            return
        yield info
        position += info.size
