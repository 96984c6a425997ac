"""Batch headers read straight from segment files (Kafka's FileRecords batch iteration).

The byte layout and the parser are protocol's (kafka_compat.protocol.batch_header); this
module only decides how much of a file to read to walk it, so it costs O(batches), never
O(records).
"""

from __future__ import annotations

import os

from kafka_compat.protocol.batch_header import (  # noqa: F401  (BatchHeader re-exported for storage)
    HEADER_SIZE_UP_TO_MAGIC,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    header_bytes_needed,
    parse_header,
)


def read_batch_header(fd: int, position: int, end: int) -> BatchHeader | None:
    """Header of the batch at ``position`` of a segment file, or None at the end (or a torn header)."""
    if end - position < HEADER_SIZE_UP_TO_MAGIC:
        return None
    head = os.pread(fd, min(RECORD_BATCH_OVERHEAD, end - position), position)
    if len(head) < HEADER_SIZE_UP_TO_MAGIC or len(head) < header_bytes_needed(head[MAGIC_OFFSET]):
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
    while end - position >= HEADER_SIZE_UP_TO_MAGIC:
        at = position - chunk_start
        if len(chunk) - at < RECORD_BATCH_OVERHEAD and chunk_start + len(chunk) < end:
            chunk, chunk_start, at = os.pread(fd, min(SCAN_CHUNK, end - position), position), position, 0
        if len(chunk) - at < HEADER_SIZE_UP_TO_MAGIC or len(chunk) - at < header_bytes_needed(chunk[at + MAGIC_OFFSET]):
            return
        info = parse_header(chunk, at, position)
        if position + info.size > end:
            return
        yield info
        position += info.size
