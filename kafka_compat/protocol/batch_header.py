"""The fixed-offset header of a record batch (magic 2) or legacy entry (magic 0/1): its layout and its reader.

Sans-I/O, and the one place the byte layout is written down. Magic 2 (DefaultRecordBatch), 61 bytes:
  0 BaseOffset q, 8 Length i, 12 PartitionLeaderEpoch i, 16 Magic b, 17 CRC I (CRC-32C of 21..end),
  21 Attributes h, 23 LastOffsetDelta i, 27 BaseTimestamp q, 35 MaxTimestamp q, 43 ProducerId q,
  51 ProducerEpoch h, 53 BaseSequence i, 57 RecordsCount i.
Legacy magic 0/1 entry: 0 Offset q, 8 MessageSize i, 12 Crc I (CRC-32 of 16..end), 16 Magic b,
  17 Attributes b, [18 Timestamp q in v1], then key and value.
The magic byte sits at offset 16 in every format. Reading a header costs O(1), never O(records),
which is all the produce, fetch and recovery paths need.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from crc32c import crc32c

from ..sentinels import NO_TIMESTAMP

OFFSET_OFFSET = 0
SIZE_OFFSET = 8
LOG_OVERHEAD = 12
MAGIC_OFFSET = 16
HEADER_SIZE_UP_TO_MAGIC = 17

# magic 2 (DefaultRecordBatch)
PARTITION_LEADER_EPOCH_OFFSET = 12
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORD_BATCH_OVERHEAD = 61

# magic 0/1 (LegacyRecord), relative to the entry start
LEGACY_CRC_OFFSET = 12
LEGACY_ATTRIBUTES_OFFSET = 17
LEGACY_TIMESTAMP_OFFSET = 18
RECORD_OVERHEAD_V0 = 14  # MessageSize minimum: crc, magic, attributes, key and value lengths
RECORD_OVERHEAD_V1 = 22  # ... plus the timestamp
V0_HEADER_SIZE = LOG_OVERHEAD + 6         # through Attributes
V1_HEADER_SIZE = V0_HEADER_SIZE + 8       # through the timestamp

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

# Every magic-2 header field, in order.
V2_HEADER = struct.Struct(">qiibIhiqqqhii")
# The fields a client append is checked against (PartitionLeaderEpoch and BaseTimestamp skipped):
# BaseOffset, Length, Magic, CRC, Attributes, LastOffsetDelta, MaxTimestamp, ProducerId, ProducerEpoch,
# BaseSequence, RecordsCount. One unpack of these decides the append fast path and the producer check.
V2_APPEND_FIELDS = struct.Struct(">qi4xbIhi8xqqhii")
# What offset assignment rewrites in place: BaseOffset, Length (kept), PartitionLeaderEpoch.
OFFSET_LENGTH_EPOCH = struct.Struct(">qii")
_PREFIX = struct.Struct(">qiib")          # offset, size, epoch-or-crc, magic
_LEGACY_V1 = struct.Struct(">qiIbbq")
_CRC = struct.Struct(">I")


class BatchHeader(NamedTuple):
    """One batch (magic 2) or one legacy outer entry, as its header says, and where it lies."""

    position: int           # where the batch starts (in its segment file, or buffer)
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

    @property
    def leader_epoch(self) -> int | None:
        """The partition leader epoch a v2 batch was written in; None for legacy entries and -1."""
        return self.partition_leader_epoch if self.magic >= 2 and self.partition_leader_epoch >= 0 else None


def header_bytes_needed(magic: int) -> int:
    return RECORD_BATCH_OVERHEAD if magic >= 2 else (V1_HEADER_SIZE if magic == 1 else V0_HEADER_SIZE)


def parse_header(buf, at: int = 0, position: int | None = None) -> BatchHeader:
    """The header starting at ``buf[at]``; ``position`` is its place in the file (default ``at``).

    The caller has checked that header_bytes_needed(magic) bytes are present. Raises
    ValueError on an unknown magic or a size too small to hold a header.
    """
    if position is None:
        position = at
    base, length, _, magic = _PREFIX.unpack_from(buf, at)
    size = length + LOG_OVERHEAD
    if magic == 2:
        if size < RECORD_BATCH_OVERHEAD:
            raise ValueError(f"batch size {size} below the header size")
        (_, _, epoch, _, _, attrs, last_delta, _, max_ts, pid, pepoch, seq, count) = V2_HEADER.unpack_from(buf, at)
        return BatchHeader(position, size, base, base + last_delta, 2, attrs, max_ts, epoch, pid, pepoch, seq, count)
    if magic == 1:
        if size < LOG_OVERHEAD + RECORD_OVERHEAD_V1:
            raise ValueError(f"message size {size} below the v1 minimum")
        _, _, _, _, attrs, ts = _LEGACY_V1.unpack_from(buf, at)
        return BatchHeader(position, size, base, base, 1, attrs, ts, -1, -1, -1, -1, -1)
    if magic == 0:
        if size < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
            raise ValueError(f"message size {size} below the v0 minimum")
        attrs = buf[at + LEGACY_ATTRIBUTES_OFFSET]
        return BatchHeader(position, size, base, base, 0, attrs, NO_TIMESTAMP, -1, -1, -1, -1, -1)
    raise ValueError(f"unknown magic {magic}")


def crc_valid(buf, at: int, size: int) -> bool:
    """Check the stored checksum of the entry ``buf[at:at+size]`` (CRC-32C for v2, CRC-32 legacy)."""
    mv = memoryview(buf)
    if mv[at + MAGIC_OFFSET] >= 2:
        return _CRC.unpack_from(mv, at + CRC_OFFSET)[0] == crc32c(mv[at + ATTRIBUTES_OFFSET: at + size])
    return _CRC.unpack_from(mv, at + LEGACY_CRC_OFFSET)[0] == zlib.crc32(mv[at + MAGIC_OFFSET: at + size])
