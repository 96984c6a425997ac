"""iter_file_batches reads a segment a chunk at a time; it must yield exactly what reading
header by header yields, wherever chunks, batches and the scan's end fall."""
import os
import random
import struct

import pytest
from kafka_compat.storage import file_records
from kafka_compat.storage.file_records import iter_file_batches, read_batch_header

from kafka_compat.protocol.records import build_batch, build_legacy_message_set

_BASE = struct.Struct(">q")


def _one_by_one(fd, start, end):
    """The reference: one pread per header, as the scan used to read."""
    out, position = [], start
    while True:
        info = read_batch_header(fd, position, end)
        if info is None or position + info.size > end:
            return out
        out.append(info)
        position += info.size


@pytest.fixture
def segment(tmp_path):
    """A file of mixed batches: magic 0 and 1 messages (26-40 bytes, below a v2 header),
    small and large v2 batches, some larger than a scan chunk; offsets consecutive."""
    rng = random.Random(11)
    data, offset = bytearray(), 0
    for _ in range(400):
        kind = rng.random()
        if kind < 0.15:
            blob = bytearray(build_legacy_message_set([(None, b"v" * rng.randrange(0, 8))], magic=rng.choice((0, 1))))
            _BASE.pack_into(blob, 0, offset)
            offset += 1
        else:
            size = rng.choice((0, 10, 100, 1000, 5000, 9000, 20000))
            n = rng.randrange(1, 4)
            blob = bytearray(build_batch([(None, os.urandom(size // n), (), 1_700_000_000_000)] * n))
            _BASE.pack_into(blob, 0, offset)
            offset += n
        data += blob
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(data))
    fd = os.open(path, os.O_RDONLY)
    yield fd, len(data)
    os.close(fd)


def test_chunked_scan_matches_header_by_header(segment):
    fd, size = segment
    every = _one_by_one(fd, 0, size)
    assert len(every) == 400 and every[-1].position + every[-1].size == size
    assert list(iter_file_batches(fd, 0, size)) == every
    rng = random.Random(5)
    for start in rng.sample([b.position for b in every], 60):
        chunk = file_records.SCAN_CHUNK
        for end in (size, size - 1, start + 3, start + 61, start + chunk, start + chunk + 7,
                    rng.randrange(start, size + 1)):
            end = min(end, size)
            assert list(iter_file_batches(fd, start, end)) == _one_by_one(fd, start, end), (start, end)


def test_scan_stops_quietly_at_a_torn_tail(segment, tmp_path):
    fd, size = segment
    every = _one_by_one(fd, 0, size)
    last = every[-1]
    for cut in (last.position + 5, last.position + 30, last.position + last.size - 1):
        got = list(iter_file_batches(fd, 0, cut))
        assert got == every[:-1]


def test_one_read_covers_an_index_interval_of_small_batches(tmp_path, monkeypatch):
    """The point of the chunking: 40 batches of ~100 bytes (4 KiB, one index interval) are
    scanned with one pread, not forty."""
    data = bytearray()
    for i in range(40):
        blob = bytearray(build_batch([(None, b"x" * 30, (), 1_700_000_000_000)]))
        _BASE.pack_into(blob, 0, i)
        data += blob
    path = tmp_path / "s.log"
    path.write_bytes(bytes(data))
    calls = []
    real = os.pread

    def counting(fd, n, pos):
        calls.append((n, pos))
        return real(fd, n, pos)

    monkeypatch.setattr(file_records.os, "pread", counting)
    fd = os.open(path, os.O_RDONLY)
    try:
        got = list(iter_file_batches(fd, 0, len(data)))
    finally:
        os.close(fd)
    assert [b.base_offset for b in got] == list(range(40))
    assert len(calls) == 1
