"""RequestMetrics: per request type, the request count by version and where its time went.

Kafka's RequestMetrics (group kafka.network): RequestsPerSec by version, and
histograms of TotalTimeMs split into RequestQueueTimeMs (waiting behind earlier
requests of the connection), LocalTimeMs (the handler), RemoteTimeMs (waiting
in a purgatory for replicas or data), ResponseSendTimeMs (encoding and
writing), plus ThrottleTimeMs. Fetches count under FetchConsumer or
FetchFollower and under Fetch, as Kafka counts them.

`record` runs for every request, so it does as little as a histogram allows
(bench/metrics_cost.py --instructions counts what it costs): every histogram
has exactly one observation per request, so each histogram's count is the
request count and its first bucket (0.05 ms, where most queue, send, remote
and throttle times fall) is derived at scrape time as that count less the
other buckets; a request touches a bucket only above it, and finds a sub-10 ms
bucket with float comparisons rather than a search. The four phases add up to
the total, so the total's sum is theirs; a request that did not wait in a
purgatory or was not throttled adds nothing to those two.
"""
from __future__ import annotations

from bisect import bisect_left

# Upper bounds (ms) of the histogram buckets; sub-millisecond ones because most answers take less.
BUCKETS_MS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0,
              5000.0, 10000.0, 30000.0)
BUCKETS_S = tuple(b / 1000.0 for b in BUCKETS_MS)   # the same in seconds: timestamps need no scaling
TIMES = ("TotalTimeMs", "RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseSendTimeMs",
         "ThrottleTimeMs")
SLOTS = len(BUCKETS_MS) + 1            # per histogram: its buckets and +Inf
TOTAL, QUEUE, LOCAL, REMOTE, SEND, THROTTLE = (i * SLOTS for i in range(6))   # offsets into the flat counts

FIRST_S, B1, B2 = BUCKETS_S[:3]


def bucket_of(v: float) -> int:
    """The index of the bucket a time above the first bound (in seconds) falls in: float comparisons for
    the sub-10 ms buckets, which cost less than a search (or an int() of a scaled time); `record` calls it
    only for a time past the first bucket."""
    if v <= 0.0005:
        return 1 if v <= 0.0001 else 2 if v <= 0.00025 else 3
    if v <= 0.0025:
        return 4 if v <= 0.001 else 5
    if v <= 0.01:
        return 6 if v <= 0.005 else 7
    return bisect_left(BUCKETS_S, v)


class RequestMetrics:
    """Counts per version, per histogram the counts of its buckets above the first (not cumulative: a
    scrape adds them up) in one flat list (histogram i at i x SLOTS), and the phases' sums in seconds
    (ThrottleTimeMs's too)."""
    __slots__ = ("name", "requests", "counts", "queue_s", "local_s", "remote_s", "send_s", "throttle_s")

    def __init__(self, name: str, max_version: int = 127) -> None:
        self.name = name
        self.requests = [0] * (max_version + 1)         # by version
        self.counts = [0] * (SLOTS * len(TIMES))
        self.queue_s = self.local_s = self.remote_s = self.send_s = self.throttle_s = 0.0

    def record(self, request, now: float) -> None:
        """One request whose answer was written at `now`, from the timestamps the RequestChannel put on it
        (time.monotonic()); remote_done_at 0: a handler that answered at once. Inlined: it runs per request."""
        self.requests[request.api_version] += 1
        received, dequeued, local = request.received_at, request.dequeued_at, request.local_done_at
        c, bucket = self.counts, bucket_of
        v = now - received
        if v > FIRST_S:
            c[(1 if v <= B1 else 2 if v <= B2 else bucket(v))] += 1
        v = dequeued - received
        if v > FIRST_S:
            c[(1 if v <= B1 else 2 if v <= B2 else bucket(v)) + QUEUE] += 1
        self.queue_s += v
        v = local - dequeued
        if v > FIRST_S:
            c[(1 if v <= B1 else 2 if v <= B2 else bucket(v)) + LOCAL] += 1
        self.local_s += v
        remote = request.remote_done_at
        if remote:                              # it waited in a purgatory
            v = remote - local
            if v > FIRST_S:
                c[(1 if v <= B1 else 2 if v <= B2 else bucket(v)) + REMOTE] += 1
            self.remote_s += v
            local = remote
        v = now - local
        if v > FIRST_S:
            c[(1 if v <= B1 else 2 if v <= B2 else bucket(v)) + SEND] += 1
        self.send_s += v
        throttle_ms = request.throttle_time_ms
        if throttle_ms > 0:
            self.throttle_ms(throttle_ms)

    def throttle_ms(self, ms: int) -> None:
        """A throttled request's ThrottleTimeMs (rare: kept out of `record`)."""
        v = ms / 1000.0
        if v > FIRST_S:
            self.counts[bucket_of(v) + THROTTLE] += 1
        self.throttle_s += v

    def snapshot(self) -> dict:
        """Counts by version, and per histogram (bucket counts, sum in ms)."""
        n = sum(self.requests)
        c = self.counts
        histograms = {}
        sums = (self.queue_s + self.local_s + self.remote_s + self.send_s, self.queue_s, self.local_s,
                self.remote_s, self.send_s, self.throttle_s)
        for i, (name, total) in enumerate(zip(TIMES, sums)):
            counts = c[i * SLOTS:(i + 1) * SLOTS]
            counts[0] = n - sum(counts)         # the first bucket: every request not counted above it
            histograms[name] = (counts, total * 1000.0)
        return {"requests": {v: k for v, k in enumerate(self.requests) if k}, "histograms": histograms}

    def add(self, other: dict) -> dict:
        """This request type's snapshot plus another's (Fetch is FetchConsumer plus FetchFollower)."""
        mine = self.snapshot()
        for version, n in other["requests"].items():
            mine["requests"][version] = mine["requests"].get(version, 0) + n
        for name, (c, total) in other["histograms"].items():
            c0, t0 = mine["histograms"][name]
            mine["histograms"][name] = ([x + y for x, y in zip(c0, c)], t0 + total)
        return mine
