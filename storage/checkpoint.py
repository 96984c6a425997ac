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
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
CURRENT_VERSION = 0


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(os.path.dirname(path) or ".")


def write_offsets(path: str, offsets: dict[tuple[str, int], int]) -> None:
    lines = [str(CURRENT_VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    _write_atomically(path, "\n".join(lines) + "\n")


def read_offsets(path: str) -> dict[tuple[str, int], int]:
    """Entries of an offset checkpoint; an absent or malformed file reads as empty (recover all)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return {}
    try:
        if int(lines[0]) != CURRENT_VERSION:
            raise ValueError(f"unrecognized version {lines[0]}")
        expected = int(lines[1])
        entries = {}
        for line in lines[2:2 + expected]:
            topic, partition, offset = line.split(" ")
            entries[(topic, int(partition))] = int(offset)
        if len(entries) != expected:
            raise ValueError(f"expected {expected} entries, found {len(entries)}")
        return entries
    except (ValueError, IndexError) as exc:
        log.warning("ignoring malformed checkpoint %s: %s", path, exc)
        return {}


def write_clean_shutdown(directory: str, broker_epoch: int = -1) -> None:
    _write_atomically(os.path.join(directory, CLEAN_SHUTDOWN_FILE),
                      json.dumps({"version": CURRENT_VERSION, "brokerEpoch": broker_epoch}, separators=(",", ":")))


def had_clean_shutdown(directory: str) -> bool:
    return os.path.exists(os.path.join(directory, CLEAN_SHUTDOWN_FILE))


def remove_clean_shutdown(directory: str) -> None:
    try:
        os.unlink(os.path.join(directory, CLEAN_SHUTDOWN_FILE))
        _fsync_dir(directory)
    except FileNotFoundError:
        pass
