"""ProducerStateManager: per producer id, what idempotence and transactions need to know.

Kafka's ProducerStateManager, ProducerStateEntry, ProducerAppendInfo, BatchMetadata,
TxnMetadata and CompletedTxn. For each producer id a partition keeps its epoch, the sequence
and offset ranges of its last five batches (a producer may have five requests in flight, so a
retry can arrive after later batches: it is answered with the offsets it already has), the
timestamp of its last write, the epoch of the coordinator that wrote its last marker, and the
first offset of its open transaction. Open transactions, and finished ones whose marker is not
yet below the high watermark, decide the first unstable offset, and so the last stable offset.

Snapshots (Kafka's format, ``<offset, 20 digits>.snapshot`` in the partition directory) hold
the state for the offsets below the one in the name, so loading a log replays only the batches
after the latest snapshot. Big-endian:

    Version int16 (1), Crc uint32 (CRC-32C of everything after it),
    ProducerEntries: count int32, then per producer
        ProducerId int64, Epoch int16, LastSequence int32, LastOffset int64, OffsetDelta int32,
        Timestamp int64, CoordinatorEpoch int32, CurrentTxnFirstOffset int64 (-1: none)

Only the last batch of each producer is kept in a snapshot, as in Kafka.
"""

from __future__ import annotations

import bisect
import logging
import os
import re
import struct
from collections import deque
from typing import NamedTuple

from crc32c import crc32c

from kafka_compat.protocol.errors import ErrorCode, KafkaError
from kafka_compat.protocol.records import ControlRecordType
from kafka_compat.sentinels import NO_PRODUCER_EPOCH, NO_SEQUENCE

from .checkpoint import read_file
from .index import INT32_MAX
from .log_offset_metadata import LogOffsetMetadata
from .validator import CLIENT, REPLICATION

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000   # producer.id.expiration.ms
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1

_SNAPSHOT_HEAD = struct.Struct(">hIi")              # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")        # 46 bytes
_CRC_FROM = 6                                       # the CRC covers the bytes after version and crc
_SNAPSHOT_FILE = re.compile(r"^(\d{20})\.snapshot$")


def snapshot_offsets_in(names) -> list[int]:
    """The offsets of the producer snapshots among a directory's file names, in order."""
    return sorted(int(m.group(1)) for m in map(_SNAPSHOT_FILE.match, names) if m)
_new = tuple.__new__


def snapshot_path(directory: str, offset: int) -> str:
    return os.path.join(directory, f"{offset:020d}{SNAPSHOT_SUFFIX}")


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequences wrap from Int32.MAX to 0."""
    return (sequence + increment) & INT32_MAX


def decrement_sequence(sequence: int, decrement: int) -> int:
    return (sequence - decrement) & INT32_MAX


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class BatchMetadata(NamedTuple):
    last_seq: int
    last_offset: int
    offset_delta: int     # last offset - first offset, also last sequence - first sequence
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerStateEntry:
    __slots__ = ("producer_id", "producer_epoch", "coordinator_epoch", "last_timestamp", "current_txn_first_offset",
                 "batches")

    def __init__(self, producer_id: int, producer_epoch: int = NO_PRODUCER_EPOCH, coordinator_epoch: int = -1,
                 last_timestamp: int = -1, current_txn_first_offset: int = -1, batches=()):
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset   # -1: no open transaction
        self.batches: deque[BatchMetadata] = deque(batches, maxlen=NUM_BATCHES_TO_RETAIN)

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The retained batch with exactly this epoch and sequence range (a retry), if any."""
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.last_seq == last_seq and batch.first_seq == first_seq:
                return batch
        return None

    def maybe_update_producer_epoch(self, epoch: int) -> None:
        if self.producer_epoch != epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        self.maybe_update_producer_epoch(epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, other: ProducerStateEntry) -> None:
        """Take on what an append worked out (Kafka's ProducerStateEntry.update)."""
        self.maybe_update_producer_epoch(other.producer_epoch)
        self.batches.extend(other.batches)
        self.coordinator_epoch = other.coordinator_epoch
        self.current_txn_first_offset = other.current_txn_first_offset
        self.last_timestamp = other.last_timestamp

    def __repr__(self) -> str:
        return (f"ProducerStateEntry(producer_id={self.producer_id}, epoch={self.producer_epoch}, "
                f"txn_first_offset={self.current_txn_first_offset}, coordinator_epoch={self.coordinator_epoch}, "
                f"last_timestamp={self.last_timestamp}, batches={list(self.batches)})")


class TxnMetadata:
    __slots__ = ("producer_id", "first_offset", "last_offset")

    def __init__(self, producer_id: int, first_offset: LogOffsetMetadata, last_offset: int = -1):
        self.producer_id = producer_id
        self.first_offset = first_offset   # LogOffsetMetadata: the LSO can stop here without an index lookup
        self.last_offset = last_offset     # the marker's offset once the transaction is complete

    def __repr__(self) -> str:
        return f"TxnMetadata({self.producer_id}, {self.first_offset}, {self.last_offset})"


class ActiveProducer(NamedTuple):
    """One producer as DescribeProducers reports it (Kafka's UnifiedLog.activeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int     # -1: no open transaction


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int     # the marker's offset
    is_aborted: bool


class ProducerAppendInfo:
    """One producer's part of an append, checked against its state before anything is written.

    Kafka's ProducerAppendInfo: ``updated`` starts as a copy of the current entry without
    batches and takes each batch of the append in turn; the manager applies it only after
    the write. Origin CLIENT checks epochs and sequences, COORDINATOR epochs only, and
    REPLICATION (follower appends, rebuilding from the log) logs what it would have refused.
    """

    __slots__ = ("producer_id", "origin", "current", "updated", "started_transactions", "name")

    def __init__(self, producer_id: int, current: ProducerStateEntry | None, origin: str, name: str = ""):
        self.producer_id = producer_id
        self.origin = origin
        self.name = name
        self.current = current if current is not None else ProducerStateEntry(producer_id)
        c = self.current
        self.updated = ProducerStateEntry(producer_id, c.producer_epoch, c.coordinator_epoch, c.last_timestamp,
                                          c.current_txn_first_offset)
        self.started_transactions: list[TxnMetadata] = []

    def _refuse(self, error_code: int, message: str, level: int = logging.WARNING) -> None:
        """Clients and coordinators are refused; a follower only logs it (the leader decided)."""
        if self.origin == REPLICATION:
            log.log(level, message)
        else:
            raise KafkaError(error_code, message)

    def _check_producer_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.updated.producer_epoch:
            self._refuse(ErrorCode.INVALID_PRODUCER_EPOCH,
                         f"Epoch of producer {self.producer_id} at offset {offset} in {self.name} is {epoch}, which "
                         f"is smaller than the last seen epoch {self.updated.producer_epoch}")

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        updated, current = self.updated, self.current
        if epoch != updated.producer_epoch:
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                 f"Invalid sequence number for new epoch of producer {self.producer_id} at offset "
                                 f"{offset} in {self.name}: {epoch} (request epoch), {first_seq} (seq. number), "
                                 f"{updated.producer_epoch} (current producer epoch)")
            return
        if updated.batches:
            current_last = updated.last_seq
        elif epoch == current.producer_epoch:
            current_last = current.last_seq
        else:
            current_last = NO_SEQUENCE
        # with no epoch known (every batch of the producer deleted), any sequence is accepted
        if not (current.producer_epoch == NO_PRODUCER_EPOCH or in_sequence(current_last, first_seq)):
            raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                             f"Out of order sequence number for producer {self.producer_id} at offset {offset} in "
                             f"{self.name}: {first_seq} (incoming seq. number), {current_last} (current end "
                             f"sequence number)")

    def append_data_batch(self, epoch: int, first_seq: int, last_seq: int, last_timestamp: int,
                          first_offset_metadata: LogOffsetMetadata, last_offset: int, is_transactional: bool) -> None:
        first_offset = first_offset_metadata.message_offset
        self._check_producer_epoch(epoch, first_offset)
        if self.origin == CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        updated = self.updated
        updated.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp)
        if updated.current_txn_first_offset >= 0:
            if not is_transactional:
                raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                                 f"Expected transactional write from producer {self.producer_id} at offset "
                                 f"{first_offset} in {self.name}")
        elif is_transactional:
            updated.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset_metadata))

    def append_end_txn_marker(self, control_type: int, coordinator_epoch: int, producer_epoch: int, offset: int,
                              timestamp: int) -> CompletedTxn | None:
        """A COMMIT or ABORT marker; returns the transaction it closes (None when none was open:
        such a marker changes neither the LSO nor the transaction index)."""
        self._check_producer_epoch(producer_epoch, offset)
        updated = self.updated
        if updated.coordinator_epoch > coordinator_epoch:
            self._refuse(ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                         f"Invalid coordinator epoch for producerId {self.producer_id} at offset {offset} in "
                         f"{self.name}: {coordinator_epoch} (zombie), {updated.coordinator_epoch} (current)",
                         logging.INFO)
        completed = None
        if updated.current_txn_first_offset >= 0:
            completed = CompletedTxn(self.producer_id, updated.current_txn_first_offset, offset,
                                     control_type == ControlRecordType.ABORT)
        updated.maybe_update_producer_epoch(producer_epoch)
        updated.coordinator_epoch = coordinator_epoch
        updated.current_txn_first_offset = -1
        updated.last_timestamp = timestamp
        return completed


class CorruptSnapshotError(Exception):
    pass


def write_snapshot(path: str, entries, sync: bool = True) -> None:
    """Write the producer entries in Kafka's snapshot format."""
    body = bytearray(_SNAPSHOT_HEAD.pack(SNAPSHOT_VERSION, 0, len(entries)))
    for e in entries:
        body += _SNAPSHOT_ENTRY.pack(e.producer_id, e.producer_epoch, e.last_seq, e.last_data_offset,
                                     e.last_offset_delta, e.last_timestamp, e.coordinator_epoch,
                                     e.current_txn_first_offset)
    struct.pack_into(">I", body, 2, crc32c(memoryview(body)[_CRC_FROM:]))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def read_snapshot(path: str) -> list[ProducerStateEntry]:
    """The entries of a snapshot file; raises CorruptSnapshotError for anything malformed."""
    data = read_file(path)
    if len(data) < _SNAPSHOT_HEAD.size:
        raise CorruptSnapshotError(f"snapshot {path} is {len(data)} bytes, shorter than its header")
    version, crc, count = _SNAPSHOT_HEAD.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot {path} has unknown version {version}")
    computed = crc32c(memoryview(data)[_CRC_FROM:])
    if crc != computed:
        raise CorruptSnapshotError(f"snapshot {path} is corrupt: stored crc {crc}, computed crc {computed}")
    if count < 0 or len(data) != _SNAPSHOT_HEAD.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(f"snapshot {path} holds {len(data)} bytes for {count} entries")
    entries = []
    for pid, epoch, seq, offset, delta, timestamp, coordinator_epoch, txn_first in _SNAPSHOT_ENTRY.iter_unpack(
            memoryview(data)[_SNAPSHOT_HEAD.size:]):
        batches = (BatchMetadata(seq, offset, delta, timestamp),) if offset >= 0 else ()
        entries.append(ProducerStateEntry(pid, epoch, coordinator_epoch, timestamp, txn_first if txn_first >= 0 else -1,
                                          batches))
    return entries


class ProducerStateManager:
    """Not thread-safe by itself: the log calls it under its lock."""

    def __init__(self, directory: str, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 name: str = "", snapshot_offsets: list[int] | None = None):
        """``snapshot_offsets``: the snapshots on disk when the caller just listed the directory
        (loading a log lists it once, as Kafka's loadSnapshots does)."""
        self.dir = directory
        self.name = name or os.path.basename(directory)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        # transactions by first offset: open ones (inserted in offset order), and finished ones
        # whose marker is not yet below the high watermark
        self._ongoing: dict[int, TxnMetadata] = {}
        self._unreplicated: dict[int, TxnMetadata] = {}
        #: first offset of the oldest open, or finished but not yet replicated, transaction (None: none)
        self.first_unstable_offset: LogOffsetMetadata | None = None
        self._snapshot_offsets: list[int] = self._list_snapshots() if snapshot_offsets is None \
            else sorted(snapshot_offsets)

    # -- the hot path: one client batch -----------------------------------------------------
    def check_client_batch(self, producer_id: int, epoch: int, first_seq: int, last_delta: int,
                           is_transactional: bool, offset: int) -> BatchMetadata | None:
        """Before a client batch is written: the retained batch it repeats (its original offsets
        answer the retry, nothing is written), or None to go ahead; raises KafkaError with
        Kafka's code for a fenced epoch, a sequence gap or a non-transactional write inside a
        transaction. ``offset`` is where the batch would go (for messages). One dict lookup in the
        common case."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return None
        if epoch == entry.producer_epoch and entry.batches and (is_transactional or entry.current_txn_first_offset < 0):
            last_seq = entry.batches[-1].last_seq
            if first_seq == last_seq + 1 or (first_seq == 0 and last_seq == INT32_MAX):
                return None
        duplicate = entry.find_duplicate(epoch, first_seq, increment_sequence(first_seq, last_delta))
        if duplicate is not None:
            return duplicate
        info = ProducerAppendInfo(producer_id, entry, CLIENT, self.name)
        info._check_producer_epoch(epoch, offset)
        info._check_sequence(epoch, first_seq, offset)
        if entry.current_txn_first_offset >= 0 and not is_transactional:
            raise KafkaError(ErrorCode.INVALID_TXN_STATE, f"Expected transactional write from producer {producer_id} "
                                                          f"at offset {offset} in {self.name}")
        return None

    def update_client_batch(self, producer_id: int, epoch: int, last_seq: int, first_offset: int, last_offset: int,
                            timestamp: int, first_offset_metadata: LogOffsetMetadata | None = None) -> None:
        """After a checked client batch is written. ``first_offset_metadata`` is given for a
        transactional batch only."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        if entry.producer_epoch != epoch:
            entry.batches.clear()
            entry.producer_epoch = epoch
        entry.batches.append(_new(BatchMetadata, (last_seq, last_offset, last_offset - first_offset, timestamp)))
        entry.last_timestamp = timestamp
        if first_offset_metadata is not None and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self._ongoing[first_offset] = TxnMetadata(producer_id, first_offset_metadata)
            self._update_first_unstable()

    # -- every other append ------------------------------------------------------------------
    def prepare_update(self, producer_id: int, origin: str) -> ProducerAppendInfo:
        return ProducerAppendInfo(producer_id, self.producers.get(producer_id), origin, self.name)

    def update(self, info: ProducerAppendInfo) -> None:
        entry = self.producers.get(info.producer_id)
        if entry is None:
            self.producers[info.producer_id] = info.updated
        else:
            entry.update(info.updated)
        if info.started_transactions:
            for txn in info.started_transactions:
                self._ongoing[txn.first_offset.message_offset] = txn
            self._update_first_unstable()

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO recorded with an aborted transaction: the first offset of the oldest open
        transaction of another producer, else the offset after the marker."""
        for txn in self._ongoing.values():
            if txn.producer_id != completed.producer_id:
                return txn.first_offset.message_offset
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        """The marker is written; the transaction stays unstable until the high watermark passes it."""
        txn = self._ongoing.pop(completed.first_offset, None)
        if txn is None:
            raise ValueError(f"{self.name}: completing transaction {completed} that was not started")
        txn.last_offset = completed.last_offset
        self._unreplicated[completed.first_offset] = txn
        self._update_first_unstable()

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        if self._unreplicated:
            self._remove_unreplicated_below(high_watermark)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        if self._unreplicated:
            self._remove_unreplicated_below(log_start_offset)

    def _remove_unreplicated_below(self, offset: int) -> None:
        done = [first for first, txn in self._unreplicated.items() if txn.last_offset < offset]
        if done:
            for first in done:
                del self._unreplicated[first]
            self._update_first_unstable()

    def _update_first_unstable(self) -> None:
        undecided = next(iter(self._ongoing.values()), None)
        unreplicated = self._unreplicated[min(self._unreplicated)] if self._unreplicated else None
        if unreplicated is None or (undecided is not None and
                                    undecided.first_offset.message_offset < unreplicated.first_offset.message_offset):
            chosen = undecided
        else:
            chosen = unreplicated
        self.first_unstable_offset = chosen.first_offset if chosen is not None else None

    def forget_positions(self, segment_bases) -> None:
        """The segments at these base offsets were rewritten: positions kept in them are stale."""
        for txn in list(self._ongoing.values()) + list(self._unreplicated.values()):
            if txn.first_offset.segment_base_offset in segment_bases:
                txn.first_offset = LogOffsetMetadata(txn.first_offset.message_offset)
        self._update_first_unstable()

    def active_producers(self) -> list[ActiveProducer]:
        return [ActiveProducer(pid, e.producer_epoch, e.last_seq, e.last_timestamp, e.coordinator_epoch,
                               e.current_txn_first_offset) for pid, e in self.producers.items()]

    def is_empty(self) -> bool:
        return not self.producers and not self._unreplicated

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget producers idle for producer.id.expiration.ms (never one with an open transaction)."""
        expired = [pid for pid, entry in self.producers.items() if self._is_expired(entry, now_ms)]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return entry.current_txn_first_offset < 0 and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms

    def _clear(self) -> None:
        self.producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        self.first_unstable_offset = None

    # -- snapshots -----------------------------------------------------------------------------
    def _list_snapshots(self) -> list[int]:
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        return snapshot_offsets_in(names)

    @property
    def snapshot_offsets(self) -> list[int]:
        return list(self._snapshot_offsets)

    def latest_snapshot_offset(self) -> int | None:
        return self._snapshot_offsets[-1] if self._snapshot_offsets else None

    def take_snapshot(self, offset: int, sync: bool = True) -> str | None:
        """Write the state as of ``offset`` (everything below it applied), unless a snapshot
        at or above it exists already; returns the file written."""
        latest = self.latest_snapshot_offset()
        if latest is not None and latest >= offset:
            return None
        path = snapshot_path(self.dir, offset)
        write_snapshot(path, list(self.producers.values()), sync)
        self._snapshot_offsets.append(offset)
        return path

    def adopt_snapshot(self, offset: int, data: bytes, now_ms: int) -> int:
        """Take another replica's snapshot at ``offset`` as ours and load it (a follower building its log from
        a tiered segment's producer snapshot, Kafka's ReplicaFetcherTierStateMachine); an empty one is none."""
        if data:
            path = snapshot_path(self.dir, offset)
            tmp = path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            if offset not in self._snapshot_offsets:
                bisect.insort(self._snapshot_offsets, offset)
        return self.load_latest_snapshot(offset, now_ms)

    def _delete_snapshot(self, offset: int) -> None:
        i = bisect.bisect_left(self._snapshot_offsets, offset)
        if i < len(self._snapshot_offsets) and self._snapshot_offsets[i] == offset:
            del self._snapshot_offsets[i]
        try:
            os.unlink(snapshot_path(self.dir, offset))
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("%s: cannot delete producer snapshot at %d: %s", self.name, offset, exc)

    def delete_snapshot(self, offset: int) -> None:
        """Delete the snapshot at ``offset`` (its file and its entry), if there is one."""
        self._delete_snapshot(offset)

    def delete_snapshots_before(self, offset: int) -> None:
        for snap in [s for s in self._snapshot_offsets if s < offset]:
            self._delete_snapshot(snap)

    def load_latest_snapshot(self, log_start_offset: int, now_ms: int, at_most: int | None = None) -> int:
        """Replace the state with the latest readable snapshot (at or below ``at_most`` if given);
        returns its offset (the state covers the offsets below it), or ``log_start_offset`` when
        there is none. A corrupt snapshot is deleted with a warning and the one before it tried."""
        self._clear()
        while True:
            i = len(self._snapshot_offsets) if at_most is None else bisect.bisect_right(self._snapshot_offsets, at_most)
            if i == 0:
                return log_start_offset
            offset = self._snapshot_offsets[i - 1]
            path = snapshot_path(self.dir, offset)
            try:
                entries = read_snapshot(path)
            except (OSError, CorruptSnapshotError) as exc:
                log.warning("%s: skipping producer snapshot %s: %s", self.name, path, exc)
                self._delete_snapshot(offset)
                continue
            ongoing = []
            for entry in entries:
                if self._is_expired(entry, now_ms):
                    continue
                self.producers[entry.producer_id] = entry
                if entry.current_txn_first_offset >= 0:
                    ongoing.append(TxnMetadata(entry.producer_id, LogOffsetMetadata(entry.current_txn_first_offset)))
            for txn in sorted(ongoing, key=lambda t: t.first_offset.message_offset):
                self._ongoing[txn.first_offset.message_offset] = txn
            self._update_first_unstable()
            return offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int,
                            at_most: int | None = None) -> int:
        """Drop snapshots outside (log start, log end], then load the latest one left, or the latest
        at or below ``at_most`` (Kafka's truncateAndReload); returns the offset from which the
        log must be replayed."""
        for offset in [s for s in self._snapshot_offsets if s > log_end_offset or s <= log_start_offset]:
            self._delete_snapshot(offset)
        return self.load_latest_snapshot(log_start_offset, now_ms, at_most)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._clear()
        for snap in list(self._snapshot_offsets):
            self._delete_snapshot(snap)

    def __repr__(self) -> str:
        return (f"ProducerStateManager({self.name}, producers={len(self.producers)}, ongoing={list(self._ongoing)}, "
                f"unreplicated={list(self._unreplicated)})")
