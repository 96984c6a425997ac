"""A consumer group (KIP-848), as Kafka's ConsumerGroup holds it.

Three epochs drive it. The group epoch moves when membership, a subscription or
the subscribed topics' metadata change; the target assignment is computed for a
group epoch (the assignment epoch); each member's epoch says which target it has
reconciled to. The group's state follows from them:

    Empty        no members
    Assigning    group epoch > assignment epoch (a new target is due)
    Reconciling  some member has not reached the target yet
    Stable       every member owns its target at the assignment epoch

The state changes only by replaying records (`replay_*`), the ones the
coordinator writes to `__consumer_offsets` and reads back after a restart, so the
live group and a reloaded one cannot differ.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ...protocol.errors import ErrorCode
from ..group import CONSUMER_PROTOCOL_TYPE, GroupType, ModernGroup
from .consumer_group_member import ClassicMemberMetadata, ConsumerGroupMember, MemberState


@dataclass(frozen=True)
class TopicMetadata:
    """A subscribed topic as the group last saw it (ConsumerGroupPartitionMetadataValue)."""
    topic_id: bytes
    name: str
    num_partitions: int


@dataclass(frozen=True)
class ResolvedRegularExpression:
    topics: frozenset
    version: int        # the metadata version it was resolved against
    timestamp: int


class ConsumerGroupState:
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


def _partitions(topic_partitions) -> dict:
    return {tp.topic_id: frozenset(tp.partitions) for tp in topic_partitions if tp.partitions}


class ConsumerGroup(ModernGroup):
    type = GroupType.CONSUMER

    def __init__(self, group_id: str):
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}            # instance id -> member id
        self.target_assignment: dict[str, dict] = {}         # member id -> {topic id: frozenset}
        self.partition_epochs: dict[tuple[bytes, int], int] = {}   # owned partition -> owner's epoch
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        self.resolved_regexes: dict[str, ResolvedRegularExpression] = {}
        self.metadata_refresh_needed = False
        self.dead = False

    def __repr__(self) -> str:
        return (f"ConsumerGroup({self.group_id!r}, {self.state_string}, epoch={self.group_epoch}, "
                f"assignment_epoch={self.assignment_epoch}, members={list(self.members)})")

    # ------------------------------------------------------------ state
    @property
    def state_string(self) -> str:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    @property
    def protocol_type(self) -> str:
        return CONSUMER_PROTOCOL_TYPE

    # ------------------------------------------------------------ members
    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return self.members.get(member_id) if member_id is not None else None

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def current_partition_epoch(self, topic_id: bytes, partition: int) -> int:
        """The epoch of the member that still owns the partition, -1 when nobody does."""
        return self.partition_epochs.get((topic_id, partition), -1)

    def waiting_on_unreleased_partition(self, member: ConsumerGroupMember) -> bool:
        """Whether some partition of the member's target is still owned by another member."""
        if member.state != MemberState.UNRELEASED_PARTITIONS:
            return False
        assigned = member.assigned_partitions
        for topic_id, partitions in self.target_assignment.get(member.member_id, {}).items():
            mine = assigned.get(topic_id, frozenset())
            for p in partitions:
                if p not in mine and self.current_partition_epoch(topic_id, p) != -1:
                    return True
        return False

    def all_members_use_classic_protocol_except(self, member_id: str) -> bool:
        return all(m.use_classic_protocol for mid, m in self.members.items() if mid != member_id)

    def supports_classic_protocols(self, protocol_type: str, protocol_names: set[str]) -> bool:
        """A classic member may join when it speaks the consumer protocol and shares a protocol
        (assignor name) with every classic member already there."""
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocol_names:
            return False
        for m in self.members.values():
            if m.use_classic_protocol:
                protocol_names = protocol_names & {n for n, _ in m.classic_member_metadata.supported_protocols}
        return bool(protocol_names)

    # ------------------------------------------------------------ subscriptions
    def member_topics(self, member: ConsumerGroupMember) -> set[str]:
        """The topic names a member consumes: its names, plus what its regex resolved to."""
        topics = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            resolved = self.resolved_regexes.get(member.subscribed_topic_regex)
            if resolved is not None:
                topics |= resolved.topics
        return topics

    def subscribed_topic_names(self) -> Counter:
        counts: Counter = Counter()
        for m in self.members.values():
            counts.update(self.member_topics(m))
        return counts

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return any(topic in self.member_topics(m) for m in self.members.values())

    def subscribed_regexes(self) -> set[str]:
        return {m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex}

    # ------------------------------------------------------------ Group: offsets and deletion
    def validate_offset_commit(self, member_id, instance_id, generation_or_epoch, api_version,
                               transactional=False) -> int | None:
        if generation_or_epoch < 0 and not self.members:
            return None     # the admin client, or a consumer without group management
        if transactional and generation_or_epoch == -1 and member_id == "" and instance_id is None:
            return None     # a producer that sends no group metadata (before KIP-447)
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and not member.use_classic_protocol and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        return self._validate_member_epoch(member, generation_or_epoch)

    def _validate_member_epoch(self, member: ConsumerGroupMember, received: int) -> int | None:
        if received == member.member_epoch:
            return None
        if not member.use_classic_protocol and received == member.previous_member_epoch and received >= 0 \
                and member.state != MemberState.UNREVOKED_PARTITIONS:
            # A commit sent just before the heartbeat answer that moved the member on (as KIP-1251 allows:
            # the member still owns what it commits, revocation waits for its acknowledgement).
            return None
        return ErrorCode.ILLEGAL_GENERATION if member.use_classic_protocol else ErrorCode.STALE_MEMBER_EPOCH

    # ------------------------------------------------------------ replaying records
    def replay_group_epoch(self, value) -> None:
        self.group_epoch = value.epoch

    def replay_partition_metadata(self, value) -> None:
        self.subscription_metadata = {} if value is None else {
            t.topic_name: TopicMetadata(t.topic_id, t.topic_name, t.num_partitions) for t in value.topics}

    def replay_member_metadata(self, member_id: str, value) -> None:
        old = self.members.get(member_id)
        if value is None:
            if old is not None:
                self._remove_partition_epochs(old)
                del self.members[member_id]
                if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
                    del self.static_members[old.instance_id]
            return
        classic = None
        if value.classic_member_metadata is not None:
            c = value.classic_member_metadata
            classic = ClassicMemberMetadata(c.session_timeout_ms,
                                            tuple((p.name, bytes(p.metadata)) for p in c.supported_protocols))
        member = (old or ConsumerGroupMember(member_id)).with_(
            instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
            client_host=value.client_host, subscribed_topic_names=tuple(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex or None,
            rebalance_timeout_ms=value.rebalance_timeout_ms, server_assignor=value.server_assignor or None,
            classic_member_metadata=classic)
        self.members[member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member_id

    def replay_target_assignment_epoch(self, value) -> None:
        self.assignment_epoch = -1 if value is None else value.assignment_epoch

    def replay_target_assignment_member(self, member_id: str, value) -> None:
        if value is None:
            self.target_assignment.pop(member_id, None)
        else:
            self.target_assignment[member_id] = _partitions(value.topic_partitions)

    def replay_current_assignment(self, member_id: str, value) -> None:
        old = self.members.get(member_id)
        if old is None:
            if value is None:
                return
            old = self.members[member_id] = ConsumerGroupMember(member_id)
        self._remove_partition_epochs(old)
        if value is None:
            member = old.with_(member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE,
                               assigned_partitions={}, partitions_pending_revocation={})
        else:
            member = old.with_(member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
                               state=MemberState(value.state) if value.state in MemberState._value2member_map_
                               else MemberState.UNKNOWN,
                               assigned_partitions=_partitions(value.assigned_partitions),
                               partitions_pending_revocation=_partitions(value.partitions_pending_revocation))
        self.members[member_id] = member
        self._add_partition_epochs(member)

    def replay_regular_expression(self, regex: str, value) -> None:
        if value is None:
            self.resolved_regexes.pop(regex, None)
        else:
            self.resolved_regexes[regex] = ResolvedRegularExpression(frozenset(value.topics), value.version,
                                                                     value.timestamp)

    def _add_partition_epochs(self, member: ConsumerGroupMember) -> None:
        if member.member_epoch < 0:
            return      # a static member away (-2) owns nothing
        for tp in member.owned_partitions():
            self.partition_epochs[tp] = member.member_epoch

    def _remove_partition_epochs(self, member: ConsumerGroupMember) -> None:
        for tp in member.owned_partitions():
            if self.partition_epochs.get(tp) == member.member_epoch:
                del self.partition_epochs[tp]
