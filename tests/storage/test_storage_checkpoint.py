"""Checkpoint files: Kafka's text format written atomically, and any garbage read as "nothing
trusted" instead of stopping the broker."""

import os

import pytest
from kafka_compat.storage import checkpoint

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
