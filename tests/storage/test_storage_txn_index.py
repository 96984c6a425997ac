"""The transaction index: Kafka's `.txnindex` entries (read here by an independent `construct`
reader), written to the segment holding the ABORT marker, kept across restarts, rebuilt by
recovery, truncated and deleted with the log."""

import os

import pytest
from construct import Const, GreedyRange, Int16sb, Int64sb, Struct
from kafka_compat.storage.index import CorruptIndexError
from kafka_compat.storage.transaction_index import AbortedTxn, TransactionIndex

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
