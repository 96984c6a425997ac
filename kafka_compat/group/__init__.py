"""The group coordinator: classic consumer groups and committed offsets over `__consumer_offsets`."""
from .coordinator import GroupCoordinator, GroupSummary, MemberSummary
from .coordinator_records import GROUP_METADATA_TOPIC_NAME, OffsetAndMetadata
from .group import ClassicGroup, GroupState, JoinResult, SyncResult

__all__ = ["GroupCoordinator", "GroupSummary", "MemberSummary", "ClassicGroup", "GroupState", "JoinResult",
           "SyncResult", "GROUP_METADATA_TOPIC_NAME", "OffsetAndMetadata"]
