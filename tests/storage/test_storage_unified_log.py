"""UnifiedLog: the high watermark apart from the log end, reads bounded by isolation, follower
appends, truncation on divergence, the log start offset, the last stable offset."""

import pytest
from kafka_compat.storage.fetch_data_info import FetchIsolation
from kafka_compat.storage.leader_epoch_cache import EpochEntry
from kafka_compat.storage.local_log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from kafka_compat.storage.log_config import LogConfig
from kafka_compat.storage.log_offset_metadata import LogOffsetMetadata
from kafka_compat.storage.validator import COORDINATOR
from logtools import TS, append_committed, batch, keyed, read_bytes, read_views

from kafka_compat.protocol.errors import ErrorCode, KafkaError
from kafka_compat.protocol.records import ControlRecordType, batches, build_batch, build_control_batch

LOG_END, HIGH_WATERMARK, TXN_COMMITTED = FetchIsolation.LOG_END, FetchIsolation.HIGH_WATERMARK, \
    FetchIsolation.TXN_COMMITTED


def offsets(lg, isolation, start=0):
    return [r.offset for v in batches(read_bytes(lg, start, isolation=isolation)) for r in v.records()]


def error_of(fn, *args, **kwargs):
    with pytest.raises(KafkaError) as info:
        fn(*args, **kwargs)
    return info.value.error_code


def leader_batch(n, base_offset, epoch, ts=TS, **kwargs):
    """A batch as a leader wrote it: offsets and PartitionLeaderEpoch assigned."""
    return bytearray(build_batch([(b"k", b"v", (), ts)] * n, base_offset=base_offset,
                                 partition_leader_epoch=epoch, **kwargs))


# -- high watermark ----------------------------------------------------------------------------
def test_the_high_watermark_is_not_the_log_end(make_log):
    lg = make_log()
    lg.append_as_leader(batch(3), 0)
    lg.append_as_leader(batch(2), 0)
    assert (lg.high_watermark, lg.log_end_offset) == (0, 5)
    assert offsets(lg, HIGH_WATERMARK) == [] and offsets(lg, LOG_END) == [0, 1, 2, 3, 4]
    assert lg.update_high_watermark(3) == 3
    assert offsets(lg, HIGH_WATERMARK) == [0, 1, 2]
    assert lg.update_high_watermark(99) == 5                     # never past the log end
    assert lg.fetch_offset_snapshot().high_watermark == lg.log_end_offset_metadata
    assert lg.update_high_watermark(1) == 1                      # a follower may go down
    assert lg.update_high_watermark(-4) == 0


def test_maybe_increment_high_watermark_only_goes_up(make_log):
    lg = make_log(segment_bytes=300)
    lg.append_as_leader(batch(2, value=b"z" * 40), 0)
    leo = lg.log_end_offset_metadata
    assert lg.maybe_increment_high_watermark(leo) == LogOffsetMetadata(0)
    assert lg.maybe_increment_high_watermark(LogOffsetMetadata(1, 0, 0)) is None
    assert lg.high_watermark == 2
    with pytest.raises(ValueError):
        lg.maybe_increment_high_watermark(LogOffsetMetadata(3))
    rolled = lg.roll()
    # the same offset named in the new segment: taken (Kafka does this after a roll)
    assert lg.fetch_offset_snapshot().high_watermark == LogOffsetMetadata(2, rolled.base_offset, 0)
    assert lg.maybe_increment_high_watermark(LogOffsetMetadata(2, 0, 100)) is None


def test_a_roll_moves_the_high_watermarks_position_to_the_new_segment(make_log):
    lg = make_log(segment_bytes=300)
    for _ in range(4):
        append_committed(lg, batch(2, value=b"z" * 40))
    assert len(lg.segments) > 1
    snapshot = lg.fetch_offset_snapshot()
    assert snapshot.high_watermark == snapshot.log_end_offset
    assert snapshot.high_watermark.segment_base_offset == lg.active_segment.base_offset


def test_fetch_offset_snapshot_always_has_positions(make_log):
    lg = make_log(segment_bytes=300)
    for _ in range(6):
        lg.append_as_leader(batch(2, value=b"z" * 40), 0)
    lg.update_high_watermark(5)                                  # offset only: inside batch 4..5
    snapshot = lg.fetch_offset_snapshot()
    segment = lg.segment_for(5)
    assert snapshot.high_watermark == LogOffsetMetadata(5, segment.base_offset, segment.translate_offset(5).position)
    assert snapshot.last_stable_offset == snapshot.high_watermark
    assert snapshot.log_end_offset == LogOffsetMetadata(12, lg.active_segment.base_offset, lg.active_segment.size)
    assert snapshot.log_start_offset == 0
    assert not any(m.message_offset_only for m in snapshot[1:])


def test_reads_start_where_they_say(make_log):
    lg = make_log(segment_bytes=300)
    for _ in range(6):
        append_committed(lg, batch(2, value=b"z" * 40))
    info = lg.read(7, 1 << 20, HIGH_WATERMARK, True)
    segment = lg.segment_for(7)
    assert info.fetch_offset_metadata == LogOffsetMetadata(7, segment.base_offset, segment.translate_offset(7).position)
    assert info.aborted_transactions is None
    at_end = lg.read(12, 1 << 20, HIGH_WATERMARK, True)          # nothing past the high watermark yet
    assert at_end.records.slices == [] and at_end.fetch_offset_metadata == lg.log_end_offset_metadata
    with pytest.raises(KafkaError) as exc:
        lg.read(13, 100, LOG_END, True)
    assert exc.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


# -- follower appends ---------------------------------------------------------------------------
def test_a_follower_keeps_the_leaders_offsets_and_epochs(make_log):
    leader, follower = make_log("l-0"), make_log("f-0")
    append_committed(leader, batch(3), 4)
    append_committed(leader, batch(2), 4)
    append_committed(leader, batch(1), 6)
    info = follower.append_as_follower(read_bytes(leader, 0))
    assert (info.first_offset, info.last_offset, info.leader_epoch, info.duplicate) == (0, 5, 6, False)
    assert read_bytes(follower, 0) == read_bytes(leader, 0)
    assert follower.leader_epoch_cache.entries == [EpochEntry(4, 0), EpochEntry(6, 5)]
    assert follower.high_watermark == 0                          # the leader says when to move it
    assert follower.end_offset_for_epoch(4) == leader.end_offset_for_epoch(4) == (4, 5)


def test_a_follower_refuses_bad_batches_and_writes_nothing(make_log):
    lg = make_log()
    lg.append_as_follower(leader_batch(3, 0, 1))
    corrupt = leader_batch(2, 3, 1)
    corrupt[-1] ^= 0x01
    assert error_of(lg.append_as_follower, corrupt) == ErrorCode.CORRUPT_MESSAGE
    assert error_of(lg.append_as_follower, leader_batch(2, 1, 1)) == ErrorCode.UNKNOWN_SERVER_ERROR   # below LEO
    backwards = leader_batch(2, 5, 1) + leader_batch(2, 3, 1)
    assert error_of(lg.append_as_follower, backwards) == ErrorCode.UNKNOWN_SERVER_ERROR
    assert lg.log_end_offset == 3 and lg.active_segment.size == len(leader_batch(3, 0, 1))
    info = lg.append_as_follower(leader_batch(2, 10, 2))         # a compacted leader's gap is fine
    assert (info.first_offset, lg.log_end_offset) == (10, 12)
    assert lg.leader_epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(2, 10)]


def test_truncation_after_divergence(make_log):
    """The follower wrote epoch 2 at 10..14 that the new leader (epoch 3 from 10) never had."""
    leader, follower = make_log("l-0"), make_log("f-0")
    for lg in (leader, follower):
        lg.append_as_follower(leader_batch(10, 0, 1))
    follower.append_as_follower(leader_batch(5, 10, 2))
    leader.maybe_assign_epoch_start_offset(3, 10)
    append_committed(leader, batch(4), 3)
    # the follower asks the leader where its latest epoch ends (OffsetForLeaderEpoch)
    epoch, end = leader.end_offset_for_epoch(follower.latest_epoch)
    assert (epoch, end) == (1, 10)
    assert follower.end_offset_for_epoch(epoch) == (1, 10)
    assert follower.truncate_to(min(end, follower.log_end_offset))
    assert follower.log_end_offset == 10 and follower.latest_epoch == 1
    assert follower.leader_epoch_cache.entries == [EpochEntry(1, 0)]
    follower.append_as_follower(read_bytes(leader, 10))
    assert read_bytes(follower, 0) == read_bytes(leader, 0)
    assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries == [EpochEntry(1, 0),
                                                                                       EpochEntry(3, 10)]


def test_truncate_to_the_end_still_drops_an_epoch_without_data(make_log):
    lg = make_log()
    append_committed(lg, batch(2), 1)
    lg.maybe_assign_epoch_start_offset(5, 2)        # a leader that never got to write
    assert not lg.truncate_to(2)
    assert lg.leader_epoch_cache.entries == [EpochEntry(1, 0)]


def test_truncate_fully_and_start_at(make_log):
    lg = make_log()
    append_committed(lg, batch(5), 2)
    lg.truncate_fully_and_start_at(100)
    assert (lg.log_start_offset, lg.log_end_offset, lg.high_watermark) == (100, 100, 100)
    assert lg.leader_epoch_cache.entries == []
    assert append_committed(lg, batch(1), 3).first_offset == 100


# -- log start offset ----------------------------------------------------------------------------
def test_the_log_start_never_passes_the_high_watermark(make_log):
    lg = make_log(segment_bytes=300)
    for epoch in (1, 1, 2, 2, 3):
        lg.append_as_leader(batch(2, value=b"z" * 40), epoch)
    lg.update_high_watermark(6)
    assert error_of(lg.maybe_increment_log_start_offset, 7) == ErrorCode.OFFSET_OUT_OF_RANGE
    assert lg.log_start_offset == 0
    assert lg.maybe_increment_log_start_offset(5)
    assert not lg.maybe_increment_log_start_offset(3)
    assert lg.log_start_offset == 5
    assert lg.leader_epoch_cache.entries == [EpochEntry(2, 5), EpochEntry(3, 8)]
    assert lg.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == (-1, 5, 2)
    assert lg.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == (-1, 10, 3)
    assert lg.fetch_offset_by_timestamp(LATEST_TIMESTAMP, HIGH_WATERMARK) == (-1, 6, 3)
    with pytest.raises(KafkaError):
        lg.read(4, 100, LOG_END, True)


# -- transactions and the last stable offset ------------------------------------------------------
def txn(n, pid, seq=0, epoch=0, ts=TS):
    return bytearray(build_batch([(b"t%d" % pid, b"%d" % i, (), ts) for i in range(n)], producer_id=pid,
                                 producer_epoch=epoch, base_sequence=seq, is_transactional=True))


def end_txn(kind, pid, epoch=0):
    return bytearray(build_control_batch(kind, producer_id=pid, producer_epoch=epoch, coordinator_epoch=1,
                                         timestamp=TS))


def test_the_last_stable_offset_waits_for_markers_and_the_high_watermark(make_log):
    lg = make_log()
    append_committed(lg, batch(2))                                   # 0..1
    append_committed(lg, txn(2, pid=1))                              # 2..3, open
    append_committed(lg, txn(2, pid=2))                              # 4..5, open
    assert lg.last_stable_offset == 2
    lg.append_as_leader(end_txn(ControlRecordType.COMMIT, 1), 0, COORDINATOR)   # marker at 6
    assert lg.high_watermark == 6 and lg.last_stable_offset == 2     # the marker is not replicated yet
    lg.update_high_watermark(7)
    assert lg.last_stable_offset == 4                                # producer 2 is still open
    assert offsets(lg, TXN_COMMITTED) == [0, 1, 2, 3]
    append_committed(lg, end_txn(ControlRecordType.ABORT, 2), origin=COORDINATOR)
    assert lg.last_stable_offset == lg.high_watermark == 8
    assert offsets(lg, TXN_COMMITTED) == list(range(8))             # markers and aborted data are returned
    snapshot = lg.fetch_offset_snapshot()
    assert snapshot.last_stable_offset == snapshot.high_watermark


def test_read_committed_reads_get_the_aborted_transactions_they_overlap(make_log):
    lg = make_log(segment_bytes=100_000, index_interval_bytes=1)
    append_committed(lg, txn(2, pid=1))                              # 0..1 aborted later
    append_committed(lg, txn(2, pid=2))                              # 2..3 committed
    append_committed(lg, end_txn(ControlRecordType.ABORT, 1), origin=COORDINATOR)    # 4
    append_committed(lg, end_txn(ControlRecordType.COMMIT, 2), origin=COORDINATOR)   # 5
    append_committed(lg, txn(1, pid=3))                              # 6 aborted later
    append_committed(lg, end_txn(ControlRecordType.ABORT, 3), origin=COORDINATOR)    # 7
    append_committed(lg, batch(1))                                   # 8
    everything = lg.read(0, 1 << 20, TXN_COMMITTED, True)
    assert [(t.producer_id, t.first_offset) for t in everything.aborted_transactions] == [(1, 0), (3, 6)]
    tail = lg.read(8, 1 << 20, TXN_COMMITTED, True)
    assert tail.aborted_transactions == []
    assert lg.read(0, 1 << 20, HIGH_WATERMARK, True).aborted_transactions is None
    one_batch = lg.read(0, 1, TXN_COMMITTED, True)                   # just the first batch
    assert [t.producer_id for t in one_batch.aborted_transactions] == [1]
    assert visible_to_read_committed(read_bytes(lg, 0, isolation=TXN_COMMITTED),
                                     everything.aborted_transactions) == [2, 3, 8]


def visible_to_read_committed(data, aborted):
    """What a read_committed consumer keeps (the Java client's CompletedFetch rules)."""
    pending = sorted(aborted, key=lambda t: t.first_offset)
    aborted_pids, kept = set(), []
    for view in batches(data):
        while pending and pending[0].first_offset <= view.last_offset:
            aborted_pids.add(pending.pop(0).producer_id)
        if view.is_control:
            aborted_pids.discard(view.producer_id)
            continue
        if view.is_transactional and view.producer_id in aborted_pids:
            continue
        kept += [r.offset for r in view.records()]
    return kept


def test_compaction_stops_at_the_last_stable_offset(make_log, clock):
    from kafka_compat.storage.cleaner import Cleaner
    lg = make_log(cleanup_policy="compact", segment_bytes=400)
    for i in range(6):
        append_committed(lg, keyed([(b"k", b"%d" % i + b"x" * 60)]))
    append_committed(lg, txn(1, pid=9))                              # an open transaction
    for i in range(6):
        append_committed(lg, keyed([(b"k", b"later%d" % i + b"x" * 60)]))
    open_at = lg.last_stable_offset
    assert open_at == 6 and len(lg.segments) > 3
    end, _ = Cleaner(clock).clean(lg, 0, lg.active_segment.base_offset)
    assert end <= open_at
    kept = [r.offset for v in read_views(lg) for r in v.records()]
    assert [o for o in kept if o >= open_at] == list(range(open_at, lg.log_end_offset))


def test_compaction_keeps_markers_aborted_transaction_indexes_and_committed_values(make_log, clock):
    from kafka_compat.storage.cleaner import Cleaner
    lg = make_log(cleanup_policy="compact", segment_bytes=500)
    append_committed(lg, keyed([(b"k", b"committed")]))                      # 0
    aborted = bytearray(build_batch([(b"k", b"aborted", (), TS)], producer_id=4, producer_epoch=0,
                                    base_sequence=0, is_transactional=True))
    append_committed(lg, aborted)                                            # 1
    append_committed(lg, end_txn(ControlRecordType.ABORT, 4), origin=COORDINATOR)   # 2
    for i in range(8):
        append_committed(lg, keyed([(b"f%d" % i, b"x" * 80)]))
    marker_segment = lg.segment_for(2)
    assert [t.first_offset for t in marker_segment.txn_index.all_aborted_txns()] == [1]
    Cleaner(clock).clean(lg, 0, lg.active_segment.base_offset)
    views = read_views(lg)
    assert any(v.is_control for v in views)
    assert [t.first_offset for t in lg.segment_for(2).txn_index.all_aborted_txns()] == [1]
    records = {r.offset: bytes(r.value) for v in views if not v.is_control for r in v.records()}
    assert records[0] == b"committed"                  # the aborted value did not shadow it
    info = lg.read(0, 1 << 20, TXN_COMMITTED, True)
    assert [(t.producer_id, t.first_offset) for t in info.aborted_transactions] == [(4, 1)]


def test_kafka_4_future_bound_is_checked_on_the_batch_header(make_log):
    """message.timestamp.after.max.ms defaults to one hour (Kafka 4). A batch's max timestamp past it is
    refused on the header-only append path too; within it, the append takes that path unchanged."""
    lg = make_log(config=LogConfig())
    assert lg.config.message_timestamp_after_max_ms == 3_600_000 and not lg.config.reads_records
    assert lg.append_as_leader(batch(2, ts=TS + 3_600_000), 0).first_offset == 0
    with pytest.raises(KafkaError) as e:
        lg.append_as_leader(batch(1, ts=TS + 3_600_001), 0)
    assert e.value.error_code == ErrorCode.INVALID_TIMESTAMP and e.value.record_errors[0][0] == 0
    assert lg.log_end_offset == 2
