"""GroupMetadataManager: the groups of this coordinator, classic and consumer, and their records.

It owns the map from group id to group, applies records to it (the ones written
live and the ones read back when a `__consumer_offsets` partition loads), writes
a classic group's metadata after a rebalance, and answers the questions that
span both kinds: ListGroups, deleting a group, which kind a group id is.
The request logic of each protocol lives in ClassicGroupProtocol and
ConsumerGroupProtocol; offsets live in the OffsetMetadataManager.
"""
from __future__ import annotations

import logging

from ..clock import now_ms
from ..protocol.errors import ErrorCode
from ..protocol.messages.consumer_offsets import GroupMetadataValue
from .classic.classic_group import ClassicGroup, GroupState
from .classic.classic_group_member import ClassicGroupMember
from .coordinator_records import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_PARTITION_METADATA,
    CONSUMER_GROUP_REGULAR_EXPRESSION,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    CoordinatorRecord,
    group_metadata_key,
    group_metadata_value,
)
from .group import Group, GroupType
from .modern.consumer_group import ConsumerGroup
from .modern.records import consumer_group_tombstones

log = logging.getLogger(__name__)

# How append failures reach members (Kafka's appendGroupMetadataErrorToResponseError).
STORE_GROUP_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.REBALANCE_IN_PROGRESS,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
}

_REPLAY = {
    CONSUMER_GROUP_METADATA: lambda g, sub, v: g.replay_group_epoch(v),
    CONSUMER_GROUP_PARTITION_METADATA: lambda g, sub, v: g.replay_partition_metadata(v),
    CONSUMER_GROUP_MEMBER_METADATA: lambda g, sub, v: g.replay_member_metadata(sub, v),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: lambda g, sub, v: g.replay_target_assignment_epoch(v),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: lambda g, sub, v: g.replay_target_assignment_member(sub, v),
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: lambda g, sub, v: g.replay_current_assignment(sub, v),
    CONSUMER_GROUP_REGULAR_EXPRESSION: lambda g, sub, v: g.replay_regular_expression(sub, v),
}


def classic_group_to_value(group: ClassicGroup, assignment: dict[str, bytes]) -> GroupMetadataValue:
    protocol = group.protocol_name
    members = [GroupMetadataValue.MemberMetadata(
        member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
        client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
        subscription=m.metadata(protocol), assignment=assignment[m.member_id]) for m in group.members.values()]
    return GroupMetadataValue(protocol_type=group.protocol_type or "", generation=group.generation_id,
                              protocol=protocol, leader=group.leader_id,
                              current_state_timestamp=group.state_timestamp if group.state_timestamp is not None
                              else -1, members=members)


def classic_group_from_value(group_id: str, version: int, v: GroupMetadataValue, clock=now_ms) -> ClassicGroup:
    """A group as it was at its last stored rebalance: Stable with its members, or Empty."""
    group = ClassicGroup(group_id, GroupState.STABLE if v.members else GroupState.EMPTY, clock)
    group.protocol_type = v.protocol_type or None
    group.generation_id = v.generation
    group.protocol_name = v.protocol
    group.leader_id = v.leader
    group.state_timestamp = v.current_state_timestamp if v.current_state_timestamp >= 0 else None
    for m in v.members:
        member = ClassicGroupMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                    m.session_timeout if version == 0 else m.rebalance_timeout, m.session_timeout,
                                    group.protocol_type or "", [(v.protocol, bytes(m.subscription))])
        member.assignment = bytes(m.assignment)
        group.add(member)
    group.subscribed_topics = group.compute_subscribed_topics()
    return group


class GroupMetadataManager:
    def __init__(self, runtime, clock=now_ms):
        self.runtime = runtime
        self.clock = clock
        self.groups: dict[str, Group] = {}

    # ------------------------------------------------------------ lookups
    def get_group(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def group_ids(self) -> list[str]:
        return list(self.groups)

    def classic_group(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    def consumer_groups(self) -> list[ConsumerGroup]:
        return [g for g in self.groups.values() if isinstance(g, ConsumerGroup)]

    def get_or_maybe_create_classic_group(self, group_id: str, create: bool) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        if group is None and create:
            group = self.groups[group_id] = ClassicGroup(group_id, clock=self.clock)
        return group if isinstance(group, ClassicGroup) else None

    def put(self, group: Group) -> None:
        """Install `group` under its id, replacing a group of the other kind (a conversion)."""
        self.groups[group.group_id] = group

    def remove(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if isinstance(group, ClassicGroup) and not group.is_dead:
            group.transition_to(GroupState.DEAD)
        elif group is not None and hasattr(group, "dead"):     # consumer and streams groups
            group.dead = True

    # ------------------------------------------------------------ classic groups: storing
    def store_classic_group(self, group: ClassicGroup, assignment: dict[str, bytes], callback) -> None:
        """Append the group's metadata with this assignment; ``callback(error a member should see)``."""
        value = group_metadata_value(classic_group_to_value(group, assignment))
        self.runtime.append(group.group_id, [(group_metadata_key(group.group_id), value)],
                            lambda error: callback(STORE_GROUP_ERRORS.get(error, error)))

    # ------------------------------------------------------------ consumer groups: records
    def replay(self, record: CoordinatorRecord) -> None:
        """Apply one consumer group record, creating the group if it is the first one seen."""
        group = self.groups.get(record.group)
        if not isinstance(group, ConsumerGroup):
            if record.value is None:
                return
            if isinstance(group, ClassicGroup):
                group.transition_to(GroupState.DEAD)
            group = self.groups[record.group] = ConsumerGroup(record.group)
        _REPLAY[record.type](group, record.sub, record.value)
        if record.type == CONSUMER_GROUP_METADATA and record.value is None:
            self.remove(record.group)

    def write(self, group_id: str, records: list, callback) -> None:
        """Replay consumer group records here, then append them (and any raw (key, value) pairs after them);
        ``callback(error a member should see)`` once durable."""
        raw = []
        for r in records:
            if isinstance(r, CoordinatorRecord):
                self.replay(r)
                raw.append(r.encode())
            else:
                raw.append(r)
        self.runtime.append(group_id, raw, lambda error: callback(STORE_GROUP_ERRORS.get(error, error)))

    # ------------------------------------------------------------ deleting
    def tombstones(self, group: Group) -> list:
        """Records that delete the group's metadata (not its offsets)."""
        if isinstance(group, ClassicGroup):
            return [(group_metadata_key(group.group_id), None)] if group.generation_id > 0 else []
        if group.type == GroupType.SHARE:
            return []       # share groups are not stored yet
        if not isinstance(group, ConsumerGroup):
            from .streams.records import tombstones as streams_tombstones
            return streams_tombstones(group)
        return consumer_group_tombstones(group)

    def maybe_delete_group(self, group_id: str, has_offsets: bool) -> bool:
        """An empty group left without offsets goes, with tombstones for what it stored."""
        group = self.groups.get(group_id)
        if group is None or has_offsets or not group.is_empty or self.runtime.is_group_loading(group_id):
            return False
        records = self.tombstones(group)
        self.remove(group_id)
        if records and self.runtime.topic_exists():
            self.runtime.append(group_id, [r.encode() if isinstance(r, CoordinatorRecord) else r for r in records],
                                lambda error: None)
        return True

    # ------------------------------------------------------------ ListGroups
    def list_groups(self, states: list[str] | None, types: list[str] | None) -> list[tuple[str, str, str, str]]:
        """[(group id, protocol type, state, type)] of the groups passing both filters."""
        wanted_types = {t.lower() for t in types or ()}
        wanted_states = {s.lower() for s in states or ()}
        out = []
        for g in self.groups.values():
            if g.is_dead or self.runtime.is_group_loading(g.group_id):
                continue
            if wanted_types and g.type.value not in wanted_types:
                continue
            if wanted_states and not g.in_states(wanted_states):
                continue
            out.append((g.group_id, g.protocol_type or "", g.state_string, g.type.value))
        return out

    # ------------------------------------------------------------ unloading
    def groups_of_partition(self, index: int) -> list[Group]:
        return [g for g in self.groups.values() if self.runtime.partition_for(g.group_id) == index]


__all__ = ["GroupMetadataManager", "GroupType", "STORE_GROUP_ERRORS", "classic_group_from_value",
           "classic_group_to_value"]
