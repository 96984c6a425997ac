"""The next target assignment of a consumer group (Kafka's TargetAssignmentBuilder).

It runs the group's assignor over the members as they will be after this request
(one member added, updated, replaced or removed), with the subscribed topics'
partition counts, starting from the current target for stickiness. What it
returns is the delta as records: one ConsumerGroupTargetAssignmentMember per
member whose target changed (and a tombstone per member gone), then the
ConsumerGroupTargetAssignmentMetadata carrying the new assignment epoch.
"""
from __future__ import annotations

from ...protocol.messages.consumer_offsets import (
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from ..assignor import GroupSpec, MemberSubscription
from ..coordinator_records import (
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    CoordinatorRecord,
)


def target_assignment_record(group_id: str, member_id: str, assignment: dict | None) -> CoordinatorRecord:
    value = None if assignment is None else ConsumerGroupTargetAssignmentMemberValue(topic_partitions=[
        ConsumerGroupTargetAssignmentMemberValue.TopicPartition(topic_id=t, partitions=sorted(ps))
        for t, ps in sorted(assignment.items()) if ps])
    return CoordinatorRecord(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member_id, value)


def build_target_assignment(group, group_epoch: int, assignor, members: dict, subscription_metadata: dict,
                            member_topics) -> tuple[dict, list[CoordinatorRecord]]:
    """(new target {member id: {topic id: frozenset}}, records).

    `members` are the members as they will be; `member_topics(member)` the topic names one consumes;
    `subscription_metadata` {topic name: TopicMetadata} of the subscribed topics that exist.
    """
    topics = {t.topic_id: t.num_partitions for t in subscription_metadata.values()}
    ids = {name: t.topic_id for name, t in subscription_metadata.items()}
    current = dict(group.target_assignment)
    for member_id, member in members.items():
        if member_id not in current and member.instance_id is not None:
            # A static member back with a new member id keeps its predecessor's target.
            previous = group.static_members.get(member.instance_id)
            if previous is not None and previous in current:
                current[member_id] = current[previous]
    spec = GroupSpec(
        members={mid: MemberSubscription(frozenset(ids[n] for n in member_topics(m) if n in ids), m.instance_id,
                                         m.rack_id)
                 for mid, m in members.items()},
        current=current)
    result = assignor.assign(spec, topics) if members else {}
    target = {mid: {t: ps for t, ps in result.get(mid, {}).items() if ps} for mid in members}
    records = []
    for member_id, assignment in target.items():
        if group.target_assignment.get(member_id) != assignment:
            records.append(target_assignment_record(group.group_id, member_id, assignment))
    for member_id in group.target_assignment:
        if member_id not in target:
            records.append(target_assignment_record(group.group_id, member_id, None))
    records.append(CoordinatorRecord(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group.group_id, None,
                                     ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=group_epoch)))
    return target, records
