"""UnifiedLog over LocalLog: append, read as whole-batch file slices, roll conditions, offsets by timestamp,
flushing."""

import os
import threading
import time

import pytest
from kafka_compat.storage.fallocate import reserve_past_end
from kafka_compat.storage.fetch_data_info import FetchIsolation
from kafka_compat.storage.local_log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from kafka_compat.storage.validator import COORDINATOR
from logtools import (
    TS,
    advance_high_watermark,
    append_committed,
    batch,
    keyed,
    read_bytes,
    read_records,
    read_views,
)

from kafka_compat.protocol.errors import ErrorCode, KafkaError
from kafka_compat.protocol.records import build_batch, build_legacy_message_set

LOG_END = FetchIsolation.LOG_END


def test_append_assigns_consecutive_offsets_and_reports_metadata(make_log):
    lg = make_log()
    r1 = lg.append_as_leader(batch(3, producer_id=9, producer_epoch=1, base_sequence=0), 0)
    r2 = lg.append_as_leader(batch(2), 0)
    assert (r1.first_offset, r1.last_offset, r2.first_offset, r2.last_offset) == (0, 2, 3, 4)
    assert r1.log_start_offset == 0 and r1.max_timestamp == TS
    assert lg.log_end_offset == 5
    assert [(v.producer_id, v.base_offset) for v in read_views(lg)] == [(9, 0), (-1, 3)]
    assert [r.offset for r in read_records(lg)] == list(range(5))


def test_read_returns_whole_batches_starting_with_the_one_holding_the_offset(make_log):
    lg = make_log()
    for _ in range(10):
        lg.append_as_leader(batch(4, value=b"x" * 5000), 0)
    size = len(batch(4, value=b"x" * 5000))
    result = lg.read(6, 3 * size + 10, LOG_END, True).records   # offset 6 is inside the batch 4..7
    assert [s.length for s in result.slices] == [3 * size] and result.data is None
    views = read_views(lg, 6, 3 * size + 10)
    assert [(v.base_offset, v.last_offset) for v in views] == [(4, 7), (8, 11), (12, 15)]
    fd, position, length = result.slices[0]
    assert os.pread(fd, length, position) == result.read_bytes()
    assert (result.log_start_offset, result.log_end_offset) == (0, 40)


def test_small_reads_come_back_as_bytes_holding_no_descriptor(make_log):
    lg = make_log()
    for _ in range(10):
        lg.append_as_leader(batch(4, value=b"x" * 50), 0)
    size = len(batch(4, value=b"x" * 50))
    result = lg.read(6, 3 * size + 10, LOG_END, True).records
    assert result.slices == [] and result.size == 3 * size
    views = read_views(lg, 6, 3 * size + 10)
    assert [(v.base_offset, v.last_offset) for v in views] == [(4, 7), (8, 11), (12, 15)]


def test_first_batch_returned_whole_even_above_max_bytes(make_log):
    lg = make_log()
    lg.append_as_leader(batch(1, value=b"x" * 5000), 0)
    lg.append_as_leader(batch(1), 0)
    result = lg.read(0, 100, LOG_END, True).records
    assert result.size == len(batch(1, value=b"x" * 5000))
    assert lg.read(0, 100, LOG_END, False).records.size == 0


def test_offset_out_of_range(make_log):
    lg = make_log()
    lg.append_as_leader(batch(5), 0)
    assert lg.read(5, 1000, LOG_END, True).records.slices == []   # the log end itself is fine: nothing yet
    with pytest.raises(KafkaError) as info:
        lg.read(6, 1000, LOG_END, True)
    assert info.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    advance_high_watermark(lg)
    lg.maybe_increment_log_start_offset(3)
    with pytest.raises(KafkaError) as info:
        lg.read(2, 1000, LOG_END, True)
    assert info.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert read_records(lg, 3)[0].offset == 0      # whole batch: the client skips below 3
    with pytest.raises(KafkaError) as info:
        lg.maybe_increment_log_start_offset(6)
    assert info.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_high_watermark_stops_reads_before_the_batch_holding_it(make_log):
    lg = make_log(segment_bytes=300)
    for _ in range(8):
        lg.append_as_leader(batch(2, value=b"z" * 30), 0)
    assert len(lg.segments) > 2
    views = read_views(lg, 0, 1 << 20)
    assert views[-1].last_offset == 15               # reads span segments
    assert lg.update_high_watermark(9) == 9            # high watermark 9 is inside batch 8..9
    bounded = read_bytes(lg, 0, 1 << 20, FetchIsolation.HIGH_WATERMARK)
    from kafka_compat.protocol.records import batches
    got = [(v.base_offset, v.last_offset) for v in batches(bounded)]
    assert got == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert lg.read(10, 1 << 20, FetchIsolation.HIGH_WATERMARK, True).records.slices == []


def test_roll_on_segment_bytes(make_log):
    lg = make_log(segment_bytes=1000)
    one = len(batch(1, value=b"a" * 200))
    for _ in range(10):
        lg.append_as_leader(batch(1, value=b"a" * 200), 0)
    assert all(s.size <= 1000 for s in lg.segments)
    assert [s.base_offset for s in lg.segments] == [i * (1000 // one) for i in range(len(lg.segments))]
    with pytest.raises(KafkaError) as info:
        lg.append_as_leader(batch(1, value=b"a" * 2000), 0)
    assert info.value.error_code == ErrorCode.RECORD_LIST_TOO_LARGE


def test_roll_on_segment_ms_by_record_timestamps(make_log, clock):
    lg = make_log(segment_ms=60_000)
    lg.append_as_leader(batch(1, ts=TS), 0)
    lg.append_as_leader(batch(1, ts=TS + 60_000), 0)        # not more than segment.ms yet
    assert len(lg.segments) == 1
    lg.append_as_leader(batch(1, ts=TS + 60_001), 0)
    assert [s.base_offset for s in lg.segments] == [0, 2]


def test_roll_on_segment_ms_without_timestamps_uses_creation_time(make_log, clock):
    lg = make_log(segment_ms=60_000)
    lg.append_as_leader(bytearray(build_legacy_message_set([(b"a", b"1")], magic=0)), 0)
    clock.advance(60_001)
    lg.append_as_leader(bytearray(build_legacy_message_set([(b"a", b"1")], magic=0)), 0)
    assert [s.base_offset for s in lg.segments] == [0, 1]


def test_roll_on_full_offset_index(make_log):
    lg = make_log(segment_index_bytes=24, index_interval_bytes=1)   # 3 offset entries, 2 time entries
    for i in range(12):
        lg.append_as_leader(batch(1, ts=TS + i), 0)
    for seg in lg.segments[:-1]:
        assert seg.offset_index.entries <= 3
    assert len(lg.segments) >= 3


def test_roll_on_relative_offset_overflow(make_log):
    lg = make_log()
    big = bytearray(build_batch([(b"k", b"v", (), TS)], last_offset_delta=2 ** 31 - 10))
    lg.append_as_leader(big, 0, origin=COORDINATOR)
    assert len(lg.segments) == 1 and lg.log_end_offset == 2 ** 31 - 9
    lg.append_as_leader(batch(20), 0)                        # last offset would be base + 2^31 + 10
    assert [s.base_offset for s in lg.segments] == [0, 2 ** 31 - 9]
    assert lg.log_end_offset == 2 ** 31 + 11


def test_offsets_by_timestamp(make_log):
    lg = make_log(segment_bytes=400, index_interval_bytes=50)
    stamps = [TS + 10 * i for i in range(20)]
    stamps[7] = TS + 1000                          # an out-of-order maximum in the middle
    for ts in stamps:
        lg.append_as_leader(batch(2, ts=ts), 0)
    assert len(lg.segments) > 3
    assert lg.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP).offset == 0
    assert lg.fetch_offset_by_timestamp(LATEST_TIMESTAMP).offset == 40
    top = lg.fetch_offset_by_timestamp(MAX_TIMESTAMP)
    assert (top.timestamp, top.offset) == (TS + 1000, 14)
    hit = lg.fetch_offset_by_timestamp(TS + 95)   # first record with timestamp >= target
    assert (hit.timestamp, hit.offset) == (TS + 1000, 14)
    hit = lg.fetch_offset_by_timestamp(TS + 120)
    assert (hit.timestamp, hit.offset) == (TS + 1000, 14)
    hit = lg.fetch_offset_by_timestamp(TS + 30)
    assert (hit.timestamp, hit.offset) == (TS + 30, 6)
    assert lg.fetch_offset_by_timestamp(TS + 1001) is None
    advance_high_watermark(lg)
    lg.maybe_increment_log_start_offset(20)
    assert lg.fetch_offset_by_timestamp(TS).offset == 20


def test_flush_messages_advances_recovery_point(make_log):
    lg = make_log(flush_messages=5)
    lg.append_as_leader(batch(3), 0)
    assert lg.recovery_point == 0
    lg.append_as_leader(batch(3), 0)
    assert lg.recovery_point == 6
    lg.flush()
    assert lg.recovery_point == 6


def test_segment_list_is_copy_on_write(make_log):
    lg = make_log(segment_bytes=300)
    lg.append_as_leader(batch(2, value=b"z" * 30), 0)
    before = lg.segments
    for _ in range(6):
        lg.append_as_leader(batch(2, value=b"z" * 30), 0)
    assert len(before) == 1 and len(lg.segments) > 1 and lg.segments[0] is before[0]


def test_readers_never_fail_during_rolls_and_retention(make_log):
    lg = make_log(segment_bytes=2000, retention_bytes=6000, file_delete_delay_ms=60_000)
    errors, done = [], threading.Event()

    def reader():
        while not done.is_set():
            try:
                start = lg.log_start_offset
                if start < lg.log_end_offset:
                    views = read_views(lg, start, 4000)
                    assert views and views[0].last_offset >= start
            except KafkaError as exc:
                if exc.error_code != ErrorCode.OFFSET_OUT_OF_RANGE:
                    errors.append(exc)
                    return
                # the start moved between the two reads: allowed
            except Exception as exc:  # noqa: BLE001 - any other failure is the bug
                errors.append(exc)
                return

    t = threading.Thread(target=reader)
    t.start()
    for i in range(400):
        append_committed(lg, keyed([(b"k%d" % i, b"v" * 40)]))
        if i % 20 == 0:
            lg.delete_old_segments()
    done.set()
    t.join()
    assert errors == []
    assert lg.log_start_offset > 0


def test_roll_fsyncs_the_old_segment_in_the_background(make_log):
    lg = make_log(segment_bytes=300)
    for _ in range(4):
        lg.append_as_leader(batch(2, value=b"z" * 30), 0)
    new_base = lg.active_segment.base_offset
    assert new_base > 0
    deadline = time.monotonic() + 10
    while lg.recovery_point < new_base and time.monotonic() < deadline:
        time.sleep(0.005)
    assert lg.recovery_point == new_base          # the flush scheduled by the roll ran


def test_append_takes_frame_slices_and_read_only_bytes(make_log):
    """A writable slice of a request frame is rewritten in place; read-only bytes are copied first."""
    lg = make_log()
    frozen = bytes(batch(3))
    assert lg.append_as_leader(frozen, 3).last_offset == 2 and frozen == bytes(batch(3))
    one = batch(2, producer_id=4, producer_epoch=0, base_sequence=0)
    frame = bytearray(b"\xee" * 7) + one + bytearray(b"\xee" * 5)
    view = memoryview(frame)[7:7 + len(one)]
    assert lg.append_as_leader(view, 5).last_offset == 4
    assert frame[:7] == b"\xee" * 7 and frame[-5:] == b"\xee" * 5        # nothing outside the slice touched
    assert int.from_bytes(frame[7:15], "big") == 3 and int.from_bytes(frame[19:23], "big") == 5
    views = read_views(lg)
    assert [(v.base_offset, v.last_offset, v.partition_leader_epoch) for v in views] == [(0, 2, 3), (3, 4, 5)]
    assert all(v.crc_valid() for v in views)


def fallocate_supported(path) -> bool:
    fd = os.open(path + ".probe", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        return reserve_past_end(fd, 0, 1 << 20)
    finally:
        os.close(fd)
        os.unlink(path + ".probe")


def test_reserved_blocks_never_show_as_file_size_and_are_returned_on_roll_and_close(make_log):
    """Appends reserve blocks past the end of file (fallocate KEEP_SIZE): the file's size is always
    the log's, as in Kafka; rolling and closing give the unused blocks back, keeping the mtime."""
    lg = make_log(segment_bytes=64 * 1024 * 1024)
    for _ in range(50):
        lg.append_as_leader(batch(3, value=b"v" * 1000), 0)
    first = lg.active_segment
    st = os.stat(first.log_path)
    assert st.st_size == first.size
    assert st.st_blocks * 512 > first.size + st.st_blksize or not fallocate_supported(first.log_path)
    os.utime(first.log_path, ns=(st.st_atime_ns, 1_600_000_000_000_000_000))
    lg.roll()
    st = os.stat(first.log_path)
    assert st.st_size == first.size and st.st_blocks * 512 <= first.size + st.st_blksize
    assert st.st_mtime_ns == 1_600_000_000_000_000_000
    lg.append_as_leader(batch(1), 0)
    active = lg.active_segment
    assert os.path.getsize(active.log_path) == active.size
    lg.close()
    st = os.stat(active.log_path)
    assert st.st_size == active.size and st.st_blocks * 512 <= active.size + st.st_blksize


def test_a_segment_never_reserves_more_blocks_ahead_than_it_holds(make_log):
    """Many partitions with a few records each must not fill the disk with reserved blocks: a
    segment reserves at most as far ahead as it already holds (and 4 MiB at most)."""
    lg = make_log(segment_bytes=64 * 1024 * 1024)
    if not fallocate_supported(lg.active_segment.log_path):
        pytest.skip("no fallocate here")
    lg.append_as_leader(batch(1, value=b"v" * 100), 0)
    st = os.stat(lg.active_segment.log_path)
    assert st.st_blocks * 512 <= 2 * lg.active_segment.size + st.st_blksize
    for _ in range(200):
        lg.append_as_leader(batch(3, value=b"v" * 10_000), 0)
    size = lg.active_segment.size
    st = os.stat(lg.active_segment.log_path)
    assert size + st.st_blksize < st.st_blocks * 512 <= 2 * size + st.st_blksize    # reserved, but bounded
    lg.close()
