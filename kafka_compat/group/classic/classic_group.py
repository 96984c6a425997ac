"""A classic group and its state machine, as Kafka's ClassicGroup has them.

States and the transitions into them:

    Empty               <- PreparingRebalance (the rebalance ended with no members)
    PreparingRebalance  <- Stable, CompletingRebalance, Empty
    CompletingRebalance <- PreparingRebalance (every member rejoined, or the rebalance timed out)
    Stable              <- CompletingRebalance (the leader's assignment was stored)
    Dead                <- any (deleted, expired, or unloaded)

Committed offsets are not here: the OffsetMetadataManager keeps them for every
kind of group, and asks the group (through `Group`) whether a commit is valid.
"""
from __future__ import annotations

import enum
import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field

from ...clock import now_ms
from ...protocol.errors import ErrorCode
from ...protocol.messages.consumer_protocol import ConsumerProtocolSubscription
from ..group import CONSUMER_PROTOCOL_TYPE, Group, GroupType
from .classic_group_member import ClassicGroupMember

log = logging.getLogger(__name__)


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


ClassicGroupState = GroupState

_VALID_PREVIOUS = {
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.DEAD: set(GroupState),
}


@dataclass
class JoinResult:
    """What a parked JoinGroup is answered with."""
    error: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: list = field(default_factory=list)   # (member_id, group_instance_id, metadata) for the leader


@dataclass
class SyncResult:
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


class ClassicGroup(Group):
    type = GroupType.CLASSIC

    def __init__(self, group_id: str, state: GroupState = GroupState.EMPTY, clock=now_ms):
        self.group_id = group_id
        self.state = state
        self.clock = clock
        self.state_timestamp: int | None = clock()
        self._protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, ClassicGroupMember] = {}
        self.static_members: dict[str, str] = {}          # group.instance.id -> member id
        self.pending_members: set[str] = set()            # got MEMBER_ID_REQUIRED, not joined yet
        self.pending_sync_members: set[str] = set()
        self.num_members_awaiting_join = 0
        self.supported_protocols: Counter = Counter()
        self.subscribed_topics: set[str] | None = None
        self.new_member_added = False

    def __repr__(self) -> str:
        return (f"ClassicGroup({self.group_id!r}, {self.state}, generation={self.generation_id}, "
                f"protocol={self.protocol_type}/{self.protocol_name}, members={list(self.members)})")

    # ------------------------------------------------------------ state
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id}: cannot go from {self.state} to {state}")
        self.state = state
        self.state_timestamp = self.clock()

    @property
    def protocol_type(self) -> str | None:
        return self._protocol_type

    @protocol_type.setter
    def protocol_type(self, value: str | None) -> None:
        self._protocol_type = value

    @property
    def state_string(self) -> str:
        return self.state.value

    @property
    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    @property
    def is_dead(self) -> bool:
        return self.state is GroupState.DEAD

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    # ------------------------------------------------------------ members
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> ClassicGroupMember:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: ClassicGroupMember, callback=None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(f"static member {member.group_instance_id} is already in {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names)
        member.awaiting_join = callback
        if callback is not None:
            self.num_members_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocol_names)
            if member.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick any member that did; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> ClassicGroupMember:
        """A static member came back with a new member id: fence the old one, keep everything else."""
        member = self.members.pop(old_member_id)
        self.maybe_invoke_join_callback(member, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_member_id))
        self.maybe_invoke_sync_callback(member, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        return member

    def current_static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def add_pending_member(self, member_id: str) -> None:
        self.pending_members.add(member_id)

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[ClassicGroupMember]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    @property
    def num_awaiting(self) -> int:
        return self.num_members_awaiting_join

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    @staticmethod
    def generate_member_id(client_id: str, instance_id: str | None) -> str:
        return f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"

    def update_member(self, member: ClassicGroupMember, protocols, rebalance_timeout_ms: int,
                      session_timeout_ms: int, callback) -> None:
        self.supported_protocols.subtract(member.protocol_names)
        member.supported_protocols = protocols
        self.supported_protocols.update(member.protocol_names)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if callback is not None and not member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        elif callback is None and member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        member.awaiting_join = callback

    def maybe_invoke_join_callback(self, member: ClassicGroupMember, result: JoinResult) -> None:
        if member.awaiting_join is not None:
            callback, member.awaiting_join = member.awaiting_join, None
            self.num_members_awaiting_join -= 1
            try:
                callback(result)
            except Exception:
                log.exception("join callback of %s failed", member.member_id)

    def maybe_invoke_sync_callback(self, member: ClassicGroupMember, result: SyncResult) -> bool:
        if member.awaiting_sync is None:
            return False
        callback, member.awaiting_sync = member.awaiting_sync, None
        try:
            callback(result)
        except Exception:
            log.exception("sync callback of %s failed", member.member_id)
        return True

    # ------------------------------------------------------------ protocols
    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        """Among the protocols every member supports, the one most members prefer (Kafka's vote)."""
        if not self.members:
            raise RuntimeError("cannot select a protocol for an empty group")
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def supports_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(protocols)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(self.supported_protocols[p] == n for p in protocols)

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.pending_sync_members.clear()

    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics the consumer members subscribe to; None when unknown (not a consumer group, bad metadata)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for m in self.members.values():
                data = m.metadata(self.protocol_name)
                # Version 0 is the prefix of every later version: read the topics with it.
                sub, _ = ConsumerProtocolSubscription.decode(data, 0, 2)
                topics.update(sub.topics)
        except Exception:
            log.warning("group %s: cannot parse the consumer subscriptions", self.group_id)
            return None
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return True if self.subscribed_topics is None else topic in self.subscribed_topics

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        return [(mid, m.group_instance_id, m.metadata(self.protocol_name)) for mid, m in self.members.items()]

    # ------------------------------------------------------------ Group: offsets and deletion
    def validate_member(self, member_id: str, instance_id: str | None) -> int | None:
        """UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID for a member that is not (or no longer) this one."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            return None if current == member_id else ErrorCode.FENCED_INSTANCE_ID
        return None if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    def validate_offset_commit(self, member_id, instance_id, generation_or_epoch, api_version,
                               transactional=False) -> int | None:
        if self.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_or_epoch < 0 and self.is_(GroupState.EMPTY):
            return None     # the admin client or a consumer without group management
        if generation_or_epoch >= 0 or member_id != "" or instance_id is not None:
            error = self.validate_member(member_id, instance_id)
            if error is not None:
                return error
            if generation_or_epoch != self.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not transactional and not self.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID      # only members commit for a group that has some
        if self.is_(GroupState.COMPLETING_REBALANCE) and not transactional:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return None

    def validate_offset_fetch(self, member_id, member_epoch) -> int | None:
        return None     # classic members never name themselves in OffsetFetch

    def validate_offset_delete(self) -> int | None:
        if self.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND
        if not self.is_(GroupState.EMPTY) and not self.is_consumer_group:
            return ErrorCode.NON_EMPTY_GROUP
        return None

    def validate_delete_group(self) -> int | None:
        if self.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND
        return None if self.is_(GroupState.EMPTY) else ErrorCode.NON_EMPTY_GROUP

    def offset_expiration_base(self):
        """Kafka's rules: an empty group's offsets expire `retention` after it became empty; a stable
        consumer group's offsets of topics nobody subscribes to expire after their last commit; a group
        that only stores offsets expires each offset after its last commit."""
        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            ts = self.state_timestamp
            return lambda o: ts if ts is not None and ts >= 0 else o.commit_timestamp
        if (self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed_topics is not None
                and self.is_(GroupState.STABLE)):
            return lambda o: o.commit_timestamp
        if self.protocol_type is None:
            return lambda o: o.commit_timestamp
        return None
