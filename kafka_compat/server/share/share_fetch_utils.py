"""What a share fetch needs of the batches a log read returned (Kafka's ShareFetchUtils): their offsets,
and the read cut after the last batch acquired. Headers only: O(batches), never O(records)."""
from __future__ import annotations

from kafka_compat.storage.file_records import iter_file_batches

from ...protocol.batch_header import HEADER_SIZE_UP_TO_MAGIC, MAGIC_OFFSET, header_bytes_needed, parse_header


def read_batch_spans(result) -> list[tuple[int, int, int]]:
    """(base offset, last offset, bytes up to its end) of every whole batch of a read (a FetchResult:
    file slices, or the bytes of a small read)."""
    spans = []
    if result.data is not None:
        data, at = result.data, 0
        while len(data) - at >= HEADER_SIZE_UP_TO_MAGIC and \
                len(data) - at >= header_bytes_needed(data[at + MAGIC_OFFSET]):
            info = parse_header(data, at)
            if at + info.size > len(data):
                break
            at += info.size
            spans.append((info.base_offset, info.last_offset, at))
        return spans
    total = 0
    for s in result.slices:
        for info in iter_file_batches(s.fd, s.position, s.position + s.length):
            total += info.size
            spans.append((info.base_offset, info.last_offset, total))
    return spans


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
