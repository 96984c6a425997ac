"""Codec speed, side by side with kafka-python's own protocol classes on the same bytes.

    python bench/codec.py [--seconds 1.0]

Three cases from the protocol-layer issue:
  1. decode a Produce v9 request of 10 partitions, each one 16 KiB batch;
  2. decode a Metadata v12 response of 1,000 partitions;
  3. encode a Fetch v12 response of 100 partitions (record bytes left out: they go by sendfile).
For each, both libraries run in alternation in one process and the ratio of their
per-operation times is printed (target: kafka-compat at least 3x faster). Case 1 also
checks that the decoded records are views into the frame, not copies.

Both sides decode everything eagerly into objects. kafka-python 3.0.12 decodes with flat
functions it generates per version; it copies record batches into bytes (ours are views)
and makes uuid.UUID objects of topic ids (ours stay bytes).
"""
from __future__ import annotations

import argparse
import gc
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


def floor_produce_decoder():
    """The least work an eager Produce v9 decode can do in CPython: a decoder written by hand for
    exactly this benchmark's frame (no transactional id, one topic, 3-byte length varints, no
    tagged fields) that still builds the same objects and keeps the records as views, with one
    bounds check per batch. It refuses any other shape, so it is no codec; `--floor` times it to
    show how close the generated decoder is to the floor and whether 3x was reachable at all."""
    import struct

    from kafka_compat.protocol.messages.produce import _ProduceRequest_PartitionProduceData as Partition
    from kafka_compat.protocol.messages.produce import _ProduceRequest_TopicProduceData as Topic
    from kafka_compat.protocol.primitives import ZERO_UUID, new
    head = struct.Struct(">hiB").unpack_from
    index_and_length = struct.Struct(">iBBB").unpack_from

    def decode(buf, p=0):
        if type(buf) is not memoryview:
            buf = memoryview(buf)
        end = len(buf)
        if buf[p]:
            raise NotImplementedError("a transactional id")
        o0 = new(ProduceRequest)
        o0.transactional_id = None
        o0.acks, o0.timeout_ms, k = head(buf, p + 1)
        p += 8
        topics = []
        for _ in range(k - 1):
            o1 = new(Topic)
            o1.topic_id = ZERO_UUID
            q = p + buf[p]
            o1.name = str(buf[p + 1:q], "utf-8")
            p = q + 1
            partitions = []
            append = partitions.append
            for _ in range(buf[q] - 1):
                o2 = new(Partition)
                o2.index, a, b, c = index_and_length(buf, p)
                if c >= 128 or b < 128:
                    raise NotImplementedError("a length varint other than 3 bytes")
                q = p + 6 + (a & 127 | (b & 127) << 7 | c << 14)
                if q > end or buf[q]:
                    raise NotImplementedError("a short frame or tagged fields")
                o2.records = buf[p + 7:q]
                o2.unknown_tags = None
                p = q + 1
                append(o2)
            o1.partition_data = partitions
            if buf[p]:
                raise NotImplementedError("tagged fields")
            o1.unknown_tags = None
            p += 1
            topics.append(o1)
        o0.topic_data = topics
        if buf[p]:
            raise NotImplementedError("tagged fields")
        o0.unknown_tags = None
        return o0, p + 1
    return decode


def calibrate(fn) -> int:
    """Calls per batch: enough for a batch to last about 20 ms."""
    n = 1
    while True:
        t = time.process_time()
        for _ in range(n):
            fn()
        if time.process_time() - t > 0.02:
            return n
        n *= 2


def timeit(ours, theirs, seconds: float, keep_gc: bool = False) -> tuple[float, float]:
    """Seconds per call of each, best batch of many, the two alternating batch by batch.

    Alternating keeps a load change on the machine from favouring either side; CPU
    time (not wall time) leaves out the time other processes hold the core; and, as
    the standard `timeit` module does, the garbage collector is paused while timing:
    a full collection walks every object in the process (mostly the two libraries'
    own modules), which would charge whichever side it happens to interrupt.
    """
    na, nb = calibrate(ours), calibrate(theirs)
    best = [float("inf"), float("inf")]
    end = time.process_time() + 2 * seconds
    enabled = gc.isenabled()
    if not keep_gc:
        gc.disable()
    try:
        while time.process_time() < end:
            for i, (fn, n) in enumerate(((ours, na), (theirs, nb))):
                t = time.process_time()
                for _ in range(n):
                    fn()
                best[i] = min(best[i], (time.process_time() - t) / n)
            gc.collect()
    finally:
        if enabled:
            gc.enable()
    return best[0], best[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=1.0, help="time budget per measurement")
    ap.add_argument("--gc", action="store_true", help="leave the garbage collector running while timing")
    ap.add_argument("--floor", action="store_true", help="also time a Produce decoder written by hand for only "
                                                        "this frame's shape, the floor for an eager decode")
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
    measured = {}
    for name, ours, theirs in cases:
        a, b = measured[name] = timeit(ours, theirs, args.seconds, keep_gc=args.gc)
        ratio = b / a
        ok = ok and ratio >= 3
        print(f"{name:40} {a * 1e6:11.1f} us {b * 1e6:11.1f} us {ratio:8.1f}x")
        print(json.dumps({"case": name, "kafka_compat_us": round(a * 1e6, 2), "kafka_python_us": round(b * 1e6, 2),
                          "speedup": round(ratio, 2)}))
    print(f"Produce records decoded as views into the frame (no copy): {zero_copy}")
    if args.floor:
        floor = floor_produce_decoder()
        got = floor(produce)[0]
        assert got == decoded, "the hand-written decoder disagrees with the generated one"
        a, b = timeit(lambda: floor(produce), lambda: KProduceRequest.decode(produce, version=9), args.seconds,
                      keep_gc=args.gc)
        c = measured[cases[0][0]][0]             # the generated decoder, timed above
        print(f"{'floor: hand-written Produce v9 decoder':40} {a * 1e6:11.1f} us {b * 1e6:11.1f} us {b / a:8.1f}x"
              f"  (generated: {c * 1e6:.1f} us, {c / a:.2f}x the floor)")
        print(json.dumps({"case": "floor decode Produce v9", "floor_us": round(a * 1e6, 2),
                          "generated_us": round(c * 1e6, 2), "kafka_python_us": round(b * 1e6, 2),
                          "speedup": round(b / a, 2)}))
    return 0 if ok and zero_copy else 1


if __name__ == "__main__":
    sys.exit(main())
