"""RequestMetrics' histograms: each request lands in the bucket its times call for, counts and sums add up.

`record` keeps only what it must per request (buckets above the first, three or
four phase sums) and derives the rest at snapshot time; these tests feed it
requests with known timestamps and check the snapshot against the plain
definition (a bisect into the bounds, every histogram one observation per request).
"""
from __future__ import annotations

from bisect import bisect_left

import pytest

from kafka_compat.protocol.frames import APIS, Request
from kafka_compat.server.request_metrics import BUCKETS_S, SLOTS, TIMES, RequestMetrics, bucket_of

METADATA = APIS[3]


def request(version: int, received: float, dequeued: float, local: float, remote: float = 0.0,
            throttle_ms: int = 0) -> Request:
    r = Request(3, version, 1, "c", None, None, METADATA)
    r.received_at, r.dequeued_at, r.local_done_at, r.remote_done_at = received, dequeued, local, remote
    r.throttle_time_ms = throttle_ms
    return r


def expected_bucket(seconds: float) -> int:
    return bisect_left(BUCKETS_S, seconds)


@pytest.mark.parametrize("seconds", [b * f for b in BUCKETS_S for f in (0.999, 1.0, 1.001)] + [0.0, 1e-9, 31.0])
def test_bucket_of_agrees_with_a_search_on_and_around_every_bound(seconds):
    if seconds <= BUCKETS_S[0]:
        return                                  # bucket_of is only asked about times past the first bucket
    assert bucket_of(seconds) == expected_bucket(seconds)


def test_every_histogram_counts_each_request_once_in_its_bucket():
    m = RequestMetrics("Metadata", METADATA.max_version)
    # (received, dequeued, local, remote, now, throttle ms): fast, slow, purgatory, throttled, very slow
    cases = [
        (100.0, 100.00001, 100.00003, 0.0, 100.00004, 0),
        (200.0, 200.0002, 200.0032, 0.0, 200.0040, 0),
        (300.0, 300.00002, 300.0001, 300.4, 300.40002, 0),
        (400.0, 400.00001, 400.00002, 0.0, 400.00003, 700),
        (500.0, 501.0, 520.0, 0.0, 520.5, 0),
    ]
    versions = [12, 12, 9, 12, 0]
    for version, (received, dequeued, local, remote, now, throttle) in zip(versions, cases):
        m.record(request(version, received, dequeued, local, remote, throttle), now)
    s = m.snapshot()
    assert s["requests"] == {12: 3, 9: 1, 0: 1}

    want = {name: ([0] * SLOTS, 0.0) for name in TIMES}

    def observe(name: str, seconds: float) -> None:
        counts, total = want[name]
        counts[expected_bucket(seconds)] += 1
        want[name] = (counts, total + seconds * 1000.0)

    for received, dequeued, local, remote, now, throttle in cases:
        done = remote or local
        observe("TotalTimeMs", now - received)
        observe("RequestQueueTimeMs", dequeued - received)
        observe("LocalTimeMs", local - dequeued)
        observe("RemoteTimeMs", done - local)
        observe("ResponseSendTimeMs", now - done)
        observe("ThrottleTimeMs", throttle / 1000.0)
    for name in TIMES:
        counts, total = s["histograms"][name]
        assert counts == want[name][0], name
        assert sum(counts) == len(cases)
        assert total == pytest.approx(want[name][1], rel=1e-9, abs=1e-9), name
    # the phases add up to the total
    phases = sum(s["histograms"][n][1] for n in TIMES[1:5])
    assert s["histograms"]["TotalTimeMs"][1] == pytest.approx(phases)


def test_fetch_sums_two_request_types():
    consumer, follower = RequestMetrics("FetchConsumer", 16), RequestMetrics("FetchFollower", 16)
    consumer.record(request(12, 1.0, 1.0001, 1.002), 1.003)
    follower.record(request(15, 2.0, 2.00001, 2.00002, remote=2.5), 2.50003)
    follower.record(request(15, 3.0, 3.00001, 3.00002), 3.00003)
    both = consumer.add(follower.snapshot())
    assert both["requests"] == {12: 1, 15: 2}
    for name in TIMES:
        assert sum(both["histograms"][name][0]) == 3
    remote_counts, remote_ms = both["histograms"]["RemoteTimeMs"]
    assert remote_counts[expected_bucket(0.49998)] == 1 and remote_counts[0] == 2
    assert remote_ms == pytest.approx(499.98)

