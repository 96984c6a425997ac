"""A share group (KIP-932), as Kafka's ShareGroup and ShareGroupMember hold it.

Members heartbeat with ShareGroupHeartbeat and the coordinator assigns partitions with the
simple assignor; a partition may be assigned to several members, who share its records
(the records themselves are handed out by the partition leaders' SharePartitions, not here).
There is no revocation phase: a member takes its target at once, so its epoch is the
assignment epoch. States: Empty (no members), Stable, Dead.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ....protocol.errors import ErrorCode
from ...group import Group, GroupType

E = ErrorCode
SHARE_PROTOCOL_TYPE = "share"


class ShareGroupState:
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class ShareGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple = ()
    assigned_partitions: dict = field(default_factory=dict)      # {topic id: frozenset}


class ShareGroup(Group):
    type = GroupType.SHARE

    def __init__(self, group_id: str):
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareGroupMember] = {}
        self.target_assignment: dict[str, dict] = {}
        self.subscription_metadata: dict = {}       # {topic name: (topic id, partitions)} at the group epoch
        self.dead = False

    @property
    def state_string(self) -> str:
        if self.dead:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    @property
    def is_empty(self) -> bool:
        return not self.members

    @property
    def is_dead(self) -> bool:
        return self.dead

    @property
    def protocol_type(self) -> str | None:
        return SHARE_PROTOCOL_TYPE

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topic_names()

    def _not_consumer(self) -> int:
        return E.GROUP_ID_NOT_FOUND

    def validate_offset_commit(self, member_id, instance_id, generation_or_epoch, api_version,
                               transactional=False) -> int | None:
        return self._not_consumer()

    def validate_offset_fetch(self, member_id, member_epoch) -> int | None:
        return self._not_consumer()

    def validate_offset_delete(self) -> int | None:
        return self._not_consumer()

    def validate_delete_group(self) -> int | None:
        return None if self.is_empty else E.NON_EMPTY_GROUP

    def offset_expiration_base(self):
        return None


__all__ = ["SHARE_PROTOCOL_TYPE", "ShareGroup", "ShareGroupMember", "ShareGroupState"]
