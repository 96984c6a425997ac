"""The `uniform` assignor (the default): balance first, then stickiness.

Every member ends with as many partitions as any other member that could take
them, within one; within that, members keep what the previous target gave them.
It starts from the previous target (minus partitions of topics a member no longer
consumes, or that no longer exist), hands the partitions nobody holds to the least
loaded member subscribed to their topic, then moves partitions one at a time from
the most loaded member to a member subscribed to the same topic holding at least
two fewer, until no such move is left. With one subscription for all members
that gives member sizes within one of each other and the fewest moves.
"""
from __future__ import annotations


class UniformAssignor:
    name = "uniform"

    def assign(self, spec, topics: dict) -> dict:
        """`topics`: {topic id: partition count}."""
        members = sorted(spec.members)
        owned: dict[str, set] = {m: set() for m in members}
        taken: set = set()
        subscribers: dict[bytes, list[str]] = {}
        for m in members:
            for topic_id in spec.members[m].topic_ids:
                if topic_id in topics:
                    subscribers.setdefault(topic_id, []).append(m)
        # 1. stickiness: keep what the previous target gave, where still valid
        for m in members:
            subscribed = spec.members[m].topic_ids
            for topic_id, partitions in sorted(spec.current.get(m, {}).items()):
                if topic_id not in subscribed or topic_id not in topics:
                    continue
                for p in sorted(partitions):
                    if p < topics[topic_id] and (topic_id, p) not in taken:
                        taken.add((topic_id, p))
                        owned[m].add((topic_id, p))
        # 2. partitions nobody holds go to the least loaded subscriber
        for topic_id in sorted(subscribers):
            candidates = subscribers[topic_id]
            for p in range(topics[topic_id]):
                if (topic_id, p) in taken:
                    continue
                m = min(candidates, key=lambda c: (len(owned[c]), c))
                owned[m].add((topic_id, p))
                taken.add((topic_id, p))
        # 3. balance: move from the most loaded to a subscriber with at least two fewer
        for _ in range(len(taken) * max(len(members), 1)):
            if not self._move_one(members, owned, subscribers):
                break
        out: dict = {}
        for m, tps in owned.items():
            per_topic: dict = {}
            for topic_id, p in tps:
                per_topic.setdefault(topic_id, set()).add(p)
            out[m] = {t: frozenset(ps) for t, ps in per_topic.items()}
        return out

    @staticmethod
    def _move_one(members, owned, subscribers) -> bool:
        for donor in sorted(members, key=lambda m: (-len(owned[m]), m)):
            load = len(owned[donor])
            for topic_id, p in sorted(owned[donor], reverse=True):
                receivers = [m for m in subscribers.get(topic_id, ()) if len(owned[m]) <= load - 2]
                if receivers:
                    receiver = min(receivers, key=lambda m: (len(owned[m]), m))
                    owned[donor].discard((topic_id, p))
                    owned[receiver].add((topic_id, p))
                    return True
        return False
