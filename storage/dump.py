"""dump-log: print segments and indexes as Kafka's DumpLogSegments tool does.

    python -m kafka_compat.storage.dump [--deep-iteration] [--print-data-log] [--verify-index-only]
                           [--index-sanity-check] [--max-bytes N] FILE...

Besides segments and their offset and time indexes it prints ``.txnindex`` files (aborted
transactions), producer ``.snapshot`` files, and a partition's ``leader-epoch-checkpoint``;
a transaction marker's batch line names its type and coordinator epoch.

Reads files only (never through a LocalLog), so it works on a broken data directory.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys

from kafka_compat.protocol.batch_header import crc_valid
from kafka_compat.protocol.records import (
    CorruptRecordError,
    LegacyMessage,
    RecordBatch,
    control_record_type,
    end_transaction_marker,
)

from .checkpoint import MalformedCheckpoint, read_entries
from .file_records import read_batch_header
from .index import CorruptIndexError
from .leader_epoch_cache import LEADER_EPOCH_CHECKPOINT, parse_epoch_line
from .producer_state import SNAPSHOT_SUFFIX, CorruptSnapshotError, read_snapshot
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX
from .transaction_index import CURRENT_VERSION as TXN_INDEX_VERSION
from .transaction_index import ENTRY_SIZE, parse_entries

TIMESTAMP_TYPES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _batches(path: str, max_bytes: int):
    """Yield (position, raw bytes) of whole batches; the last item is (end, None)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        end = min(os.fstat(fd).st_size, max_bytes)
        position = 0
        while True:
            try:
                info = read_batch_header(fd, position, end)
            except ValueError:
                info = None
            if info is None or position + info.size > end:
                break
            yield position, os.pread(fd, info.size, position)
            position += info.size
        yield position, None
    finally:
        os.close(fd)


def _batch_line(view, position: int, raw: bytes) -> str:
    if isinstance(view, RecordBatch):
        horizon = f"OptionalLong[{view.delete_horizon_ms}]" if view.has_delete_horizon else "OptionalLong.empty"
        head = (f"baseOffset: {view.base_offset} lastOffset: {view.last_offset} count: {view.records_count} "
                f"baseSequence: {view.base_sequence} lastSequence: {view.last_sequence} "
                f"producerId: {view.producer_id} producerEpoch: {view.producer_epoch} "
                f"partitionLeaderEpoch: {view.partition_leader_epoch} isTransactional: {_bool(view.is_transactional)} "
                f"isControl: {_bool(view.is_control)} deleteHorizonMs: {horizon}")
        max_timestamp = view.max_timestamp
    else:
        head = f"offset: {view.last_offset}"
        max_timestamp = view.timestamp
    return (f"{head} position: {position} {TIMESTAMP_TYPES[view.timestamp_type]}: {max_timestamp} "
            f"size: {view.size} magic: {view.magic} compresscodec: {CODECS.get(view.compression, '?')} "
            f"crc: {view.crc} isvalid: {_bool(crc_valid(raw, 0, len(raw)))}")


def _text(data) -> str:
    return bytes(data).decode("utf-8", errors="replace")


def _control_text(record) -> str:
    """What a control record says: a transaction marker's type and coordinator epoch."""
    try:
        control = control_record_type(record.key)
        if control in CONTROL_TYPES:
            _, epoch = end_transaction_marker(record.value)
            return f" endTxnMarker: {CONTROL_TYPES[control]} coordinatorEpoch: {epoch}"
        return f" controlType: UNKNOWN({control})"
    except CorruptRecordError as exc:
        return f" invalidControlRecord: {exc}"


def _record_line(view, record, print_data: bool, value_decoder=None) -> str:
    ts_type = TIMESTAMP_TYPES[view.timestamp_type]
    key_size = -1 if record.key is None else len(record.key)
    value_size = -1 if record.value is None else len(record.value)
    line = f"| offset: {record.offset} {ts_type}: {record.timestamp} keySize: {key_size} valueSize: {value_size}"
    if isinstance(view, RecordBatch):
        sequence = -1 if view.base_sequence < 0 else view.base_sequence + (record.offset - view.base_offset)
        line += f" sequence: {sequence} headerKeys: [{','.join(k for k, _ in record.headers)}]"
        if view.is_control:
            line += _control_text(record)
    if print_data and not (isinstance(view, RecordBatch) and view.is_control):
        if record.key is not None:
            line += f" key: {_text(record.key)}"
        if record.value is not None:
            line += f" payload: {value_decoder(record.value) if value_decoder else _text(record.value)}"
    return line


def dump_log(path: str, out, err, deep: bool, print_data: bool, max_bytes: int, value_decoder=None) -> None:
    name = os.path.basename(path)
    if name.endswith(LOG_SUFFIX):
        print(f"Log starting offset: {int(name.split('.')[0])}", file=out)
    last_offset = -1
    gaps = []
    size = os.path.getsize(path)
    for position, raw in _batches(path, max_bytes):
        if raw is None:
            if position < size and max_bytes >= size:
                print(f"Found {size - position} invalid bytes at the end of {name}", file=out)
            break
        view = RecordBatch(raw) if raw[16] == 2 else LegacyMessage(raw)
        line = _batch_line(view, position, raw)
        if not (deep or print_data) and isinstance(view, RecordBatch) and view.is_control:
            try:
                record = next(iter(view.records()), None)
                line += _control_text(record) if record is not None else " (empty control batch)"
            except CorruptRecordError as exc:
                line += f" invalidControlRecord: {exc}"
        print(line, file=out)
        if deep or print_data:
            try:
                for record in view.records():
                    if last_offset != -1 and record.offset != last_offset + 1:
                        gaps.append((last_offset, record.offset))
                    last_offset = record.offset
                    print(_record_line(view, record, print_data, value_decoder), file=out)
            except CorruptRecordError as exc:
                print(f"| cannot read records: {exc}", file=out)
    if gaps:
        print(f"Non-consecutive offsets in {os.path.abspath(path)}", file=err)
        for first, second in gaps:
            print(f"  {first} is followed by {second}", file=err)


def _entries(path: str, entry: struct.Struct):
    with open(path, "rb") as f:
        data = f.read()
    usable = len(data) - len(data) % entry.size
    return [entry.unpack_from(data, i) for i in range(0, usable, entry.size)], len(data)


def _batch_at(log_path: str, position: int):
    fd = os.open(log_path, os.O_RDONLY)
    try:
        return read_batch_header(fd, position, os.fstat(fd).st_size)
    except ValueError:
        return None
    finally:
        os.close(fd)


def _report_sanity(path: str, entries: list, length: int, entry: struct.Struct, out, err) -> None:
    """Whole entries whose keys (offsets, or timestamps) strictly increase."""
    keys = [e[0] for e in entries]
    if length % entry.size or any(b <= a for a, b in zip(keys, keys[1:])):
        print(f"{path} failed sanity check.", file=err)
    else:
        print(f"{path} passed sanity check.", file=out)


def dump_index(path: str, out, err, sanity_only: bool, verify_only: bool) -> None:
    base = int(os.path.basename(path).split(".")[0])
    log_path = path[: -len(INDEX_SUFFIX)] + LOG_SUFFIX
    entries, length = _entries(path, _OFFSET_ENTRY)
    if sanity_only:
        _report_sanity(path, entries, length, _OFFSET_ENTRY, out, err)
        return
    if not entries:
        print(f"{path} is empty.", file=out)
        return
    mismatches = []
    for i, (rel, position) in enumerate(entries):
        if rel == 0 and i > 0:
            break   # the zero-filled preallocated tail of an index left by a crash
        batch = _batch_at(log_path, position)
        if batch is None or batch.last_offset != base + rel:
            mismatches.append((base + rel, -1 if batch is None else batch.last_offset))
        if not verify_only:
            print(f"offset: {base + rel} position: {position}", file=out)
    if mismatches:
        print(f"Mismatches in :{os.path.abspath(path)}", file=err)
        for index_offset, log_offset in mismatches:
            print(f"  Index offset: {index_offset}, log offset: {log_offset}", file=err)


def dump_time_index(path: str, out, err, sanity_only: bool, verify_only: bool) -> None:
    base = int(os.path.basename(path).split(".")[0])
    entries, length = _entries(path, _TIME_ENTRY)
    if sanity_only:
        _report_sanity(path, entries, length, _TIME_ENTRY, out, err)
        return
    previous = -1
    out_of_order = []
    for i, (timestamp, rel) in enumerate(entries):
        if rel == 0 and i > 0:
            break
        if previous >= timestamp:
            out_of_order.append((timestamp, previous))
        if not verify_only:
            print(f"timestamp: {timestamp} offset: {base + rel}", file=out)
        previous = timestamp
    if out_of_order:
        print(f"Found out of order timestamp in :{os.path.abspath(path)}", file=err)
        for timestamp, prev in out_of_order:
            print(f"  Index timestamp: {timestamp}, Previously indexed timestamp: {prev}", file=err)


def dump_txn_index(path: str, out, err) -> None:
    """Kafka's format: one line per aborted transaction."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        entries = parse_entries(data, path)
    except CorruptIndexError as exc:
        print(str(exc), file=err)
        return
    for _, txn in entries:
        print(f"version: {TXN_INDEX_VERSION} producerId: {txn.producer_id} firstOffset: {txn.first_offset} "
              f"lastOffset: {txn.last_offset} lastStableOffset: {txn.last_stable_offset}", file=out)
    if len(data) % ENTRY_SIZE:
        print(f"Found {len(data) % ENTRY_SIZE} bytes of a partial entry at the end of {os.path.basename(path)}",
              file=err)


def _optional(value: int) -> str:
    return f"OptionalLong[{value}]" if value >= 0 else "OptionalLong.empty"


def dump_producer_snapshot(path: str, out, err) -> None:
    """Kafka's format: one line per producer, with its last batch."""
    try:
        entries = read_snapshot(path)
    except CorruptSnapshotError as exc:
        print(str(exc), file=err)
        return
    for entry in entries:
        line = (f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
                f"coordinatorEpoch: {entry.coordinator_epoch} currentTxnFirstOffset: "
                f"{_optional(entry.current_txn_first_offset)} lastTimestamp: {entry.last_timestamp} ")
        if entry.batches:
            batch = entry.batches[0]
            line += (f"firstSequence: {batch.first_seq} lastSequence: {batch.last_seq} lastOffset: "
                     f"{batch.last_offset} offsetDelta: {batch.offset_delta} timestamp: {batch.timestamp}")
        print(line, file=out)


def dump_leader_epochs(path: str, out, err) -> None:
    """The leader epochs of a partition and where each began."""
    try:
        entries = read_entries(path, parse_epoch_line)
    except MalformedCheckpoint as exc:
        print(str(exc), file=err)
        return
    for entry in entries or ():
        print(f"epoch: {entry.epoch} startOffset: {entry.start_offset}", file=out)


def main(argv=None, out=None, err=None, value_decoder=None) -> int:
    """``value_decoder`` (bytes -> text) prints record values decoded, as Kafka's --*-decoder options do."""
    out = out or sys.stdout
    err = err or sys.stderr
    parser = argparse.ArgumentParser(prog="dump-log", description="Print the contents of log segments and indexes.")
    parser.add_argument("files", nargs="*", help="segment (.log), .index, .timeindex, .txnindex, producer .snapshot "
                                                 "or leader-epoch-checkpoint files")
    parser.add_argument("--files", dest="more_files", default="", help="comma-separated files (Kafka's option)")
    parser.add_argument("--print-data-log", action="store_true", help="print record keys and values")
    parser.add_argument("--deep-iteration", action="store_true", help="print every record, not only batches")
    parser.add_argument("--verify-index-only", action="store_true", help="check indexes against the log, quietly")
    parser.add_argument("--index-sanity-check", action="store_true", help="only check index sanity")
    parser.add_argument("--max-bytes", type=int, default=2**31 - 1, help="read at most this many log bytes")
    args = parser.parse_args(argv)
    files = list(args.files) + [f for f in args.more_files.split(",") if f]
    if not files:
        parser.error("no files given")
    for path in files:
        print(f"Dumping {path}", file=out)
        if path.endswith(LOG_SUFFIX):
            dump_log(path, out, err, args.deep_iteration, args.print_data_log or value_decoder is not None,
                     args.max_bytes, value_decoder)
        elif path.endswith(INDEX_SUFFIX):
            dump_index(path, out, err, args.index_sanity_check, args.verify_index_only)
        elif path.endswith(TIME_INDEX_SUFFIX):
            dump_time_index(path, out, err, args.index_sanity_check, args.verify_index_only)
        elif path.endswith(TXN_INDEX_SUFFIX):
            dump_txn_index(path, out, err)
        elif path.endswith(SNAPSHOT_SUFFIX):
            dump_producer_snapshot(path, out, err)
        elif os.path.basename(path) == LEADER_EPOCH_CHECKPOINT:
            dump_leader_epochs(path, out, err)
        else:
            print(f"Ignoring unknown file {path}", file=err)
    return 0


if __name__ == "__main__":
    sys.exit(main())
