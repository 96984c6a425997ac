"""The share coordinator's state and records (KIP-932; Kafka's ShareCoordinatorShard and
ShareCoordinatorRecordHelpers), sans I/O.

The keys are (group, topic id, partition), on the `__share_group_state` partition
`abs(hash("group:topicId:partition")) % share.coordinator.state.topic.num.partitions` (Java's
String.hashCode). The records are Kafka's: ShareSnapshot (key type 0) and ShareUpdate (key type 1), each
a version-prefixed key and value. The shard answers each share-state request for one key with the records
to append, the error and its message, and replays records (its own as they are written, the log's when a
partition loads) into its state: InitializeShareGroupState writes a snapshot; WriteShareGroupState an
update, and a snapshot instead once `share.coordinator.snapshot.update.records.per.snapshot` updates
followed the last one; ReadShareGroupState with a newer leader epoch records that epoch. A write whose
leader epoch is older than the one recorded is FENCED_LEADER_EPOCH, one whose state epoch is older
FENCED_STATE_EPOCH; reading or writing a share partition never initialized is INVALID_REQUEST.
"""
from __future__ import annotations

import base64
import binascii
import struct
from typing import NamedTuple

from ...clock import now_ms
from ...protocol.errors import ErrorCode
from ...protocol.messages.share_coordinator import (
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareUpdateKey,
    ShareUpdateValue,
)

E = ErrorCode
SNAPSHOT, UPDATE = 0, 1             # the record types: the key's version prefix
_VERSION = struct.Struct(">h")
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def uuid_string(topic_id: bytes) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id).rstrip(b"=").decode()


def coordinator_key(group_id: str, topic_id: bytes, partition: int) -> str:
    """SharePartitionKey.asCoordinatorKey: FindCoordinator's key for the share coordinator."""
    return f"{group_id}:{uuid_string(topic_id)}:{partition}"


def parse_coordinator_key(key: str) -> tuple[str, bytes, int]:
    """SharePartitionKey.getInstance(key): (group, topic id, partition); ValueError as Kafka's validate."""
    if not key:
        raise ValueError("Share partition key cannot be empty")
    tokens = key.split(":")
    if len(tokens) != 3:
        raise ValueError(f"Invalid key format: expected - groupId:topicId:partition, found -  {key}")
    if not tokens[0].strip():
        raise ValueError("GroupId must be alphanumeric string")
    try:
        if len(tokens[1]) > 24:
            raise ValueError
        topic_id = base64.urlsafe_b64decode(tokens[1] + "=" * (-len(tokens[1]) % 4))
        if len(topic_id) != 16:
            raise ValueError
    except (ValueError, binascii.Error):
        raise ValueError(f"Invalid topic ID: {tokens[1]}") from None
    try:
        partition = int(tokens[2])
        if not -(1 << 31) <= partition < 1 << 31 or not tokens[2].lstrip("+-").isdigit():
            raise ValueError
    except ValueError:
        raise ValueError(f"Invalid partition: {tokens[2]}") from None
    return tokens[0].strip(), topic_id, partition


def partition_for(group_id: str, topic_id: bytes, partition: int, num_partitions: int) -> int:
    h = java_string_hash(coordinator_key(group_id, topic_id, partition))
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


class PersistedState(NamedTuple):
    start_offset: int
    state_epoch: int
    batches: list           # [(first offset, last offset, delivery state, delivery count)]


class ShareGroupOffset(NamedTuple):
    """A share partition's state as the coordinator holds it (Kafka's ShareGroupOffset)."""
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    batches: list
    create_timestamp: int = 0
    write_timestamp: int = 0


def _prefixed(version: int, message, message_version: int = 0) -> bytes:
    b = bytearray(_VERSION.pack(version))
    message.encode_into(b, message_version)
    return bytes(b)


def _state_batches(cls, batches_):
    return [cls(first_offset=f, last_offset=last, delivery_state=s, delivery_count=c) for f, last, s, c in batches_]


def snapshot_record(group_id: str, topic_id: bytes, partition: int, state, leader_epoch: int = -1,
                    now: int = 0, delivery_complete: int = -1) -> tuple[bytes, bytes]:
    """A ShareSnapshot record of ``state`` (a ShareGroupOffset, or a PersistedState with the epochs given)."""
    if not isinstance(state, ShareGroupOffset):
        state = ShareGroupOffset(0, state.state_epoch, leader_epoch, state.start_offset, delivery_complete,
                                 state.batches, now, now)
    key = _prefixed(SNAPSHOT, ShareSnapshotKey(group_id=group_id, topic_id=topic_id, partition=partition))
    value = _prefixed(0, ShareSnapshotValue(
        snapshot_epoch=state.snapshot_epoch, state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
        start_offset=state.start_offset, delivery_complete_count=state.delivery_complete_count,
        create_timestamp=state.create_timestamp, write_timestamp=state.write_timestamp,
        state_batches=_state_batches(ShareSnapshotValue.StateBatch, state.batches)))
    return key, value


def update_record(group_id: str, topic_id: bytes, partition: int, snapshot_epoch: int, leader_epoch: int,
                  start_offset: int, delivery_complete: int, batches_: list) -> tuple[bytes, bytes]:
    key = _prefixed(UPDATE, ShareUpdateKey(group_id=group_id, topic_id=topic_id, partition=partition))
    value = _prefixed(0, ShareUpdateValue(
        snapshot_epoch=snapshot_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
        delivery_complete_count=delivery_complete,
        state_batches=_state_batches(ShareUpdateValue.StateBatch, batches_)))
    return key, value


def tombstone_record(group_id: str, topic_id: bytes, partition: int) -> tuple[bytes, None]:
    return _prefixed(SNAPSHOT, ShareSnapshotKey(group_id=group_id, topic_id=topic_id, partition=partition)), None


def read_record(key: bytes, value: bytes | None):
    """((group, topic id, partition), record type, decoded value or None) of a `__share_group_state` record."""
    kind = _VERSION.unpack_from(key, 0)[0]
    if kind not in (SNAPSHOT, UPDATE):
        return None
    k = (ShareSnapshotKey if kind == SNAPSHOT else ShareUpdateKey).decode(key, 0, 2)[0]
    decoded = None
    if value is not None:
        version = _VERSION.unpack_from(value, 0)[0]
        decoded = (ShareSnapshotValue if kind == SNAPSHOT else ShareUpdateValue).decode(value, version, 2)[0]
    return (k.group_id, bytes(k.topic_id), k.partition), kind, decoded


def combine_state_batches(old: list, new: list, start_offset: int) -> list:
    """``new``'s batches written over ``old``'s, nothing below ``start_offset`` (-1: no bound), neighbours of
    one state and delivery count merged (Kafka's PersisterStateBatchCombiner)."""
    out = []
    for f, last, s, c in old:
        pieces = [(f, last)]
        for uf, ul, _, _ in new:
            pieces = [p for lo, hi in pieces for p in ((lo, min(hi, uf - 1)), (max(lo, ul + 1), hi)) if p[0] <= p[1]]
        out.extend((lo, hi, s, c) for lo, hi in pieces)
    merged: list = []
    for f, last, s, c in sorted(out + [tuple(b) for b in new]):
        f = max(f, start_offset)
        if f > last:
            continue
        if merged and merged[-1][1] + 1 >= f and merged[-1][2:] == (s, c):
            merged[-1] = (merged[-1][0], max(merged[-1][1], last), s, c)
        else:
            merged.append((f, last, s, c))
    return merged


def _batches_of(value) -> list:
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in value.state_batches]


class ShareCoordinatorShard:
    """The state of the keys of the `__share_group_state` partitions loaded here, and what each request
    does to it: ``(records to append, error, message)`` per request, sans I/O (Kafka's ShareCoordinatorShard)."""

    def __init__(self, updates_per_snapshot: int = 500, clock=now_ms):
        self.updates_per_snapshot = updates_per_snapshot
        self.clock = clock
        self.states: dict[tuple[str, bytes, int], ShareGroupOffset] = {}
        self.leader_epochs: dict[tuple[str, bytes, int], int] = {}
        self.state_epochs: dict[tuple[str, bytes, int], int] = {}
        self.update_counts: dict[tuple[str, bytes, int], int] = {}

    # ------------------------------------------------------------ replay
    def replay(self, key: bytes, value: bytes | None) -> None:
        read = read_record(key, value)
        if read is None:
            return
        k, kind, v = read
        if kind == SNAPSHOT:
            if v is None:
                for d in (self.states, self.leader_epochs, self.state_epochs, self.update_counts):
                    d.pop(k, None)
                return
            self._raise(self.leader_epochs, k, v.leader_epoch)
            self._raise(self.state_epochs, k, v.state_epoch)
            self.states[k] = ShareGroupOffset(v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset,
                                              v.delivery_complete_count, _batches_of(v), v.create_timestamp,
                                              v.write_timestamp)
            if self.update_counts.get(k, 0) >= self.updates_per_snapshot:
                self.update_counts[k] = 0
            return
        if v is None:
            return
        self._raise(self.leader_epochs, k, v.leader_epoch)
        old = self.states.get(k)
        self.update_counts[k] = 0 if k not in self.update_counts else self.update_counts[k] + 1
        if old is None:
            self.states[k] = ShareGroupOffset(v.snapshot_epoch, 0, v.leader_epoch, v.start_offset,
                                              v.delivery_complete_count, _batches_of(v))
            return
        start = old.start_offset if v.start_offset == -1 else v.start_offset
        self.states[k] = old._replace(
            start_offset=start, delivery_complete_count=v.delivery_complete_count,
            leader_epoch=old.leader_epoch if v.leader_epoch == -1 else v.leader_epoch,
            batches=combine_state_batches(old.batches, _batches_of(v), start))

    @staticmethod
    def _raise(epochs: dict, k, epoch: int) -> None:
        if epochs.get(k, epoch) <= epoch:
            epochs[k] = epoch

    def forget(self, keep) -> None:
        """Drop every key ``keep(key)`` refuses (a partition unloaded)."""
        for k in [k for k in self.states if not keep(k)]:
            for d in (self.states, self.leader_epochs, self.state_epochs, self.update_counts):
                d.pop(k, None)

    # ------------------------------------------------------------ the requests, one key each
    def _state_record(self, k, start_offset: int, leader_epoch: int, delivery_complete: int, batches_: list,
                      update_leader_epoch: bool):
        """A ShareUpdate, or a ShareSnapshot once enough updates followed the last one
        (Kafka's generateShareStateRecord)."""
        current = self.states[k]
        epoch = leader_epoch if update_leader_epoch and leader_epoch != -1 else current.leader_epoch
        group_id, topic_id, partition = k
        if self.update_counts.get(k, 0) >= self.updates_per_snapshot:
            start = current.start_offset if start_offset == -1 else start_offset
            now = self.clock()
            return snapshot_record(group_id, topic_id, partition, ShareGroupOffset(
                current.snapshot_epoch + 1, current.state_epoch, epoch, start, delivery_complete,
                combine_state_batches(current.batches, batches_, start), now, now))
        return update_record(group_id, topic_id, partition, current.snapshot_epoch, epoch, start_offset,
                             delivery_complete, combine_state_batches([], batches_, start_offset))

    def write_state(self, k, state_epoch: int, leader_epoch: int, start_offset: int, delivery_complete: int,
                    batches_: list):
        if k not in self.states:
            return [], E.INVALID_REQUEST, WRITE_UNINITIALIZED
        if leader_epoch != -1 and self.leader_epochs.get(k, leader_epoch) > leader_epoch:
            return [], E.FENCED_LEADER_EPOCH, None
        if state_epoch != -1 and self.state_epochs.get(k, state_epoch) > state_epoch:
            return [], E.FENCED_STATE_EPOCH, None
        return [self._state_record(k, start_offset, leader_epoch, delivery_complete, batches_, False)], E.NONE, None

    def read_state(self, k, leader_epoch: int):
        """([records], error, message, ShareGroupOffset | None): a newer leader epoch is recorded."""
        if k not in self.states:
            return [], E.INVALID_REQUEST, READ_UNINITIALIZED, None
        if self.leader_epochs.get(k, leader_epoch) > leader_epoch:
            return [], E.FENCED_LEADER_EPOCH, None, None
        state = self.states[k]
        if leader_epoch == -1 or self.leader_epochs.get(k) == leader_epoch:
            return [], E.NONE, None, state
        return [self._state_record(k, state.start_offset, leader_epoch, state.delivery_complete_count, [],
                                   True)], E.NONE, None, state

    def initialize_state(self, k, state_epoch: int, start_offset: int):
        if state_epoch != -1 and self.state_epochs.get(k, state_epoch) > state_epoch:
            return [], E.FENCED_STATE_EPOCH, E.FENCED_STATE_EPOCH.message
        old = self.states.get(k)
        now = self.clock()
        group_id, topic_id, partition = k
        return [snapshot_record(group_id, topic_id, partition, ShareGroupOffset(
            0 if old is None else old.snapshot_epoch + 1, state_epoch, -1, start_offset, -1, [], now, now))], \
            E.NONE, None

    def delete_state(self, k):
        if k not in self.states:
            return [], E.NONE, None
        return [tombstone_record(*k)], E.NONE, None

    def read_summary(self, k) -> ShareGroupOffset | None:
        return self.states.get(k)


__all__ = ["READ_UNINITIALIZED", "WRITE_UNINITIALIZED", "PersistedState", "ShareCoordinatorShard",
           "ShareGroupOffset", "combine_state_batches", "coordinator_key", "java_string_hash",
           "parse_coordinator_key", "partition_for", "read_record", "snapshot_record", "tombstone_record",
           "update_record"]
