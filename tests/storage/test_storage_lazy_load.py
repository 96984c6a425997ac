"""Loading a cleanly closed log opens only what it uses (Kafka's LazyIndex and FileRecords on demand).

A loaded segment costs no descriptor, mapping or read until it is used; used, it answers as an
eagerly opened one would; closed unused, its files stay as they were. A restarted empty
partition keeps its leader-epoch checkpoint rather than writing it twice, and loads without
index objects whether or not it was closed cleanly.
"""

import gc
import os

import pytest
from kafka_compat.storage.fallocate import reserve_past_end
from kafka_compat.storage.log_config import LogConfig
from kafka_compat.storage.log_manager import LogManager
from kafka_compat.storage.open_files import POOL
from kafka_compat.storage.segment import LogSegment
from logtools import append_committed, batch, read_records

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=200, segment_index_bytes=4096)


def _open_in(directory: str) -> list[str]:
    """The segment files of ``directory`` this process holds a descriptor on (a producer snapshot the
    scheduler is writing does not count)."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if os.path.dirname(target) == directory and target.endswith((".log", ".index", ".timeindex", ".txnindex")):
            held.append(target)
    return held


def _files(directory: str) -> dict[str, bytes]:
    return {n: open(os.path.join(directory, n), "rb").read() for n in sorted(os.listdir(directory))
            if n.endswith((".log", ".index", ".timeindex"))}


def _filled_log(make_log):
    lg = make_log("t-0", CONFIG)
    for i in range(60):
        append_committed(lg, batch(3, value=b"v%03d" % i + b"x" * 40))
    assert len(lg.segments) > 3
    records = read_records(lg)
    lg.close()
    gc.collect()   # descriptors still referenced from garbage close now
    assert _open_in(lg.dir) == []
    return lg.dir, records


def test_a_loaded_segment_opens_nothing_until_used_then_reads_as_an_open_one(make_log):
    directory, records = _filled_log(make_log)
    before_files = _files(directory)
    first = sorted(n for n in before_files if n.endswith(".log"))[0]
    base = int(first.split(".")[0])
    counted = len(POOL)
    seg = LogSegment(directory, base, CONFIG, active=False, lazy=True)
    assert _open_in(directory) == [] and len(POOL) == counted       # no descriptor, nothing in the budget
    assert "offset_index" not in vars(seg) and "size" not in vars(seg)
    # used: the same answers an eager open gives
    eager = LogSegment(directory, base, CONFIG, active=False)
    assert seg.size == eager.size == os.path.getsize(os.path.join(directory, first))
    target = base + 7
    assert seg.translate_offset(target) == eager.translate_offset(target)
    assert seg.max_timestamp_so_far == eager.max_timestamp_so_far
    assert seg.time_index.lookup(records[5].timestamp) == eager.time_index.lookup(records[5].timestamp)
    eager.close()
    seg.close()
    assert _files(directory) == before_files


def test_a_segment_closed_unused_leaves_its_files_as_they_were(make_log):
    directory, _ = _filled_log(make_log)
    before_files = _files(directory)
    bases = sorted(int(n.split(".")[0]) for n in before_files if n.endswith(".log"))
    segments = [LogSegment(directory, b, CONFIG, active=False, lazy=True) for b in bases]
    segments[-1].make_active()        # the last one is made active, as a load does, but stays unused
    assert _open_in(directory) == []
    for seg in segments:
        seg.close()
    assert _files(directory) == before_files
    assert not any(n.endswith(".txnindex") for n in os.listdir(directory))


def test_a_reloaded_log_serves_every_record_and_takes_appends(make_log):
    _, records = _filled_log(make_log)
    lg = make_log("t-0", CONFIG, recovery_point=10**9, had_clean_shutdown=True)
    assert read_records(lg) == records
    end = lg.log_end_offset
    append_committed(lg, batch(2, value=b"after"))
    assert lg.log_end_offset == end + 2
    assert [(r.offset, bytes(r.value)) for r in read_records(lg, start=end)] == [(end, b"after"), (end + 1, b"after")]


def test_a_cleanly_loaded_log_holds_no_descriptor_until_used(make_log):
    directory, records = _filled_log(make_log)
    lg = make_log("t-0", CONFIG, recovery_point=10**9, had_clean_shutdown=True)
    gc.collect()
    assert _open_in(directory) == []          # its active segment was checked, then let go
    assert read_records(lg) == records
    assert _open_in(directory)                # used: opened again


def test_restarting_an_empty_partition_does_not_rewrite_its_leader_epoch_checkpoint(tmp_path, clock):
    def manager():
        return LogManager([str(tmp_path / "d")], CONFIG, clock=clock, cleaner_enabled=False)

    m = manager()
    m.startup(background=False)
    lg = m.get_or_create_log("empty", 0)
    lg.maybe_assign_epoch_start_offset(0, 0)
    path = lg.leader_epoch_cache.path
    m.shutdown()
    written = os.stat(path)
    for _ in range(2):
        m = manager()
        m.startup(background=False)
        lg = m.get_log("empty", 0)
        assert lg.leader_epoch_cache.entries == [(0, 0)]
        lg.maybe_assign_epoch_start_offset(0, lg.log_end_offset)   # what its leader does at once
        m.shutdown()
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)


def _empty_log_dir(make_log, name):
    lg = make_log(name, CONFIG)
    lg.maybe_assign_epoch_start_offset(0, 0)
    lg.close()
    return lg.dir


def test_an_empty_partition_loads_without_its_indexes_and_then_takes_appends(make_log):
    """Most partitions of a broker with many are empty: loading one, after a clean shutdown or not,
    makes no index object and no file, and the log then works as any other."""
    for clean in (True, False):
        name = f"e{int(clean)}-0"
        directory = _empty_log_dir(make_log, name)
        before = sorted(os.listdir(directory))
        lg = make_log(name, CONFIG, had_clean_shutdown=clean)
        seg = lg.segments[0]
        assert "offset_index" not in vars(seg) and "time_index" not in vars(seg) and "txn_index" not in vars(seg)
        assert sorted(os.listdir(directory)) == before
        assert (lg.log_end_offset, lg.recovery_point, lg.leader_epoch_cache.entries) == (0, 0, [(0, 0)])
        for i in range(30):    # past index.interval.bytes: the indexes get entries
            append_committed(lg, batch(2, value=b"w%02d" % i + b"y" * 40))
        assert [bytes(r.value)[:3] for r in read_records(lg)] == [b"w%02d" % (i // 2) for i in range(60)]
        assert lg.segments[0].offset_index.entries > 0
        lg.close()
        again = make_log(name, CONFIG, recovery_point=0, had_clean_shutdown=False)   # recovered: the same
        assert again.log_end_offset == 60 and len(read_records(again)) == 60


def test_recovering_an_empty_segment_returns_blocks_reserved_past_its_end(make_log):
    """An unclean shutdown between reserving blocks for an append and writing it leaves an empty file
    holding them: recovery gives them back, empty as the file is."""
    directory = _empty_log_dir(make_log, "r-0")
    path = os.path.join(directory, "00000000000000000000.log")
    fd = os.open(path, os.O_RDWR)
    try:
        if not reserve_past_end(fd, 0, 1 << 20) or os.fstat(fd).st_blocks == 0:
            pytest.skip("this filesystem reserves no blocks past a file's end")
    finally:
        os.close(fd)
    lg = make_log("r-0", CONFIG, had_clean_shutdown=False)
    assert lg.log_end_offset == 0
    st = os.stat(path)
    assert (st.st_size, st.st_blocks) == (0, 0)
