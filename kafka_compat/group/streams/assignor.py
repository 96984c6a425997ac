"""The sticky task assignor of streams groups (Kafka's StickyTaskAssignor, "sticky").

Active tasks first, stateful ones before stateless ones, each member taking at most its share
(ceil(tasks / members)): a task stays with the member that runs it, else goes to a member that keeps
its state as a standby or warm-up (that standby is promoted, its restore work not thrown away), else
to the least loaded member. Then `num_standby_replicas` standbys of every stateful task, each on a
process (a client, which may run several members) that holds no other copy of the task; previous
holders first, then the least loaded. A standby that fits nowhere is left out, as Kafka does. This
assignor makes no warm-up tasks.
"""
from __future__ import annotations

import math
from typing import NamedTuple

from .tasks import TasksTuple, normalize


class MemberSpec(NamedTuple):
    process_id: str
    current: TasksTuple     # what the member holds or is being given now (its target so far)


class TaskSpec(NamedTuple):
    partitions: int
    stateful: bool


def _flat(tasks: dict) -> set:
    return {(s, p) for s, ps in tasks.items() for p in ps}


def assign(members: dict, subtopologies: dict, num_standby_replicas: int = 0) -> dict:
    """members {member id: MemberSpec}, subtopologies {id: TaskSpec} -> {member id: TasksTuple}."""
    if not members:
        return {}
    order = sorted(members)
    stateful = [(s, p) for s, t in sorted(subtopologies.items()) if t.stateful for p in range(t.partitions)]
    stateless = [(s, p) for s, t in sorted(subtopologies.items()) if not t.stateful for p in range(t.partitions)]
    prev_active = {}
    prev_standby: dict = {}
    for m in order:
        spec = members[m]
        for task in _flat(spec.current.active):
            prev_active.setdefault(task, m)
        for task in _flat(spec.current.standby) | _flat(spec.current.warmup):
            prev_standby.setdefault(task, []).append(m)
    active = {m: set() for m in order}
    load = dict.fromkeys(order, 0)

    def give(member, task, where):
        where[member].add(task)
        load[member] += 1

    for tasks, total in ((stateful, len(stateful)), (stateless, len(stateful) + len(stateless))):
        quota = math.ceil(total / len(order))      # stateless tasks fill up to the share of all active tasks
        rest = []
        for task in tasks:
            owner = prev_active.get(task)
            if owner is not None and load[owner] < quota:
                give(owner, task, active)
            else:
                rest.append(task)
        left = []
        for task in rest:
            holders = [m for m in prev_standby.get(task, ()) if load[m] < quota]
            if holders:
                give(min(holders, key=lambda m: (load[m], m)), task, active)
            else:
                left.append(task)
        for task in left:
            give(min(order, key=lambda m: (load[m], m)), task, active)
    standby = {m: set() for m in order}
    if num_standby_replicas > 0:
        process_of = {m: members[m].process_id for m in order}
        for task in stateful:
            holder_processes = {process_of[m] for m in order if task in active[m]}
            for _ in range(num_standby_replicas):
                candidates = [m for m in order if process_of[m] not in holder_processes]
                if not candidates:
                    break
                previous = set(prev_standby.get(task, ())) | ({prev_active[task]} if task in prev_active else set())
                chosen = min(candidates, key=lambda m: (m not in previous, load[m], m))
                give(chosen, task, standby)
                holder_processes.add(process_of[chosen])
    return {m: TasksTuple(_grouped(active[m]), _grouped(standby[m]), {}) for m in order}


def _grouped(tasks: set) -> dict:
    out: dict = {}
    for s, p in tasks:
        out.setdefault(s, set()).add(p)
    return normalize(out)
