"""Retention by time, by size and by log start offset; delayed deletion of `.deleted` files."""

import os
import time

from kafka_compat.storage.fetch_data_info import FetchIsolation
from logtools import TS, append_committed, batch, read_records


def fill(lg, count, ts_step=1000, value=b"x" * 100):
    for i in range(count):
        append_committed(lg, batch(1, value=value, ts=TS + i * ts_step))


def files(lg):
    return sorted(os.listdir(lg.dir))


def test_retention_ms_by_largest_timestamp_of_each_segment(make_log, clock, scheduler):
    lg = make_log(segment_bytes=500, retention_ms=10_000, file_delete_delay_ms=60_000)
    fill(lg, 12)                                   # ~3 batches per segment, timestamps 1 s apart
    bases = [s.base_offset for s in lg.segments]
    largest = [s.largest_timestamp() for s in lg.segments]
    now = TS + 12_500
    expired = [b for b, ts in zip(bases, largest) if now - ts > 10_000]
    assert 0 < len(expired) < len(bases)
    assert lg.delete_old_segments(now) == len(expired)
    assert lg.segments[0].base_offset == bases[len(expired)]
    assert lg.log_start_offset == bases[len(expired)]
    assert read_records(lg)[0].offset == lg.log_start_offset
    deleted = [f for f in files(lg) if f.endswith(".deleted")]
    assert len(deleted) == 3 * len(expired)      # .log, .index, .timeindex renamed, not yet removed


def test_retention_ms_deletes_everything_by_rolling_first(make_log):
    lg = make_log(segment_bytes=500, retention_ms=1000)
    fill(lg, 6)
    end = lg.log_end_offset
    lg.delete_old_segments(TS + 10 ** 9)
    assert [s.base_offset for s in lg.segments] == [end]
    assert lg.log_start_offset == end and lg.log_end_offset == end
    assert lg.read(end, 1000, FetchIsolation.LOG_END, True).records.slices == []
    append_committed(lg, batch(1))
    assert read_records(lg)[0].offset == end


def test_retention_bytes_keeps_the_newest_segments_under_the_limit(make_log):
    lg = make_log(segment_bytes=500, retention_bytes=1200, retention_ms=-1)
    fill(lg, 20)
    sizes = [s.size for s in lg.segments]
    lg.delete_old_segments(TS)
    kept = [s.size for s in lg.segments]
    # Kafka deletes oldest segments while the overshoot still covers a whole segment
    overshoot = sum(sizes) - 1200
    dropped = 0
    while overshoot - sizes[dropped] >= 0:
        overshoot -= sizes[dropped]
        dropped += 1
    assert kept == sizes[dropped:]
    assert sum(kept) - kept[0] < 1200 <= sum(sizes[dropped - 1:])


def test_retention_never_passes_the_high_watermark(make_log):
    lg = make_log(segment_bytes=500, retention_ms=1000)
    fill(lg, 12)
    second = lg.segments[1].base_offset
    lg.update_high_watermark(second + 1)              # a follower lags: the second segment is not replicated
    assert lg.delete_old_segments(TS + 10 ** 9) == 1
    assert lg.log_start_offset == second
    lg.update_high_watermark(0)                       # nothing replicated (a fresh leader's view)
    assert lg.high_watermark == second                # never below the log start
    assert lg.delete_old_segments(TS + 10 ** 9) == 0


def test_log_start_offset_deletes_whole_segments_below_it(make_log):
    lg = make_log(segment_bytes=500, retention_ms=-1, cleanup_policy="compact")
    fill(lg, 12)
    third = lg.segments[2].base_offset
    lg.maybe_increment_log_start_offset(third + 1)
    assert lg.delete_old_segments(TS) == 2           # the segment holding the new start stays
    assert lg.segments[0].base_offset == third
    assert lg.log_start_offset == third + 1


def test_compact_only_topics_ignore_time_and_size_retention(make_log):
    lg = make_log(segment_bytes=500, retention_ms=1, retention_bytes=1, cleanup_policy="compact")
    fill(lg, 12)
    assert lg.delete_old_segments(TS + 10 ** 9) == 0


def test_deleted_files_wait_for_file_delete_delay(make_log, scheduler):
    lg = make_log(segment_bytes=500, retention_ms=1000, file_delete_delay_ms=600_000)
    fill(lg, 12)
    lg.delete_old_segments(TS + 10 ** 9)
    assert any(f.endswith(".deleted") for f in files(lg))
    scheduler.shutdown(run_pending=True)             # runs the delayed deletion now
    assert not any(f.endswith(".deleted") for f in files(lg))


def test_deleted_files_go_by_themselves(make_log):
    lg = make_log(segment_bytes=500, retention_ms=1000, file_delete_delay_ms=20)
    fill(lg, 12)
    lg.delete_old_segments(TS + 10 ** 9)
    deadline = time.monotonic() + 10
    while any(f.endswith(".deleted") for f in files(lg)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(f.endswith(".deleted") for f in files(lg))
