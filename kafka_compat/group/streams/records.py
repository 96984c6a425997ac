"""The records a streams group is written as in `__consumer_offsets` (Kafka's StreamsCoordinatorRecordHelpers),
and replaying them onto a StreamsGroup (what loading a partition does).

Writing is a diff: the protocol snapshots the group before a change and `changes(before, group)` gives the
records that take the stored group from the one to the other, in Kafka's order: a member that left first
(its current assignment, target and metadata tombstones), then member metadata, the topology, the group
epoch, the target assignment (its members, then its epoch), the current assignments.
"""
from __future__ import annotations

import hashlib
from typing import NamedTuple

from ...protocol.messages.consumer_offsets import (
    StreamsGroupCurrentMemberAssignmentValue as CurrentV,
)
from ...protocol.messages.consumer_offsets import (
    StreamsGroupMemberMetadataValue as MemberV,
)
from ...protocol.messages.consumer_offsets import (
    StreamsGroupMetadataValue as MetadataV,
)
from ...protocol.messages.consumer_offsets import (
    StreamsGroupTargetAssignmentMemberValue as TargetV,
)
from ...protocol.messages.consumer_offsets import (
    StreamsGroupTargetAssignmentMetadataValue as TargetEpochV,
)
from ...protocol.messages.consumer_offsets import (
    StreamsGroupTopologyValue as TopologyV,
)
from ..coordinator_records import (
    STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    STREAMS_GROUP_MEMBER_METADATA,
    STREAMS_GROUP_METADATA,
    STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER,
    STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA,
    STREAMS_GROUP_TOPOLOGY,
    CoordinatorRecord,
)
from .streams_group import MemberState, StreamsGroup, StreamsGroupMember
from .tasks import EMPTY, TasksTuple
from .topology import CopartitionGroup, StreamsTopology, Subtopology, TopicInfo


def signature_hash(signature: tuple) -> int:
    """The int64 MetadataHash of what the topology's configuration depended on (topic partition counts)."""
    return int.from_bytes(hashlib.sha256(repr(signature).encode()).digest()[:8], "big", signed=True)


class Snapshot(NamedTuple):
    group_epoch: int
    metadata_hash: int
    configured_topology_epoch: int
    topology: object
    members: dict
    target: dict
    assignment_epoch: int


def snapshot(group: StreamsGroup) -> Snapshot:
    return Snapshot(group.group_epoch, group.metadata_hash, group.configured_topology_epoch, group.topology,
                    dict(group.members), dict(group.target_assignment), group.assignment_epoch)


EMPTY_SNAPSHOT = Snapshot(0, 0, -1, None, {}, {}, 0)


# ---------------------------------------------------------------- values
def _task_ids(cls, tasks: dict) -> list:
    return [cls(subtopology_id=s, partitions=sorted(p)) for s, p in sorted(tasks.items())]


def _metadata_key(m: StreamsGroupMember) -> tuple:
    return (m.instance_id, m.rack_id, m.client_id, m.client_host, m.rebalance_timeout_ms, m.topology_epoch,
            m.process_id, m.user_endpoint, m.client_tags)


def _current_key(m: StreamsGroupMember) -> tuple:
    return m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.pending_revocation


def member_value(m: StreamsGroupMember) -> MemberV:
    return MemberV(instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
                   rebalance_timeout_ms=m.rebalance_timeout_ms, topology_epoch=m.topology_epoch,
                   process_id=m.process_id,
                   user_endpoint=MemberV.Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1])
                   if m.user_endpoint else None,
                   client_tags=[MemberV.KeyValue(key=k, value=v) for k, v in m.client_tags])


def current_value(m: StreamsGroupMember) -> CurrentV:
    a, p = m.assigned, m.pending_revocation
    T = CurrentV.TaskIds
    return CurrentV(member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=int(m.state),
                    active_tasks=_task_ids(T, a.active), standby_tasks=_task_ids(T, a.standby),
                    warmup_tasks=_task_ids(T, a.warmup), active_tasks_pending_revocation=_task_ids(T, p.active),
                    standby_tasks_pending_revocation=_task_ids(T, p.standby),
                    warmup_tasks_pending_revocation=_task_ids(T, p.warmup))


def target_value(t: TasksTuple) -> TargetV:
    return TargetV(active_tasks=_task_ids(TargetV.TaskIds, t.active),
                   standby_tasks=_task_ids(TargetV.TaskIds, t.standby),
                   warmup_tasks=_task_ids(TargetV.TaskIds, t.warmup))


def topology_value(t: StreamsTopology) -> TopologyV:
    def info(i):
        return TopologyV.TopicInfo(name=i.name, partitions=i.partitions, replication_factor=i.replication_factor,
                                   topic_configs=[TopologyV.TopicConfig(key=k, value=v) for k, v in i.configs])
    return TopologyV(epoch=t.epoch, subtopologies=[TopologyV.Subtopology(
        subtopology_id=s.subtopology_id, source_topics=list(s.source_topics), source_topic_regex=[],
        state_changelog_topics=[info(i) for i in s.state_changelog_topics],
        repartition_sink_topics=list(s.repartition_sink_topics),
        repartition_source_topics=[info(i) for i in s.repartition_source_topics],
        copartition_groups=[TopologyV.CopartitionGroup(source_topics=list(g.source_topics), source_topic_regex=[],
                                                       repartition_source_topics=list(g.repartition_source_topics))
                            for g in s.copartition_groups]) for s in t.subtopologies])


def _record(kind: int, group_id: str, sub, value) -> CoordinatorRecord:
    return CoordinatorRecord(kind, group_id, sub, value)


def _member_tombstones(group_id: str, member_id: str) -> list:
    return [_record(STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, member_id, None),
            _record(STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member_id, None),
            _record(STREAMS_GROUP_MEMBER_METADATA, group_id, member_id, None)]


def changes(before: Snapshot, group: StreamsGroup) -> list[CoordinatorRecord]:
    gid = group.group_id
    out: list = []
    for member_id in sorted(set(before.members) - set(group.members)):
        out.extend(_member_tombstones(gid, member_id))
    for member_id, m in sorted(group.members.items()):
        old = before.members.get(member_id)
        if old is None or _metadata_key(old) != _metadata_key(m):
            out.append(_record(STREAMS_GROUP_MEMBER_METADATA, gid, member_id, member_value(m)))
    if group.topology is not None and group.topology != before.topology:
        out.append(_record(STREAMS_GROUP_TOPOLOGY, gid, None, topology_value(group.topology)))
    if (group.group_epoch, group.metadata_hash, group.configured_topology_epoch) != \
            (before.group_epoch, before.metadata_hash, before.configured_topology_epoch):
        out.append(_record(STREAMS_GROUP_METADATA, gid, None, MetadataV(
            epoch=group.group_epoch, metadata_hash=group.metadata_hash,
            validated_topology_epoch=group.configured_topology_epoch, last_assignment_configs=None)))
    for member_id, t in sorted(group.target_assignment.items()):
        if member_id in group.members and before.target.get(member_id) != t:
            out.append(_record(STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, member_id, target_value(t)))
    if group.assignment_epoch != before.assignment_epoch:
        out.append(_record(STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, gid, None,
                           TargetEpochV(assignment_epoch=group.assignment_epoch)))
    for member_id, m in sorted(group.members.items()):
        old = before.members.get(member_id)
        if old is None or _current_key(old) != _current_key(m):
            out.append(_record(STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, member_id, current_value(m)))
    return out


def tombstones(group: StreamsGroup) -> list[CoordinatorRecord]:
    """Everything the group stored, deleted (DeleteGroups; an empty group whose offsets are gone)."""
    gid = group.group_id
    out: list = []
    for member_id in sorted(group.members):
        out.extend(_member_tombstones(gid, member_id))
    out.append(_record(STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, gid, None, None))
    out.append(_record(STREAMS_GROUP_TOPOLOGY, gid, None, None))
    out.append(_record(STREAMS_GROUP_METADATA, gid, None, None))
    return out


# ---------------------------------------------------------------- replaying
def _tasks(items) -> dict:
    from .tasks import normalize
    return normalize([(t.subtopology_id, t.partitions) for t in items or ()])


def _topology_from_value(v: TopologyV) -> StreamsTopology:
    def info(i):
        return TopicInfo(i.name, i.partitions, i.replication_factor,
                         tuple((c.key, c.value) for c in i.topic_configs or ()))
    return StreamsTopology(v.epoch, tuple(sorted(Subtopology(
        s.subtopology_id, tuple(s.source_topics), tuple(s.repartition_sink_topics),
        tuple(info(i) for i in s.state_changelog_topics), tuple(info(i) for i in s.repartition_source_topics),
        tuple(CopartitionGroup(tuple(g.source_topics), tuple(g.repartition_source_topics))
              for g in s.copartition_groups)) for s in v.subtopologies)))


def replay(groups, record: CoordinatorRecord) -> None:
    """Apply one streams group record to the GroupMetadataManager `groups`."""
    group = groups.get_group(record.group)
    if not isinstance(group, StreamsGroup):
        if record.value is None:
            return
        if group is not None:
            groups.remove(record.group)
        group = StreamsGroup(record.group)
        groups.put(group)
    v, kind, sub = record.value, record.type, record.sub
    if kind == STREAMS_GROUP_METADATA:
        if v is None:
            groups.remove(record.group)
            return
        group.group_epoch, group.metadata_hash = v.epoch, v.metadata_hash
        group.configured_topology_epoch = v.validated_topology_epoch
    elif kind == STREAMS_GROUP_TOPOLOGY:
        group.topology = None if v is None else _topology_from_value(v)
    elif kind == STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA:
        group.assignment_epoch = 0 if v is None else v.assignment_epoch
    elif kind == STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER:
        if v is None:
            group.target_assignment.pop(sub, None)
        else:
            group.target_assignment[sub] = TasksTuple(_tasks(v.active_tasks), _tasks(v.standby_tasks),
                                                      _tasks(v.warmup_tasks))
    elif kind == STREAMS_GROUP_MEMBER_METADATA:
        if v is None:
            group.remove_member(sub)
            return
        m = group.members.get(sub) or StreamsGroupMember(sub)
        group.put_member(m.with_(
            instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id, client_host=v.client_host,
            rebalance_timeout_ms=v.rebalance_timeout_ms, topology_epoch=v.topology_epoch, process_id=v.process_id,
            user_endpoint=(v.user_endpoint.host, v.user_endpoint.port) if v.user_endpoint else None,
            client_tags=tuple((kv.key, kv.value) for kv in v.client_tags)))
    elif kind == STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        m = group.members.get(sub)
        if m is None:
            if v is None:
                return
            m = StreamsGroupMember(sub)
        if v is None:
            group.put_member(m.with_(assigned=EMPTY, pending_revocation=EMPTY))
            return
        try:
            state = MemberState(v.state)
        except ValueError:
            state = MemberState.UNKNOWN
        group.put_member(m.with_(
            member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch, state=state,
            assigned=TasksTuple(_tasks(v.active_tasks), _tasks(v.standby_tasks), _tasks(v.warmup_tasks)),
            pending_revocation=TasksTuple(_tasks(v.active_tasks_pending_revocation),
                                          _tasks(v.standby_tasks_pending_revocation),
                                          _tasks(v.warmup_tasks_pending_revocation))))
