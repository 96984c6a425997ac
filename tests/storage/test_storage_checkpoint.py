"""Checkpoint files: Kafka's text format written atomically, and any garbage read as "nothing
trusted" instead of stopping the broker."""

import os
import stat

import pytest
from kafka_compat.storage import checkpoint
from kafka_compat.storage.log_config import LogConfig
from kafka_compat.storage.log_manager import LogManager
from logtools import append_committed, batch, read_records

GARBAGE = [
    b"\xff\xfe\x00\x81garbage",          # not UTF-8 at all
    b"",                                 # empty: no entries
    b"0\n",                              # a version and nothing else
    b"1\n1\nt 0 5\n",                    # an unknown version
    b"0\nx\nt 0 5\n",                    # a count that is no number
    b"0\n2\nt 0 5\n",                    # fewer entries than counted
    b"0\n1\nt 0 5\nt 1 6\n",             # more entries than counted
    b"0\n1\nt 0\n",                      # an entry short of a field
    b"0\n1\nt zero 5\n",                 # a partition that is no number
    b"\x00" * 4096,                      # a zero-filled page (a crash after the rename)
]


def test_offsets_are_written_in_kafkas_format_and_read_back(tmp_path):
    path = str(tmp_path / checkpoint.REPLICATION_OFFSET_CHECKPOINT)
    checkpoint.write_offsets(path, {("b", 1): 7, ("a", 0): 42})
    with open(path, "rb") as f:
        assert f.read() == b"0\n2\na 0 42\nb 1 7\n"
    assert checkpoint.read_offsets(path) == {("a", 0): 42, ("b", 1): 7}
    assert not os.path.exists(path + ".tmp")
    assert checkpoint.REPLICATION_OFFSET_CHECKPOINT == "replication-offset-checkpoint"


@pytest.mark.parametrize("data", GARBAGE)
def test_any_garbage_reads_as_no_offsets(tmp_path, data, caplog):
    path = tmp_path / checkpoint.RECOVERY_POINT_CHECKPOINT
    path.write_bytes(data)
    assert checkpoint.read_offsets(str(path)) == {}
    if data not in (b"", b"0\n"):
        assert "malformed checkpoint" in caplog.text


def test_a_missing_file_reads_as_no_offsets(tmp_path):
    assert checkpoint.read_offsets(str(tmp_path / "absent")) == {}


def test_read_entries_tells_absent_from_empty_and_malformed(tmp_path):
    path = tmp_path / "cp"
    assert checkpoint.read_entries(str(path), int) is None
    path.write_bytes(b"")
    assert checkpoint.read_entries(str(path), int) == []
    path.write_bytes(b"0\n2\n5\n6\n")
    assert checkpoint.read_entries(str(path), int) == [5, 6]
    path.write_bytes(b"0\n2\n5\nsix\n")
    with pytest.raises(checkpoint.MalformedCheckpoint):
        checkpoint.read_entries(str(path), int)


@pytest.mark.parametrize("name", [checkpoint.RECOVERY_POINT_CHECKPOINT, checkpoint.LOG_START_OFFSET_CHECKPOINT,
                                  checkpoint.CLEANER_OFFSET_CHECKPOINT])
def test_a_broker_with_garbage_checkpoints_starts_and_recovers(tmp_path, clock, name):
    dirs = [str(tmp_path / "d0")]
    m = LogManager(dirs, LogConfig(segment_bytes=400), clock=clock, cleaner_enabled=False)
    m.startup(background=False)
    lg = m.get_or_create_log("t", 0)
    for _ in range(10):
        append_committed(lg, batch(2, value=b"x" * 30))
    m.shutdown()
    with open(os.path.join(dirs[0], name), "wb") as f:
        f.write(b"\xc3\x28\xa0\xa1 not a checkpoint \xff")
    m2 = LogManager(dirs, LogConfig(segment_bytes=400), clock=clock, cleaner_enabled=False)
    m2.startup(background=False)
    lg2 = m2.get_log("t", 0)
    assert lg2.log_end_offset == 20
    assert [r.offset for r in read_records(lg2)] == list(range(20))
    m2.shutdown()
    assert checkpoint.read_offsets(os.path.join(dirs[0], checkpoint.RECOVERY_POINT_CHECKPOINT)) == {("t", 0): 20}


def test_write_atomically_replaces_the_whole_file_with_its_mode_and_leaves_no_temporary(tmp_path):
    path = str(tmp_path / "state")
    (tmp_path / "state.tmp").write_text("a stale half-written file from a crash, world-readable")
    os.chmod(tmp_path / "state.tmp", 0o644)
    checkpoint.write_atomically(path, "first\n", 0o600)
    checkpoint.write_atomically(path, "second\n", 0o600)
    assert open(path).read() == "second\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert sorted(os.listdir(tmp_path)) == ["state"]
