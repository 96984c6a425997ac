"""Producer state: idempotent retries, fenced epochs and sequence gaps, transactions opened and
closed by markers, Kafka's snapshot files (read here by an independent `construct` reader),
recovery from snapshots after clean and unclean closes, and expiry."""

import os
import time

import crc32c
import pytest
from construct import Int16sb, Int32sb, Int32ub, Int64sb, PrefixedArray, Struct
from kafka_compat.storage import unified_log
from kafka_compat.storage.log_config import LogConfig
from kafka_compat.storage.log_manager import LogManager
from kafka_compat.storage.log_offset_metadata import LogOffsetMetadata
from kafka_compat.storage.producer_state import (
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateManager,
    read_snapshot,
    snapshot_path,
    write_snapshot,
)
from kafka_compat.storage.validator import COORDINATOR, REPLICATION
from logtools import TS, append_committed, batch

from kafka_compat.protocol.errors import ErrorCode, KafkaError
from kafka_compat.protocol.records import ControlRecordType, build_batch, build_control_batch

SnapshotFile = Struct(
    "version" / Int16sb,
    "crc" / Int32ub,
    "entries" / PrefixedArray(Int32sb, Struct(
        "producer_id" / Int64sb,
        "epoch" / Int16sb,
        "last_sequence" / Int32sb,
        "last_offset" / Int64sb,
        "offset_delta" / Int32sb,
        "timestamp" / Int64sb,
        "coordinator_epoch" / Int32sb,
        "current_txn_first_offset" / Int64sb,
    )),
)


def parse_snapshot(path):
    with open(path, "rb") as f:
        data = f.read()
    parsed = SnapshotFile.parse(data)
    assert parsed.version == 1
    assert parsed.crc == crc32c.crc32c(data[6:])
    assert len(data) == 10 + 46 * len(parsed.entries)
    return {e.producer_id: (e.epoch, e.last_sequence, e.last_offset, e.offset_delta, e.timestamp,
                            e.coordinator_epoch, e.current_txn_first_offset) for e in parsed.entries}


def idem(n, pid=7, epoch=0, seq=0, ts=TS, txn=False, value=b"v"):
    return bytearray(build_batch([(b"k", value, (), ts)] * n, producer_id=pid, producer_epoch=epoch,
                                 base_sequence=seq, is_transactional=txn))


def marker(kind, pid=7, epoch=0, coordinator_epoch=0, ts=TS):
    return bytearray(build_control_batch(kind, producer_id=pid, producer_epoch=epoch,
                                         coordinator_epoch=coordinator_epoch, timestamp=ts))


def error_of(fn, *args, **kwargs):
    with pytest.raises(KafkaError) as info:
        fn(*args, **kwargs)
    return info.value.error_code


def snapshots(lg):
    return sorted(int(n[:20]) for n in os.listdir(lg.dir) if n.endswith(".snapshot"))


# -- idempotence ------------------------------------------------------------------------------
def test_a_retry_is_answered_with_its_original_offsets_and_nothing_is_written(make_log):
    lg = make_log()
    append_committed(lg, batch(3))                       # another writer first: offsets 0..2
    first = append_committed(lg, idem(5, seq=0))
    second = append_committed(lg, idem(5, seq=5))
    size, end = lg.active_segment.size, lg.log_end_offset
    retry = lg.append_as_leader(idem(5, seq=0, ts=TS + 99), 0)
    assert (retry.first_offset, retry.last_offset, retry.duplicate) == (3, 7, True)
    assert retry.log_append_time == TS                   # Kafka answers with the batch's timestamp
    assert (first.duplicate, second.duplicate) == (False, False)
    assert (lg.active_segment.size, lg.log_end_offset) == (size, end)
    retry = lg.append_as_leader(idem(5, seq=5), 0)
    assert (retry.first_offset, retry.last_offset, retry.duplicate) == (8, 12, True)
    assert append_committed(lg, idem(5, seq=10)).first_offset == 13


def test_only_the_last_five_batches_are_remembered(make_log):
    lg = make_log()
    for i in range(6):
        append_committed(lg, idem(2, seq=2 * i))
    assert lg.append_as_leader(idem(2, seq=2), 0).duplicate          # the second of six: still kept
    assert error_of(lg.append_as_leader, idem(2, seq=0), 0) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    entry = lg.producer_state_manager.producers[7]
    assert [b.first_seq for b in entry.batches] == [2, 4, 6, 8, 10]


def test_gaps_fenced_epochs_and_a_new_epoch_not_at_zero_are_refused(make_log):
    lg = make_log()
    append_committed(lg, idem(5, epoch=3, seq=0))
    end = lg.log_end_offset
    assert error_of(lg.append_as_leader, idem(1, epoch=3, seq=6), 0) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert error_of(lg.append_as_leader, idem(1, epoch=2, seq=5), 0) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert error_of(lg.append_as_leader, idem(1, epoch=4, seq=3), 0) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert lg.log_end_offset == end and lg.active_segment.size == len(idem(5))
    assert append_committed(lg, idem(1, epoch=4, seq=0)).first_offset == end     # a new epoch at 0
    assert error_of(lg.append_as_leader, idem(1, epoch=3, seq=5), 0) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_sequences_wrap_from_int32_max_to_zero(make_log):
    lg = make_log()
    append_committed(lg, idem(2, seq=2 ** 31 - 2))
    assert append_committed(lg, idem(3, seq=0)).first_offset == 2
    assert lg.append_as_leader(idem(3, seq=0), 0).duplicate


def test_the_general_path_applies_the_same_rules(make_log):
    """A compacted topic sends appends through the validator: the checks must be the same."""
    lg = make_log(cleanup_policy="compact")
    append_committed(lg, idem(2, seq=0))
    assert lg.append_as_leader(idem(2, seq=0), 0).duplicate
    assert error_of(lg.append_as_leader, idem(1, seq=9), 0) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert append_committed(lg, idem(1, seq=2)).first_offset == 2


# -- transactions -------------------------------------------------------------------------------
def test_a_transaction_is_opened_by_data_and_closed_by_a_marker(make_log):
    lg = make_log()
    append_committed(lg, batch(2))
    append_committed(lg, idem(3, txn=True))                     # offsets 2..4: the transaction begins at 2
    append_committed(lg, idem(2, seq=3, txn=True))
    psm = lg.producer_state_manager
    assert psm.producers[7].current_txn_first_offset == 2
    assert lg.last_stable_offset == 2
    assert error_of(lg.append_as_leader, idem(1, seq=5), 0) == ErrorCode.INVALID_TXN_STATE
    append_committed(lg, marker(ControlRecordType.COMMIT, coordinator_epoch=4), origin=COORDINATOR)
    assert psm.producers[7].current_txn_first_offset == -1
    assert psm.producers[7].coordinator_epoch == 4
    assert lg.last_stable_offset == lg.high_watermark == 8
    assert append_committed(lg, idem(1, seq=5)).first_offset == 8   # after the commit a plain write is fine


def test_fenced_markers(make_log):
    lg = make_log()
    append_committed(lg, idem(1, epoch=2, txn=True))
    end = lg.log_end_offset
    assert error_of(lg.append_as_leader, marker(ControlRecordType.ABORT, epoch=1), 0,
                    origin=COORDINATOR) == ErrorCode.INVALID_PRODUCER_EPOCH
    append_committed(lg, marker(ControlRecordType.ABORT, epoch=2, coordinator_epoch=5), origin=COORDINATOR)
    append_committed(lg, idem(1, epoch=2, seq=1, txn=True))
    end = lg.log_end_offset
    assert error_of(lg.append_as_leader, marker(ControlRecordType.COMMIT, epoch=2, coordinator_epoch=4), 0,
                    origin=COORDINATOR) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert lg.log_end_offset == end
    assert lg.last_stable_offset == end - 1                       # still open


def test_a_marker_without_an_open_transaction_changes_nothing_but_is_written(make_log):
    lg = make_log()
    append_committed(lg, idem(2))
    info = append_committed(lg, marker(ControlRecordType.ABORT), origin=COORDINATOR)
    assert info.first_offset == 2 and lg.last_stable_offset == 3
    assert all(not seg.txn_index.exists for seg in lg.segments)


def test_clients_cannot_write_markers(make_log):
    lg = make_log()
    assert error_of(lg.append_as_leader, marker(ControlRecordType.COMMIT), 0) == ErrorCode.INVALID_RECORD


def test_replication_is_lenient_where_clients_are_refused(make_log):
    leader, follower = make_log("a-0"), make_log("b-0")
    append_committed(leader, idem(2, epoch=5))
    append_committed(leader, idem(2, epoch=5, seq=2))
    follower.append_as_follower(read_range(leader, 0))
    stale = bytearray(build_batch([(b"k", b"v", (), TS)], producer_id=7, producer_epoch=4, base_sequence=40,
                                  base_offset=4, partition_leader_epoch=0))
    info = follower.append_as_follower(stale)                   # a lower epoch and a gap: logged, kept
    assert (info.first_offset, info.last_offset) == (4, 4)
    assert follower.producer_state_manager.producers[7].producer_epoch == 4


def read_range(lg, start):
    from kafka_compat.storage.fetch_data_info import FetchIsolation
    return lg.read(start, 1 << 30, FetchIsolation.LOG_END, True).records.read_bytes()


def test_the_manager_alone_checks_epochs_sequences_and_markers(tmp_path):
    psm = ProducerStateManager(str(tmp_path))
    assert psm.check_client_batch(7, 0, 0, 4, False, 0) is None          # unknown producer: any start
    psm.update_client_batch(7, 0, 4, 0, 4, TS)
    assert psm.check_client_batch(7, 0, 5, 1, False, 5) is None          # in sequence
    assert psm.check_client_batch(7, 0, 0, 4, False, 5) == BatchMetadata(4, 4, 4, TS)   # a retry
    assert error_of(psm.check_client_batch, 7, 0, 9, 0, False, 5) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert error_of(psm.check_client_batch, 7, -1, 5, 0, False, 5) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert error_of(psm.check_client_batch, 7, 1, 3, 0, False, 5) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    psm.update_client_batch(7, 0, 6, 5, 6, TS, LogOffsetMetadata(5, 0, 300))   # a transaction from offset 5
    assert psm.first_unstable_offset == LogOffsetMetadata(5, 0, 300)
    info = psm.prepare_update(7, COORDINATOR)
    completed = info.append_end_txn_marker(ControlRecordType.ABORT, 3, 0, 7, TS)
    psm.update(info)
    assert completed == (7, 5, 7, True) and psm.last_stable_offset(completed) == 8
    psm.complete_txn(completed)
    assert psm.first_unstable_offset == LogOffsetMetadata(5, 0, 300)      # until the high watermark passes 7
    psm.on_high_watermark_updated(8)
    assert psm.first_unstable_offset is None
    zombie = psm.prepare_update(7, COORDINATOR)
    assert error_of(zombie.append_end_txn_marker, ControlRecordType.COMMIT, 2, 0, 9, TS) == \
        ErrorCode.TRANSACTION_COORDINATOR_FENCED
    follower = psm.prepare_update(7, REPLICATION)                        # a follower only logs it
    assert follower.append_end_txn_marker(ControlRecordType.COMMIT, 2, 0, 9, TS) is None


# -- snapshots --------------------------------------------------------------------------------
def test_snapshots_are_kafkas_format(tmp_path):
    entries = [ProducerStateEntry(7, 3, 11, TS, -1, [BatchMetadata(9, 104, 4, TS)]),
               ProducerStateEntry(8, 0, -1, TS + 5, 120, [BatchMetadata(2, 122, 2, TS + 5)]),
               ProducerStateEntry(9, 1, 2, TS + 6, -1, [])]   # only markers seen: no batch
    path = str(tmp_path / "00000000000000000130.snapshot")
    write_snapshot(path, entries)
    assert parse_snapshot(path) == {7: (3, 9, 104, 4, TS, 11, -1), 8: (0, 2, 122, 2, TS + 5, -1, 120),
                                    9: (1, -1, -1, 0, TS + 6, 2, -1)}
    loaded = {e.producer_id: e for e in read_snapshot(path)}
    assert list(loaded[7].batches) == [BatchMetadata(9, 104, 4, TS)]
    assert loaded[7].batches[0].first_seq == 5 and loaded[7].batches[0].first_offset == 100
    assert loaded[8].current_txn_first_offset == 120
    assert not loaded[9].batches and loaded[9].coordinator_epoch == 2


def test_a_roll_snapshots_at_the_new_base_and_a_clean_close_at_the_log_end(make_log):
    lg = make_log(segment_bytes=400)
    for i in range(8):
        append_committed(lg, idem(2, seq=2 * i, ts=TS + i, value=b"x" * 40))
    bases = [s.base_offset for s in lg.segments]
    assert len(bases) > 2
    assert snapshots(lg) == bases[1:]
    state = parse_snapshot(snapshot_path(lg.dir, bases[1]))
    assert state[7][2] == bases[1] - 1                    # the state of the offsets below the base
    end = lg.log_end_offset
    lg.close()
    assert snapshots(lg) == bases[1:] + [end]
    assert parse_snapshot(snapshot_path(lg.dir, end))[7] == (0, 15, 15, 1, TS + 7, -1, -1)


def test_loading_starts_from_the_latest_snapshot_and_replays_only_what_follows(make_log):
    """A snapshot whose content differs from the log wins for the offsets it covers: producer 50
    exists only in the snapshot, producer 60's batches lie wholly below it and are not read."""
    lg = make_log(segment_bytes=10_000)
    for i in range(3):
        append_committed(lg, idem(2, pid=60, seq=2 * i, value=b"x" * 40))
    base = lg.roll().base_offset
    for i in range(3):
        append_committed(lg, idem(2, pid=7, seq=2 * i, value=b"x" * 40))
    lg.flush()
    os.unlink(snapshot_path(lg.dir, base))
    write_snapshot(snapshot_path(lg.dir, base), [ProducerStateEntry(50, 1, 3, TS, -1, [BatchMetadata(3, 2, 1, TS)])])
    # SIGKILL-like: no close; the dir is reopened as after an unclean shutdown
    again = make_log("t-0", segment_bytes=10_000, recovery_point=lg.log_end_offset)
    producers = again.producer_state_manager.producers
    assert sorted(producers) == [7, 50]
    assert producers[7].last_seq == 5 and producers[7].last_data_offset == base + 5
    assert again.append_as_leader(idem(2, pid=7, seq=4), 0).duplicate


def test_an_unclean_close_keeps_idempotence(make_log):
    lg = make_log(segment_bytes=500)
    for i in range(12):
        append_committed(lg, idem(2, seq=2 * i, value=b"y" * 30))
    end = lg.log_end_offset
    again = make_log("t-0", segment_bytes=500)          # not closed: recovery from the start
    assert again.log_end_offset == end
    retry = again.append_as_leader(idem(2, seq=20), 0)
    assert retry.duplicate and retry.first_offset == 20
    assert error_of(again.append_as_leader, idem(2, seq=30), 0) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert again.append_as_leader(idem(2, seq=24), 0).first_offset == end


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "version"])
def test_a_corrupt_snapshot_is_skipped_for_an_older_one(make_log, damage, caplog):
    lg = make_log(segment_bytes=400)
    for i in range(10):
        append_committed(lg, idem(2, seq=2 * i, value=b"x" * 40))
    lg.close()
    latest = snapshots(lg)[-1]
    path = snapshot_path(lg.dir, latest)
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        if damage == "flip":
            data[20] ^= 0xFF
        elif damage == "truncate":
            data = data[:-3]
        elif damage == "empty":
            data = bytearray()
        else:
            data[1] = 9
        f.seek(0)
        f.truncate()
        f.write(data)
    again = make_log("t-0", segment_bytes=400, had_clean_shutdown=True)
    assert "skipping producer snapshot" in caplog.text
    assert again.producer_state_manager.producers[7].last_seq == 19     # older snapshot + replay
    assert again.append_as_leader(idem(2, seq=18), 0).duplicate
    assert snapshots(again)[-1] == again.log_end_offset                   # rewritten after the replay


def test_with_every_snapshot_corrupt_the_state_is_rebuilt_from_the_log(make_log):
    lg = make_log(segment_bytes=400)
    for i in range(10):
        append_committed(lg, idem(2, seq=2 * i, value=b"x" * 40))
    lg.close()
    for offset in snapshots(lg):
        with open(snapshot_path(lg.dir, offset), "wb") as f:
            f.write(b"\x00\x01garbage")
    again = make_log("t-0", segment_bytes=400)
    assert again.producer_state_manager.producers[7].last_seq == 19


def test_snapshots_go_with_the_log_start_and_with_truncation(make_log):
    lg = make_log(segment_bytes=400)
    for i in range(12):                                     # sequence numbers equal offsets here
        append_committed(lg, idem(2, seq=2 * i, value=b"x" * 40))
    bases = [s.base_offset for s in lg.segments]
    assert len(bases) > 4 and snapshots(lg) == bases[1:]
    lg.maybe_increment_log_start_offset(bases[2] + 1)
    assert snapshots(lg) == bases[3:]                       # none below the log start
    lg.truncate_to(bases[3] + 2)                            # the second batch of that segment on
    assert snapshots(lg) == bases[3:4]                      # none above the truncation point
    assert lg.producer_state_manager.producers[7].last_data_offset == bases[3] + 1
    assert lg.append_as_leader(idem(2, seq=bases[3]), 0).duplicate
    assert lg.append_as_leader(idem(2, seq=bases[3] + 2), 0).first_offset == bases[3] + 2
    lg.truncate_fully_and_start_at(500)
    assert snapshots(lg) == [] and lg.producer_state_manager.producers == {}


def test_truncation_reloads_the_state_before_the_truncation_point(make_log):
    lg = make_log(segment_bytes=10_000)
    for i in range(5):
        append_committed(lg, idem(2, seq=2 * i))
    append_committed(lg, idem(1, pid=8, epoch=1))
    lg.truncate_to(6)
    producers = lg.producer_state_manager.producers
    assert 8 not in producers and producers[7].last_seq == 5
    assert error_of(lg.append_as_leader, idem(2, seq=8), 0) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert lg.append_as_leader(idem(2, seq=6), 0).first_offset == 6


def test_a_follower_truncation_reloads_a_snapshot_near_the_log_end_not_the_segment_base(make_log):
    """The producer state is also snapshotted every PRODUCER_SNAPSHOT_INTERVAL offsets (the last two kept): a
    follower truncating its uncommitted tail then replays a few thousand batches, not the whole segment (which
    on a loaded machine held the event loop for seconds during a controlled shutdown's failover)."""
    lg = make_log()
    interval = unified_log.PRODUCER_SNAPSHOT_INTERVAL
    for seq in range(0, 4 * interval + 50, 50):
        lg.append_as_follower(bytearray(build_batch([(b"k", b"v", (), TS)] * 50, base_offset=seq, producer_id=7,
                                                    producer_epoch=0, base_sequence=seq, partition_leader_epoch=0)))
    end = lg.log_end_offset
    kept = snapshots(lg)
    assert len(kept) == 2 and end - interval <= kept[-1] <= end and kept[0] < kept[-1] - interval // 2
    assert lg.active_segment.base_offset == 0                 # one segment: before, the replay ran from 0
    lg.truncate_to(end - 100)                                  # the uncommitted tail: two batches
    assert snapshots(lg) == [s for s in kept if s <= end - 100]
    assert lg.producer_state_manager.producers[7].last_data_offset == end - 101
    assert lg.append_as_leader(idem(50, seq=end - 150), 0).duplicate
    assert lg.append_as_leader(idem(50, seq=end - 100), 0).first_offset == end - 100


# -- expiry -------------------------------------------------------------------------------------
def test_idle_producers_expire_but_not_with_an_open_transaction(make_log, clock):
    lg = make_log()
    append_committed(lg, idem(1, pid=1, ts=TS))
    append_committed(lg, idem(1, pid=2, ts=TS, txn=True))
    append_committed(lg, idem(1, pid=3, ts=TS + 3_600_000))
    assert lg.remove_expired_producers(TS + 86_400_000 - 1) == 0
    assert lg.remove_expired_producers(TS + 86_400_000) == 1
    assert sorted(lg.producer_state_manager.producers) == [2, 3]
    # a forgotten producer may start over at any sequence, as in Kafka
    assert append_committed(lg, idem(1, pid=1, seq=77)).duplicate is False


def test_expired_producers_are_not_loaded_from_a_snapshot(make_log, clock):
    lg = make_log()
    append_committed(lg, idem(1, pid=1, ts=TS))
    append_committed(lg, idem(1, pid=2, ts=TS + 10_000_000))
    lg.close()
    clock.ms = TS + 86_400_000 + 1
    again = make_log("t-0", had_clean_shutdown=True)
    assert sorted(again.producer_state_manager.producers) == [2]


def test_the_log_manager_expires_producers_in_the_background(tmp_path, clock):
    m = LogManager([str(tmp_path / "d")], LogConfig(), clock=clock, cleaner_enabled=False,
                   producer_id_expiration_ms=1000, producer_id_expiration_check_interval_ms=10)
    m.startup()
    try:
        lg = m.get_or_create_log("t", 0)
        append_committed(lg, idem(1, pid=1, ts=TS))
        clock.ms = TS + 5000
        deadline = time.monotonic() + 10
        while lg.producer_state_manager.producers and time.monotonic() < deadline:
            time.sleep(0.01)
        assert lg.producer_state_manager.producers == {}
    finally:
        m.shutdown()


def test_the_server_module_is_gone():
    import importlib.util
    assert importlib.util.find_spec("kafka_compat.server.producer_state") is None


def test_a_log_without_snapshots_closed_cleanly_is_not_scanned(make_log, tmp_path):
    """Kafka's upgrade rule: logs written before snapshots existed start with an empty state
    instead of a scan of every segment, and get a snapshot at their end."""
    lg = make_log(segment_bytes=400)
    for i in range(6):
        append_committed(lg, idem(2, seq=2 * i, value=b"x" * 40))
    lg.close()
    for offset in snapshots(lg):
        os.unlink(snapshot_path(lg.dir, offset))
    again = make_log("t-0", segment_bytes=400, had_clean_shutdown=True)
    assert again.producer_state_manager.producers == {}
    assert snapshots(again) == [again.log_end_offset]


def test_recovering_segments_without_markers_keeps_the_latest_snapshot(make_log):
    """Recovery only rescans for producer state when a recovered segment holds transaction
    markers (its .txnindex must be rebuilt); otherwise the snapshot at the log end is used."""
    lg = make_log(segment_bytes=400)
    for i in range(6):
        append_committed(lg, idem(2, seq=2 * i, value=b"x" * 40))
    lg.close()
    end = lg.log_end_offset
    os.unlink(snapshot_path(lg.dir, end))
    write_snapshot(snapshot_path(lg.dir, end), [ProducerStateEntry(50, 1, 3, TS, -1, [BatchMetadata(3, 2, 1, TS)])])
    again = make_log("t-0", segment_bytes=400)          # unclean, recovery from offset 0
    assert sorted(again.producer_state_manager.producers) == [50]
    again.append_as_leader(marker(ControlRecordType.COMMIT, pid=50, epoch=1, coordinator_epoch=3), 0,
                           origin=COORDINATOR)
    again.close()
    os.unlink(snapshot_path(lg.dir, again.log_end_offset))
    last_base = lg.segments[-1].base_offset
    assert last_base < end                               # the marker went into the last segment
    third = make_log("t-0", segment_bytes=400)           # a recovered segment holds a marker now
    # replayed from the roll snapshot at that segment's base: producer 7 is back, 50 from the marker
    producers = third.producer_state_manager.producers
    assert sorted(producers) == [7, 50] and producers[7].last_seq == end - 1
    assert producers[50].coordinator_epoch == 3 and last_base in snapshots(third)


def test_active_producers_as_describe_producers_reports_them(make_log):
    lg = make_log()
    append_committed(lg, idem(3, pid=7, epoch=2, ts=TS + 1))
    append_committed(lg, idem(2, pid=8, txn=True, ts=TS + 2))
    append_committed(lg, marker(ControlRecordType.ABORT, pid=9, epoch=4, coordinator_epoch=6, ts=TS + 3),
                     origin=COORDINATOR)
    assert sorted(lg.active_producers()) == [(7, 2, 2, TS + 1, -1, -1), (8, 0, 1, TS + 2, -1, 3),
                                             (9, 4, -1, TS + 3, 6, -1)]
