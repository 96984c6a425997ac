"""What a share fetch needs of the batches a log read returned (Kafka's ShareFetchUtils and SharePartition's
aborted-transaction filter): their offsets, the batches of aborted transactions, and the read cut
after the last batch acquired. Headers only, O(batches), except the first record of a control batch.
"""
from __future__ import annotations

import os

from kafka_compat.storage.file_records import iter_file_batches

from ...protocol.batch_header import HEADER_SIZE_UP_TO_MAGIC, MAGIC_OFFSET, header_bytes_needed, parse_header
from ...protocol.records import ControlRecordType, RecordBatch, control_record_type


def read_batch_spans(result) -> list[tuple]:
    """(BatchHeader, bytes up to its end, the file descriptor or None) of every whole batch of a read (a
    FetchResult: file slices, or the bytes of a small read)."""
    spans = []
    if result.data is not None:
        data, at = result.data, 0
        while len(data) - at >= HEADER_SIZE_UP_TO_MAGIC and \
                len(data) - at >= header_bytes_needed(data[at + MAGIC_OFFSET]):
            info = parse_header(data, at)
            if at + info.size > len(data):
                break
            at += info.size
            spans.append((info, at, None))
        return spans
    total = 0
    for s in result.slices:
        for info in iter_file_batches(s.fd, s.position, s.position + s.length):
            total += info.size
            spans.append((info, total, s.fd))
    return spans


def _is_abort_marker(result, info, fd) -> bool:
    if not info.is_control:
        return False
    raw = result.data[info.position:info.position + info.size] if fd is None else \
        os.pread(fd, info.size, info.position)
    record = next(iter(RecordBatch(raw).records()), None)
    return record is not None and control_record_type(record.key) == ControlRecordType.ABORT


def aborted_batches(result, spans: list, aborted_transactions) -> list[tuple[int, int]]:
    """(base, last) of the read's batches that belong to aborted transactions (``aborted_transactions``:
    the read's AbortedTxn entries, producer id and first offset), as Kafka's fetchAbortedTransactionRecordBatches
    finds them: a producer's batches count from its aborted transaction's first offset to its ABORT marker."""
    pending = sorted(aborted_transactions, key=lambda a: a.first_offset)
    aborting: set[int] = set()
    out = []
    for info, _end, fd in spans:
        if info.producer_id < 0:
            continue
        while pending and pending[0].first_offset <= info.last_offset:
            aborting.add(pending.pop(0).producer_id)
        if _is_abort_marker(result, info, fd):
            aborting.discard(info.producer_id)
        elif info.is_transactional and info.producer_id in aborting:
            out.append((info.base_offset, info.last_offset))
    return out


def truncate_read(result, size: int):
    """The FetchResult cut to its first ``size`` bytes (a batch boundary from read_batch_spans)."""
    if size >= result.size:
        return result
    if result.data is not None:
        return result._replace(data=result.data[:size])
    slices, left = [], size
    for s in result.slices:
        if left <= 0:
            break
        slices.append(s._replace(length=min(s.length, left)))
        left -= s.length
    return result._replace(slices=slices)


__all__ = ["read_batch_spans", "truncate_read"]
