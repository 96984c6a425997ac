"""LeaderEpochFileCache: each leader epoch of a partition and the offset where it began.

Kafka's LeaderEpochFileCache, kept in the partition directory as ``leader-epoch-checkpoint``
(Kafka's LeaderEpochCheckpointFile), text in the checkpoint format:

    0              <- version
    2              <- number of entries
    0 0            <- epoch start_offset
    3 1500

Replication uses it to find where a follower's log diverges from the leader's
(OffsetForLeaderEpoch, Fetch's DivergingEpoch): ``end_offset_for``. A new epoch is written
synchronously (tmp file, fsync, rename), so the file never lacks an epoch the log has;
truncations rewrite it in the background, as Kafka does, because loading truncates the cache
to the log again anyway. A missing or unreadable file never stops a log from loading: the
log rebuilds the cache from its batches' PartitionLeaderEpoch instead.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import NamedTuple

from .checkpoint import MalformedCheckpoint, read_entries, write_entries

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def parse_epoch_line(line: str) -> EpochEntry:
    epoch, start_offset = line.split()
    entry = EpochEntry(int(epoch), int(start_offset))
    if entry.epoch < 0 or entry.start_offset < 0:
        raise ValueError(f"negative epoch or offset in {line!r}")
    return entry


def read_checkpoint(path: str) -> list[EpochEntry] | None:
    """The entries of a leader-epoch-checkpoint file; None when it is absent or malformed."""
    try:
        entries = read_entries(path, parse_epoch_line)
    except MalformedCheckpoint as exc:
        log.warning("%s; the leader epochs will be rebuilt from the log", exc)
        return None
    return entries


class LeaderEpochFileCache:
    """Thread-safe. ``latest_epoch`` is a plain attribute (None when empty) because the append
    path compares each batch's epoch with it."""

    def __init__(self, directory: str, scheduler=None, name: str = ""):
        self.path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)
        self.name = name or os.path.basename(directory)
        self._scheduler = scheduler
        self._lock = threading.RLock()
        self._epochs: list[EpochEntry] = []      # ascending epochs, ascending start offsets
        self.latest_epoch: int | None = None
        self._flush_pending = False
        entries = read_checkpoint(self.path)
        #: False when the file was absent or malformed: the log should rebuild the entries
        self.loaded = entries is not None
        for entry in entries or ():
            self._assign(entry)

    # -- changes ----------------------------------------------------------------------
    def _update_needed(self, entry: EpochEntry) -> bool:
        latest = self._epochs[-1] if self._epochs else None
        return latest is None or entry.epoch != latest.epoch or entry.start_offset < latest.start_offset

    def _assign(self, entry: EpochEntry) -> bool:
        """Add ``entry``, first removing the latest entries that conflict with it (an epoch not
        below it, or a start offset not below its own), as Kafka does. True if anything changed."""
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"invalid leader epoch entry {entry}")
        if not self._update_needed(entry):
            return False
        epochs = self._epochs
        removed = []
        while epochs and (epochs[-1].epoch >= entry.epoch or epochs[-1].start_offset >= entry.start_offset):
            removed.append(epochs.pop())
        if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
            log.warning("%s: new epoch entry %s truncated conflicting entries %s", self.name, entry, removed)
        epochs.append(entry)
        self.latest_epoch = entry.epoch
        return True

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` began at ``start_offset``; written at once when it changes the cache."""
        with self._lock:
            epochs = self._epochs
            if epochs and epochs[-1].epoch == epoch and epochs[-1].start_offset <= start_offset:
                return False   # the latest epoch again, from where it began or later: every leader at startup
            if not self._assign(EpochEntry(epoch, start_offset)):
                return False
            self._write()
        return True

    def assign_all(self, entries) -> None:
        """Several assigns, one file write (rebuilding from a log)."""
        with self._lock:
            changed = [self._assign(EpochEntry(*e)) for e in entries]
            if any(changed):
                self._write()

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop the entries starting at or after ``end_offset`` (the log was truncated there)."""
        with self._lock:
            epochs = self._epochs
            if end_offset < 0 or not epochs or epochs[-1].start_offset < end_offset:
                return
            while epochs and epochs[-1].start_offset >= end_offset:
                epochs.pop()
            self._after_change()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop the entries wholly below ``start_offset``; the last of them is kept, moved to start there."""
        with self._lock:
            epochs = self._epochs
            below = 0
            while below < len(epochs) and epochs[below].start_offset <= start_offset:
                below += 1
            if not below or (below == 1 and epochs[0].start_offset == start_offset):
                return   # nothing below, or the first entry starts exactly there: nothing to write
            kept = EpochEntry(epochs[below - 1].epoch, start_offset)
            del epochs[:below]
            epochs.insert(0, kept)
            self._after_change()

    def clear(self, flush: bool = True) -> None:
        with self._lock:
            self._epochs.clear()
            self.latest_epoch = None
            if flush:
                self._write()

    def _after_change(self) -> None:
        self.latest_epoch = self._epochs[-1].epoch if self._epochs else None
        if self._scheduler is None:
            self._write()
        elif not self._flush_pending:
            self._flush_pending = True
            self._scheduler.schedule(f"leader-epoch-cache-flush-{self.name}", self._write_if_pending)

    # -- the file ------------------------------------------------------------------------
    def _write(self) -> None:
        with self._lock:
            self._flush_pending = False
            write_entries(self.path, [f"{e.epoch} {e.start_offset}" for e in self._epochs])

    def _write_if_pending(self) -> None:
        with self._lock:
            if self._flush_pending and os.path.isdir(os.path.dirname(self.path)):
                self._write()

    def flush(self) -> None:
        """Write a truncation still waiting for the background write (clean close)."""
        self._write_if_pending()

    # -- questions ------------------------------------------------------------------------
    @property
    def entries(self) -> list[EpochEntry]:
        with self._lock:
            return list(self._epochs)

    def __len__(self) -> int:
        return len(self._epochs)

    def earliest_entry(self) -> EpochEntry | None:
        epochs = self._epochs
        return epochs[0] if epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch holding ``offset``: the last one starting at or below it."""
        found = None
        for entry in self.entries:
            if entry.start_offset > offset:
                break
            found = entry.epoch
        return found

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's answer to OffsetForLeaderEpoch: (epoch, end offset).

        - undefined epoch requested, or no epoch above it known: (-1, -1);
        - the latest epoch: (it, the log end offset);
        - below the first known epoch: (requested, start of the first epoch);
        - otherwise: (the largest epoch <= requested, start of the next higher epoch).
        """
        with self._lock:
            epochs = self._epochs
            if requested_epoch == UNDEFINED_EPOCH:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if epochs and epochs[-1].epoch == requested_epoch:
                return requested_epoch, log_end_offset
            higher = next((e for e in epochs if e.epoch > requested_epoch), None)
            if higher is None:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            floor = None
            for entry in epochs:
                if entry.epoch > requested_epoch:
                    break
                floor = entry
            if floor is None:
                return requested_epoch, higher.start_offset
            return floor.epoch, higher.start_offset

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self.name}, {self._epochs})"
