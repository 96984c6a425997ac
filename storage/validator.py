"""Kafka's LogValidator rules for a produce append, and offset assignment in place.

The client's bytes are kept as they are (magic 0, 1 or 2, compressed or not) and
only the fields Kafka rewrites are touched:
- magic 2: BaseOffset and PartitionLeaderEpoch (outside the CRC); with
  LogAppendTime also the timestamp-type bit and MaxTimestamp, and the CRC;
- magic 0/1 uncompressed: each message's offset (outside the CRC), and with
  LogAppendTime each v1 message's timestamp, attributes and CRC;
- magic 1 compressed: the wrapper offset becomes the last inner offset (inner
  offsets stay relative); inner offsets that are not 0..n-1 force a rebuild, as
  Kafka does for old clients;
- magic 0 compressed: inner offsets are absolute, so the set is decompressed,
  renumbered and recompressed.
Records are read only when a rule needs them: compacted topics (null keys),
finite message.timestamp.before/after.max.ms, and legacy compressed sets.
"""

from __future__ import annotations

from typing import NamedTuple

from kafka_compat.configdef import LONG_MAX
from kafka_compat.protocol.batch_header import crc_valid
from kafka_compat.protocol.compression import ZSTD
from kafka_compat.protocol.errors import ErrorCode, KafkaError
from kafka_compat.protocol.records import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    CREATE_TIME,
    LEGACY_ATTRIBUTES_OFFSET,
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    CorruptRecordError,
    LegacyMessage,
    RecordBatch,
    build_legacy_message_set,
    set_base_offset,
    set_legacy_offset,
    set_legacy_timestamp,
    set_max_timestamp,
    set_partition_leader_epoch,
    split_batches,
)

from .log_config import LogConfig

CLIENT = "client"            # Kafka's AppendOrigin.CLIENT: every client-only rule applies
COORDINATOR = "coordinator"  # group/transaction coordinators write their own batches
REPLICATION = "replication"  # a follower copies the leader's batches as they are


class BatchMetadata(NamedTuple):
    """Per magic-2 batch facts the broker's idempotence checks need."""

    base_offset: int
    last_offset_delta: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    records_count: int


class ValidationResult(NamedTuple):
    data: object                 # the bytes to write: the caller's buffer, or a rebuilt one
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int         # -1 unless message.timestamp.type=LogAppendTime
    batches: list                # BatchMetadata for magic-2 batches


class _RecordChecks:
    """The per-record rules of LogValidator.validateRecord, collected as Kafka does."""

    def __init__(self, config: LogConfig, now: int):
        self.compacted = config.compact
        self.log_append_time = config.log_append_time
        self.before = config.message_timestamp_before_max_ms
        self.after = config.message_timestamp_after_max_ms
        self.now = now
        self.errors: list[tuple[int, str]] = []
        self.timestamp_error = False

    @property
    def bounded(self) -> bool:
        return not self.log_append_time and (self.before != LONG_MAX or self.after != LONG_MAX)

    def check(self, index: int, has_key: bool, timestamp: int, batch_log_append: bool) -> None:
        if self.compacted and not has_key:
            self.errors.append((index, "Compacted topic cannot accept message without key"))
            return
        if not self.log_append_time and timestamp != NO_TIMESTAMP:
            diff = self.now - timestamp
            if diff > self.before or -diff > self.after:
                self.timestamp_error = True
                self.errors.append((index, f"Timestamp {timestamp} of message is out of range. The timestamp "
                                           f"should be within [{self.now - self.before}, {self.now + self.after}]"))
        elif batch_log_append:
            self.timestamp_error = True
            self.errors.append((index, "Producer should not set timestamp type to LogAppendTime."))

    def raise_if_any(self) -> None:
        if not self.errors:
            return
        if self.timestamp_error:
            raise KafkaError(ErrorCode.INVALID_TIMESTAMP,
                             "One or more records have been rejected due to invalid timestamp",
                             record_errors=self.errors)
        raise KafkaError(ErrorCode.INVALID_RECORD,
                         f"One or more records have been rejected due to {len(self.errors)} record errors in total, "
                         f"and only showing the first three errors at most: {self.errors[:3]}",
                         record_errors=self.errors)


def _writable(records) -> memoryview:
    mv = records if isinstance(records, memoryview) else memoryview(records)
    if mv.readonly:
        mv = memoryview(bytearray(mv))
    return mv.cast("B") if mv.format != "B" else mv


def validate_and_assign(records, next_offset: int, config: LogConfig, now: int, leader_epoch: int = 0,
                        origin: str = CLIENT) -> ValidationResult:
    """Validate a produce request's records for one partition and assign offsets from ``next_offset``.

    Raises a KafkaError subclass carrying Kafka's error code.
    """
    mv = _writable(records)
    try:
        entries, stop = split_batches(mv)
    except CorruptRecordError as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
    if stop != len(mv):
        mv = mv[:stop]  # Kafka trims a partial trailing entry (trimInvalidBytes)
    if not entries:
        raise KafkaError(ErrorCode.INVALID_RECORD, "Record batch has no batches at all")

    # UnifiedLog.analyzeAndValidateRecords
    source_compression = 0
    for pos, size, magic in entries:
        if magic >= 2 and origin == CLIENT and RecordBatch(mv, pos).base_offset != 0:
            raise KafkaError(ErrorCode.INVALID_RECORD, f"The baseOffset of the record batch should be 0, but it is "
                                     f"{RecordBatch(mv, pos).base_offset}")
        if size > config.max_message_bytes:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE, f"The record batch size is {size} bytes which exceeds the "
                                                          f"maximum configured value of {config.max_message_bytes}.")
        if not crc_valid(mv, pos, size):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Record is corrupt at position {pos}")
        codec = mv[pos + (ATTRIBUTES_OFFSET if magic >= 2 else LEGACY_ATTRIBUTES_OFFSET)] & COMPRESSION_CODEC_MASK
        if codec:
            source_compression = codec

    # LogValidator.validateMessagesAndAssignOffsets
    first_magic = entries[0][2]
    for _pos, _size, magic in entries:
        if magic != first_magic:
            raise KafkaError(ErrorCode.INVALID_RECORD, f"Batch magic {magic} is not the same as the first batch's "
                                                       f"magic byte {first_magic}")
    if (first_magic >= 2 or source_compression) and len(entries) > 1:
        raise KafkaError(ErrorCode.INVALID_RECORD, "Compressed outer record has more than one batch")
    checks = _RecordChecks(config, now)
    if first_magic >= 2:
        return _assign_v2(mv, next_offset, config, now, leader_epoch, origin, checks)
    if source_compression == ZSTD:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd needs magic 2")
    if source_compression:
        return _assign_legacy_compressed(mv, next_offset, config, now, checks)
    return _assign_legacy_uncompressed(mv, entries, next_offset, config, now, checks)


def _assign_v2(mv, next_offset, config, now, leader_epoch, origin, checks) -> ValidationResult:
    batch = RecordBatch(mv, 0)
    count = batch.records_count
    if origin == CLIENT:
        if batch.last_offset_delta + 1 <= 0:
            raise KafkaError(ErrorCode.INVALID_RECORD, f"Batch has an invalid offset range: [0, {batch.last_offset}]")
        if count <= 0:
            raise KafkaError(ErrorCode.INVALID_RECORD, f"Invalid reported count for record batch: {count}")
        if batch.last_offset_delta + 1 != count:
            raise KafkaError(ErrorCode.INVALID_RECORD, f"Inconsistent batch offset range [0, {batch.last_offset}] and "
                                                       f"count of records {count}")
        if batch.is_control:
            raise KafkaError(ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records")
        if batch.producer_id >= 0 and batch.base_sequence < 0:
            raise KafkaError(ErrorCode.INVALID_RECORD, f"Invalid sequence number {batch.base_sequence} in record batch "
                                                       f"with producerId {batch.producer_id}")
    batch_log_append = batch.timestamp_type == LOG_APPEND_TIME
    if checks.compacted or checks.bounded:
        try:
            for i, record in enumerate(batch.records()):
                checks.check(i, record.key is not None, record.timestamp, batch_log_append)
        except CorruptRecordError as exc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
    elif batch_log_append:
        # every record of such a batch carries MaxTimestamp: the rule is decided by the header
        checks.check(0, True, batch.max_timestamp, True)
    checks.raise_if_any()

    set_base_offset(mv, 0, next_offset)
    set_partition_leader_epoch(mv, 0, leader_epoch)
    last_offset = next_offset + batch.last_offset_delta
    if config.log_append_time:
        set_max_timestamp(mv, 0, now, LOG_APPEND_TIME)
    meta = BatchMetadata(next_offset, batch.last_offset_delta, batch.producer_id, batch.producer_epoch,
                         batch.base_sequence, batch.is_transactional, count)
    return ValidationResult(mv, next_offset, last_offset, batch.max_timestamp, last_offset,
                            now if config.log_append_time else -1, [meta])


def _assign_legacy_uncompressed(mv, entries, next_offset, config, now, checks) -> ValidationResult:
    messages = [LegacyMessage(mv, pos) for pos, _size, _magic in entries]
    for i, message in enumerate(messages):
        checks.check(i, message.key is not None, message.timestamp,
                     message.timestamp_type == LOG_APPEND_TIME)
    checks.raise_if_any()
    max_timestamp, offset_of_max = NO_TIMESTAMP, -1
    for i, message in enumerate(messages):
        offset = next_offset + i
        set_legacy_offset(mv, message.position, offset)
        if message.magic == 1:
            if config.log_append_time:
                set_legacy_timestamp(mv, message.position, now, LOG_APPEND_TIME)
            elif message.timestamp > max_timestamp:
                max_timestamp, offset_of_max = message.timestamp, offset
    if config.log_append_time and messages[0].magic == 1:
        max_timestamp, offset_of_max = now, next_offset   # Kafka's choice for v1
    last_offset = next_offset + len(messages) - 1
    return ValidationResult(mv, next_offset, last_offset, max_timestamp, offset_of_max,
                            now if config.log_append_time else -1, [])


def _assign_legacy_compressed(mv, next_offset, config, now, checks) -> ValidationResult:
    wrapper = LegacyMessage(mv, 0)
    try:
        inner = wrapper.inner_messages(max(config.max_message_bytes * 64, 64 * 1024 * 1024))
    except CorruptRecordError as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
    wrapper_log_append = wrapper.timestamp_type == LOG_APPEND_TIME
    in_place = wrapper.magic == 1
    for i, message in enumerate(inner):
        if message.magic != wrapper.magic:
            checks.errors.append((i, f"Record's magic does not match outer magic {wrapper.magic}"))
            continue
        if not message.crc_valid():
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Inner record {i} is corrupt (stored crc = {message.crc})")
        timestamp = wrapper.timestamp if (wrapper_log_append and message.magic) else message.timestamp
        checks.check(i, message.key is not None, timestamp, wrapper_log_append)
        if message.offset != i:
            in_place = False   # old clients number inner messages wrongly: rebuild, as Kafka does
    checks.raise_if_any()
    count = len(inner)
    last_offset = next_offset + count - 1
    log_append_time = now if config.log_append_time else -1
    if wrapper.magic == 1:
        max_timestamp = now if config.log_append_time else max(m.timestamp for m in inner)
    else:
        max_timestamp = NO_TIMESTAMP
    if in_place:
        set_legacy_offset(mv, 0, last_offset)
        if config.log_append_time:
            set_legacy_timestamp(mv, 0, now, LOG_APPEND_TIME)
        return ValidationResult(mv, next_offset, last_offset, max_timestamp, last_offset, log_append_time, [])

    timestamp_type = LOG_APPEND_TIME if (config.log_append_time and wrapper.magic == 1) else CREATE_TIME
    items = [(m.key, m.value, (), now if timestamp_type == LOG_APPEND_TIME else m.timestamp) for m in inner]
    rebuilt = build_legacy_message_set(items, magic=wrapper.magic, compression=wrapper.compression,
                                       base_offset=next_offset, timestamp_type=timestamp_type)
    if len(rebuilt) > config.max_message_bytes:
        raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE, f"Message batch size is {len(rebuilt)} bytes after "
                                                      f"recompression, above the maximum configured size of "
                                                      f"{config.max_message_bytes}.")
    return ValidationResult(memoryview(rebuilt), next_offset, last_offset, max_timestamp, last_offset,
                            log_append_time, [])
