"""RequestMetrics: per request type, the request count by version and where its time went.

Kafka's RequestMetrics (group kafka.network): RequestsPerSec by version, and
histograms of TotalTimeMs split into RequestQueueTimeMs (waiting behind earlier
requests of the connection), LocalTimeMs (the handler), RemoteTimeMs (waiting
in a purgatory for replicas or data), ResponseSendTimeMs (encoding and
writing), plus ThrottleTimeMs. Fetches count under FetchConsumer or
FetchFollower and under Fetch, as Kafka counts them. One observation per
request: a bisect into fixed bucket bounds and two additions.
"""
from __future__ import annotations

from bisect import bisect_left

# Upper bounds (ms) of the histogram buckets; sub-millisecond ones because most answers take less.
BUCKETS_MS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0,
              5000.0, 10000.0, 30000.0)
FIRST_BUCKET_MS = BUCKETS_MS[0]        # most queue, remote, send and throttle times fall here: no bisect
TIMES = ("TotalTimeMs", "RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseSendTimeMs",
         "ThrottleTimeMs")


class RequestMetrics:
    """Counts per version, and per histogram bucket counts (not cumulative: a scrape adds them up) and sums."""
    __slots__ = ("name", "requests", "counts", "sums")

    def __init__(self, name: str) -> None:
        self.name = name
        self.requests: dict[int, int] = {}              # version -> count
        self.counts = [[0] * (len(BUCKETS_MS) + 1) for _ in TIMES]     # the last bucket is +Inf
        self.sums = [0.0] * len(TIMES)

    def record(self, version: int, received: float, dequeued: float, local: float, remote: float, now: float,
               throttle_ms: float) -> None:
        """One request, from its timestamps (time.monotonic()); unrolled: this runs for every request."""
        requests = self.requests
        requests[version] = requests.get(version, 0) + 1
        b, counts, sums, first = BUCKETS_MS, self.counts, self.sums, FIRST_BUCKET_MS
        v = (now - received) * 1000.0
        counts[0][bisect_left(b, v) if v > first else 0] += 1
        sums[0] += v
        v = (dequeued - received) * 1000.0
        counts[1][bisect_left(b, v) if v > first else 0] += 1
        sums[1] += v
        v = (local - dequeued) * 1000.0
        counts[2][bisect_left(b, v) if v > first else 0] += 1
        sums[2] += v
        v = (remote - local) * 1000.0
        counts[3][bisect_left(b, v) if v > first else 0] += 1
        sums[3] += v
        v = (now - remote) * 1000.0
        counts[4][bisect_left(b, v) if v > first else 0] += 1
        sums[4] += v
        counts[5][bisect_left(b, throttle_ms) if throttle_ms > first else 0] += 1
        sums[5] += throttle_ms

    def snapshot(self) -> dict:
        return {"requests": dict(self.requests),
                "histograms": {name: (list(c), total) for name, c, total in zip(TIMES, self.counts, self.sums)}}

    def add(self, other: dict) -> dict:
        """This request type's snapshot plus another's (Fetch is FetchConsumer plus FetchFollower)."""
        mine = self.snapshot()
        for version, n in other["requests"].items():
            mine["requests"][version] = mine["requests"].get(version, 0) + n
        for name, (c, total) in other["histograms"].items():
            c0, t0 = mine["histograms"][name]
            mine["histograms"][name] = ([x + y for x, y in zip(c0, c)], t0 + total)
        return mine
