"""A member of a consumer group (KIP-848), as Kafka's ConsumerGroupMember keeps it.

Assignments are keyed by topic id, as on the wire: `{topic_id: frozenset(partitions)}`.
A member is a value: every change makes a new one (`replace`), so the coordinator
can compare before and after to decide what to write and what to answer.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

Assignment = dict  # {topic_id (16 bytes): frozenset[int]}


class MemberState(enum.IntEnum):
    """Where a member is in reconciling toward the target assignment (stored as an int8)."""
    STABLE = 0                  # it owns exactly what it was given at its epoch
    UNREVOKED_PARTITIONS = 1    # it must give partitions up first; its epoch waits
    UNRELEASED_PARTITIONS = 2   # some partitions it is due are still owned by others
    UNKNOWN = 127


# Member epochs with a meaning of their own (ConsumerGroupHeartbeat's MemberEpoch).
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """What a member that speaks the classic protocol gave in its JoinGroup."""
    session_timeout_ms: int
    supported_protocols: tuple  # ((name, metadata bytes), ...)


@dataclass(frozen=True)
class ConsumerGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)
    classic_member_metadata: ClassicMemberMetadata | None = None

    def with_(self, **changes) -> ConsumerGroupMember:
        return replace(self, **changes)

    @property
    def use_classic_protocol(self) -> bool:
        return self.classic_member_metadata is not None

    @property
    def is_static(self) -> bool:
        return self.instance_id is not None

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == target_epoch

    def same_subscription(self, other: ConsumerGroupMember) -> bool:
        return (self.subscribed_topic_names == other.subscribed_topic_names
                and self.subscribed_topic_regex == other.subscribed_topic_regex)

    def owned_partitions(self):
        """Every (topic id, partition) the member may still hold: assigned or not yet revoked."""
        for source in (self.assigned_partitions, self.partitions_pending_revocation):
            for topic_id, partitions in source.items():
                for p in partitions:
                    yield topic_id, p
