"""Our segment and index files, read by an independent reader built here with `construct`
from Kafka's documented layout (DefaultRecordBatch, OffsetIndex, TimeIndex), not through
the package's code."""

import os

import crc32c
from construct import (
    Array,
    Bytes,
    Const,
    GreedyRange,
    If,
    Int8sb,
    Int16sb,
    Int32sb,
    Int32ub,
    Int64sb,
    Struct,
    ZigZag,
    this,
)
from logtools import TS

from kafka_compat.protocol.records import build_batch

VarBytes = Struct("length" / ZigZag, "data" / If(this.length >= 0, Bytes(this.length)))
Header = Struct("key" / VarBytes, "value" / VarBytes)
Record = Struct(
    "length" / ZigZag,
    "attributes" / Int8sb,
    "timestamp_delta" / ZigZag,
    "offset_delta" / ZigZag,
    "key" / VarBytes,
    "value" / VarBytes,
    "header_count" / ZigZag,
    "headers" / Array(this.header_count, Header),
)
RecordBatch = Struct(
    "base_offset" / Int64sb,
    "batch_length" / Int32sb,
    "partition_leader_epoch" / Int32sb,
    "magic" / Const(2, Int8sb),
    "crc" / Int32ub,
    "body" / Bytes(this.batch_length - 9),          # attributes .. end, the CRC-32C's input
)
BatchBody = Struct(
    "attributes" / Int16sb,
    "last_offset_delta" / Int32sb,
    "base_timestamp" / Int64sb,
    "max_timestamp" / Int64sb,
    "producer_id" / Int64sb,
    "producer_epoch" / Int16sb,
    "base_sequence" / Int32sb,
    "records_count" / Int32sb,
    "records" / Array(this.records_count, Record),
)
LogFile = GreedyRange(RecordBatch)
OffsetIndexFile = GreedyRange(Struct("relative_offset" / Int32sb, "position" / Int32sb))
TimeIndexFile = GreedyRange(Struct("timestamp" / Int64sb, "relative_offset" / Int32sb))


def parse_segment(path):
    with open(path, "rb") as f:
        data = f.read()
    batches, position = [], 0
    for raw in LogFile.parse(data):
        assert crc32c.crc32c(raw.body) == raw.crc
        body = BatchBody.parse(raw.body)
        batches.append((position, raw, body))
        position += 12 + raw.batch_length
    assert position == len(data)                    # the file is whole batches, nothing else
    return batches


def test_segments_and_indexes_match_kafkas_layout(make_log):
    lg = make_log(segment_bytes=3000, index_interval_bytes=300, segment_index_bytes=1200)
    written = []
    for i in range(60):
        records = [(b"key-%d-%d" % (i, j), b"value-%d" % i * 3, [("h", b"%d" % j)], TS + 10 * i + j)
                   for j in range(i % 4 + 1)]
        written.extend(records)
        lg.append_as_leader(bytearray(build_batch(records)), 5)
    lg.close()
    directory = lg.dir
    bases = sorted(int(name[:20]) for name in os.listdir(directory) if name.endswith(".log"))
    assert len(bases) > 3
    assert all(f"{b:020d}.log" in os.listdir(directory) for b in bases)

    seen, expected_offset = [], 0
    for base in bases:
        prefix = os.path.join(directory, f"{base:020d}")
        batches = parse_segment(prefix + ".log")
        assert batches[0][1].base_offset == base
        last_of_position, running_max, max_at = {}, -1, {}
        for position, raw, body in batches:
            assert raw.base_offset == expected_offset and raw.partition_leader_epoch == 5
            assert body.last_offset_delta == body.records_count - 1
            for record in body.records:
                seen.append((raw.base_offset + record.offset_delta, record.key.data, record.value.data,
                             body.base_timestamp + record.timestamp_delta,
                             [(h.key.data.decode(), h.value.data) for h in record.headers]))
            expected_offset = raw.base_offset + body.last_offset_delta + 1
            last_of_position[position] = expected_offset - 1
            if body.max_timestamp > running_max:
                running_max = body.max_timestamp
                max_at[expected_offset - 1] = running_max

        with open(prefix + ".index", "rb") as f:
            index_bytes = f.read()
        with open(prefix + ".timeindex", "rb") as f:
            time_bytes = f.read()
        assert len(index_bytes) % 8 == 0 and len(time_bytes) % 12 == 0    # trimmed on roll/close
        entries = OffsetIndexFile.parse(index_bytes)
        assert entries, "sparse, but not empty at this size"
        assert len(entries) <= sum(12 + raw.batch_length for _, raw, _ in batches) // 300
        for entry in entries:
            assert last_of_position[entry.position] == base + entry.relative_offset
        for entry in TimeIndexFile.parse(time_bytes):
            assert max_at[base + entry.relative_offset] == entry.timestamp

    assert seen == [(offset, key, value, ts, list(headers))
                    for offset, (key, value, headers, ts) in enumerate(written)]
