"""Server-side assignors of consumer groups (`group.consumer.assignors`), Kafka's ConsumerGroupPartitionAssignor.

An assignor sees the members' subscriptions (topic ids), the topics' partition
counts and the current target assignment, and returns the new target:
{member id: {topic id: frozenset(partitions)}}. Members without partitions may be
left out of the result.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .range import RangeAssignor
from .uniform import UniformAssignor


@dataclass(frozen=True)
class MemberSubscription:
    topic_ids: frozenset
    instance_id: str | None = None
    rack_id: str | None = None


@dataclass
class GroupSpec:
    members: dict            # member id -> MemberSubscription
    current: dict = field(default_factory=dict)    # member id -> {topic id: frozenset}: the previous target


ASSIGNORS = {a.name: a for a in (UniformAssignor(), RangeAssignor())}


def assignors_from_config(names: list[str]) -> dict:
    """The assignors `group.consumer.assignors` names, in its order (the first is the default)."""
    out = {}
    for name in names:
        name = name.strip()
        if name not in ASSIGNORS:
            raise ValueError(f"unknown consumer group assignor {name!r} (known: {', '.join(ASSIGNORS)})")
        out[name] = ASSIGNORS[name]
    if not out:
        raise ValueError("group.consumer.assignors names no assignor")
    return out


__all__ = ["ASSIGNORS", "GroupSpec", "MemberSubscription", "RangeAssignor", "UniformAssignor",
           "assignors_from_config"]
