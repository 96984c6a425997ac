"""The share groups' server-side assignor (`group.share.assignors=simple`, Kafka's SimpleAssignor).

Share groups need no exclusive ownership: a partition may be given to several members, which
then share its records. Kafka's principles, applied topic by topic:
- balance first: with at least as many partitions as subscribers, every partition goes to one
  member and the members' counts differ by at most one; with more subscribers than partitions,
  every member gets exactly one partition and the partitions' sharing differs by at most one;
- stickiness next: a member keeps what the previous target gave it as far as balance allows.
Input and output as the consumer assignors': {member id: {topic id: frozenset(partitions)}}.
"""
from __future__ import annotations


class SimpleAssignor:
    name = "simple"

    def assign(self, members: dict, num_partitions: dict, current: dict) -> dict:
        """``members``: {member id: frozenset(topic ids)}; ``num_partitions``: {topic id: count};
        ``current``: the previous target."""
        out: dict = {m: {} for m in members}
        topics = sorted({t for subs in members.values() for t in subs if num_partitions.get(t, 0) > 0})
        for topic in topics:
            subscribers = sorted(m for m, subs in members.items() if topic in subs)
            owned = {m: current.get(m, {}).get(topic, frozenset()) for m in subscribers}
            for member, parts in _assign_topic(subscribers, num_partitions[topic], owned).items():
                if parts:
                    out[member][topic] = frozenset(parts)
        return out


def _quotas(holders: list, slots: int) -> dict:
    """``slots`` spread over ``holders`` (sorted): the first ``slots % n`` get one more."""
    base, extra = divmod(slots, len(holders))
    return {h: base + (1 if i < extra else 0) for i, h in enumerate(holders)}


def _assign_topic(subscribers: list, partitions: int, owned: dict) -> dict:
    out: dict = {m: set() for m in subscribers}
    if len(subscribers) <= partitions:
        # one member per partition; members keep what they had up to their quota
        quota = _quotas(subscribers, partitions)
        # members that had more get the bigger quotas first, so fewer partitions move
        order = sorted(subscribers, key=lambda m: (-len(owned[m]), m))
        quota = dict(zip(order, sorted(quota.values(), reverse=True)))
        taken: set = set()
        for m in order:
            for p in sorted(owned[m]):
                if p < partitions and p not in taken and len(out[m]) < quota[m]:
                    out[m].add(p)
                    taken.add(p)
        free = [p for p in range(partitions) if p not in taken]
        for m in order:
            while len(out[m]) < quota[m]:
                out[m].add(free.pop(0))
        return out
    # more members than partitions: one partition per member, shared as evenly as can be
    share = _quotas(list(range(partitions)), len(subscribers))
    load = dict.fromkeys(range(partitions), 0)
    unplaced = []
    for m in subscribers:
        kept = next((p for p in sorted(owned[m]) if p < partitions and load[p] < share[p]), None)
        if kept is None:
            unplaced.append(m)
        else:
            out[m].add(kept)
            load[kept] += 1
    for m in unplaced:
        p = min(range(partitions), key=lambda q: (load[q] - share[q], q))
        out[m].add(p)
        load[p] += 1
    return out


__all__ = ["SimpleAssignor"]
