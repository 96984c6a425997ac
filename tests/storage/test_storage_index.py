"""OffsetIndex / TimeIndex: preallocation, sparsity, lookups, truncation, trimming, sanity checks."""

import os

import pytest
from kafka_compat.storage.index import CorruptIndexError, OffsetIndex, TimeIndex
from logtools import TS, batch


def test_new_index_files_are_preallocated_to_whole_entries_at_their_first_entry(tmp_path):
    idx = OffsetIndex(str(tmp_path / "0.index"), 0, 1000)
    tidx = TimeIndex(str(tmp_path / "0.timeindex"), 0, 1000)
    assert not os.path.exists(idx.path) and not os.path.exists(tidx.path)   # an idle segment costs no files
    assert (idx.entries, idx.max_entries) == (0, 125)
    assert (tidx.entries, tidx.max_entries) == (0, 83)
    assert idx.lookup(7) == (0, 0)
    idx.append(3, 0)
    tidx.maybe_append(1000, 3)
    assert os.path.getsize(idx.path) == 1000          # 125 entries of 8 bytes
    assert os.path.getsize(tidx.path) == 996          # 83 entries of 12 bytes
    idx.close()
    tidx.close()
    assert os.path.getsize(idx.path) == 8 and os.path.getsize(tidx.path) == 12


def test_a_reopened_index_grows_at_its_next_entry_not_when_made_active(tmp_path):
    """Loading makes the last segment's indexes active again (room for segment.index.bytes); the
    files grow only when an entry is written, so a partition loaded and closed idle never
    resizes them (two system calls each way per partition at startup and shutdown)."""
    idx = OffsetIndex(str(tmp_path / "0.index"), 0, 1000)
    idx.append(3, 0)
    idx.append(9, 100)
    idx.close()
    again = OffsetIndex(idx.path, 0, 1000)
    again.resize(1000)
    assert (again.entries, again.max_entries, os.path.getsize(idx.path)) == (2, 125, 16)
    assert again.lookup(9) == (9, 100)                 # reading needs no growth
    again.close()
    assert os.path.getsize(idx.path) == 16
    third = OffsetIndex(idx.path, 0, 1000)
    third.resize(1000)
    third.append(20, 200)
    assert os.path.getsize(idx.path) == 1000 and third.lookup(25) == (20, 200)
    third.close()
    assert os.path.getsize(idx.path) == 24
    assert OffsetIndex(idx.path, 0, 1000).lookup(25) == (20, 200)


def test_offset_index_lookup_finds_largest_entry_at_or_below(tmp_path):
    idx = OffsetIndex(str(tmp_path / "100.index"), 100, 800)
    for i in range(10):
        idx.append(100 + 10 * i + 9, 1000 * i)
    assert idx.lookup(50) == (100, 0)            # below the first entry: the segment start
    assert idx.lookup(108) == (100, 0)
    assert idx.lookup(109) == (109, 0)
    assert idx.lookup(150) == (149, 4000)
    assert idx.lookup(10 ** 9) == (199, 9000)
    with pytest.raises(ValueError):
        idx.append(199, 9500)                    # offsets must increase
    with pytest.raises(OverflowError):
        idx.append(100 + 2 ** 31, 9600)          # relative offset must fit 32 bits
    assert idx.position_floor(4500) == 4000
    assert idx.position_floor(-1) == -1


def test_offset_index_truncate_to(tmp_path):
    idx = OffsetIndex(str(tmp_path / "0.index"), 0, 800)
    for i in range(5):
        idx.append(10 * i, 100 * i)
    idx.truncate_to(25)        # keeps entries for 0, 10, 20
    assert idx.entries == 3 and idx.last_offset == 20
    idx.truncate_to(20)        # an exact hit removes that entry too
    assert idx.entries == 2 and idx.last_offset == 10
    idx.truncate_to(0)
    assert idx.entries == 0 and idx.last_offset == 0


def test_time_index_appends_only_increasing_timestamps_and_keeps_last_slot(tmp_path):
    tidx = TimeIndex(str(tmp_path / "0.timeindex"), 0, 36)   # 3 slots, 2 usable before roll
    tidx.maybe_append(100, 5)
    tidx.maybe_append(100, 6)          # same timestamp: ignored
    tidx.maybe_append(90, 7)           # smaller timestamp: ignored
    assert tidx.entries == 1
    tidx.maybe_append(120, 9)
    assert tidx.is_full()
    with pytest.raises(ValueError):
        tidx.maybe_append(130, 10)
    tidx.maybe_append(130, 10, skip_full_check=True)   # the roll-time entry
    assert tidx.entries == 3
    assert tidx.lookup(99) == (-1, 0)
    assert tidx.lookup(100) == (100, 5)
    assert tidx.lookup(125) == (120, 9)
    assert tidx.last_entry == (130, 10)


def test_segment_index_is_sparse_one_entry_per_interval(make_log):
    lg = make_log(index_interval_bytes=4096)
    one = len(batch(10, value=b"x" * 90))
    positions, last_offsets = [], []
    for _ in range(200):
        r = lg.append_as_leader(batch(10, value=b"x" * 90), 0)
        positions.append(lg.active_segment.size - one)
        last_offsets.append(r.last_offset)
    # Kafka's rule: an entry for an append once more than index.interval.bytes were written
    # since the previous entry (counted before this append).
    expected, since = [], 0
    for pos, last in zip(positions, last_offsets):
        if since > 4096:
            expected.append((last, pos))
            since = 0
        since += one
    idx = lg.active_segment.offset_index
    got = [idx.entry(i) for i in range(idx.entries)]
    assert got == expected
    assert 200 * one // 4096 - 2 <= len(got) <= 200 * one // 4096
    # each entry points at the start of the batch whose last offset it names
    views = {b.position: b for b in lg.active_segment.batches()}
    for offset, position in got:
        assert views[position].last_offset == offset


def test_indexes_trimmed_on_roll_and_reopened_intact(make_log):
    lg = make_log(segment_bytes=20_000, index_interval_bytes=500, segment_index_bytes=4000)
    for i in range(100):
        lg.append_as_leader(batch(5, value=b"y" * 100, ts=TS + i), 0)
    assert len(lg.segments) > 2
    for seg in lg.segments[:-1]:
        assert os.path.getsize(seg.offset_index.path) == 8 * seg.offset_index.entries
        assert os.path.getsize(seg.time_index.path) == 12 * seg.time_index.entries
        assert seg.offset_index.entries > 0
        assert seg.time_index.last_entry == (seg.max_timestamp_so_far, seg.next_offset - 1)
    active = lg.active_segment
    assert os.path.getsize(active.offset_index.path) == 4000
    before = [[s.offset_index.entry(i) for i in range(s.offset_index.entries)] for s in lg.segments]
    lg.close()
    again = make_log(segment_bytes=20_000, index_interval_bytes=500, segment_index_bytes=4000,
                     had_clean_shutdown=True)
    after = [[s.offset_index.entry(i) for i in range(s.offset_index.entries)] for s in again.segments]
    assert after == before
    assert os.path.getsize(again.active_segment.offset_index.path) == 4000   # room to grow again


def test_sanity_check_rejects_garbage(tmp_path):
    path = str(tmp_path / "0.index")
    idx = OffsetIndex(path, 0, 80)
    idx.append(5, 0)
    idx.append(9, 100)
    idx.close()
    idx = OffsetIndex(path, 0, 80)
    idx.sanity_check(200)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check(100)          # a position beyond the log
    idx.close(trim=False)
    with open(path, "r+b") as f:
        f.write(b"\x00\x00\x00\x09\x00\x00\x00\x00")   # first entry now larger than the second
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 80).sanity_check(200)
    with open(path, "ab") as f:
        f.write(b"\x01\x02\x03")                         # not a whole number of entries
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 80).sanity_check(200)


def _resident_pages(path: str) -> int:
    """Pages of `path` in the page cache (mincore over a fresh read-only mapping)."""
    import ctypes
    import mmap
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value)
        vec = ctypes.create_string_buffer((size + mmap.PAGESIZE - 1) // mmap.PAGESIZE)
        try:
            assert libc.mincore(addr, size, vec) == 0, ctypes.get_errno()
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
    return sum(b & 1 for b in vec.raw)


@pytest.mark.skipif(not hasattr(__import__("mmap"), "MADV_RANDOM"), reason="no madvise")
def test_first_entries_bring_only_their_page_into_the_page_cache(tmp_path):
    """A fault on the sparse preallocated index must not read ahead megabytes of zeroes
    (with read_ahead_kb at 8 MiB that cost a third of a produce's kernel time)."""
    idx = OffsetIndex(str(tmp_path / "0.index"), 0, 10 * 1024 * 1024)
    tidx = TimeIndex(str(tmp_path / "0.timeindex"), 0, 10 * 1024 * 1024)
    for i in range(100):
        idx.append(i, i * 4096)
        tidx.maybe_append(TS + i, i)
    assert _resident_pages(idx.path) <= 2
    assert _resident_pages(tidx.path) <= 2
    assert idx.lookup(57) == (57, 57 * 4096)
    idx.close()
    tidx.close()
