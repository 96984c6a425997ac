"""Reconciliation: move one member from its current assignment toward its target (CurrentAssignmentBuilder).

The rule is revoke before assign: a partition is never given to a member while
another member still owns it. A member that must give partitions up stays at its
epoch in UNREVOKED_PARTITIONS and is told only what it keeps; once a heartbeat
shows it no longer owns them, it moves to the target epoch and receives the
partitions that are free (UNRELEASED_PARTITIONS while some are not yet).
"""
from __future__ import annotations

from typing import Callable

from ...protocol.errors import ErrorCode, KafkaError
from .consumer_group_member import ConsumerGroupMember, MemberState


def _owns_any(owned: list | None, partitions: dict) -> bool:
    """Whether the heartbeat's owned partitions (None: not sent, assume yes) include any of `partitions`."""
    if owned is None:
        return True
    for topic_id, parts in owned:
        pending = partitions.get(topic_id)
        if pending and any(p in pending for p in parts):
            return True
    return False


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: dict,
              current_partition_epoch: Callable[[bytes, int], int], owned: list | None) -> ConsumerGroupMember:
    """The member after one reconciliation step.

    `target` is its target assignment {topic id: partitions} at `target_epoch`;
    `current_partition_epoch(topic id, p)` is -1 for a partition nobody owns;
    `owned` is what the member says it owns [(topic id, partitions)], None if unchanged.
    """
    state = member.state
    if state == MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, current_partition_epoch, owned)
        return member
    if state == MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.partitions_pending_revocation):
            return member
        return _next(member, member.member_epoch, target_epoch, target, current_partition_epoch, owned)
    if state == MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, current_partition_epoch, owned)
    if owned is None or owned:
        raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH,
                         "The consumer group member is in an unknown state: it must give up its partitions and rejoin.")
    return _next(member, target_epoch, target_epoch, target, current_partition_epoch, owned)


def _next(member: ConsumerGroupMember, member_epoch: int, target_epoch: int, target: dict,
          current_partition_epoch, owned) -> ConsumerGroupMember:
    current = member.assigned_partitions
    assigned: dict = {}
    revoking: dict = {}
    pending: dict = {}
    unreleased = False
    for topic_id in set(target) | set(current):
        want = target.get(topic_id, frozenset())
        have = current.get(topic_id, frozenset())
        keep = have & want
        give_up = have - keep
        free = set()
        for p in want - keep:
            if current_partition_epoch(topic_id, p) == -1:
                free.add(p)
            else:
                unreleased = True
        if keep:
            assigned[topic_id] = frozenset(keep)
        if give_up:
            revoking[topic_id] = frozenset(give_up)
        if free:
            pending[topic_id] = frozenset(free)

    if revoking and _owns_any(owned, revoking):
        # Revoke first: the member keeps its epoch and sees only what it keeps.
        return member.with_(state=MemberState.UNREVOKED_PARTITIONS, assigned_partitions=assigned,
                            partitions_pending_revocation=revoking,
                            **_epoch_change(member, member_epoch))
    for topic_id, parts in pending.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | parts
    return member.with_(state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
                        assigned_partitions=assigned, partitions_pending_revocation={},
                        **_epoch_change(member, target_epoch))


def _epoch_change(member: ConsumerGroupMember, epoch: int) -> dict:
    if epoch == member.member_epoch:
        return {}
    return {"member_epoch": epoch, "previous_member_epoch": member.member_epoch}
