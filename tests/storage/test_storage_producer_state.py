"""Producer state: idempotent retries, fenced epochs and sequence gaps, transactions opened and
closed by markers, Kafka's snapshot files (read here by an independent `construct` reader),
recovery from snapshots after clean and unclean closes, and expiry."""

import crc32c
import pytest
from construct import Int16sb, Int32sb, Int32ub, Int64sb, PrefixedArray, Struct
from kafka_compat.storage.log_offset_metadata import LogOffsetMetadata
from kafka_compat.storage.producer_state import (
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateManager,
    read_snapshot,
    write_snapshot,
)
from kafka_compat.storage.validator import COORDINATOR, REPLICATION
from logtools import TS

from kafka_compat.protocol.errors import ErrorCode, KafkaError
from kafka_compat.protocol.records import ControlRecordType

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


def error_of(fn, *args, **kwargs):
    with pytest.raises(KafkaError) as info:
        fn(*args, **kwargs)
    return info.value.error_code


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
