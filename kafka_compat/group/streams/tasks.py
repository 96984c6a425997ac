"""Tasks as the streams protocol names them: a subtopology id and a partition number.

A TasksTuple (Kafka's TasksTuple) is what one member holds or is to hold: active, standby and warm-up
tasks, each {subtopology id: frozenset of partitions}, empty sets left out.
"""
from __future__ import annotations

from typing import NamedTuple

Tasks = dict  # {subtopology id: frozenset[int]}


def normalize(tasks) -> dict:
    """{subtopology: frozenset} from any mapping or [(subtopology, partitions)], without empty entries."""
    items = tasks.items() if isinstance(tasks, dict) else tasks
    out: dict = {}
    for sub, parts in items:
        if parts:
            out[sub] = out.get(sub, frozenset()) | frozenset(parts)
    return out


def minus(a: dict, b: dict) -> dict:
    return normalize({s: p - b.get(s, frozenset()) for s, p in a.items()})


def intersect(a: dict, b: dict) -> dict:
    return normalize({s: p & b.get(s, frozenset()) for s, p in a.items()})


def union(a: dict, b: dict) -> dict:
    return normalize([*a.items(), *b.items()])


def overlaps(a: dict, b: dict) -> bool:
    return any(p & b.get(s, frozenset()) for s, p in a.items())


def count(tasks: dict) -> int:
    return sum(len(p) for p in tasks.values())


class TasksTuple(NamedTuple):
    active: dict = {}
    standby: dict = {}
    warmup: dict = {}

    @classmethod
    def of(cls, active=(), standby=(), warmup=()) -> TasksTuple:
        return cls(normalize(active), normalize(standby), normalize(warmup))

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def contains_any(self, other: TasksTuple) -> bool:
        return any(overlaps(a, b) for a, b in zip(self, other))

    def merge(self, other: TasksTuple) -> TasksTuple:
        return TasksTuple(*(union(a, b) for a, b in zip(self, other)))


EMPTY = TasksTuple()
