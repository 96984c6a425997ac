"""The records a consumer group is written as (Kafka's GroupCoordinatorRecordHelpers, consumer part)."""
from __future__ import annotations

from ...protocol.messages.consumer_offsets import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from ..coordinator_records import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_PARTITION_METADATA,
    CONSUMER_GROUP_REGULAR_EXPRESSION,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    CoordinatorRecord,
)
from .consumer_group_member import ConsumerGroupMember
from .target_assignment_builder import target_assignment_record

_TopicPartitions = ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions


def _topic_partitions(assignment: dict) -> list:
    return [_TopicPartitions(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(assignment.items()) if ps]


def group_epoch_record(group_id: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(CONSUMER_GROUP_METADATA, group_id, None, ConsumerGroupMetadataValue(epoch=epoch))


def subscription_metadata_record(group_id: str, metadata: dict) -> CoordinatorRecord:
    """metadata: {topic name: TopicMetadata}."""
    T = ConsumerGroupPartitionMetadataValue.TopicMetadata
    return CoordinatorRecord(CONSUMER_GROUP_PARTITION_METADATA, group_id, None,
                             ConsumerGroupPartitionMetadataValue(topics=[
                                 T(topic_id=t.topic_id, topic_name=t.name, num_partitions=t.num_partitions,
                                   partition_metadata=[]) for _, t in sorted(metadata.items())]))


def member_metadata_record(group_id: str, member: ConsumerGroupMember) -> CoordinatorRecord:
    V = ConsumerGroupMemberMetadataValue
    classic = None
    if member.classic_member_metadata is not None:
        c = member.classic_member_metadata
        classic = V.ClassicMemberMetadata(session_timeout_ms=c.session_timeout_ms, supported_protocols=[
            V.ClassicProtocol(name=n, metadata=m) for n, m in c.supported_protocols])
    return CoordinatorRecord(CONSUMER_GROUP_MEMBER_METADATA, group_id, member.member_id, V(
        instance_id=member.instance_id, rack_id=member.rack_id, client_id=member.client_id,
        client_host=member.client_host, subscribed_topic_names=list(member.subscribed_topic_names),
        subscribed_topic_regex=member.subscribed_topic_regex, rebalance_timeout_ms=member.rebalance_timeout_ms,
        server_assignor=member.server_assignor, classic_member_metadata=classic))


def current_assignment_record(group_id: str, member: ConsumerGroupMember) -> CoordinatorRecord:
    return CoordinatorRecord(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, member.member_id,
                             ConsumerGroupCurrentMemberAssignmentValue(
                                 member_epoch=member.member_epoch, previous_member_epoch=member.previous_member_epoch,
                                 state=int(member.state),
                                 assigned_partitions=_topic_partitions(member.assigned_partitions),
                                 partitions_pending_revocation=_topic_partitions(
                                     member.partitions_pending_revocation)))


def regular_expression_record(group_id: str, regex: str, topics, version: int, timestamp: int) -> CoordinatorRecord:
    return CoordinatorRecord(CONSUMER_GROUP_REGULAR_EXPRESSION, group_id, regex, ConsumerGroupRegularExpressionValue(
        topics=sorted(topics), version=version, timestamp=timestamp))


def target_assignment_epoch_record(group_id: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group_id, None,
                             ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch))


def member_tombstones(group_id: str, member_id: str) -> list[CoordinatorRecord]:
    """A member leaves: its current assignment, its target, then its subscription (Kafka's order)."""
    return [CoordinatorRecord(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, member_id, None),
            target_assignment_record(group_id, member_id, None),
            CoordinatorRecord(CONSUMER_GROUP_MEMBER_METADATA, group_id, member_id, None)]


def consumer_group_tombstones(group) -> list[CoordinatorRecord]:
    """Delete the whole group: assignments, target, members, regexes, metadata, and the epoch last."""
    g = group.group_id
    out = [CoordinatorRecord(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, g, m, None) for m in group.members]
    out += [target_assignment_record(g, m, None) for m in group.members]
    out.append(CoordinatorRecord(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, g, None, None))
    out += [CoordinatorRecord(CONSUMER_GROUP_MEMBER_METADATA, g, m, None) for m in group.members]
    out += [CoordinatorRecord(CONSUMER_GROUP_REGULAR_EXPRESSION, g, r, None) for r in group.resolved_regexes]
    out.append(CoordinatorRecord(CONSUMER_GROUP_PARTITION_METADATA, g, None, None))
    out.append(CoordinatorRecord(CONSUMER_GROUP_METADATA, g, None, None))
    return out
