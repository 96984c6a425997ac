"""LogOffsetMetadata: an offset, and where its batch sits (segment base offset, byte position in it).

Kafka's LogOffsetMetadata. The high watermark, the last stable offset, the log end offset and
a fetch's start carry one, so that a read bounded by one of them, or a delayed fetch counting
the bytes between two, needs no index lookup. "Message offset only" (-1, -1) means the
position is not known; the log converts such a value when a full one is needed.
"""

from __future__ import annotations

from typing import NamedTuple

UNKNOWN_OFFSET = -1          # segment base offset not known
UNKNOWN_FILE_POSITION = -1   # position in the segment not known


class LogOffsetMetadata(NamedTuple):
    message_offset: int
    segment_base_offset: int = UNKNOWN_OFFSET
    relative_position_in_segment: int = UNKNOWN_FILE_POSITION

    @property
    def message_offset_only(self) -> bool:
        return self.segment_base_offset == UNKNOWN_OFFSET and self.relative_position_in_segment == UNKNOWN_FILE_POSITION

    def on_older_segment(self, other: LogOffsetMetadata) -> bool:
        """Whether this one lies in a segment older than ``other``'s (False if either lacks a position)."""
        if self.message_offset_only or other.message_offset_only:
            return False
        return self.segment_base_offset < other.segment_base_offset

    def on_same_segment(self, other: LogOffsetMetadata) -> bool:
        if self.message_offset_only or other.message_offset_only:
            return False
        return self.segment_base_offset == other.segment_base_offset

    def position_diff(self, other: LogOffsetMetadata) -> int:
        """Bytes from ``other`` to this one; both must have positions in the same segment."""
        if not self.on_same_segment(other):
            raise ValueError(f"{self} and {other} have no comparable positions (not one segment, or offset only)")
        return self.relative_position_in_segment - other.relative_position_in_segment

    def __repr__(self) -> str:
        return (f"(offset={self.message_offset}, segment=[{self.segment_base_offset}:"
                f"{self.relative_position_in_segment}])")
