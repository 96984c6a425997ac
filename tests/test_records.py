"""Record batch and legacy message-set views, in-place rewrites, builders, and a
cross-check against a real client's encoder and decoder (kafka-python)."""

import random
import struct
import zlib

import crc32c
import pytest
from test_compression import damaged_copies

from kafka_compat.protocol import records as R
from kafka_compat.protocol.compression import DecompressedSizeError, compress
from kafka_compat.protocol.records import (
    ControlRecordType,
    CorruptRecordError,
    LegacyMessage,
    RecordBatch,
    batches,
    build_batch,
    build_control_batch,
    build_legacy_message_set,
    control_record_type,
    end_transaction_marker,
    iter_batches,
    set_base_offset,
    set_legacy_offset,
    set_legacy_timestamp,
    set_max_timestamp,
    set_partition_leader_epoch,
    split_batches,
)

CODECS = [0, 1, 2, 3, 4]
LEGACY_CODECS = [0, 1, 2, 3]

RECORDS = [
    (b"key-1", b"value-1", [("h1", b"v1"), ("h2", None)], 1_700_000_000_000),
    (None, b"no key", [], 1_700_000_000_005),
    (b"null value", None, [("only", b"")], 1_699_999_999_990),  # timestamps need not ascend
    (b"", b"", [], 1_700_000_000_001),
    (b"k" * 300, bytes(range(256)) * 40, [("big", b"x" * 200)], 1_700_000_000_002),
]


def plain(record):
    """Comparable form of a parsed record."""
    return (None if record.key is None else bytes(record.key),
            None if record.value is None else bytes(record.value),
            [(k, None if v is None else bytes(v)) for k, v in record.headers],
            record.timestamp)


def expected(items, magic=2):
    return [(k, v, list(h) if magic == 2 else [], ts if magic else -1) for k, v, h, ts in items]


# --- magic 2 ---

@pytest.mark.parametrize("codec", CODECS)
def test_batch_round_trip(codec):
    data = build_batch(RECORDS, base_offset=1000, compression=codec, producer_id=42,
                       producer_epoch=3, base_sequence=7, partition_leader_epoch=5)
    batch = RecordBatch(memoryview(data))
    assert batch.size == len(data) == 12 + batch.length
    assert (batch.base_offset, batch.last_offset_delta, batch.last_offset, batch.next_offset) == (
        1000, 4, 1004, 1005)
    assert (batch.magic, batch.compression, batch.records_count) == (2, codec, 5)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, 7)
    assert batch.last_sequence == 11
    assert batch.partition_leader_epoch == 5
    assert batch.base_timestamp == RECORDS[0][3]
    assert batch.max_timestamp == max(r[3] for r in RECORDS)
    assert batch.timestamp_type == R.CREATE_TIME
    assert not batch.is_transactional and not batch.is_control and not batch.has_delete_horizon
    assert batch.crc_valid()
    batch.ensure_valid()
    parsed = list(batch.records())
    assert [r.offset for r in parsed] == list(range(1000, 1005))
    assert [plain(r) for r in parsed] == expected(RECORDS)


def test_batch_fields_are_at_kafkas_byte_offsets():
    data = build_batch([(b"k", b"v", [], 5)], base_offset=0x0102030405060708,
                       producer_id=0x1112131415161718, producer_epoch=0x2122,
                       base_sequence=0x31323334, partition_leader_epoch=0x41424344,
                       is_transactional=True, timestamp_type=R.LOG_APPEND_TIME)
    assert struct.unpack_from(">q", data, 0)[0] == 0x0102030405060708
    assert struct.unpack_from(">i", data, 8)[0] == len(data) - 12
    assert struct.unpack_from(">i", data, 12)[0] == 0x41424344
    assert data[16] == 2
    assert struct.unpack_from(">I", data, 17)[0] == crc32c.crc32c(data[21:])
    assert struct.unpack_from(">h", data, 21)[0] == 0x10 | 0x08
    assert struct.unpack_from(">qqqhii", data, 27) == (5, 5, 0x1112131415161718, 0x2122, 0x31323334, 1)


def test_records_are_zero_copy_views_of_an_uncompressed_batch():
    data = bytearray(build_batch([(b"key", b"value", [], 1)]))
    record = next(RecordBatch(data).records())
    data[data.index(b"value")] = ord("V")
    assert bytes(record.value) == b"Value"


def test_log_append_time_gives_every_record_max_timestamp():
    data = build_batch(RECORDS, timestamp_type=R.LOG_APPEND_TIME, max_timestamp=123)
    assert [r.timestamp for r in RecordBatch(data).records()] == [123] * len(RECORDS)


def test_empty_batch_after_compaction_keeps_last_offset_delta():
    data = build_batch([], base_offset=50, last_offset_delta=9, producer_id=1, producer_epoch=0,
                       base_sequence=0)
    batch = RecordBatch(data)
    assert (batch.records_count, batch.last_offset, list(batch.records())) == (0, 59, [])


def test_compacted_batch_with_offset_gaps_and_delete_horizon():
    data = build_batch(RECORDS[:2], base_offset=10, offset_deltas=[2, 7], last_offset_delta=9,
                       delete_horizon_ms=1_800_000_000_000)
    batch = RecordBatch(data)
    assert batch.has_delete_horizon and batch.delete_horizon_ms == 1_800_000_000_000
    assert [(r.offset, r.timestamp) for r in batch.records()] == [
        (12, RECORDS[0][3]), (17, RECORDS[1][3])]
    assert batch.last_offset == 19


def test_records_accept_record_like_objects():
    source = RecordBatch(build_batch(RECORDS, compression=3))
    again = RecordBatch(build_batch(source.records(), compression=4))
    assert [plain(r) for r in again.records()] == expected(RECORDS)


def test_last_sequence_wraps_like_kafka():
    data = build_batch([(b"a", b"", [], 1)] * 3, producer_id=1, producer_epoch=0,
                       base_sequence=0x7FFFFFFF - 1)
    assert RecordBatch(data).last_sequence == 0


def test_control_batch():
    data = build_control_batch(ControlRecordType.COMMIT, producer_id=9, producer_epoch=2,
                               coordinator_epoch=17, base_offset=300, timestamp=55)
    batch = RecordBatch(data)
    assert batch.is_control and batch.is_transactional and batch.crc_valid()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 2, -1)
    (record,) = batch.records()
    assert record.offset == 300 and record.timestamp == 55
    assert bytes(record.key) == b"\x00\x00\x00\x01"
    assert control_record_type(record.key) == ControlRecordType.COMMIT
    assert end_transaction_marker(record.value) == (0, 17)
    with pytest.raises(CorruptRecordError):
        control_record_type(b"\x00")
    with pytest.raises(CorruptRecordError):
        end_transaction_marker(b"\xff\xff\x00\x00\x00\x00")


# --- CRC and in-place rewrites ---

def test_any_flipped_byte_in_the_crc_range_is_detected():
    data = build_batch(RECORDS[:2], compression=1)
    for i in range(R.ATTRIBUTES_OFFSET, len(data)):
        mutated = bytearray(data)
        mutated[i] ^= 0x40
        assert not RecordBatch(mutated).crc_valid(), i
        with pytest.raises(CorruptRecordError):
            RecordBatch(mutated).ensure_valid()
    mutated = bytearray(data)
    mutated[R.CRC_OFFSET] ^= 1
    assert not RecordBatch(mutated).crc_valid()


def test_offset_and_epoch_rewrites_keep_the_crc_valid():
    data = bytearray(build_batch(RECORDS, compression=2))
    crc_before = RecordBatch(data).crc
    set_base_offset(data, 0, 77_000)
    set_partition_leader_epoch(memoryview(data), 0, 12)
    batch = RecordBatch(data)
    assert (batch.base_offset, batch.partition_leader_epoch) == (77_000, 12)
    assert batch.crc == crc_before and batch.crc_valid()
    assert [r.offset for r in batch.records()] == list(range(77_000, 77_005))


def test_set_max_timestamp_recomputes_the_crc():
    data = bytearray(build_batch(RECORDS, compression=3))
    assert not set_max_timestamp(data, 0, RecordBatch(data).max_timestamp, R.CREATE_TIME)
    crc_before = RecordBatch(data).crc
    assert set_max_timestamp(data, 0, 1_900_000_000_000, R.LOG_APPEND_TIME)
    batch = RecordBatch(data)
    assert batch.crc != crc_before and batch.crc_valid()
    assert batch.timestamp_type == R.LOG_APPEND_TIME and batch.compression == 3
    assert {r.timestamp for r in batch.records()} == {1_900_000_000_000}
    assert set_max_timestamp(data, 0, 5, R.CREATE_TIME)
    assert RecordBatch(data).timestamp_type == R.CREATE_TIME and RecordBatch(data).crc_valid()


def test_rewrites_at_a_position_inside_a_larger_buffer():
    first, second = build_batch(RECORDS[:1]), build_batch(RECORDS[1:3], compression=1)
    buf = bytearray(first + second)
    pos = len(first)
    set_base_offset(buf, pos, 5)
    set_max_timestamp(buf, pos, 99, R.LOG_APPEND_TIME)
    one, two = batches(buf)
    assert one.crc_valid() and bytes(buf[:pos]) == first
    assert two.crc_valid() and two.base_offset == 5 and two.max_timestamp == 99


# --- legacy ---

@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_legacy_round_trip(magic, codec):
    items = [(k, v, [], ts) for k, v, _h, ts in RECORDS]
    data = build_legacy_message_set(items, magic=magic, compression=codec, base_offset=200)
    messages = list(batches(data))
    assert all(isinstance(m, LegacyMessage) and m.crc_valid() and m.magic == magic for m in messages)
    parsed = [r for m in messages for r in m.records()]
    assert [r.offset for r in parsed] == list(range(200, 205))
    assert [plain(r) for r in parsed] == expected(items, magic)
    if codec:
        (wrapper,) = messages
        assert wrapper.offset == wrapper.last_offset == 204 and wrapper.key is None
        inner = [m.offset for m in wrapper.inner_messages()]
        assert inner == (list(range(5)) if magic == 1 else list(range(200, 205)))
        if magic:
            assert wrapper.timestamp == max(r[3] for r in RECORDS)
    else:
        assert len(messages) == 5


def test_legacy_layout():
    data = build_legacy_message_set([(b"K", b"VV", [], 7)], magic=1, base_offset=3)
    assert struct.unpack_from(">qiIbbqi", data) == (
        3, len(data) - 12, zlib.crc32(data[16:]), 1, 0, 7, 1)
    message = LegacyMessage(data)
    assert (bytes(message.key), bytes(message.value), message.timestamp) == (b"K", b"VV", 7)
    v0 = LegacyMessage(build_legacy_message_set([(None, b"x")], magic=0))
    assert (v0.key, v0.timestamp, v0.timestamp_type, v0.message_size) == (None, -1, -1, 15)


def test_legacy_v1_wrapper_offset_zero_is_tolerated():
    """Kafka accepts a v1 wrapper offset of 0 from certain librdkafka versions."""
    items = [(k, v, [], ts) for k, v, _h, ts in RECORDS[:3]]
    data = bytearray(build_legacy_message_set(items, magic=1, compression=1, base_offset=40))
    set_legacy_offset(data, 0, 0)
    assert LegacyMessage(data).crc_valid()
    assert [r.offset for r in LegacyMessage(data).records()] == [0, 1, 2]
    set_legacy_offset(data, 0, 1)  # below the last inner offset (2) and not zero
    with pytest.raises(CorruptRecordError):
        list(LegacyMessage(data).records())


def test_legacy_log_append_time_comes_from_the_wrapper():
    items = [(b"a", b"1", [], 10), (b"b", b"2", [], 20)]
    data = bytearray(build_legacy_message_set(items, magic=1, compression=2, base_offset=8))
    set_legacy_offset(data, 0, 1009)
    assert set_legacy_timestamp(data, 0, 555, R.LOG_APPEND_TIME)
    assert not set_legacy_timestamp(data, 0, 555, R.LOG_APPEND_TIME)
    wrapper = LegacyMessage(data)
    assert wrapper.crc_valid() and wrapper.timestamp_type == R.LOG_APPEND_TIME
    assert wrapper.compression == 2
    assert [(r.offset, r.timestamp) for r in wrapper.records()] == [(1008, 555), (1009, 555)]


def test_legacy_timestamp_needs_magic_1():
    data = bytearray(build_legacy_message_set([(b"a", b"1")], magic=0))
    with pytest.raises(ValueError):
        set_legacy_timestamp(data, 0, 1, R.LOG_APPEND_TIME)


def test_legacy_builder_refuses_what_kafka_never_writes():
    with pytest.raises(ValueError):
        build_legacy_message_set([(b"a", b"1")], magic=1, compression=4)
    with pytest.raises(ValueError):
        build_legacy_message_set([(b"a", b"1", [("h", b"")])], magic=1)


def _wrap(inner: bytes, magic=1, codec=1, offset=0) -> bytes:
    """A hand-made wrapper message around arbitrary (already laid out) inner bytes."""
    return R._encode_legacy(offset, magic, codec, 0, None, compress(codec, inner, magic))


@pytest.mark.parametrize("inner", [
    b"",                                                               # no inner messages
    build_legacy_message_set([(b"a", b"1")], magic=1, compression=1),  # nested compression
    build_batch([(b"a", b"1", [], 1)]),                                # magic 2 inside
    build_legacy_message_set([(b"a", b"1")], magic=1)[:-1],            # partial inner message
])
def test_bad_wrapper_contents(inner):
    with pytest.raises(CorruptRecordError):
        list(LegacyMessage(_wrap(inner)).records())


def test_null_wrapper_value_and_zstd_wrapper_are_corrupt():
    with pytest.raises(CorruptRecordError):
        LegacyMessage(R._encode_legacy(0, 1, 1, 0, None, None)).inner_messages()
    inner = build_legacy_message_set([(b"a", b"1")], magic=1)
    with pytest.raises(CorruptRecordError):
        LegacyMessage(_wrap(inner, codec=4)).inner_messages()


# --- walking entries ---

def test_split_mixed_formats_and_stop_at_partial_entry():
    parts = [build_batch(RECORDS[:2]), build_legacy_message_set([(b"a", b"1")], magic=0),
             build_legacy_message_set([(b"b", b"2", [], 9)], magic=1, compression=1),
             build_batch(RECORDS[2:], compression=4)]
    whole = b"".join(parts)
    positions = [sum(map(len, parts[:i])) for i in range(len(parts))]
    expect = [(p, len(x), m) for p, x, m in zip(positions, parts, [2, 0, 1, 2])]
    assert split_batches(whole) == (expect, len(whole))
    assert list(iter_batches(whole)) == expect
    for cut in (1, 11, 12, 16, 17, len(parts[3]) - 1):
        assert split_batches(whole[:-cut]) == (expect[:3], positions[3])
    assert [type(v).__name__ for v in batches(whole)] == [
        "RecordBatch", "LegacyMessage", "LegacyMessage", "RecordBatch"]
    assert split_batches(whole, position=positions[2]) == (expect[2:], len(whole))


@pytest.mark.parametrize("length", [-1, -(2 ** 31), 0, 13])
def test_negative_or_tiny_length_is_corrupt(length):
    data = bytearray(build_batch(RECORDS[:1]))
    struct.pack_into(">i", data, 8, length)
    with pytest.raises(CorruptRecordError) as info:
        split_batches(bytes(data) * 2)
    assert info.value.position == 0


def test_length_below_the_magic_2_header_is_corrupt():
    data = bytearray(build_batch(RECORDS[:1]))
    struct.pack_into(">i", data, 8, 40)
    with pytest.raises(CorruptRecordError):
        split_batches(data)


def test_oversized_length_is_corrupt_when_capped():
    good = build_batch(RECORDS[:1])
    data = bytearray(good)
    struct.pack_into(">i", data, 8, 10_000_000)
    with pytest.raises(CorruptRecordError) as info:
        split_batches(good + data, max_message_size=1_000_000)
    assert info.value.position == len(good)
    assert split_batches(good + data) == ([(0, len(good), 2)], len(good))  # uncapped: partial


@pytest.mark.parametrize("magic", [3, -1, 127])
def test_unknown_magic_is_corrupt(magic):
    data = bytearray(build_batch(RECORDS[:1]))
    data[16] = magic & 0xFF
    with pytest.raises(CorruptRecordError):
        split_batches(data)


def test_decompression_bomb_in_a_batch_is_refused():
    data = build_batch([(None, bytes(4_000_000), [], 1)], compression=4)
    assert len(data) < 10_000
    with pytest.raises(CorruptRecordError) as info:
        RecordBatch(data).records(max_size=1_000_000)
    assert isinstance(info.value.__cause__, DecompressedSizeError)
    items = [(None, bytes(4_000_000), [], 1)]
    wrapper = LegacyMessage(build_legacy_message_set(items, magic=1, compression=1))
    with pytest.raises(CorruptRecordError):
        wrapper.records(max_size=1_000_000)


def _patch_records_count(data: bytes, count: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(">i", out, R.RECORDS_COUNT_OFFSET, count)
    return bytes(out)


@pytest.mark.parametrize("codec", [0, 1])
@pytest.mark.parametrize("count", [-1, 1, 3])
def test_record_count_must_match_the_bytes(codec, count):
    data = _patch_records_count(build_batch(RECORDS[:2], compression=codec), count)
    with pytest.raises(CorruptRecordError):
        list(RecordBatch(data).records())


def test_record_length_disagreeing_with_its_fields_is_corrupt():
    data = bytearray(build_batch([(b"k", b"v", [], 1)]))
    data[R.RECORD_BATCH_OVERHEAD] += 2  # record length varint: claims one more byte
    data += b"\x00"
    struct.pack_into(">i", data, 8, len(data) - 12)
    with pytest.raises(CorruptRecordError):
        list(RecordBatch(data).records())


def _consume(buf):
    """Everything a reader might do with untrusted bytes."""
    for view in batches(buf, max_message_size=1 << 20):
        view.crc_valid()
        for record in view.records(max_size=1 << 20):
            plain(record) if isinstance(view, RecordBatch) else None


def test_truncated_and_garbage_input_raises_only_corrupt_record_error():
    rng = random.Random(1234)
    sources = [build_batch(RECORDS, compression=c) for c in CODECS]
    sources += [build_legacy_message_set([(k, v, [], ts) for k, v, _h, ts in RECORDS],
                                         magic=m, compression=c)
                for m in (0, 1) for c in LEGACY_CODECS]
    candidates = []
    for src in sources:
        candidates += damaged_copies(src, rng, 60, 37)
    candidates += [rng.randbytes(rng.randint(0, 200)) for _ in range(200)]
    candidates += [bytes(12) + struct.pack(">i", 100) + b"\x02" + rng.randbytes(200)
                   for _ in range(100)]
    errors = 0
    for candidate in candidates:
        for build in (lambda: _consume(candidate), lambda: list(RecordBatch(candidate).records()),
                      lambda: list(LegacyMessage(candidate).records())):
            try:
                build()
            except CorruptRecordError:
                errors += 1
    assert errors > len(candidates)  # plenty of damage seen, and nothing escaped untyped


# --- the real thing: kafka-python's encoder and decoder ---

kafka_default = pytest.importorskip("kafka.record.default_records")
kafka_legacy = pytest.importorskip("kafka.record.legacy_records")
kafka_memory = pytest.importorskip("kafka.record.memory_records")


def _needs_xxhash(magic, codec):
    if magic == 0 and codec == 3:  # kafka-python's magic-0 lz4 path uses xxhash
        pytest.importorskip("xxhash")


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_parse_with_ours(codec):
    builder = kafka_default.DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=True, producer_id=123,
        producer_epoch=4, base_sequence=99, batch_size=1 << 22)
    for i, (k, v, h, ts) in enumerate(RECORDS):
        builder.append(i, timestamp=ts, key=k, value=v, headers=h)
    data = bytes(builder.build())
    batch = RecordBatch(data)
    assert batch.crc_valid() and batch.compression == codec and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (123, 4, 99)
    assert batch.records_count == len(RECORDS) and batch.last_offset_delta == len(RECORDS) - 1
    assert [plain(r) for r in batch.records()] == expected(RECORDS)


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_parse_with_kafka_python(codec):
    data = bytearray(build_batch(RECORDS, base_offset=500, compression=codec, producer_id=8,
                                 producer_epoch=1, base_sequence=0, partition_leader_epoch=3))
    set_max_timestamp(data, 0, 1_900_000_000_000, R.LOG_APPEND_TIME)
    theirs = kafka_default.DefaultRecordBatch(bytes(data))
    assert theirs.validate_crc()
    assert (theirs.base_offset, theirs.leader_epoch, theirs.compression_type) == (500, 3, codec)
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (8, 1, 0)
    got = [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in theirs]
    assert got == [(500 + i, k, v, list(h), 1_900_000_000_000)
                   for i, (k, v, h, _ts) in enumerate(RECORDS)]


def test_our_control_batch_parses_with_kafka_python():
    data = build_control_batch(ControlRecordType.ABORT, producer_id=5, producer_epoch=0,
                               coordinator_epoch=3)
    theirs = kafka_default.DefaultRecordBatch(data)
    assert theirs.validate_crc() and theirs.is_control_batch and theirs.is_transactional
    (record,) = list(theirs)
    assert record.abort and not record.commit


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_kafka_python_legacy_sets_parse_with_ours(magic, codec):
    _needs_xxhash(magic, codec)
    builder = kafka_legacy.LegacyRecordBatchBuilder(magic=magic, compression_type=codec,
                                                    batch_size=1 << 22)
    for i, (k, v, _h, ts) in enumerate(RECORDS):
        builder.append(i, timestamp=ts, key=k, value=v)
    data = bytes(builder.build())
    parsed = []
    for message in batches(data):
        assert message.crc_valid() and message.magic == magic and message.compression == codec
        parsed += message.records()
    items = [(k, v, [], ts) for k, v, _h, ts in RECORDS]
    assert [plain(r) for r in parsed] == expected(items, magic)
    # kafka-python leaves the wrapper offset at 0 (the broker assigns it): relative offsets
    assert [r.offset for r in parsed] == list(range(len(RECORDS)))


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_our_legacy_sets_parse_with_kafka_python(magic, codec):
    _needs_xxhash(magic, codec)
    items = [(k, v, [], ts) for k, v, _h, ts in RECORDS]
    data = build_legacy_message_set(items, magic=magic, compression=codec, base_offset=70)
    got = []
    records = kafka_memory.MemoryRecords(data)
    while (batch := records.next_batch()) is not None:
        assert batch.validate_crc()
        got += [(r.offset, r.key, r.value, r.timestamp if magic else None) for r in batch]
    assert got == [(70 + i, k, v, ts if magic else None) for i, (k, v, _h, ts) in enumerate(items)]
