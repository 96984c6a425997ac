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

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupType(enum.Enum):
    CLASSIC = "classic"
    CONSUMER = "consumer"
    SHARE = "share"

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
