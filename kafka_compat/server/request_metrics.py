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
TIMES = ("TotalTimeMs", "RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseSendTimeMs",
         "ThrottleTimeMs")


class Histogram:
    """Counts per bucket (not cumulative: a scrape adds them up) and the sum of observations."""
    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS_MS) + 1)       # the last is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(BUCKETS_MS, value)] += 1
        self.sum += value

    def snapshot(self) -> tuple[list[int], float]:
        return list(self.counts), self.sum


class RequestMetrics:
    __slots__ = ("name", "requests", "total", "queue", "local", "remote", "send", "throttle")

    def __init__(self, name: str) -> None:
        self.name = name
        self.requests: dict[int, int] = {}              # version -> count
        self.total, self.queue, self.local, self.remote, self.send, self.throttle = (
            Histogram() for _ in TIMES)

    def record(self, version: int, total: float, queue: float, local: float, remote: float, send: float,
               throttle: float) -> None:
        requests = self.requests
        requests[version] = requests.get(version, 0) + 1
        self.total.observe(total)
        self.queue.observe(queue)
        self.local.observe(local)
        self.remote.observe(remote)
        self.send.observe(send)
        self.throttle.observe(throttle)

    def histograms(self) -> dict[str, Histogram]:
        return dict(zip(TIMES, (self.total, self.queue, self.local, self.remote, self.send, self.throttle)))
