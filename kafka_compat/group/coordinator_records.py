"""The records of `__consumer_offsets`, keyed and encoded exactly as Kafka writes them.

Every key and value starts with an int16 version: keys of version 0 and 1 are
offset commits, version 2 is group metadata. A value of None is a tombstone,
which the log cleaner uses to drop the key. Kafka writes offset values as
version 3 (version 1 when the commit carries an explicit expire timestamp,
OffsetCommit v2-4 with a retention time) and group values as version 3.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from ..protocol.messages.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)

_VERSION = struct.Struct(">h")
OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3
GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"


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


def read_key(buf) -> OffsetKey | GroupKey | None:
    """The key of a `__consumer_offsets` record; None for a version we do not know (Kafka skips those)."""
    version = _VERSION.unpack_from(buf, 0)[0]
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
