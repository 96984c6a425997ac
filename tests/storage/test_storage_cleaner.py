"""Log compaction: newest record per key, offsets kept, dirty ratio, compaction lag, tombstones,
idempotent producers' empty batches, checkpoint, and appends/reads running during cleaning."""

import os
import threading
import time

from kafka_compat.storage import checkpoint
from kafka_compat.storage.cleaner import Cleaner, LogCleaner, cleanable_range, dirty_ratio
from logtools import TS, append_committed, assert_consistent, keyed, read_records, read_views

from kafka_compat.protocol.compression import GZIP
from kafka_compat.protocol.records import RecordBatch, batches, build_legacy_message_set

COMPACT = dict(cleanup_policy="compact", segment_bytes=1200, file_delete_delay_ms=0)


def clean(lg, clock, upper_bound=None):
    first_dirty, uncleanable = cleanable_range(lg, None, clock(), upper_bound)
    return Cleaner(clock).clean(lg, first_dirty, uncleanable)


def latest_by_key(records):
    latest = {}
    for r in records:
        latest[bytes(r.key)] = (r.offset, None if r.value is None else bytes(r.value))
    return latest


def test_keeps_the_newest_record_per_key_at_its_offset(make_log, clock):
    lg = make_log(**COMPACT)
    for round_no in range(30):
        append_committed(lg, keyed([(b"k%d" % i, b"v%d-%d" % (round_no, i)) for i in range(5)], ts=TS + round_no))
    append_committed(lg, keyed([(b"k0", b"newest")]))
    assert len(lg.segments) > 3
    before = read_records(lg)
    expected = latest_by_key(before)
    active_base = lg.active_segment.base_offset
    end, stats = clean(lg, clock)
    assert end == active_base
    after = read_records(lg)
    assert latest_by_key(after) == expected
    cleaned = [r for r in after if r.offset < active_base]
    keys = [bytes(r.key) for r in cleaned]
    assert len(keys) == len(set(keys))                          # one record per key below the head
    assert [r.offset for r in after if r.offset >= active_base] == \
        [r.offset for r in before if r.offset >= active_base]   # the active segment is untouched
    assert stats.records_read > stats.records_retained
    assert lg.log_end_offset == 151
    assert_consistent(lg, contiguous=False)


def test_untouched_batches_are_copied_byte_for_byte(make_log, clock):
    lg = make_log(**COMPACT)
    append_committed(lg, keyed([(b"only-once", b"x")]))
    for i in range(12):
        append_committed(lg, keyed([(b"dup", b"%d" % i)]))
    original = read_views(lg)[0]
    raw = bytes(original.buffer[original.position:original.position + original.size])
    clean(lg, clock)
    first = read_views(lg)[0]
    assert bytes(first.buffer[first.position:first.position + first.size]) == raw


def test_compressed_batches_stay_compressed(make_log, clock):
    lg = make_log(**COMPACT)
    for i in range(10):
        append_committed(lg, keyed([(b"a", b"%d" % i), (b"b%d" % i, b"x" * 50)], compression=GZIP))
    clean(lg, clock)
    views = read_views(lg)
    assert all(v.compression == GZIP for v in views if v.records_count)
    assert latest_by_key(read_records(lg))[b"a"] == (18, b"9")


def test_min_cleanable_dirty_ratio(make_log, clock, tmp_path):
    lg = make_log(**dict(COMPACT, min_cleanable_dirty_ratio=0.9))
    for i in range(20):
        append_committed(lg, keyed([(b"k%d" % (i % 3), b"v" * 60)]))
    cleaner = LogCleaner(lambda: {str(tmp_path): [lg]}, clock)
    first_dirty, uncleanable = cleanable_range(lg, None, clock())
    ratio, _ = dirty_ratio(lg, first_dirty, uncleanable)
    assert ratio == 1.0                                   # nothing cleaned yet
    assert cleaner.clean_once()                           # 1.0 > 0.9
    saved = checkpoint.read_offsets(os.path.join(tmp_path, checkpoint.CLEANER_OFFSET_CHECKPOINT))
    assert saved == {("t", 0): lg.active_segment.base_offset}
    append_committed(lg, keyed([(b"k1", b"w")]))
    assert not cleaner.clean_once()                       # the new data is only in the active segment
    segments = len(lg.segments)
    while len(lg.segments) == segments:                  # fill the active segment until it rolls
        append_committed(lg, keyed([(b"k2", b"v" * 60)]))
    first_dirty, uncleanable = cleanable_range(lg, saved[("t", 0)], clock())
    ratio, dirty = dirty_ratio(lg, first_dirty, uncleanable)
    assert dirty > 0 and ratio < 0.9
    assert not cleaner.clean_once()                       # dirty, but below the ratio


def test_min_compaction_lag_protects_recent_segments(make_log, clock):
    lg = make_log(**dict(COMPACT, min_compaction_lag_ms=60_000))
    clock.ms = TS + 100_000
    for i in range(60):
        ts = TS if i < 30 else TS + 90_000                # the second half is only 10 s old
        append_committed(lg, keyed([(b"k", b"%d" % i + b"x" * 60)], ts=ts))
    first_dirty, uncleanable = cleanable_range(lg, None, clock())
    recent = [s for s in lg.segments if s.largest_timestamp() > clock() - 60_000]
    assert uncleanable == recent[0].base_offset
    assert 0 < uncleanable < lg.active_segment.base_offset
    clean(lg, clock)
    offsets = [r.offset for r in read_records(lg)]
    assert offsets[0] == uncleanable - 1                  # one survivor of the old enough part
    assert offsets[1:] == list(range(uncleanable, 60))    # nothing younger than the lag was touched


def test_tombstones_kept_until_delete_retention_passes(make_log, clock):
    lg = make_log(**dict(COMPACT, delete_retention_ms=1000))
    for i in range(6):
        append_committed(lg, keyed([(b"gone", b"%d" % i), (b"stay", b"%d" % i)]))
    append_committed(lg, keyed([(b"gone", None)]))
    for i in range(10):
        append_committed(lg, keyed([(b"filler%d" % i, b"x" * 60)]))
    clean(lg, clock)
    by_key = latest_by_key(read_records(lg))
    assert by_key[b"gone"] == (12, None)                  # the tombstone survives the first pass
    tomb = [v for v in read_views(lg) if v.base_offset <= 12 <= v.last_offset][0]
    assert isinstance(tomb, RecordBatch) and tomb.delete_horizon_ms == clock() + 1000
    assert [r.offset for r in read_records(lg) if bytes(r.key) == b"gone"] == [12]
    clock.advance(1001)
    for i in range(10):                                   # more dirty data to trigger a round
        append_committed(lg, keyed([(b"filler%d" % i, b"y" * 60)]))
    first_dirty = lg.active_segment.base_offset
    end, _ = Cleaner(clock).clean(lg, 0, lg.active_segment.base_offset)
    assert end >= first_dirty - 1
    assert b"gone" not in latest_by_key(read_records(lg))
    assert latest_by_key(read_records(lg))[b"stay"][1] == b"5"


def test_idempotent_producer_batches_survive_as_empty_batches(make_log, clock):
    lg = make_log(**COMPACT)
    append_committed(lg, keyed([(b"k", b"old")], producer_id=77, producer_epoch=2, base_sequence=0))
    append_committed(lg, keyed([(b"k", b"plain-old")]))
    for i in range(30):
        append_committed(lg, keyed([(b"k", b"%d" % i + b"x" * 60)]))
    assert len(lg.segments) > 2
    clean(lg, clock)
    first = read_views(lg)[0]
    assert (first.base_offset, first.last_offset, first.records_count) == (0, 0, 0)
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (77, 2, 0)
    assert first.crc_valid()
    assert 1 not in [v.base_offset for v in read_views(lg)]   # a plain batch emptied is dropped


def test_legacy_messages_are_compacted_too(make_log, clock):
    lg = make_log(**COMPACT)
    for i in range(40):
        append_committed(lg, bytearray(build_legacy_message_set([(b"a", b"%d" % i), (b"b%d" % i, os.urandom(40))],
                                                                magic=1, compression=GZIP, timestamp_type=0)))
    assert len(lg.segments) > 2
    head = lg.active_segment.base_offset
    clean(lg, clock)
    records = read_records(lg)
    assert latest_by_key(records)[b"a"] == (78, b"39")
    assert [bytes(r.key) for r in records if r.offset < head].count(b"a") == 1
    assert {bytes(r.key) for r in records} == {b"a"} | {b"b%d" % i for i in range(40)}
    assert_consistent(lg, contiguous=False)


def test_appends_and_reads_continue_while_the_cleaner_runs(make_log, clock, tmp_path):
    lg = make_log(**dict(COMPACT, segment_bytes=3000, min_cleanable_dirty_ratio=0.01))
    cleaner = LogCleaner(lambda: {str(tmp_path): [lg]}, clock, backoff_ms=1)
    cleaner.start()
    errors = []
    try:
        for i in range(1500):
            append_committed(lg, keyed([(b"k%d" % (i % 20), b"%d" % i)]))
            if i % 50 == 0:
                try:
                    read_records(lg, lg.log_start_offset)
                except Exception as exc:  # noqa: BLE001 - a failing read is the bug
                    errors.append(exc)
    finally:
        cleaner.shutdown()
    assert errors == []
    latest = latest_by_key(read_records(lg))
    assert latest == {b"k%d" % k: (i, b"%d" % i) for i in range(1480, 1500) for k in [i % 20]}
    assert len(read_records(lg)) < 1500                  # it did compact meanwhile
    assert_consistent(lg, contiguous=False)


def test_compact_and_delete_applies_both(make_log, clock):
    lg = make_log(**dict(COMPACT, cleanup_policy="compact,delete", retention_ms=1000))
    for i in range(20):
        append_committed(lg, keyed([(b"k%d" % (i % 4), b"v" * 60)], ts=TS + i))
    clean(lg, clock)
    kept_before = len(read_records(lg))
    # a cleaned segment left without records has no timestamp: retention falls back to its
    # file's modification time (wall clock), as Kafka's largestTimestamp does
    far_future = time.time_ns() // 1_000_000 + 10 ** 9
    assert lg.delete_old_segments(far_future) > 0
    assert len(read_records(lg)) < kept_before


def test_cleaner_thread_shutdown_is_prompt(tmp_path, clock):
    cleaner = LogCleaner(lambda: {}, clock, backoff_ms=60_000)
    cleaner.start()
    t = threading.Thread(target=cleaner.shutdown)
    t.start()
    t.join(10)
    assert not t.is_alive()


def _marker(control_type, producer_id, epoch=0):
    from kafka_compat.protocol.records import build_control_batch
    return bytearray(build_control_batch(control_type, producer_id=producer_id, producer_epoch=epoch,
                                         timestamp=TS))


def test_aborted_data_goes_and_markers_follow_only_after_their_transaction_and_delete_retention(make_log, clock):
    from kafka_compat.storage.fetch_data_info import FetchIsolation
    from kafka_compat.storage.validator import COORDINATOR

    from kafka_compat.protocol.records import ControlRecordType
    lg = make_log(**dict(COMPACT, delete_retention_ms=1000))
    append_committed(lg, keyed([(b"a", b"aborted"), (b"b", b"aborted")], producer_id=1, producer_epoch=0,
                               base_sequence=0, is_transactional=True))                          # 0-1
    append_committed(lg, _marker(ControlRecordType.ABORT, 1), origin=COORDINATOR)                # 2
    append_committed(lg, keyed([(b"a", b"committed")], producer_id=2, producer_epoch=0, base_sequence=0,
                               is_transactional=True))                                          # 3
    append_committed(lg, _marker(ControlRecordType.COMMIT, 2), origin=COORDINATOR)               # 4
    for i in range(12):
        append_committed(lg, keyed([(b"filler%d" % i, b"x" * 60)]))
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in lg.collect_aborted_transactions(0, 5)] == \
        [(1, 0, 2)]

    def offsets_of(producer_id):
        return [(v.base_offset, v.is_control, v.records_count) for v in read_views(lg) if v.producer_id == producer_id]

    clean(lg, clock)
    # the aborted records are gone; both markers stay (their transactions had data in this pass), and so
    # does the aborted transaction in the cleaned segment's index, for readers of the kept marker
    assert offsets_of(1) == [(2, True, 1)]
    assert offsets_of(2) == [(3, False, 1), (4, True, 1)]
    assert [(t.producer_id, t.first_offset) for t in lg.collect_aborted_transactions(0, 5)] == [(1, 0)]
    committed = lg.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED, True)
    assert [bytes(r.value) for v in batches(committed.records.read_bytes()) if not v.is_control
            for r in v.records() if bytes(r.key) == b"a"] == [b"committed"]

    clock.advance(10)
    for i in range(12):
        append_committed(lg, keyed([(b"filler%d" % i, b"y" * 60)]))
    Cleaner(clock).clean(lg, 0, lg.active_segment.base_offset)
    # nothing of the aborted transaction is left: its marker gets a delete horizon (kept until it passes)
    abort = [v for v in read_views(lg) if v.producer_id == 1][0]
    assert abort.is_control and abort.delete_horizon_ms == clock() + 1000
    assert lg.collect_aborted_transactions(0, 5) == []

    clock.advance(1001)
    for i in range(12):
        append_committed(lg, keyed([(b"filler%d" % i, b"z" * 60)]))
    Cleaner(clock).clean(lg, 0, lg.active_segment.base_offset)
    # past the horizon the ABORT marker goes, but as producer 1's last batch its header stays, emptied
    assert offsets_of(1) == [(2, True, 0)]
    assert latest_by_key(read_records(lg))[b"a"] == (3, b"committed")
    assert_consistent(lg, contiguous=False)
