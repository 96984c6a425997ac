"""A streams group and its members (Kafka's StreamsGroup, StreamsGroupMember), and how one member moves
toward its target assignment (Kafka's streams CurrentAssignmentBuilder).

Three epochs as in KIP-848: the group epoch (membership, topology or metadata changed), the assignment
epoch (the group epoch the target was computed at) and each member's epoch (the target it has reached).
Reconciling revokes before it assigns: an active task is handed to a member only once no other member
runs it, and a standby or warm-up only once the member's process holds no other copy of the task.
"""
from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

from ...protocol.errors import ErrorCode
from ..group import GroupType, ModernGroup
from .tasks import EMPTY, TasksTuple, intersect, minus, normalize

LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH = -1, -2


class MemberState(enum.IntEnum):
    STABLE = 0
    UNREVOKED_TASKS = 1
    UNRELEASED_TASKS = 2
    UNKNOWN = 127


class StreamsGroupState:
    EMPTY, NOT_READY, ASSIGNING, RECONCILING, STABLE, DEAD = \
        "Empty", "NotReady", "Assigning", "Reconciling", "Stable", "Dead"


@dataclass(frozen=True)
class StreamsGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = 0
    process_id: str = ""
    user_endpoint: tuple | None = None          # (host, port)
    client_tags: tuple = ()                     # ((key, value), ...)
    assigned: TasksTuple = EMPTY
    pending_revocation: TasksTuple = EMPTY
    task_offsets: tuple = ()                    # ((subtopology, partition, offset), ...)
    task_end_offsets: tuple = ()

    def with_(self, **changes) -> StreamsGroupMember:
        return dataclasses.replace(self, **changes)

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == epoch


def reconcile(member: StreamsGroupMember, target_epoch: int, target: TasksTuple, owned: TasksTuple | None,
              active_owner, other_copies) -> StreamsGroupMember:
    """One step of `member` toward `target` at `target_epoch`. `owned` is what the member reported holding
    (None: not reported). `active_owner(sub, p)` is the process id running the task actively (None: free),
    `other_copies(sub, p)` the process ids holding it as a standby or warm-up."""
    if member.state == MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, owned, active_owner, other_copies)
    if member.state == MemberState.UNREVOKED_TASKS:
        if owned is None or owned.contains_any(member.pending_revocation):
            return member
        return _next(member, member.member_epoch, target_epoch, target, owned, active_owner, other_copies)
    return _next(member, member.member_epoch, target_epoch, target, owned, active_owner, other_copies)


def _split(current: dict, wanted: dict, unreleased) -> tuple[dict, dict, dict, bool]:
    keep = intersect(current, wanted)
    revoke = minus(current, keep)
    add: dict = {}
    held_back = False
    for sub, parts in minus(wanted, keep).items():
        free = frozenset(p for p in parts if not unreleased(sub, p))
        held_back |= len(free) < len(parts)
        if free:
            add[sub] = free
    return keep, revoke, add, held_back


def _next(member, epoch, target_epoch, target, owned, active_owner, other_copies) -> StreamsGroupMember:
    me = member.process_id

    def active_unreleased(sub, p):
        return active_owner(sub, p) is not None or me in other_copies(sub, p)

    def copy_unreleased(sub, p):
        return active_owner(sub, p) == me or me in other_copies(sub, p)

    parts = [_split(member.assigned.active, target.active, active_unreleased),
             _split(member.assigned.standby, target.standby, copy_unreleased),
             _split(member.assigned.warmup, target.warmup, copy_unreleased)]
    keep = TasksTuple(*(p[0] for p in parts))
    revoke = TasksTuple(*(p[1] for p in parts))
    add = TasksTuple(*(p[2] for p in parts))
    held_back = any(p[3] for p in parts)
    if not revoke.is_empty() and (owned is None or owned.contains_any(revoke)):
        return member.with_(state=MemberState.UNREVOKED_TASKS, member_epoch=epoch,
                            previous_member_epoch=member.member_epoch if epoch != member.member_epoch
                            else member.previous_member_epoch, assigned=keep, pending_revocation=revoke)
    state = MemberState.UNRELEASED_TASKS if held_back else MemberState.STABLE
    previous = member.member_epoch if target_epoch != member.member_epoch else member.previous_member_epoch
    return member.with_(state=state, member_epoch=target_epoch, previous_member_epoch=previous,
                        assigned=keep.merge(add), pending_revocation=EMPTY)


class StreamsGroup(ModernGroup):
    type = GroupType.STREAMS

    def __init__(self, group_id: str):
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, StreamsGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.target_assignment: dict[str, TasksTuple] = {}
        self.topology = None                    # StreamsTopology
        self.configured = None                  # ConfiguredTopology against the last metadata seen
        self.metadata_hash = 0                  # of the metadata the group epoch last moved for
        self.configured_topology_epoch = -1     # the topology epoch that metadata was checked against
        self.endpoint_information_epoch = 0
        self.shutdown_requested = False
        self.created_ms: int | None = None      # when the first member joined (the initial rebalance delay)
        self.initial_assignment_done = False
        self.dead = False
        # who holds what right now: task -> process id (active), task -> {process ids} (standby, warm-up)
        self.active_process: dict[tuple, str] = {}
        self.copy_processes: dict[tuple, dict] = {}

    def __repr__(self) -> str:
        return (f"StreamsGroup({self.group_id!r}, {self.state_string}, epoch={self.group_epoch}, "
                f"assignment_epoch={self.assignment_epoch}, members={list(self.members)})")

    # ------------------------------------------------------------ state
    @property
    def state_string(self) -> str:
        if self.dead:
            return StreamsGroupState.DEAD
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.configured is None or not self.configured.is_ready:
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return StreamsGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    @property
    def protocol_type(self) -> str:
        return "streams"

    # ------------------------------------------------------------ members and who holds what
    def put_member(self, member: StreamsGroupMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._hold(member)

    def remove_member(self, member_id: str) -> StreamsGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._release(member)
            if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
        self.target_assignment.pop(member_id, None)
        return member

    @staticmethod
    def _holdings(member: StreamsGroupMember) -> TasksTuple:
        return member.assigned.merge(member.pending_revocation)

    def _hold(self, member: StreamsGroupMember) -> None:
        tasks = self._holdings(member)
        for sub, parts in tasks.active.items():
            for p in parts:
                self.active_process[(sub, p)] = member.process_id
        for kind in (tasks.standby, tasks.warmup):
            for sub, parts in kind.items():
                for p in parts:
                    held = self.copy_processes.setdefault((sub, p), {})
                    held[member.process_id] = held.get(member.process_id, 0) + 1

    def _release(self, member: StreamsGroupMember) -> None:
        tasks = self._holdings(member)
        for sub, parts in tasks.active.items():
            for p in parts:
                if self.active_process.get((sub, p)) == member.process_id:
                    del self.active_process[(sub, p)]
        for kind in (tasks.standby, tasks.warmup):
            for sub, parts in kind.items():
                for p in parts:
                    held = self.copy_processes.get((sub, p), {})
                    if held.get(member.process_id, 0) > 1:
                        held[member.process_id] -= 1
                    else:
                        held.pop(member.process_id, None)

    def active_owner(self, sub: str, partition: int) -> str | None:
        return self.active_process.get((sub, partition))

    def other_copies(self, sub: str, partition: int):
        return self.copy_processes.get((sub, partition), {}).keys()

    # ------------------------------------------------------------ Group: offsets and deletion
    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.topology is None or not self.members:
            return False
        return any(topic in s.source_topics or any(i.name == topic for i in s.repartition_source_topics)
                   for s in self.topology.subtopologies)

    def validate_offset_commit(self, member_id, instance_id, generation_or_epoch, api_version,
                               transactional=False) -> int | None:
        if generation_or_epoch < 0 and not self.members:
            return None     # the admin client (resetting the application's offsets)
        if transactional and generation_or_epoch == -1 and member_id == "" and instance_id is None:
            return None
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        return self._validate_member_epoch(member, generation_or_epoch)

    def _validate_member_epoch(self, member: StreamsGroupMember, received: int) -> int | None:
        if received == member.member_epoch:
            return None
        if received == member.previous_member_epoch and received >= 0 and \
                member.state != MemberState.UNREVOKED_TASKS:
            return None     # sent just before the answer that moved the member on; it still owns the tasks
        return ErrorCode.STALE_MEMBER_EPOCH



def tasks_from_wire(items) -> dict:
    """[TaskIds] -> {subtopology: frozenset}."""
    return normalize([(t.subtopology_id, t.partitions) for t in items or ()])


__all__ = ["StreamsGroup", "StreamsGroupMember", "MemberState", "StreamsGroupState", "reconcile"]
