"""Codec speed, side by side with kafka-python's own protocol classes on the same bytes.

    python bench/codec.py [--seconds 1.0]

Three cases from the protocol-layer issue:
  1. decode a Produce v9 request of 10 partitions, each one 16 KiB batch;
  2. decode a Metadata v12 response of 1,000 partitions;
  3. encode a Fetch v12 response of 100 partitions (record bytes left out: they go by sendfile).
For each, both libraries run in alternation in one process and the ratio of their
per-operation times is printed (target: kafka-compat at least 3x faster). Case 1 also
checks that the decoded records are views into the frame, not copies.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kafka_compat.protocol.messages.fetch import FetchResponse  # noqa: E402
from kafka_compat.protocol.messages.metadata import MetadataResponse  # noqa: E402
from kafka_compat.protocol.messages.produce import ProduceRequest  # noqa: E402


def produce_frame() -> bytes:
    batch = os.urandom(16384)
    req = ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[ProduceRequest.TopicProduceData(
        name="bench-topic", partition_data=[ProduceRequest.PartitionProduceData(index=i, records=batch)
                                            for i in range(10)])])
    return req.encode(9)


def metadata_frame() -> bytes:
    parts = [MetadataResponse.MetadataResponsePartition(partition_index=i, leader_id=i % 3, leader_epoch=5,
                                                        replica_nodes=[0, 1, 2], isr_nodes=[0, 1, 2])
             for i in range(1000)]
    resp = MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(node_id=n, host=f"broker-{n}",
                                                                             port=9092) for n in range(3)],
                            cluster_id="bench-cluster", controller_id=0,
                            topics=[MetadataResponse.MetadataResponseTopic(name="bench-topic", topic_id=os.urandom(16),
                                                                           partitions=parts)])
    return resp.encode(12)


def fetch_response_ours() -> FetchResponse:
    return FetchResponse(session_id=0, responses=[FetchResponse.FetchableTopicResponse(topic="bench-topic", partitions=[
        FetchResponse.PartitionData(partition_index=i, high_watermark=1_000_000 + i, last_stable_offset=1_000_000 + i,
                                    log_start_offset=0, aborted_transactions=None, records=b"")
        for i in range(100)])])


def timeit(fn, seconds: float) -> float:
    """Seconds per call, best of several batches within the time budget."""
    n = 1
    while True:
        t = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t
        if dt > 0.05:
            break
        n *= 2
    best = dt / n
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=1.0, help="time budget per measurement")
    args = ap.parse_args()
    from kafka.protocol.consumer import FetchResponse as KFetchResponse
    from kafka.protocol.metadata import MetadataResponse as KMetadataResponse
    from kafka.protocol.producer import ProduceRequest as KProduceRequest

    produce = produce_frame()
    decoded, _ = ProduceRequest.decode(memoryview(produce), 9)
    records = decoded.topic_data[0].partition_data[0].records
    zero_copy = isinstance(records, memoryview) and records.obj is memoryview(produce).obj
    metadata = metadata_frame()
    ours_fetch = fetch_response_ours()
    theirs_fetch = KFetchResponse.decode(ours_fetch.encode(12), version=12)
    theirs_fetch._header = None             # a decoded response has no header slot until set
    assert ours_fetch.encode(12) == theirs_fetch.encode(version=12), "the two encoders disagree"
    assert KMetadataResponse.decode(metadata, version=12).topics[0].partitions[999].partition_index == 999

    cases = [
        ("decode Produce v9, 10 x 16 KiB", lambda: ProduceRequest.decode(produce, 9),
         lambda: KProduceRequest.decode(produce, version=9)),
        ("decode Metadata v12, 1000 partitions", lambda: MetadataResponse.decode(metadata, 12),
         lambda: KMetadataResponse.decode(metadata, version=12)),
        ("encode Fetch v12, 100 partitions", lambda: ours_fetch.encode(12),
         lambda: theirs_fetch.encode(version=12)),
    ]
    print(f"{'case':40} {'kafka-compat':>14} {'kafka-python':>14} {'speed-up':>9}")
    ok = True
    for name, ours, theirs in cases:
        a = timeit(ours, args.seconds)
        b = timeit(theirs, args.seconds)
        ratio = b / a
        ok = ok and ratio >= 3
        print(f"{name:40} {a * 1e6:11.1f} us {b * 1e6:11.1f} us {ratio:8.1f}x")
        print(json.dumps({"case": name, "kafka_compat_us": round(a * 1e6, 2), "kafka_python_us": round(b * 1e6, 2),
                          "speedup": round(ratio, 2)}))
    print(f"Produce records decoded as views into the frame (no copy): {zero_copy}")
    return 0 if ok and zero_copy else 1


if __name__ == "__main__":
    sys.exit(main())
