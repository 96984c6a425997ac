"""The `range` assignor: each topic's partitions in contiguous ranges, as the client's RangeAssignor.

Per topic, the members subscribed to it, in order (members with an instance id first, by
instance id, then the others by member id), take `partitions / members` partitions each and
the first `partitions % members` one more. Members subscribed to the same co-partitioned
topics get the same partition numbers of each (joins rely on that). The result depends only
on the members and topics, so it is as sticky as the member order allows.
"""
from __future__ import annotations


def _order(item):
    member_id, sub = item
    return (0, sub.instance_id, "") if sub.instance_id is not None else (1, "", member_id)


class RangeAssignor:
    name = "range"

    def assign(self, spec, topics: dict) -> dict:
        """`topics`: {topic id: partition count}."""
        members = [m for m, _ in sorted(spec.members.items(), key=_order)]
        out: dict = {m: {} for m in members}
        for topic_id in sorted(topics):
            count = topics[topic_id]
            subscribers = [m for m in members if topic_id in spec.members[m].topic_ids]
            if not subscribers or count <= 0:
                continue
            quota, extra = divmod(count, len(subscribers))
            start = 0
            for i, m in enumerate(subscribers):
                n = quota + (1 if i < extra else 0)
                if n:
                    out[m][topic_id] = frozenset(range(start, start + n))
                start += n
        return out
