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
BUCKETS_S = tuple(b / 1000.0 for b in BUCKETS_MS)   # the same in seconds: timestamps need no scaling
FIRST_BUCKET_S = BUCKETS_S[0]          # most queue, remote, send and throttle times fall here: no bisect
FIRST_BUCKET_MS = BUCKETS_MS[0]
TIMES = ("TotalTimeMs", "RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseSendTimeMs",
         "ThrottleTimeMs")
SLOTS = len(BUCKETS_MS) + 1            # per histogram: its buckets and +Inf
QUEUE, LOCAL, REMOTE, SEND, THROTTLE = (i * SLOTS for i in range(1, 6))   # offsets into the flat counts


class RequestMetrics:
    """Counts per version, and per histogram bucket counts (not cumulative: a scrape adds them up) and sums.

    The counts of all six histograms are one flat list (histogram i at i x SLOTS), the sums are in
    seconds (ThrottleTimeMs's too): a request costs no scaling and one index per histogram."""
    __slots__ = ("name", "requests", "counts", "sums")

    def __init__(self, name: str) -> None:
        self.name = name
        self.requests: dict[int, int] = {}              # version -> count
        self.counts = [0] * (SLOTS * len(TIMES))
        self.sums = [0.0] * len(TIMES)

    def record(self, version: int, received: float, dequeued: float, local: float, remote: float, now: float,
               throttle_ms: float) -> None:
        """One request, from its timestamps (time.monotonic()); unrolled: this runs for every request."""
        requests = self.requests
        requests[version] = requests.get(version, 0) + 1
        b, c, sums, first = BUCKETS_S, self.counts, self.sums, FIRST_BUCKET_S
        v = now - received
        c[bisect_left(b, v) if v > first else 0] += 1
        sums[0] += v
        v = dequeued - received
        c[(bisect_left(b, v) if v > first else 0) + QUEUE] += 1
        sums[1] += v
        v = local - dequeued
        c[(bisect_left(b, v) if v > first else 0) + LOCAL] += 1
        sums[2] += v
        if remote != local:                     # it waited in a purgatory
            v = remote - local
            c[(bisect_left(b, v) if v > first else 0) + REMOTE] += 1
            sums[3] += v
        else:
            c[REMOTE] += 1
        v = now - remote
        c[(bisect_left(b, v) if v > first else 0) + SEND] += 1
        sums[4] += v
        if throttle_ms:
            c[(bisect_left(BUCKETS_MS, throttle_ms) if throttle_ms > FIRST_BUCKET_MS else 0) + THROTTLE] += 1
            sums[5] += throttle_ms / 1000.0
        else:
            c[THROTTLE] += 1

    def snapshot(self) -> dict:
        """Counts by version, and per histogram (bucket counts, sum in ms)."""
        c = self.counts
        return {"requests": dict(self.requests),
                "histograms": {name: (c[i * SLOTS:(i + 1) * SLOTS], total * 1000.0)
                               for i, (name, total) in enumerate(zip(TIMES, self.sums))}}

    def add(self, other: dict) -> dict:
        """This request type's snapshot plus another's (Fetch is FetchConsumer plus FetchFollower)."""
        mine = self.snapshot()
        for version, n in other["requests"].items():
            mine["requests"][version] = mine["requests"].get(version, 0) + n
        for name, (c, total) in other["histograms"].items():
            c0, t0 = mine["histograms"][name]
            mine["histograms"][name] = ([x + y for x, y in zip(c0, c)], t0 + total)
        return mine
