"""Pipelined requests on one connection are answered in the order they were sent.

The connection answers ready requests inline in its read callback and hands a
request that must wait (a long-poll fetch) to a task; the frames behind it must
still wait their turn, and everything sent in one burst must be answered.
"""
from __future__ import annotations

import pytest
from wire import WireClient, decode_response, encode_request

from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest
from kafka_compat.protocol.messages.fetch import FetchRequest
from kafka_compat.protocol.messages.metadata import MetadataRequest
from kafka_compat.protocol.messages.produce import ProduceRequest
from kafka_compat.protocol.records import build_batch
from kafka_compat.testing import EmbeddedBroker


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker({"num.partitions": 1}) as b:
        yield b


def produce(topic: str, value: bytes) -> ProduceRequest:
    return ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(
            index=0, records=build_batch([(b"k", value, [], 1000)]))])])


def long_poll(topic: str, offset: int, wait_ms: int) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                        session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                            topic=topic, partitions=[FetchRequest.FetchPartition(
                                partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])


def test_a_burst_of_produce_requests_is_answered_in_order(broker):
    c = WireClient("127.0.0.1", broker.port)
    c.call(3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="burst")]))
    # 200 requests in one write, so many frames arrive in one read
    c.send_raw(b"".join(encode_request(0, 9, produce("burst", b"v%d" % i), 100 + i) for i in range(200)))
    offsets = []
    for i in range(200):
        cid, body = decode_response(0, 9, c.read_frame())
        assert cid == 100 + i
        part = body.responses[0].partition_responses[0]
        assert part.error_code == 0
        offsets.append(part.base_offset)
    assert offsets == list(range(200))
    c.close()


def test_requests_behind_a_waiting_fetch_wait_their_turn(broker):
    c = WireClient("127.0.0.1", broker.port)
    c.call(3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="turn")]))
    # the fetch finds nothing and waits 300 ms; the two requests behind it are answerable at once
    c.send_raw(encode_request(1, 12, long_poll("turn", 0, 300), 1)
               + encode_request(18, 3, ApiVersionsRequest(client_software_name="t",
                                                          client_software_version="1"), 2)
               + encode_request(0, 9, produce("turn", b"after"), 3))
    cid, fetched = decode_response(1, 12, c.read_frame())
    assert cid == 1
    part = fetched.responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == 0 and not part.records   # answered empty at its timeout
    cid, versions = decode_response(18, 3, c.read_frame())
    assert cid == 2 and versions.error_code == 0
    cid, produced = decode_response(0, 9, c.read_frame())
    assert cid == 3 and produced.responses[0].partition_responses[0].base_offset == 0
    # and the connection keeps serving inline afterwards
    again = c.call(0, 9, produce("turn", b"again"))
    assert again.responses[0].partition_responses[0].base_offset == 1
    c.close()
