"""The transaction index: Kafka's `.txnindex` entries (read here by an independent `construct`
reader), written to the segment holding the ABORT marker, kept across restarts, rebuilt by
recovery, truncated and deleted with the log."""

import os

import pytest
from construct import Const, GreedyRange, Int16sb, Int64sb, Struct
from kafka_compat.storage.fetch_data_info import FetchIsolation
from kafka_compat.storage.index import CorruptIndexError
from kafka_compat.storage.transaction_index import AbortedTxn, TransactionIndex
from kafka_compat.storage.validator import COORDINATOR
from logtools import TS, append_committed, batch

from kafka_compat.protocol.records import ControlRecordType, build_batch, build_control_batch

TxnIndexFile = GreedyRange(Struct(
    "version" / Const(0, Int16sb),
    "producer_id" / Int64sb,
    "first_offset" / Int64sb,
    "last_offset" / Int64sb,
    "last_stable_offset" / Int64sb,
))


def parse_txn_index(path):
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) % 34 == 0
    return [(e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset) for e in TxnIndexFile.parse(data)]


def txn(n, pid, seq=0, value=b"v"):
    return bytearray(build_batch([(b"k", value, (), TS)] * n, producer_id=pid, producer_epoch=0, base_sequence=seq,
                                 is_transactional=True))


def end_txn(kind, pid):
    return bytearray(build_control_batch(kind, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp=TS))


def aborted_of(lg, start=0):
    return [(t.producer_id, t.first_offset) for t in lg.read(start, 1 << 30, FetchIsolation.TXN_COMMITTED,
                                                             True).aborted_transactions]


def test_entries_are_kafkas_34_byte_format(tmp_path):
    path = str(tmp_path / "00000000000000000100.txnindex")
    index = TransactionIndex(path, 100)
    index.append(AbortedTxn(7, 100, 130, 110))
    index.append(AbortedTxn(8, 120, 140, 141))
    index.close()
    assert os.path.getsize(path) == 68
    assert parse_txn_index(path) == [(7, 100, 130, 110), (8, 120, 140, 141)]
    assert TransactionIndex(path, 100).all_aborted_txns() == [AbortedTxn(7, 100, 130, 110),
                                                              AbortedTxn(8, 120, 140, 141)]


def test_the_index_enforces_order_and_answers_overlaps(tmp_path):
    index = TransactionIndex(str(tmp_path / "00000000000000000000.txnindex"), 0)
    assert not os.path.exists(index.path)                  # created on the first abort only
    index.append(AbortedTxn(1, 0, 10, 11))
    index.append(AbortedTxn(2, 5, 20, 21))
    index.append(AbortedTxn(3, 30, 40, 41))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(4, 1, 40, 50))
    assert index.collect_aborted_txns(11, 30) == ([AbortedTxn(2, 5, 20, 21)], True)   # LSO 41 >= 30: done
    assert index.collect_aborted_txns(0, 100) == (index.all_aborted_txns(), False)
    index.truncate_to(20)
    assert index.all_aborted_txns() == [AbortedTxn(1, 0, 10, 11)]
    index.append(AbortedTxn(5, 12, 15, 16))                # order restarts after the truncation
    index.reset()
    assert index.all_aborted_txns() == []


def test_a_torn_entry_is_dropped_and_a_future_version_is_corrupt(tmp_path, caplog):
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(AbortedTxn(1, 0, 3, 4).pack() + b"\x00\x00\x00")
    index = TransactionIndex(str(path), 0)
    assert index.all_aborted_txns() == [AbortedTxn(1, 0, 3, 4)] and os.path.getsize(path) == 34
    assert "partial entry" in caplog.text
    path.write_bytes(b"\x00\x05" + AbortedTxn(1, 0, 3, 4).pack()[2:])
    with pytest.raises(CorruptIndexError):
        TransactionIndex(str(path), 0).sanity_check()


def abort_spanning_segments(make_log, name="t-0"):
    """Producer 1's transaction starts in the first segment; its ABORT lands two segments later."""
    lg = make_log(name, segment_bytes=300)
    append_committed(lg, txn(2, pid=1, value=b"a" * 60))         # 0..1
    while len(lg.segments) < 3:
        append_committed(lg, batch(1, value=b"b" * 60))
    append_committed(lg, txn(1, pid=2))
    marker = append_committed(lg, end_txn(ControlRecordType.ABORT, 1), origin=COORDINATOR).first_offset
    append_committed(lg, end_txn(ControlRecordType.COMMIT, 2), origin=COORDINATOR)
    return lg, marker


def test_an_abort_goes_to_the_segment_holding_its_marker(make_log):
    lg, marker = abort_spanning_segments(make_log)
    holder = lg.segment_for(marker)
    assert holder.base_offset > 1 and holder is not lg.segments[0]
    assert parse_txn_index(holder.txn_index.path) == [(1, 0, marker, marker - 1)]   # LSO: producer 2's start
    assert all(not os.path.exists(s.txn_index.path) for s in lg.segments if s is not holder)
    assert aborted_of(lg) == [(1, 0)]
    assert aborted_of(lg, marker + 1) == []


def test_the_index_survives_a_clean_restart(make_log):
    lg, marker = abort_spanning_segments(make_log)
    lg.close()
    again = make_log("t-0", segment_bytes=300, had_clean_shutdown=True)
    again.update_high_watermark(again.log_end_offset)
    assert aborted_of(again) == [(1, 0)]


@pytest.mark.parametrize("damage", ["delete", "garbage", "future-version", "negative-first-offset"])
def test_recovery_rebuilds_the_index(make_log, damage):
    lg, marker = abort_spanning_segments(make_log)
    path = lg.segment_for(marker).txn_index.path
    expected = parse_txn_index(path)
    end = lg.log_end_offset
    lg.close()
    if damage == "delete":
        os.unlink(path)
        again = make_log("t-0", segment_bytes=300)                   # unclean: recovery from offset 0
    elif damage == "garbage":
        with open(path, "wb") as f:
            f.write(os.urandom(34 * 3))
        again = make_log("t-0", segment_bytes=300)
    elif damage == "future-version":
        with open(path, "r+b") as f:
            f.write(b"\x00\x07")
        again = make_log("t-0", segment_bytes=300, had_clean_shutdown=True)   # the sanity check catches it
    else:       # a flipped sign bit: read_committed consumers would skip the producer's committed records
        with open(path, "r+b") as f:
            f.seek(10)                  # the first entry's FirstOffset, its top byte
            top = f.read(1)[0]
            f.seek(10)
            f.write(bytes([top ^ 0x80]))
        assert parse_txn_index(path)[0][1] < 0
        again = make_log("t-0", segment_bytes=300, had_clean_shutdown=True)   # the sanity check catches it
    assert again.log_end_offset == end
    assert parse_txn_index(path) == expected
    again.update_high_watermark(again.log_end_offset)
    assert aborted_of(again) == [(1, 0)]


def test_recovery_of_only_the_tail_keeps_older_indexes(make_log):
    lg, marker = abort_spanning_segments(make_log)
    holder_base = lg.segment_for(marker).base_offset
    append_committed(lg, txn(1, pid=3))
    lg.roll()
    append_committed(lg, end_txn(ControlRecordType.ABORT, 3), origin=COORDINATOR)
    lg.flush()
    path = lg.segment_for(marker).txn_index.path
    # unclean shutdown, recovery point in the last segment: only it is recovered
    again = make_log("t-0", segment_bytes=300, recovery_point=lg.active_segment.base_offset)
    assert os.path.exists(path) and again.segment_for(holder_base).txn_index.all_aborted_txns()
    again.update_high_watermark(again.log_end_offset)
    assert aborted_of(again) == [(1, 0), (3, marker + 2)]


def test_the_index_is_truncated_and_deleted_with_the_log(make_log, scheduler):
    lg, marker = abort_spanning_segments(make_log)
    holder = lg.segment_for(marker)
    assert lg.truncate_to(marker)
    assert holder.txn_index.all_aborted_txns() == [] and aborted_of(lg) == []
    assert lg.producer_state_manager.producers[1].current_txn_first_offset == 0    # open again
    append_committed(lg, end_txn(ControlRecordType.ABORT, 1), origin=COORDINATOR)
    assert aborted_of(lg) == [(1, 0)]
    path = holder.txn_index.path
    lg.truncate_fully_and_start_at(lg.log_end_offset)
    assert not os.path.exists(path) and os.path.exists(path + ".deleted")   # renamed with its segment
    scheduler.shutdown(run_pending=True)                                    # file.delete.delay.ms passes
    assert not os.path.exists(path + ".deleted")


def test_retention_deletes_the_index_with_its_segment(make_log):
    lg = make_log(segment_bytes=300, retention_ms=1000)
    append_committed(lg, txn(1, pid=1))
    append_committed(lg, end_txn(ControlRecordType.ABORT, 1), origin=COORDINATOR)
    path = lg.segments[0].txn_index.path
    assert os.path.exists(path)
    while len(lg.segments) < 3:
        append_committed(lg, batch(1, value=b"b" * 200, ts=TS + 5000))
    assert lg.delete_old_segments(TS + 5500) == 1              # only the first has nothing newer than 1 s
    assert not os.path.exists(path) and os.path.exists(path + ".deleted")
    assert aborted_of(lg, lg.log_start_offset) == []
