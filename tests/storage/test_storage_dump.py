"""dump-log prints segments and indexes in the line formats of Kafka's DumpLogSegments."""

import io
import os
import struct
import subprocess
import sys

from kafka_compat.storage.dump import main
from kafka_compat.storage.validator import COORDINATOR
from logtools import TS, keyed

from kafka_compat.protocol.compression import GZIP
from kafka_compat.protocol.records import build_control_batch, build_legacy_message_set


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    assert main(list(argv), out, err) == 0
    return out.getvalue().splitlines(), err.getvalue().splitlines()


def make(make_log):
    lg = make_log(index_interval_bytes=100)
    lg.append_as_leader(keyed([(b"a", b"1"), (b"b", None)], producer_id=4, producer_epoch=1, base_sequence=0), 0)
    lg.append_as_leader(keyed([(b"c", b"33")], ts=TS + 7, compression=GZIP), 0)
    lg.append_as_leader(bytearray(build_legacy_message_set([(b"x", b"y", (), TS + 9)], magic=1)), 0)
    lg.append_as_leader(bytearray(build_control_batch(1, producer_id=4, producer_epoch=1, coordinator_epoch=3,
                                            timestamp=TS + 10)), 0, origin=COORDINATOR)
    lg.close()
    return os.path.join(lg.dir, "00000000000000000000")


def test_batch_lines(make_log):
    prefix = make(make_log)
    lines, err = run(prefix + ".log")
    assert lines[0] == f"Dumping {prefix}.log"
    assert lines[1] == "Log starting offset: 0"
    assert lines[2].startswith(
        "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 4 producerEpoch: 1 "
        "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        f"position: 0 CreateTime: {TS} size: ")
    assert lines[2].endswith("magic: 2 compresscodec: none crc: " + lines[2].split("crc: ")[1].split()[0]
                             + " isvalid: true")
    assert "compresscodec: gzip" in lines[3] and f"CreateTime: {TS + 7}" in lines[3]
    assert lines[4].startswith("offset: 3 position: ") and "magic: 1" in lines[4]
    assert "isControl: true" in lines[5] and "isTransactional: true" in lines[5]
    assert len(lines) == 6 and err == []


def test_deep_iteration_and_data(make_log):
    prefix = make(make_log)
    lines, _ = run("--deep-iteration", "--print-data-log", prefix + ".log")
    records = [line for line in lines if line.startswith("|")]
    assert records[0] == \
        f"| offset: 0 CreateTime: {TS} keySize: 1 valueSize: 1 sequence: 0 headerKeys: [] key: a payload: 1"
    assert records[1] == f"| offset: 1 CreateTime: {TS} keySize: 1 valueSize: -1 sequence: 1 headerKeys: [] key: b"
    assert records[3] == f"| offset: 3 CreateTime: {TS + 9} keySize: 1 valueSize: 1 key: x payload: y"
    assert records[4].endswith("endTxnMarker: COMMIT coordinatorEpoch: 3")


def test_index_lines_and_mismatches(make_log):
    prefix = make(make_log)
    lines, err = run(prefix + ".index", prefix + ".timeindex")
    assert lines[0] == f"Dumping {prefix}.index"
    index_lines = [line for line in lines if line.startswith("offset:")]
    assert index_lines and all(len(line.split()) == 4 for line in index_lines)
    assert any(line.startswith("timestamp:") for line in lines)
    assert err == []
    with open(prefix + ".index", "r+b") as f:
        f.write(struct.pack(">ii", 0, 0))          # claims offset 0 starts at position 0: wrong
    lines, err = run("--verify-index-only", prefix + ".index")
    assert lines == [f"Dumping {prefix}.index"]
    assert err[0] == f"Mismatches in :{os.path.abspath(prefix)}.index"


def test_trailing_garbage_is_reported(make_log):
    prefix = make(make_log)
    with open(prefix + ".log", "ab") as f:
        f.write(b"\x00" * 5)
    lines, _ = run(prefix + ".log")
    assert lines[-1] == "Found 5 invalid bytes at the end of 00000000000000000000.log"


def test_runs_as_a_module(make_log):
    prefix = make(make_log)
    result = subprocess.run([sys.executable, "-m", "kafka_compat.storage.dump", prefix + ".log"], capture_output=True,
                            text=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert result.returncode == 0 and "Log starting offset: 0" in result.stdout


def test_a_marker_batch_line_names_its_type_and_coordinator_epoch(make_log):
    prefix = make(make_log)
    lines, _ = run(prefix + ".log")
    assert lines[5].endswith(" endTxnMarker: COMMIT coordinatorEpoch: 3")
    assert not lines[2].endswith("coordinatorEpoch: 3")          # data batches say nothing of it
    deep, _ = run("--deep-iteration", prefix + ".log")
    assert sum("endTxnMarker" in line for line in deep) == 1     # said once, on the record line


def test_txn_index_snapshot_and_leader_epoch_files(make_log):
    lg = make_log(index_interval_bytes=100)
    lg.append_as_leader(keyed([(b"a", b"1")], producer_id=4, producer_epoch=1, base_sequence=0,
                              is_transactional=True), 2)
    lg.append_as_leader(bytearray(build_control_batch(0, producer_id=4, producer_epoch=1, coordinator_epoch=6,
                                                      timestamp=TS + 1)), 5, origin=COORDINATOR)
    lg.append_as_leader(keyed([(b"b", b"2")], producer_id=9, producer_epoch=0, base_sequence=0,
                              is_transactional=True), 5)
    lg.close()
    prefix = os.path.join(lg.dir, "00000000000000000000")
    lines, err = run(prefix + ".txnindex")
    assert lines[1:] == ["version: 0 producerId: 4 firstOffset: 0 lastOffset: 1 lastStableOffset: 2"]
    lines, err = run(os.path.join(lg.dir, "00000000000000000003.snapshot"))
    # one timestamp per producer in a snapshot (its last write, here the marker), as in Kafka
    assert sorted(lines[1:]) == [
        f"producerId: 4 producerEpoch: 1 coordinatorEpoch: 6 currentTxnFirstOffset: OptionalLong.empty "
        f"lastTimestamp: {TS + 1} firstSequence: 0 lastSequence: 0 lastOffset: 0 offsetDelta: 0 timestamp: {TS + 1}",
        f"producerId: 9 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong[2] "
        f"lastTimestamp: {TS} firstSequence: 0 lastSequence: 0 lastOffset: 2 offsetDelta: 0 timestamp: {TS}"]
    lines, err = run(os.path.join(lg.dir, "leader-epoch-checkpoint"))
    assert lines[1:] == ["epoch: 2 startOffset: 0", "epoch: 5 startOffset: 1"] and err == []


def test_damaged_side_files_are_reported_not_fatal(tmp_path):
    snapshot = tmp_path / "00000000000000000007.snapshot"
    snapshot.write_bytes(b"\x00\x01\x00")
    epochs = tmp_path / "leader-epoch-checkpoint"
    epochs.write_bytes(b"\xff\xfe")
    index = tmp_path / "00000000000000000000.txnindex"
    index.write_bytes(b"\x00\x00" + b"\x01" * 40)
    lines, err = run(str(snapshot), str(epochs), str(index))
    assert len(err) == 3 and "snapshot" in err[0] and "malformed checkpoint" in err[1] and "partial entry" in err[2]
    assert len([line for line in lines if line.startswith("version: 0")]) == 1
