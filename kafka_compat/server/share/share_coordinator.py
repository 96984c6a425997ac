"""Durable share-partition state in `__share_group_state` (KIP-932's share coordinator), on a single node.

Kafka's share coordinator keeps each share partition's state (start offset, and the state and delivery
count of its in-flight records as batches) in the internal topic `__share_group_state`, keyed by
(group, topic id, partition) on the partition `abs(hash("group:topicId:partition")) %
share.coordinator.state.topic.num.partitions` (Java's String.hashCode). Its records are Kafka's:
ShareSnapshot (key type 0) and ShareUpdate (key type 1), each a version-prefixed key and value.

Here the leader's SharePartitionManager writes a ShareSnapshot after every change it must keep
(acknowledgements, releases, expired locks, offset resets), and reads the state back when a share
partition is first used after a start: every partition of the topic is replayed once at start-up, the
latest ShareSnapshot per key with the ShareUpdates after it applied on top. Acquired records are
stored as Available, as Kafka stores them. A single node only: in a cluster the share-state RPCs
(83-87) to a coordinator on another broker are not built, and share partitions stay in memory.
"""
from __future__ import annotations

import base64
import logging
import struct
from typing import NamedTuple

from kafka_compat.storage.validator import COORDINATOR

from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.share_coordinator import (
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareUpdateKey,
    ShareUpdateValue,
)
from ...protocol.records import batches, build_batch
from ...sentinels import SHARE_GROUP_STATE_TOPIC_NAME

log = logging.getLogger(__name__)
SHARE_GROUP_STATE_TOPIC = SHARE_GROUP_STATE_TOPIC_NAME
SNAPSHOT, UPDATE = 0, 1             # the record types: the key's version prefix
_VERSION = struct.Struct(">h")
LOAD_BUFFER_BYTES = 5 * 1024 * 1024


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


def partition_for(group_id: str, topic_id: bytes, partition: int, num_partitions: int) -> int:
    h = java_string_hash(f"{group_id}:{uuid_string(topic_id)}:{partition}")
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


class PersistedState(NamedTuple):
    start_offset: int
    state_epoch: int
    batches: list           # [(first offset, last offset, delivery state, delivery count)]


def _prefixed(version: int, message, message_version: int = 0) -> bytes:
    b = bytearray(_VERSION.pack(version))
    message.encode_into(b, message_version)
    return bytes(b)


def snapshot_record(group_id: str, topic_id: bytes, partition: int, state: PersistedState, leader_epoch: int,
                    now_ms: int, delivery_complete: int = -1) -> tuple[bytes, bytes]:
    key = _prefixed(SNAPSHOT, ShareSnapshotKey(group_id=group_id, topic_id=topic_id, partition=partition))
    value = _prefixed(0, ShareSnapshotValue(
        snapshot_epoch=0, state_epoch=state.state_epoch, leader_epoch=leader_epoch, start_offset=state.start_offset,
        delivery_complete_count=delivery_complete, create_timestamp=now_ms, write_timestamp=now_ms,
        state_batches=[ShareSnapshotValue.StateBatch(first_offset=f, last_offset=last, delivery_state=s,
                                                     delivery_count=c) for f, last, s, c in state.batches]))
    return key, value


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


def _overlay(old: list, update: list) -> list:
    """State batches with an update's batches written over them (Kafka's combineStateBatches, simplified)."""
    out = []
    for f, last, s, c in old:
        pieces = [(f, last)]
        for uf, ul, _, _ in update:
            pieces = [p for lo, hi in pieces for p in ((lo, min(hi, uf - 1)), (max(lo, ul + 1), hi)) if p[0] <= p[1]]
        out.extend((lo, hi, s, c) for lo, hi in pieces)
    return sorted(out + list(update))


class ShareCoordinator:
    def __init__(self, config, replica_manager, controller, replication_factor: int = 1):
        self.replica_manager = replica_manager
        self.controller = controller
        self.num_partitions = config["share.coordinator.state.topic.num.partitions"]
        self.replication_factor = replication_factor
        self.segment_bytes = config["share.coordinator.state.topic.segment.bytes"]
        self.min_isr = config["share.coordinator.state.topic.min.isr"]
        self.states: dict[tuple[str, bytes, int], PersistedState] = {}

    # ------------------------------------------------------------ the topic
    def ensure_topic(self) -> bool:
        if self.replica_manager.get_partition(SHARE_GROUP_STATE_TOPIC, 0) is not None:
            return True
        configs = {"cleanup.policy": "delete", "compression.type": "producer", "retention.ms": "-1",
                   "segment.bytes": str(self.segment_bytes), "min.insync.replicas": str(self.min_isr)}
        try:
            self.controller.create_topic(SHARE_GROUP_STATE_TOPIC, self.num_partitions, self.replication_factor,
                                         configs)
        except KafkaError as e:
            log.error("cannot create %s: %s", SHARE_GROUP_STATE_TOPIC, e)
            return False
        log.info("created %s with %d partitions", SHARE_GROUP_STATE_TOPIC, self.num_partitions)
        return self.replica_manager.get_partition(SHARE_GROUP_STATE_TOPIC, 0) is not None

    # ------------------------------------------------------------ loading (at start-up, in a worker thread)
    def load(self) -> int:
        """Replay every hosted partition of the topic; returns how many share partitions have state."""
        for index in range(self.num_partitions):
            if self.replica_manager.get_partition(SHARE_GROUP_STATE_TOPIC, index) is None:
                continue
            position, end = self.replica_manager.log_offsets(SHARE_GROUP_STATE_TOPIC, index)
            while position < end:
                data = self.replica_manager.read_local(SHARE_GROUP_STATE_TOPIC, index, position,
                                                       LOAD_BUFFER_BYTES).records.read_bytes()
                if not data:
                    break
                for batch in batches(data):
                    for record in batch.records():
                        if record.key is not None:
                            self._replay(bytes(record.key), None if record.value is None else bytes(record.value))
                    position = batch.last_offset + 1
        if self.states:
            log.info("loaded the state of %d share partitions from %s", len(self.states), SHARE_GROUP_STATE_TOPIC)
        return len(self.states)

    def _replay(self, key: bytes, value: bytes | None) -> None:
        read = read_record(key, value)
        if read is None:
            return
        k, kind, v = read
        if v is None:
            self.states.pop(k, None)
            return
        batches_ = [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in v.state_batches]
        if kind == SNAPSHOT:
            self.states[k] = PersistedState(v.start_offset, v.state_epoch, batches_)
            return
        old = self.states.get(k)
        if old is None:
            return
        start = v.start_offset if v.start_offset >= 0 else old.start_offset
        kept = [b for b in _overlay(old.batches, batches_) if b[1] >= start]
        self.states[k] = PersistedState(start, old.state_epoch, kept)

    # ------------------------------------------------------------ the persister's calls
    def read(self, group_id: str, topic_id: bytes, partition: int) -> PersistedState | None:
        return self.states.get((group_id, topic_id, partition))

    def write(self, group_id: str, topic_id: bytes, partition: int, state: PersistedState | None, leader_epoch: int,
              now_ms: int, delivery_complete: int = -1) -> None:
        """Append the share partition's snapshot (None: a tombstone, the state deleted)."""
        key = (group_id, topic_id, partition)
        if state is None:
            if self.states.pop(key, None) is None:
                return
            record = (_prefixed(SNAPSHOT, ShareSnapshotKey(group_id=group_id, topic_id=topic_id,
                                                           partition=partition)), None)
        else:
            self.states[key] = state
            record = snapshot_record(group_id, topic_id, partition, state, leader_epoch, now_ms, delivery_complete)
        if not self.ensure_topic():
            return
        index = partition_for(group_id, topic_id, partition, self.num_partitions)
        results = self.replica_manager.append_records(
            30000, 1, [(SHARE_GROUP_STATE_TOPIC, index, bytearray(build_batch([record])))], origin=COORDINATOR,
            internal_topics_allowed=True)
        if isinstance(results, list) and results and results[0].error_code:
            log.warning("writing share state to %s-%d failed: %s", SHARE_GROUP_STATE_TOPIC, index,
                        ErrorCode(results[0].error_code).name)


__all__ = ["SHARE_GROUP_STATE_TOPIC", "PersistedState", "ShareCoordinator", "java_string_hash", "partition_for",
           "read_record", "snapshot_record"]
