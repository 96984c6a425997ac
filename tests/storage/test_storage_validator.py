"""Kafka's LogValidator rules and in-place offset assignment, per magic and compression."""

import os
import struct

import pytest
from kafka_compat.storage.log_config import LogConfig
from kafka_compat.storage.scheduler import Scheduler
from kafka_compat.storage.unified_log import UnifiedLog
from kafka_compat.storage.validator import COORDINATOR, validate_and_assign
from logtools import TS, batch, keyed

from kafka_compat.protocol.compression import GZIP, LZ4, SNAPPY
from kafka_compat.protocol.errors import ErrorCode, KafkaError
from kafka_compat.protocol.records import (
    LOG_APPEND_TIME,
    LegacyMessage,
    RecordBatch,
    build_batch,
    build_control_batch,
    build_legacy_message_set,
)

NOW = TS + 10_000


def assign(data, next_offset=1000, config=None, epoch=7, **kw):
    return validate_and_assign(memoryview(data), next_offset, config or LogConfig(), NOW, epoch, **kw)


@pytest.fixture(params=["validator", "log"])
def error_code(request, tmp_path):
    """error_code(data, config) -> the KafkaError code, through validate_and_assign and through
    Log.append, whose own header-only path must apply the same rules and write nothing."""
    def through_validator(data, config=None, **kw) -> int:
        with pytest.raises(KafkaError) as info:
            assign(data, config=config, **kw)
        return info.value.error_code

    def through_log(data, config=None, **kw) -> int:
        lg = UnifiedLog(str(tmp_path / f"t-{len(os.listdir(tmp_path))}"), config or LogConfig(),
                        scheduler=scheduler, clock=lambda: NOW)
        try:
            with pytest.raises(KafkaError) as info:
                lg.append_as_leader(data, 7, **kw)
            assert lg.log_end_offset == 0 and lg.active_segment.size == 0
        finally:
            lg.close()
        return info.value.error_code

    scheduler = Scheduler("validator-test")
    yield through_validator if request.param == "validator" else through_log
    scheduler.shutdown()


@pytest.mark.parametrize("codec", [0, GZIP, SNAPPY])
def test_magic2_rewrites_only_base_offset_and_leader_epoch(codec):
    data = batch(5, compression=codec, producer_id=42, producer_epoch=3, base_sequence=10)
    original = bytes(data)
    result = assign(data)
    out = bytes(result.data)
    assert struct.unpack_from(">q", out, 0)[0] == 1000
    assert struct.unpack_from(">i", out, 12)[0] == 7
    assert out[8:12] == original[8:12] and out[16:] == original[16:]
    assert (result.first_offset, result.last_offset, result.log_append_time) == (1000, 1004, -1)
    assert result.max_timestamp == TS
    meta = result.batches[0]
    assert (meta.producer_id, meta.producer_epoch, meta.base_sequence, meta.last_offset_delta) == (42, 3, 10, 4)
    assert RecordBatch(out).crc_valid()


def test_magic2_log_append_time_rewrites_timestamp_fields_and_crc():
    data = batch(3, compression=LZ4)
    original = bytes(data)
    result = assign(data, config=LogConfig(message_timestamp_type="LogAppendTime"))
    view = RecordBatch(bytes(result.data))
    assert view.timestamp_type == LOG_APPEND_TIME and view.max_timestamp == NOW
    assert view.crc_valid()
    assert result.log_append_time == NOW and result.max_timestamp == NOW
    out = bytes(result.data)
    # untouched: Length, Magic, LastOffsetDelta, BaseTimestamp, producer fields, records
    assert out[8:12] == original[8:12] and out[16] == original[16]
    assert out[23:35] == original[23:35] and out[43:] == original[43:]
    assert [r.timestamp for r in view.records()] == [NOW] * 3


def test_magic1_uncompressed_rewrites_each_offset():
    data = bytearray(build_legacy_message_set([(b"a", b"1", (), TS), (b"b", b"2", (), TS + 5)], magic=1))
    original = bytes(data)
    result = assign(data)
    out = bytes(result.data)
    first = LegacyMessage(out, 0)
    second = LegacyMessage(out, first.size)
    assert (first.offset, second.offset) == (1000, 1001)
    assert out[8:first.size] == original[8:first.size]
    assert out[first.size + 8:] == original[first.size + 8:]
    assert (result.last_offset, result.max_timestamp, result.offset_of_max_timestamp) == (1001, TS + 5, 1001)


def test_magic1_uncompressed_log_append_time_rewrites_timestamp_and_crc():
    data = bytearray(build_legacy_message_set([(b"a", b"1", (), TS), (b"b", b"2", (), TS)], magic=1))
    result = assign(data, config=LogConfig(message_timestamp_type="LogAppendTime"))
    out = bytes(result.data)
    first = LegacyMessage(out, 0)
    second = LegacyMessage(out, first.size)
    for m in (first, second):
        assert m.timestamp == NOW and m.timestamp_type == LOG_APPEND_TIME and m.crc_valid()


def test_magic1_compressed_rewrites_wrapper_offset_to_last_inner_offset():
    data = bytearray(build_legacy_message_set([(b"a", b"1", (), TS), (b"b", b"2", (), TS + 1),
                                               (b"c", b"3", (), TS + 2)], magic=1, compression=GZIP))
    original = bytes(data)
    result = assign(data)
    out = bytes(result.data)
    wrapper = LegacyMessage(out)
    assert wrapper.offset == 1002
    assert out[8:] == original[8:]                        # inner offsets stay relative: same bytes
    assert [m.offset for m in wrapper.inner_messages()] == [0, 1, 2]
    assert [r.offset for r in wrapper.records()] == [1000, 1001, 1002]
    assert (result.first_offset, result.last_offset, result.max_timestamp) == (1000, 1002, TS + 2)


def test_magic1_compressed_with_wrong_inner_offsets_is_rebuilt():
    inner = build_legacy_message_set([(b"a", b"1", (), TS), (b"b", b"2", (), TS)], magic=1, base_offset=40)
    from kafka_compat.protocol.compression import compress
    from kafka_compat.protocol.records import _encode_legacy
    wrapper = bytearray(_encode_legacy(41, 1, GZIP, TS, None, compress(GZIP, inner, 1)))
    result = assign(wrapper)
    rebuilt = LegacyMessage(bytes(result.data))
    assert rebuilt.offset == 1001
    assert [m.offset for m in rebuilt.inner_messages()] == [0, 1]
    assert [bytes(r.key) for r in rebuilt.records()] == [b"a", b"b"]


def test_magic0_uncompressed_and_compressed():
    plain = bytearray(build_legacy_message_set([(b"a", b"1"), (b"b", b"2")], magic=0))
    result = assign(plain)
    out = bytes(result.data)
    assert LegacyMessage(out).offset == 1000
    assert LegacyMessage(out, LegacyMessage(out).size).offset == 1001
    assert result.max_timestamp == -1

    packed = bytearray(build_legacy_message_set([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], magic=0,
                                                compression=GZIP))
    result = assign(packed)
    wrapper = LegacyMessage(bytes(result.data))
    assert wrapper.offset == 1002 and wrapper.magic == 0 and wrapper.crc_valid()
    assert [m.offset for m in wrapper.inner_messages()] == [1000, 1001, 1002]   # absolute, recompressed
    assert [bytes(r.value) for r in wrapper.records()] == [b"1", b"2", b"3"]


def test_corrupt_checksum_is_corrupt_message(error_code):
    data = batch(2)
    data[-1] ^= 0xFF
    assert error_code(data) == ErrorCode.CORRUPT_MESSAGE
    legacy = bytearray(build_legacy_message_set([(b"a", b"1")], magic=1))
    legacy[-1] ^= 0xFF
    assert error_code(legacy) == ErrorCode.CORRUPT_MESSAGE


def test_bad_size_or_magic_is_corrupt_message(error_code):
    data = batch(1)
    struct.pack_into(">i", data, 8, 5)
    assert error_code(data) == ErrorCode.CORRUPT_MESSAGE
    data = batch(1)
    data[16] = 7
    assert error_code(data) == ErrorCode.CORRUPT_MESSAGE


def test_record_count_must_match_last_offset_delta(error_code):
    data = bytearray(build_batch([(b"k", b"v", (), TS)] * 3, last_offset_delta=5))
    assert error_code(data) == ErrorCode.INVALID_RECORD
    data = bytearray(build_batch([(b"k", b"v", (), TS)] * 3, last_offset_delta=-1))
    assert error_code(data) == ErrorCode.INVALID_RECORD


def test_max_message_bytes(error_code):
    data = batch(1, value=b"x" * 2000)
    assert error_code(data, LogConfig(max_message_bytes=1000)) == ErrorCode.MESSAGE_TOO_LARGE
    assign(batch(1, value=b"x" * 2000), config=LogConfig(max_message_bytes=len(data)))


def test_null_key_on_compacted_topic_is_invalid_record(error_code):
    data = keyed([(b"a", b"1"), (None, b"2"), (b"c", b"3")])
    with pytest.raises(KafkaError) as info:
        assign(data, config=LogConfig(cleanup_policy="compact"))
    assert info.value.error_code == ErrorCode.INVALID_RECORD
    assert [i for i, _ in info.value.record_errors] == [1]
    assign(keyed([(None, b"2")]))   # fine on a delete-policy topic
    legacy = bytearray(build_legacy_message_set([(None, b"1")], magic=1, compression=GZIP))
    assert error_code(legacy, LogConfig(cleanup_policy="compact,delete")) == ErrorCode.INVALID_RECORD


def test_control_batch_from_client_is_invalid_record_but_allowed_for_coordinator(error_code):
    data = bytearray(build_control_batch(1, producer_id=5, producer_epoch=0, timestamp=TS))
    assert error_code(data) == ErrorCode.INVALID_RECORD
    assert error_code(batch(1, is_control=True)) == ErrorCode.INVALID_RECORD    # no producer id: only this rule
    assert assign(data, origin=COORDINATOR).last_offset == 1000


def test_client_rules_on_batch_header(error_code):
    data = batch(1)
    struct.pack_into(">q", data, 0, 9)
    assert error_code(data) == ErrorCode.INVALID_RECORD          # BaseOffset must be 0
    assert error_code(batch(2, producer_id=3, producer_epoch=0, base_sequence=-1)) == ErrorCode.INVALID_RECORD
    assert error_code(batch(1) + batch(1)) == ErrorCode.INVALID_RECORD           # one v2 batch per append
    mixed = bytearray(build_legacy_message_set([(b"a", b"1")], magic=0)) + \
        bytearray(build_legacy_message_set([(b"b", b"2")], magic=1))
    assert error_code(mixed) == ErrorCode.INVALID_RECORD


def test_timestamp_bounds(error_code):
    config = LogConfig(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=500)
    assign(batch(1, ts=NOW - 1000), config=config)
    assign(batch(1, ts=NOW + 500), config=config)
    assert error_code(batch(1, ts=NOW - 1001), config) == ErrorCode.INVALID_TIMESTAMP
    assert error_code(batch(1, ts=NOW + 501), config) == ErrorCode.INVALID_TIMESTAMP
    late_inside = bytearray(build_batch([(b"k", b"v", (), NOW), (b"k", b"v", (), NOW - 5000)]))
    assert error_code(late_inside, config) == ErrorCode.INVALID_TIMESTAMP      # checked per record
    legacy = bytearray(build_legacy_message_set([(b"a", b"1", (), NOW - 5000)], magic=1))
    assert error_code(legacy, config) == ErrorCode.INVALID_TIMESTAMP


def test_client_batch_claiming_log_append_time(error_code):
    data = batch(1, timestamp_type=LOG_APPEND_TIME)
    assert error_code(data, LogConfig(message_timestamp_type="LogAppendTime")) == ErrorCode.INVALID_TIMESTAMP


def test_trailing_partial_batch_is_trimmed():
    data = batch(2) + batch(1)[:30]
    result = assign(data)
    assert len(result.data) == len(batch(2))
    assert result.last_offset == 1001


def test_empty_records_are_invalid(error_code):
    assert error_code(bytearray()) == ErrorCode.INVALID_RECORD
