"""What keeps an acks=all record's trip short in a cluster: nothing waits out a timeout when data moves.

- A follower's fetch parked on the leader is answered when the leader appends, and the follower's next
  fetch moves the high watermark, which answers the acks=all produce and a consumer's parked fetch: with
  replica.fetch.wait.max.ms far beyond the test's patience, the record is still acknowledged and read.
- While an acks=all produce waits for its replicas, the produce requests behind it on the same connection
  are appended at once (in order) and answered in order when their turn comes: a client that sends one
  request per partition every linger.ms would otherwise queue behind each replication round trip.
"""
from __future__ import annotations

import select
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from wire import WireClient, decode_response, encode_request

from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest
from kafka_compat.protocol.messages.fetch import FetchRequest
from kafka_compat.protocol.messages.list_offsets import ListOffsetsRequest
from kafka_compat.protocol.messages.produce import ProduceRequest
from kafka_compat.protocol.records import build_batch
from kafka_compat.testing import EmbeddedCluster, zookeeper_missing

LONG_MS = 300_000        # replica.fetch.wait.max.ms: a test that waited this out would fail long before


@pytest.fixture(scope="module")
def cluster():
    if zookeeper_missing():
        pytest.skip(zookeeper_missing())
    with EmbeddedCluster(2, {"replica.fetch.wait.max.ms": LONG_MS, "replica.socket.timeout.ms": LONG_MS,
                             "replica.lag.time.max.ms": LONG_MS, "offsets.topic.replication.factor": 1,
                             "offsets.topic.num.partitions": 1,
                             # a paused follower keeps its session (and so its ISR place) for the whole test
                             "zookeeper.session.timeout.ms": 120_000}) as c:
        c.wait_for_controller(60)
        yield c


def create(cluster, topic: str, leader: int) -> None:
    """One partition led by ``leader`` and followed by the other broker, both in the ISR.

    Each test's follower is a broker that fetches nothing else yet: a partition added to a fetcher whose
    fetch is parked on its leader is first fetched once that fetch returns (as in Kafka), which here would
    be after replica.fetch.wait.max.ms."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[leader, 1 - leader]])])[topic].result(60)
    cluster.wait_until(lambda: (s := cluster.partition_state(topic, 0)) and s["leader"] == leader
                       and sorted(s["isr"]) == [0, 1], 60, f"{topic} led by {leader} with both replicas in sync")


def produce(topic: str, value: bytes) -> ProduceRequest:
    return ProduceRequest(acks=-1, timeout_ms=120_000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(
            index=0, records=build_batch([(b"k", value, [], 1000)]))])])


def log_end_offset(client: WireClient, topic: str) -> int:
    """The leader's log end offset (ListOffsets as a debugging replica reads past the high watermark)."""
    body = client.call(2, 7, ListOffsetsRequest(replica_id=-2, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])]))
    return body.topics[0].partitions[0].offset


def test_an_append_answers_the_parked_fetches_that_move_the_high_watermark(cluster):
    create(cluster, "woken", 0)
    leader = cluster.brokers[0]
    # a consumer's fetch parked on the leader (nothing below the high watermark yet) for far longer than we wait
    consumer = WireClient("127.0.0.1", leader.port, timeout=60)
    consumer.send_raw(encode_request(1, 12, FetchRequest(
        replica_id=-1, max_wait_ms=LONG_MS, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[FetchRequest.FetchTopic(topic="woken", partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]), 7))
    time.sleep(0.5)         # let it park (were it read first, it would be answered with the record at once)
    delivered = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "message.timeout.ms": 60_000})
    producer.produce("woken", b"first", partition=0, on_delivery=lambda e, m: delivered.append((e, m.offset())))
    assert producer.flush(90) == 0
    # acknowledged: the follower's parked fetch was answered by the append, and its next fetch told the leader
    assert delivered == [(None, 0)]
    cid, fetched = decode_response(1, 12, consumer.read_frame())
    part = fetched.responses[0].partitions[0]
    assert cid == 7 and part.error_code == 0 and part.high_watermark == 1 and b"first" in bytes(part.records)
    consumer.close()


def test_produce_requests_behind_one_waiting_for_acks_are_appended_and_answered_in_order(cluster):
    create(cluster, "ahead", 1)
    leader = cluster.brokers[1]
    client = WireClient("127.0.0.1", leader.port, timeout=60)
    probe = WireClient("127.0.0.1", leader.port, timeout=60)
    cluster.pause(0)        # the follower stops fetching: acks=all waits, the follower stays in the ISR
    try:
        client.send_raw(encode_request(0, 9, produce("ahead", b"a"), 1) + encode_request(0, 9, produce("ahead", b"b"), 2)
                        + encode_request(18, 3, ApiVersionsRequest(client_software_name="t",
                                                                   client_software_version="1"), 3))
        # both appended while the first still waits for its acks (its answer would be on our socket by now)
        cluster.wait_until(lambda: log_end_offset(probe, "ahead") == 2, 30, "the second produce to be appended")
        assert select.select([client.sock], [], [], 0)[0] == [], "the first produce was answered before the second"
    finally:
        cluster.resume(0)
    cid, first = decode_response(0, 9, client.read_frame())
    assert cid == 1 and first.responses[0].partition_responses[0].error_code == 0
    assert first.responses[0].partition_responses[0].base_offset == 0
    cid, second = decode_response(0, 9, client.read_frame())
    assert cid == 2 and second.responses[0].partition_responses[0].error_code == 0
    assert second.responses[0].partition_responses[0].base_offset == 1
    cid, versions = decode_response(18, 3, client.read_frame())
    assert cid == 3 and versions.error_code == 0
    # and the connection goes on answering one at a time
    again = client.call(0, 9, produce("ahead", b"c"))
    assert again.responses[0].partition_responses[0].base_offset == 2
    client.close()
    probe.close()
