"""Kafka's per-log-dir checkpoint files and the clean-shutdown marker.

Offset checkpoint format (CheckpointFile / OffsetCheckpointFile):
    0                      <- version
    2                      <- number of entries
    my-topic 0 1234        <- topic partition offset
    my-topic 1 99
Written to ``<name>.tmp``, fsynced, renamed over the old file, directory fsynced.
The marker ``.kafka_cleanshutdown`` holds {"version":0,"brokerEpoch":N}.
"""

from __future__ import annotations

import json
import logging
import os

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"   # high watermarks, written by ReplicaManager
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
CURRENT_VERSION = 0
_READ_SIZE = 65536


def fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str, text: str, mode: int = 0o644) -> None:
    """Replace the file's content so that a crash leaves the old text or the new one, never a mix:
    a temporary file (created with ``mode``), fsync, rename, fsync of the directory."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, mode)         # an old temporary file keeps its mode through O_CREAT
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path) or ".")


class MalformedCheckpoint(ValueError):
    """A checkpoint file that does not parse; whoever reads it decides what to trust instead."""


def write_entries(path: str, lines: list[str]) -> None:
    """Kafka's CheckpointFile.write: version, entry count, one line per entry; atomically."""
    write_atomically(path, "\n".join([str(CURRENT_VERSION), str(len(lines)), *lines]) + "\n")


def read_file(path: str) -> bytes:
    """The whole of a small file with plain syscalls (open, read, close): loading a log reads a
    few such files per partition, and a buffered file object costs twice the syscalls."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, _READ_SIZE)
            chunks.append(chunk)
            if len(chunk) < _READ_SIZE:   # a regular file's short read is its end: no read of nothing after
                return b"".join(chunks)
    finally:
        os.close(fd)


def read_entries(path: str, parse_line) -> list | None:
    """Kafka's CheckpointFile.read: the parsed entries, or None when the file is absent.

    An empty file has no entries. Anything else that is not version 0, a count and exactly
    that many lines ``parse_line`` accepts (it raises ValueError otherwise) raises
    MalformedCheckpoint, bytes that are not UTF-8 included.
    """
    try:
        raw = read_file(path)
    except FileNotFoundError:
        return None
    except OSError as exc:   # a directory in its place, no permission
        raise MalformedCheckpoint(f"unreadable checkpoint {path}: {exc}") from None
    try:
        lines = raw.decode("utf-8").splitlines()
        if not lines:
            return []
        if int(lines[0]) != CURRENT_VERSION:
            raise ValueError(f"unrecognised version {lines[0]!r}")
        if len(lines) < 2:
            return []
        expected = int(lines[1])
        entries = [parse_line(line) for line in lines[2:]]
        if len(entries) != expected:
            raise ValueError(f"expected {expected} entries, found {len(entries)}")
        return entries
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedCheckpoint(f"malformed checkpoint {path}: {exc}") from None


def _offset_line(line: str) -> tuple[tuple[str, int], int]:
    topic, partition, offset = line.split()
    return (topic, int(partition)), int(offset)


def write_offsets(path: str, offsets: dict[tuple[str, int], int]) -> None:
    write_entries(path, [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())])


def read_offsets(path: str) -> dict[tuple[str, int], int]:
    """Entries of an offset checkpoint; an absent or malformed file (any bytes at all) reads as
    empty, which means recovering every log."""
    try:
        entries = read_entries(path, _offset_line)
    except MalformedCheckpoint as exc:
        log.warning("ignoring %s", exc)
        return {}
    return dict(entries or ())


def write_clean_shutdown(directory: str, broker_epoch: int = -1) -> None:
    write_atomically(os.path.join(directory, CLEAN_SHUTDOWN_FILE),
                      json.dumps({"version": CURRENT_VERSION, "brokerEpoch": broker_epoch}, separators=(",", ":")))


def had_clean_shutdown(directory: str) -> bool:
    return os.path.exists(os.path.join(directory, CLEAN_SHUTDOWN_FILE))


def remove_clean_shutdown(directory: str) -> None:
    try:
        os.unlink(os.path.join(directory, CLEAN_SHUTDOWN_FILE))
        fsync_dir(directory)
    except FileNotFoundError:
        pass
