"""The records of `__consumer_offsets`, keyed and encoded exactly as Kafka writes them.

Every key and value starts with an int16 version. The key's version is the
record type: 0 and 1 are offset commits, 2 is a classic group's metadata, and
3 to 8 and 16 are a consumer group's (KIP-848) records: its epoch, subscription
metadata, each member's subscription, the target assignment (its epoch, then one
record per member), each member's current assignment, and each resolved regular
expression; 17 and 19 to 23 a streams group's (KIP-1071), in the same pattern, with
its topology (23) in place of subscriptions. A value of None is a tombstone, which the log cleaner uses to drop
the key. Kafka writes offset values as version 3 (version 1 when the commit
carries an explicit expire timestamp, OffsetCommit v2-4 with a retention time),
classic group values as version 3 and the consumer group values as version 0.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from ..protocol.messages.consumer_offsets import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataKey,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyKey,
    StreamsGroupTopologyValue,
)
from ..sentinels import GROUP_METADATA_TOPIC_NAME  # noqa: F401  (re-exported)

_VERSION = struct.Struct(">h")
OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3


class OffsetAndMetadata(NamedTuple):
    """A committed offset as the coordinator caches it."""
    offset: int
    leader_epoch: int = -1          # -1: none
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1      # -1: none (only OffsetCommit v2-4 set one)


class OffsetKey(NamedTuple):
    group: str
    topic: str
    partition: int


class GroupKey(NamedTuple):
    group: str


# Consumer group record types: the key version Kafka gives each, its key and value messages.
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16
_CONSUMER_RECORDS = {
    CONSUMER_GROUP_METADATA: (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue, None),
    CONSUMER_GROUP_PARTITION_METADATA: (ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue,
                                        None),
    CONSUMER_GROUP_MEMBER_METADATA: (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue, "member_id"),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: (ConsumerGroupTargetAssignmentMetadataKey,
                                                ConsumerGroupTargetAssignmentMetadataValue, None),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: (ConsumerGroupTargetAssignmentMemberKey,
                                              ConsumerGroupTargetAssignmentMemberValue, "member_id"),
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: (ConsumerGroupCurrentMemberAssignmentKey,
                                               ConsumerGroupCurrentMemberAssignmentValue, "member_id"),
    CONSUMER_GROUP_REGULAR_EXPRESSION: (ConsumerGroupRegularExpressionKey, ConsumerGroupRegularExpressionValue,
                                        "regular_expression"),
}
# a streams group's (KIP-1071): its epoch, topology, members, target assignment and current assignments
STREAMS_GROUP_METADATA = 17
STREAMS_GROUP_MEMBER_METADATA = 19
STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA = 20
STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER = 21
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT = 22
STREAMS_GROUP_TOPOLOGY = 23
STREAMS_RECORD_TYPES = frozenset(range(17, 24)) - {18}
_CONSUMER_RECORDS.update({
    STREAMS_GROUP_METADATA: (StreamsGroupMetadataKey, StreamsGroupMetadataValue, None),
    STREAMS_GROUP_TOPOLOGY: (StreamsGroupTopologyKey, StreamsGroupTopologyValue, None),
    STREAMS_GROUP_MEMBER_METADATA: (StreamsGroupMemberMetadataKey, StreamsGroupMemberMetadataValue, "member_id"),
    STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA: (StreamsGroupTargetAssignmentMetadataKey,
                                               StreamsGroupTargetAssignmentMetadataValue, None),
    STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER: (StreamsGroupTargetAssignmentMemberKey,
                                             StreamsGroupTargetAssignmentMemberValue, "member_id"),
    STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT: (StreamsGroupCurrentMemberAssignmentKey,
                                              StreamsGroupCurrentMemberAssignmentValue, "member_id"),
})
CONSUMER_VALUE_VERSION = 0


class CoordinatorRecord(NamedTuple):
    """A consumer group record before encoding: live changes and loading both replay these."""
    type: int
    group: str
    sub: str | None
    value: object       # the value message; None for a tombstone

    def encode(self) -> tuple[bytes, bytes | None]:
        return consumer_record(self.type, self.group, self.sub, self.value)


class ConsumerRecordKey(NamedTuple):
    """The key of a consumer group record: its type, the group, and the member id or regex (else None)."""
    type: int
    group: str
    sub: str | None = None


def consumer_record_key(record_type: int, group: str, sub: str | None = None) -> bytes:
    key_cls, _, sub_field = _CONSUMER_RECORDS[record_type]
    fields = {"group_id": group}
    if sub_field is not None:
        fields[sub_field] = sub
    return _prefixed(record_type, key_cls(**fields))


def consumer_record_value(value) -> bytes:
    return _prefixed(CONSUMER_VALUE_VERSION, value)


def consumer_record(record_type: int, group: str, sub: str | None, value) -> tuple[bytes, bytes | None]:
    """(key, value) bytes of one consumer group record; a value of None makes the tombstone."""
    return consumer_record_key(record_type, group, sub), None if value is None else consumer_record_value(value)


def read_consumer_value(record_type: int, buf):
    """The value message of a consumer group record (any version: newer ones keep version 0's prefix)."""
    _, value_cls, _ = _CONSUMER_RECORDS[record_type]
    version = _VERSION.unpack_from(buf, 0)[0]
    v, _ = value_cls.decode(buf, min(version, value_cls.MAX_VERSION), 2)
    return v


def _prefixed(version: int, message) -> bytes:
    b = bytearray(_VERSION.pack(version))
    message.encode_into(b, version)
    return bytes(b)


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return _prefixed(OFFSET_KEY_VERSION, OffsetCommitKey(group=group, topic=topic, partition=partition))


def group_metadata_key(group: str) -> bytes:
    return _prefixed(GROUP_KEY_VERSION, GroupMetadataKey(group=group))


def offset_commit_value(o: OffsetAndMetadata) -> bytes:
    version = OFFSET_VALUE_VERSION_WITH_EXPIRY if o.expire_timestamp >= 0 else OFFSET_VALUE_VERSION
    return _prefixed(version, OffsetCommitValue(offset=o.offset, leader_epoch=o.leader_epoch,
                                                metadata=o.metadata, commit_timestamp=o.commit_timestamp,
                                                expire_timestamp=o.expire_timestamp))


def group_metadata_value(value: GroupMetadataValue) -> bytes:
    return _prefixed(GROUP_VALUE_VERSION, value)


def read_key(buf) -> OffsetKey | GroupKey | ConsumerRecordKey | None:
    """The key of a `__consumer_offsets` record; None for a version we do not know (Kafka skips those)."""
    version = _VERSION.unpack_from(buf, 0)[0]
    spec = _CONSUMER_RECORDS.get(version)
    if spec is not None:
        k, _ = spec[0].decode(buf, version, 2)
        return ConsumerRecordKey(version, k.group_id, None if spec[2] is None else getattr(k, spec[2]))
    if version in (0, 1):
        k, _ = OffsetCommitKey.decode(buf, version, 2)
        return OffsetKey(k.group, k.topic, k.partition)
    if version == 2:
        k, _ = GroupMetadataKey.decode(buf, version, 2)
        return GroupKey(k.group)
    return None


def read_offset_value(buf) -> OffsetAndMetadata:
    version = _VERSION.unpack_from(buf, 0)[0]
    v, _ = OffsetCommitValue.decode(buf, version, 2)
    return OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                             v.expire_timestamp if version == 1 else -1)


def read_group_value(buf) -> tuple[int, GroupMetadataValue]:
    version = _VERSION.unpack_from(buf, 0)[0]
    v, _ = GroupMetadataValue.decode(buf, version, 2)
    return version, v


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: 31-polynomial over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % partitions` (abs(MIN_VALUE) is 0 there)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions
