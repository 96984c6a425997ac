"""What every group is, whichever protocol its members speak (Kafka's Group interface).

A group id names either a classic group (JoinGroup/SyncGroup, the leader assigns)
or a consumer group (KIP-848: ConsumerGroupHeartbeat, the coordinator assigns).
The offset APIs, ListGroups, DescribeGroups and DeleteGroups work on both, so they
ask the group through this interface: may this member commit, is the group
subscribed to this topic, when do its offsets expire, may it be deleted.
"""
from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from typing import Callable

from ..protocol.errors import ErrorCode

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupType(enum.Enum):
    CLASSIC = "classic"
    CONSUMER = "consumer"
    SHARE = "share"
    STREAMS = "streams"

    def __str__(self) -> str:
        return self.value



class Group(ABC):
    group_id: str
    type: GroupType

    @property
    @abstractmethod
    def state_string(self) -> str:
        """The state as DescribeGroups and ListGroups name it ("Stable", "Reconciling", ...)."""

    @property
    @abstractmethod
    def is_empty(self) -> bool:
        """No members."""

    @property
    @abstractmethod
    def is_dead(self) -> bool:
        """Deleted or unloaded: requests must not act on this object any more."""

    @property
    @abstractmethod
    def protocol_type(self) -> str | None:
        """What ListGroups reports as ProtocolType."""

    def in_states(self, states_lower: set[str]) -> bool:
        return self.state_string.lower() in states_lower

    @abstractmethod
    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Whether some member consumes `topic` (its offsets then neither expire nor may be deleted)."""

    @abstractmethod
    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation_or_epoch: int,
                               api_version: int, transactional: bool = False) -> int | None:
        """The error an OffsetCommit (or a TxnOffsetCommit, `transactional`) from this member gets, or None."""

    @abstractmethod
    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int | None:
        """The error an OffsetFetch (v9+ names the member) gets, or None."""

    @abstractmethod
    def validate_offset_delete(self) -> int | None:
        """The error OffsetDelete gets, or None."""

    @abstractmethod
    def validate_delete_group(self) -> int | None:
        """The error DeleteGroups gets, or None."""

    @abstractmethod
    def offset_expiration_base(self) -> Callable | None:
        """``f(offset) -> timestamp`` retention counts from, or None while offsets must not expire."""


class ModernGroup(Group):
    """What consumer groups (KIP-848) and streams groups (KIP-1071) share: members that heartbeat with
    member epochs, static members by instance id, and deletion only when empty."""
    members: dict
    static_members: dict
    dead: bool

    @property
    def is_empty(self) -> bool:
        return not self.members

    @property
    def is_dead(self) -> bool:
        return self.dead

    def static_member(self, instance_id: str | None):
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return self.members.get(member_id) if member_id is not None else None

    def validate_offset_fetch(self, member_id, member_epoch) -> int | None:
        if member_id is None and member_epoch < 0:
            return None
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return self._validate_member_epoch(member, member_epoch)

    def _validate_member_epoch(self, member, received: int) -> int | None:
        raise NotImplementedError

    def validate_offset_delete(self) -> int | None:
        return ErrorCode.GROUP_ID_NOT_FOUND if self.dead else None

    def validate_delete_group(self) -> int | None:
        if self.dead:
            return ErrorCode.GROUP_ID_NOT_FOUND
        return None if not self.members else ErrorCode.NON_EMPTY_GROUP

    def offset_expiration_base(self):
        return lambda o: o.commit_timestamp
