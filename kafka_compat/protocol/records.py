"""Record batches (magic 2) and legacy message sets (magic 0/1) as zero-copy views.

Sans-I/O. Views hold a memoryview and a position and read each header field straight
from the buffer with precompiled ``struct.Struct`` objects, so they never copy a batch
and always reflect in-place rewrites. Only ``records()`` walks individual records
(compaction, magic-0 re-compression, tests); the produce and fetch paths never do.

Public API (the storage layer depends on these names; keep them stable):

Walking concatenated entries (the magic byte sits at offset 16 in every format):
    iter_batches(buf, position=0, max_message_size=None) -> Iterator[(position, size, magic)]
    split_batches(buf, position=0, max_message_size=None) -> (list[(position, size, magic)], stop)
        ``stop`` is where walking ended: len(buf) or the start of a partial trailing entry.
    batches(buf, position=0, max_message_size=None) -> Iterator[RecordBatch | LegacyMessage]

Views (constructor validates the header and bounds, raising CorruptRecordError):
    RecordBatch(buf, position=0)       magic 2; every header field as a property,
        size, compression, timestamp_type, is_transactional, is_control,
        has_delete_horizon, delete_horizon_ms, last_offset, next_offset, last_sequence,
        crc_valid(), compute_crc(), ensure_valid(), records(max_size=...)
    LegacyMessage(buf, position=0)     magic 0/1; offset, message_size, size, crc, magic,
        attributes, compression, timestamp_type, timestamp, key, value, last_offset,
        crc_valid(), compute_crc(), ensure_valid(), inner_messages(max_size=...),
        records(max_size=...)
    Record(offset, timestamp, key, value, headers, attributes)   NamedTuple
        key/value are memoryview slices (or None): call bytes() to keep or hash them.
        headers is a tuple of (str, memoryview | None).

In-place writers over a writable buffer (bytearray or writable memoryview):
    set_base_offset(buf, pos, offset)                 magic 2, outside the CRC
    set_partition_leader_epoch(buf, pos, epoch)       magic 2, outside the CRC
    set_max_timestamp(buf, pos, max_timestamp, timestamp_type) -> bool
        magic 2; rewrites the timestamp-type bit and MaxTimestamp, recomputes the CRC;
        returns False (and writes nothing) when both already match, as Kafka does.
    set_legacy_offset(buf, pos, offset)               magic 0/1, outside the CRC
    set_legacy_timestamp(buf, pos, timestamp, timestamp_type) -> bool   magic 1 only

Builders:
    build_batch(records, *, base_offset=0, compression=0, timestamp_type=0,
                producer_id=-1, producer_epoch=-1, base_sequence=-1,
                partition_leader_epoch=-1, is_transactional=False, is_control=False,
                base_timestamp=None, max_timestamp=None, offset_deltas=None,
                last_offset_delta=None, delete_horizon_ms=None) -> bytes
    build_control_batch(control_type, *, producer_id, producer_epoch,
                        coordinator_epoch=0, base_offset=0, timestamp=None,
                        partition_leader_epoch=-1) -> bytes
    build_legacy_message_set(records, *, magic, compression=0, base_offset=0,
                             timestamp_type=0) -> bytes
    ``records`` items are (key, value[, headers[, timestamp]]) tuples or objects with
    key/value/headers/timestamp attributes (a Record works). A None timestamp means now.
    control_record_type(key) -> int ; end_transaction_marker(value) -> (version, coordinator_epoch)

Errors: every malformed input raises CorruptRecordError(message, position). Its
``__cause__`` is a compression.DecompressedSizeError when a batch decompresses past
``max_size``. Builders raise ValueError for arguments Kafka would never write.
"""

from __future__ import annotations

import struct
import zlib
from typing import Iterable, Iterator, NamedTuple

import crc32c as _crc32c

from ..clock import now_ms
from ..sentinels import (  # noqa: F401  (RecordBatch's names, re-exported)
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
)
from .compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    NONE,
    ZSTD,
    CompressionError,
    compress,
    decompress,
)
from .primitives import read_varint, read_varlong, write_varint, write_varlong

__all__ = [
    "CorruptRecordError",
    "Record",
    "RecordBatch",
    "LegacyMessage",
    "ControlRecordType",
    "iter_batches",
    "split_batches",
    "batches",
    "set_base_offset",
    "set_partition_leader_epoch",
    "set_max_timestamp",
    "set_legacy_offset",
    "set_legacy_timestamp",
    "build_batch",
    "build_control_batch",
    "build_legacy_message_set",
    "control_record_type",
    "end_transaction_marker",
]

# --- layout: batch_header.py holds it (Kafka's names) ---------------------------------

from .batch_header import (  # noqa: E402,F401  (re-exported: the views' callers use these names)
    ATTRIBUTES_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    LAST_OFFSET_DELTA_OFFSET,
    LEGACY_ATTRIBUTES_OFFSET,
    LEGACY_CRC_OFFSET,
    LEGACY_TIMESTAMP_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    OFFSET_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    RECORDS_COUNT_OFFSET,
    SIZE_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
)

_MIN_LENGTH = (RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD)

NO_TIMESTAMP_TYPE, CREATE_TIME, LOG_APPEND_TIME = -1, 0, 1
_INT32_MAX = 0x7FFFFFFF


class ControlRecordType:
    """Control record key types written in transaction markers."""

    ABORT = 0
    COMMIT = 1


_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
_LEGACY_V0 = struct.Struct(">qiIbb")
_LEGACY_V1 = struct.Struct(">qiIbbq")
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_MARKER = struct.Struct(">hi")
assert _BATCH_HEADER.size == RECORD_BATCH_OVERHEAD


class CorruptRecordError(Exception):
    """Malformed, truncated or inconsistent record data; ``position`` is the byte
    offset in the caller's buffer of the entry (or field) found wrong."""

    def __init__(self, message: str, position: int | None = None):
        super().__init__(message if position is None else f"{message} (at position {position})")
        self.message = message
        self.position = position


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: memoryview | None
    value: memoryview | None
    headers: tuple
    attributes: int


def _view(buffer) -> memoryview:
    mv = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    return mv if mv.format == "B" and mv.ndim == 1 else mv.cast("B")


# --- walking entries --------------------------------------------------------------


def _next_entry(mv: memoryview, pos: int, end: int, max_message_size: int | None):
    """Kafka's ByteBufferLogInputStream.nextBatchSize: (pos, size, magic) or None if partial."""
    remaining = end - pos
    if remaining < LOG_OVERHEAD:
        return None
    length = _I32.unpack_from(mv, pos + SIZE_OFFSET)[0]
    if length < RECORD_OVERHEAD_V0:
        raise CorruptRecordError(
            f"Record size {length} is less than the minimum record overhead ({RECORD_OVERHEAD_V0})", pos)
    if max_message_size is not None and length > max_message_size:
        raise CorruptRecordError(
            f"Record size {length} exceeds the largest allowable message size ({max_message_size})", pos)
    if remaining < HEADER_SIZE_UP_TO_MAGIC:
        return None
    magic = _I8.unpack_from(mv, pos + MAGIC_OFFSET)[0]
    if magic < 0 or magic > 2:
        raise CorruptRecordError(f"Invalid magic found in record: {magic}", pos)
    if length < _MIN_LENGTH[magic]:
        raise CorruptRecordError(
            f"Record size {length} is less than the minimum for magic {magic} ({_MIN_LENGTH[magic]})", pos)
    size = length + LOG_OVERHEAD
    if remaining < size:
        return None
    return pos, size, magic


def iter_batches(buffer, position: int = 0, max_message_size: int | None = None
                 ) -> Iterator[tuple[int, int, int]]:
    """Yield (position, size, magic) per complete entry; stop silently at a partial one."""
    mv = _view(buffer)
    end = len(mv)
    pos = position
    while (entry := _next_entry(mv, pos, end, max_message_size)) is not None:
        yield entry
        pos += entry[1]


def split_batches(buffer, position: int = 0, max_message_size: int | None = None
                  ) -> tuple[list[tuple[int, int, int]], int]:
    """Like iter_batches, also returning where it stopped (a partial entry's start, or the end)."""
    mv = _view(buffer)
    end = len(mv)
    pos = position
    entries = []
    while (entry := _next_entry(mv, pos, end, max_message_size)) is not None:
        entries.append(entry)
        pos += entry[1]
    return entries, pos


def batches(buffer, position: int = 0, max_message_size: int | None = None):
    """Views over each complete entry: RecordBatch for magic 2, LegacyMessage otherwise."""
    mv = _view(buffer)
    for pos, _size, magic in iter_batches(mv, position, max_message_size):
        yield RecordBatch(mv, pos) if magic == 2 else LegacyMessage(mv, pos)


# --- magic 2 ----------------------------------------------------------------------


def _field(struct_: struct.Struct, offset: int, doc: str) -> property:
    unpack_from = struct_.unpack_from

    def get(self):
        return unpack_from(self.buffer, self.position + offset)[0]

    return property(get, doc=doc)


def _check_view(mv: memoryview, position: int) -> int:
    """Common entry checks for both views; returns the Length/MessageSize field."""
    remaining = len(mv) - position
    if position < 0 or remaining < HEADER_SIZE_UP_TO_MAGIC:
        raise CorruptRecordError("entry is shorter than its header", position)
    length = _I32.unpack_from(mv, position + SIZE_OFFSET)[0]
    magic = _I8.unpack_from(mv, position + MAGIC_OFFSET)[0]
    if not 0 <= magic <= 2:
        raise CorruptRecordError(f"Invalid magic found in record: {magic}", position)
    if length < _MIN_LENGTH[magic]:
        raise CorruptRecordError(
            f"Record size {length} is less than the minimum for magic {magic} ({_MIN_LENGTH[magic]})",
            position)
    if length > remaining - LOG_OVERHEAD:
        raise CorruptRecordError(
            f"entry of {length + LOG_OVERHEAD} bytes is truncated to {remaining}", position)
    return length


class RecordBatch:
    """View over one magic-2 batch at ``position`` in ``buffer`` (no copy)."""

    __slots__ = ("buffer", "position")

    def __init__(self, buffer, position: int = 0):
        mv = _view(buffer)
        _check_view(mv, position)
        if _I8.unpack_from(mv, position + MAGIC_OFFSET)[0] != 2:
            raise CorruptRecordError("RecordBatch needs magic 2", position)
        self.buffer = mv
        self.position = position

    base_offset = _field(_I64, OFFSET_OFFSET, "BaseOffset")
    length = _field(_I32, SIZE_OFFSET, "Length: bytes after this field")
    partition_leader_epoch = _field(_I32, PARTITION_LEADER_EPOCH_OFFSET, "PartitionLeaderEpoch")
    magic = _field(_I8, MAGIC_OFFSET, "Magic (2)")
    crc = _field(_U32, CRC_OFFSET, "stored CRC-32C")
    attributes = _field(_I16, ATTRIBUTES_OFFSET, "Attributes")
    last_offset_delta = _field(_I32, LAST_OFFSET_DELTA_OFFSET, "LastOffsetDelta")
    base_timestamp = _field(_I64, BASE_TIMESTAMP_OFFSET, "BaseTimestamp")
    max_timestamp = _field(_I64, MAX_TIMESTAMP_OFFSET, "MaxTimestamp")
    producer_id = _field(_I64, PRODUCER_ID_OFFSET, "ProducerId")
    producer_epoch = _field(_I16, PRODUCER_EPOCH_OFFSET, "ProducerEpoch")
    base_sequence = _field(_I32, BASE_SEQUENCE_OFFSET, "BaseSequence")
    records_count = _field(_I32, RECORDS_COUNT_OFFSET, "RecordsCount")

    @property
    def size(self) -> int:
        """Whole batch in bytes, BaseOffset and Length included."""
        return LOG_OVERHEAD + self.length

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> int:
        """The cleaner stores the delete horizon in BaseTimestamp when the flag is set."""
        return self.base_timestamp if self.has_delete_horizon else NO_TIMESTAMP

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def last_sequence(self) -> int:
        """BaseSequence + LastOffsetDelta, wrapping past int32 max as Kafka does."""
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        delta = self.last_offset_delta
        return delta - (_INT32_MAX - base) - 1 if base > _INT32_MAX - delta else base + delta

    def compute_crc(self) -> int:
        """CRC-32C from Attributes to the end of the batch."""
        p = self.position
        return _crc32c.crc32c(self.buffer[p + ATTRIBUTES_OFFSET : p + LOG_OVERHEAD + self.length])

    def crc_valid(self) -> bool:
        return self.crc == self.compute_crc()

    def ensure_valid(self) -> None:
        stored, computed = self.crc, self.compute_crc()
        if stored != computed:
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {stored}, computed crc = {computed})", self.position)

    def records(self, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> Iterator[Record]:
        """Records with absolute offsets and timestamps; decompresses (bounded by
        ``max_size``) eagerly, parses lazily. Does not check the CRC."""
        pos = self.position
        count = self.records_count
        if count < 0:
            raise CorruptRecordError(f"Found invalid record count {count} in magic v2 batch", pos)
        start, stop = pos + RECORD_BATCH_OVERHEAD, pos + self.size
        buf = self.buffer
        codec = self.compression
        if codec != NONE:
            try:
                buf = memoryview(decompress(codec, buf[start:stop], 2, max_size))
            except CompressionError as e:
                raise CorruptRecordError(f"cannot decompress batch: {e}", pos) from e
            start, stop = 0, len(buf)
        log_append_time = self.max_timestamp if self.timestamp_type == LOG_APPEND_TIME else None
        return _iter_records(buf, start, stop, count, self.base_offset, self.base_timestamp,
                             log_append_time, pos)

    def __repr__(self) -> str:
        return (f"RecordBatch(position={self.position}, base_offset={self.base_offset}, "
                f"last_offset={self.last_offset}, count={self.records_count}, "
                f"compression={self.compression}, size={self.size})")


def _read_sized(buf, pos: int, end: int, what: str):
    """A varint-length byte field: -1 is null; the bytes must lie before ``end``."""
    n, pos = read_varint(buf, pos)
    if n == -1:
        return None, pos
    if n < 0 or n > end - pos:
        raise ValueError(f"invalid {what} size {n}")
    return buf[pos : pos + n], pos + n


def _read_record(buf, pos: int, end: int, base_offset: int, base_timestamp: int,
                 log_append_time: int | None) -> tuple[Record, int]:
    body, pos = read_varint(buf, pos)
    if body < 0 or body > end - pos:
        raise ValueError(f"Invalid record size: expected {body} bytes in record payload, "
                         f"but only {end - pos} remain")
    record_end = pos + body
    attributes = buf[pos]
    timestamp_delta, p = read_varlong(buf, pos + 1)
    offset_delta, p = read_varint(buf, p)
    key, p = _read_sized(buf, p, record_end, "key")
    value, p = _read_sized(buf, p, record_end, "value")
    count, p = read_varint(buf, p)
    if count < 0 or count > record_end - p:
        raise ValueError(f"Found invalid number of record headers {count}")
    headers = []
    for _ in range(count):
        hkey, p = _read_sized(buf, p, record_end, "header key")
        if hkey is None:
            raise ValueError("Invalid negative header key size")
        hvalue, p = _read_sized(buf, p, record_end, "header value")
        headers.append((str(hkey, "utf-8"), hvalue))
    if p != record_end:
        raise ValueError(f"Invalid record size: expected to read {body} bytes in record "
                         f"payload, but instead read {p - pos}")
    timestamp = base_timestamp + timestamp_delta if log_append_time is None else log_append_time
    record = Record(base_offset + offset_delta, timestamp, key, value, tuple(headers),
                    attributes - 256 if attributes > 127 else attributes)
    return record, record_end


def _iter_records(buf, pos, end, count, base_offset, base_timestamp, log_append_time, where):
    for _ in range(count):
        try:
            record, pos = _read_record(buf, pos, end, base_offset, base_timestamp, log_append_time)
        except (ValueError, IndexError, OverflowError) as e:  # a varint ran off or overflowed
            raise CorruptRecordError(f"Found invalid record structure: {e}", where) from None
        yield record
    if pos != end:
        raise CorruptRecordError("Incorrect declared batch size, records still remaining", where)


# --- magic 2 in-place writers -----------------------------------------------------


def set_base_offset(buf, pos: int, offset: int) -> None:
    """BaseOffset is outside the CRC: no recomputation."""
    _I64.pack_into(buf, pos + OFFSET_OFFSET, offset)


def set_partition_leader_epoch(buf, pos: int, epoch: int) -> None:
    """PartitionLeaderEpoch is outside the CRC: no recomputation."""
    _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def _set_timestamp(buf, pos: int, timestamp: int, timestamp_type: int, attributes_struct,
                   attributes_offset: int, timestamp_offset: int, crc_offset: int,
                   crc_from: int, checksum) -> bool:
    """Rewrite the timestamp-type bit and a timestamp, then the CRC that covers both;
    write nothing when both already match (Kafka skips the CRC work then)."""
    if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
        raise ValueError(f"invalid timestamp type {timestamp_type}")
    attributes = attributes_struct.unpack_from(buf, pos + attributes_offset)[0]
    current_type = LOG_APPEND_TIME if attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME
    if current_type == timestamp_type and _I64.unpack_from(buf, pos + timestamp_offset)[0] == timestamp:
        return False
    attributes = (attributes & ~TIMESTAMP_TYPE_MASK) | (TIMESTAMP_TYPE_MASK if timestamp_type else 0)
    attributes_struct.pack_into(buf, pos + attributes_offset, attributes)
    _I64.pack_into(buf, pos + timestamp_offset, timestamp)
    end = pos + LOG_OVERHEAD + _I32.unpack_from(buf, pos + SIZE_OFFSET)[0]
    _U32.pack_into(buf, pos + crc_offset, checksum(memoryview(buf)[pos + crc_from : end]))
    return True


def set_max_timestamp(buf, pos: int, max_timestamp: int, timestamp_type: int) -> bool:
    """Kafka's DefaultRecordBatch.setMaxTimestamp: both fields are inside the CRC."""
    return _set_timestamp(buf, pos, max_timestamp, timestamp_type, _I16, ATTRIBUTES_OFFSET,
                          MAX_TIMESTAMP_OFFSET, CRC_OFFSET, ATTRIBUTES_OFFSET, _crc32c.crc32c)


# --- magic 0/1 --------------------------------------------------------------------


class LegacyMessage:
    """View over one magic-0/1 message entry (Offset, MessageSize, message) at ``position``."""

    __slots__ = ("buffer", "position", "_key_pos", "_key_len", "_value_pos", "_value_len")

    def __init__(self, buffer, position: int = 0):
        mv = _view(buffer)
        length = _check_view(mv, position)
        magic = _I8.unpack_from(mv, position + MAGIC_OFFSET)[0]
        if magic > 1:
            raise CorruptRecordError("LegacyMessage needs magic 0 or 1", position)
        end = position + LOG_OVERHEAD + length
        p = position + (LEGACY_TIMESTAMP_OFFSET + 8 if magic else LEGACY_TIMESTAMP_OFFSET)
        # The minimum size checked above guarantees both length fields are present.
        key_len = _I32.unpack_from(mv, p)[0]
        key_pos = p + 4
        if key_len < -1 or key_len > end - key_pos - 4:
            raise CorruptRecordError(f"invalid key size {key_len}", position)
        value_len_pos = key_pos + max(key_len, 0)
        value_len = _I32.unpack_from(mv, value_len_pos)[0]
        value_pos = value_len_pos + 4
        if value_len < -1 or value_len > end - value_pos:
            raise CorruptRecordError(f"invalid value size {value_len}", position)
        self.buffer = mv
        self.position = position
        self._key_pos, self._key_len = key_pos, key_len
        self._value_pos, self._value_len = value_pos, value_len

    offset = _field(_I64, OFFSET_OFFSET, "Offset (for a compressed wrapper: the last inner offset)")
    message_size = _field(_I32, SIZE_OFFSET, "MessageSize: bytes after this field")
    crc = _field(_U32, LEGACY_CRC_OFFSET, "stored CRC-32 (IEEE)")
    magic = _field(_I8, MAGIC_OFFSET, "Magic (0 or 1)")
    attributes = _field(_I8, LEGACY_ATTRIBUTES_OFFSET, "Attributes")

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.message_size

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        if self.magic == 0:
            return NO_TIMESTAMP_TYPE
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def timestamp(self) -> int:
        if self.magic == 0:
            return NO_TIMESTAMP
        return _I64.unpack_from(self.buffer, self.position + LEGACY_TIMESTAMP_OFFSET)[0]

    @property
    def key(self) -> memoryview | None:
        n = self._key_len
        return None if n < 0 else self.buffer[self._key_pos : self._key_pos + n]

    @property
    def value(self) -> memoryview | None:
        n = self._value_len
        return None if n < 0 else self.buffer[self._value_pos : self._value_pos + n]

    def compute_crc(self) -> int:
        """CRC-32 from Magic to the end of the message."""
        p = self.position
        return zlib.crc32(self.buffer[p + MAGIC_OFFSET : p + self.size])

    def crc_valid(self) -> bool:
        return self.crc == self.compute_crc()

    def ensure_valid(self) -> None:
        stored, computed = self.crc, self.compute_crc()
        if stored != computed:
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {stored}, computed crc = {computed})", self.position)

    def inner_messages(self, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> list[LegacyMessage]:
        """A compressed wrapper's inner messages, offsets as stored (relative for magic 1).

        Decompression is bounded by ``max_size``. Kafka rejects null or empty wrapper
        values, zstd wrappers, nested compression and trailing partial entries."""
        pos = self.position
        codec = self.compression
        if codec == NONE:
            raise CorruptRecordError("message is not a compressed wrapper", pos)
        if codec == ZSTD:
            raise CorruptRecordError("Invalid wrapper compressionType zstd for magic < 2", pos)
        value = self.value
        if value is None:
            raise CorruptRecordError("Found invalid compressed record set with null value", pos)
        try:
            data = memoryview(decompress(codec, value, self.magic, max_size))
        except CompressionError as e:
            raise CorruptRecordError(f"cannot decompress wrapper message: {e}", pos) from e
        try:
            entries, stop = split_batches(data)
        except CorruptRecordError as e:
            raise CorruptRecordError(f"inner message: {e.message}", pos) from None
        if stop != len(data):
            raise CorruptRecordError("compressed message set ends with a partial message", pos)
        if not entries:
            raise CorruptRecordError("Found invalid compressed record set with no inner records", pos)
        inner = []
        for p, _size, magic in entries:
            if magic > 1:
                raise CorruptRecordError(f"inner message has magic {magic}", pos)
            try:
                message = LegacyMessage(data, p)
            except CorruptRecordError as e:
                raise CorruptRecordError(f"inner message: {e.message}", pos) from None
            if message.compression != NONE:
                raise CorruptRecordError("Inner messages must not be compressed", pos)
            inner.append(message)
        return inner

    def records(self, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> Iterator[Record]:
        """Records with absolute offsets (Kafka's deep iteration)."""
        if self.compression == NONE:
            return iter((Record(self.offset, self.timestamp, self.key, self.value, (),
                                self.attributes),))
        inner = self.inner_messages(max_size)
        wrapper_offset = self.offset
        base = 0
        if self.magic == 1 and wrapper_offset != 0:  # 0: "certain versions of librdkafka"
            last_inner = inner[-1].offset
            if wrapper_offset < last_inner:
                raise CorruptRecordError(
                    f"Found invalid wrapper offset in compressed v1 message set, wrapper offset "
                    f"'{wrapper_offset}' is less than the last inner message offset '{last_inner}' "
                    "and it is not zero.", self.position)
            base = wrapper_offset - last_inner
        wrapper_log_append = self.timestamp_type == LOG_APPEND_TIME
        wrapper_timestamp = self.timestamp
        return iter([
            Record(m.offset + base,
                   (wrapper_timestamp if wrapper_log_append else m.timestamp) if m.magic else NO_TIMESTAMP,
                   m.key, m.value, (), m.attributes)
            for m in inner
        ])

    def __repr__(self) -> str:
        return (f"LegacyMessage(position={self.position}, offset={self.offset}, magic={self.magic}, "
                f"compression={self.compression}, size={self.size})")


def set_legacy_offset(buf, pos: int, offset: int) -> None:
    """The entry's Offset is outside the message CRC: no recomputation."""
    _I64.pack_into(buf, pos + OFFSET_OFFSET, offset)


def set_legacy_timestamp(buf, pos: int, timestamp: int, timestamp_type: int) -> bool:
    """Kafka's legacy setMaxTimestamp (magic 1 only): a compressed wrapper's timestamp
    and type stand for its inner messages."""
    if _I8.unpack_from(buf, pos + MAGIC_OFFSET)[0] != 1:
        raise ValueError("Cannot set timestamp for a record with magic = 0")
    return _set_timestamp(buf, pos, timestamp, timestamp_type, _I8, LEGACY_ATTRIBUTES_OFFSET,
                          LEGACY_TIMESTAMP_OFFSET, LEGACY_CRC_OFFSET, MAGIC_OFFSET, zlib.crc32)


# --- control records --------------------------------------------------------------


def control_record_type(key) -> int:
    """Type from a control record key (version int16, type int16)."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError("control record key is shorter than 4 bytes")
    version, type_ = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"Invalid version found for control record: {version}")
    return type_


def end_transaction_marker(value) -> tuple[int, int]:
    """(version, coordinator_epoch) from a COMMIT/ABORT control record value."""
    if value is None or len(value) < _END_TXN_MARKER.size:
        raise CorruptRecordError("end transaction marker value is shorter than 6 bytes")
    version, coordinator_epoch = _END_TXN_MARKER.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(f"Invalid version found for end transaction marker: {version}")
    return version, coordinator_epoch


# --- builders ---------------------------------------------------------------------



def _normalize(item) -> tuple:
    """(key, value, headers, timestamp) from a tuple or a record-like object."""
    if hasattr(item, "key"):
        return (item.key, item.value, getattr(item, "headers", None) or (),
                getattr(item, "timestamp", None))
    key, value, headers, timestamp = (tuple(item) + (None, None))[:4]
    return key, value, headers or (), timestamp


def _put_varint_bytes(out: bytearray, data) -> None:
    if data is None:
        out += b"\x01"  # zigzag(-1)
    else:
        write_varint(out, len(data))
        out += data


def _encode_record(out: bytearray, timestamp_delta: int, offset_delta: int, key, value,
                   headers) -> None:
    body = bytearray(b"\x00")  # attributes: unused
    write_varlong(body, timestamp_delta)
    write_varint(body, offset_delta)
    _put_varint_bytes(body, key)
    _put_varint_bytes(body, value)
    write_varint(body, len(headers))
    for hkey, hvalue in headers:
        if hkey is None:
            raise ValueError("header keys cannot be null")
        _put_varint_bytes(body, hkey.encode() if isinstance(hkey, str) else hkey)
        _put_varint_bytes(body, hvalue)
    write_varint(out, len(body))
    out += body


def build_batch(records: Iterable, *, base_offset: int = 0, compression: int = NONE,
                timestamp_type: int = CREATE_TIME, producer_id: int = NO_PRODUCER_ID,
                producer_epoch: int = NO_PRODUCER_EPOCH, base_sequence: int = NO_SEQUENCE,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                is_transactional: bool = False, is_control: bool = False,
                base_timestamp: int | None = None, max_timestamp: int | None = None,
                offset_deltas: Iterable[int] | None = None,
                last_offset_delta: int | None = None,
                delete_horizon_ms: int | None = None) -> bytes:
    """Encode one magic-2 batch. Offset deltas default to 0..n-1; the cleaner passes the
    surviving deltas and the original ``last_offset_delta``. BaseTimestamp defaults to
    the first record's timestamp, MaxTimestamp to the largest."""
    items = [_normalize(r) for r in records]
    if compression not in range(5):
        raise ValueError(f"unknown compression codec id {compression}")
    if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
        raise ValueError(f"invalid timestamp type {timestamp_type}")
    now = None
    timestamps = []
    for item in items:
        ts = item[3]
        if ts is None:
            now = now_ms() if now is None else now
            ts = now
        timestamps.append(ts)
    deltas = list(range(len(items))) if offset_deltas is None else list(offset_deltas)
    if len(deltas) != len(items):
        raise ValueError("offset_deltas must give one delta per record")
    if delete_horizon_ms is not None:
        if base_timestamp is not None:
            raise ValueError("the delete horizon is stored in BaseTimestamp; pass only one")
        base_timestamp = delete_horizon_ms
    elif base_timestamp is None:
        base_timestamp = timestamps[0] if timestamps else NO_TIMESTAMP
    if max_timestamp is None:
        max_timestamp = max(timestamps) if timestamps else NO_TIMESTAMP
    if last_offset_delta is None:
        last_offset_delta = deltas[-1] if deltas else 0

    body = bytearray()
    for (key, value, headers, _ts), ts, delta in zip(items, timestamps, deltas):
        _encode_record(body, ts - base_timestamp, delta, key, value, headers)
    payload = compress(compression, body, 2) if compression != NONE else body

    attributes = (compression
                  | (TIMESTAMP_TYPE_MASK if timestamp_type == LOG_APPEND_TIME else 0)
                  | (TRANSACTIONAL_FLAG_MASK if is_transactional else 0)
                  | (CONTROL_FLAG_MASK if is_control else 0)
                  | (DELETE_HORIZON_FLAG_MASK if delete_horizon_ms is not None else 0))
    out = bytearray(_BATCH_HEADER.pack(
        base_offset, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload), partition_leader_epoch,
        2, 0, attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id,
        producer_epoch, base_sequence, len(items)))
    out += payload
    _U32.pack_into(out, CRC_OFFSET, _crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def build_control_batch(control_type: int, *, producer_id: int, producer_epoch: int,
                        coordinator_epoch: int = 0, base_offset: int = 0,
                        timestamp: int | None = None,
                        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """A transaction marker: transactional + control batch holding one record whose key
    is (version 0, type) and value (version 0, coordinatorEpoch)."""
    if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise ValueError(f"not an end-transaction control type: {control_type}")
    record = (_CONTROL_KEY.pack(0, control_type), _END_TXN_MARKER.pack(0, coordinator_epoch),
              (), timestamp)
    return build_batch([record], base_offset=base_offset, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE,
                       partition_leader_epoch=partition_leader_epoch,
                       is_transactional=True, is_control=True)


def _encode_legacy(offset: int, magic: int, attributes: int, timestamp: int, key, value) -> bytearray:
    key_len = -1 if key is None else len(key)
    value_len = -1 if value is None else len(value)
    size = (RECORD_OVERHEAD_V1 if magic else RECORD_OVERHEAD_V0) + max(key_len, 0) + max(value_len, 0)
    if magic:
        out = bytearray(_LEGACY_V1.pack(offset, size, 0, 1, attributes, timestamp))
    else:
        out = bytearray(_LEGACY_V0.pack(offset, size, 0, 0, attributes))
    out += _I32.pack(key_len)
    if key is not None:
        out += key
    out += _I32.pack(value_len)
    if value is not None:
        out += value
    _U32.pack_into(out, LEGACY_CRC_OFFSET, zlib.crc32(memoryview(out)[MAGIC_OFFSET:]))
    return out


def build_legacy_message_set(records: Iterable, *, magic: int, compression: int = NONE,
                             base_offset: int = 0, timestamp_type: int = CREATE_TIME) -> bytes:
    """Encode a magic-0/1 message set; compressed sets are one wrapper message whose
    offset is the last inner offset. Magic 1 inner offsets are relative (0..n-1);
    magic 0 inner offsets are absolute."""
    if magic not in (0, 1):
        raise ValueError(f"legacy message sets have magic 0 or 1, not {magic}")
    if compression == ZSTD or compression not in range(4):
        raise ValueError(f"compression codec {compression} is not allowed for magic {magic}")
    if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME) or (magic == 0 and timestamp_type):
        raise ValueError(f"invalid timestamp type {timestamp_type} for magic {magic}")
    items = [_normalize(r) for r in records]
    if any(item[2] for item in items):
        raise ValueError("record headers need magic 2")
    type_bit = TIMESTAMP_TYPE_MASK if timestamp_type == LOG_APPEND_TIME else 0
    now = now_ms()
    timestamps = [NO_TIMESTAMP if magic == 0 else (now if ts is None else ts)
                  for _k, _v, _h, ts in items]
    inner_relative = compression != NONE and magic == 1
    out = bytearray()
    for i, ((key, value, _h, _ts), ts) in enumerate(zip(items, timestamps)):
        out += _encode_legacy(i if inner_relative else base_offset + i, magic, type_bit, ts, key, value)
    if compression == NONE or not items:
        return bytes(out)
    wrapper = _encode_legacy(base_offset + len(items) - 1, magic, compression | type_bit,
                             max(timestamps), None, compress(compression, out, magic))
    return bytes(wrapper)
