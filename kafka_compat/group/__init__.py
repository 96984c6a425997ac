"""The group coordinator: classic groups, consumer groups (KIP-848) and committed offsets over `__consumer_offsets`."""
from ..sentinels import GROUP_METADATA_TOPIC_NAME
from .classic.classic_group import ClassicGroup, GroupState, JoinResult, SyncResult
from .coordinator import GroupCoordinator, GroupSummary, MemberSummary
from .coordinator_records import OffsetAndMetadata
from .group import Group, GroupType
from .modern.consumer_group import ConsumerGroup

__all__ = ["GroupCoordinator", "GroupSummary", "MemberSummary", "ClassicGroup", "ConsumerGroup", "Group",
           "GroupType", "GroupState", "JoinResult", "SyncResult", "GROUP_METADATA_TOPIC_NAME", "OffsetAndMetadata"]
