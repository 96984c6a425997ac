"""The broker over the wire: the advertised table, bad input, acks=0, sendfile and long polls."""
from __future__ import annotations

import asyncio
import gc
import os
import struct

import pytest
from schema_values import SCHEMAS
from wire import AsyncWireClient, WireClient, encode_request

from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest
from kafka_compat.protocol.messages.fetch import FetchRequest
from kafka_compat.protocol.messages.metadata import MetadataRequest
from kafka_compat.protocol.messages.produce import ProduceRequest
from kafka_compat.protocol.records import RecordBatch, build_batch
from kafka_compat.server.broker import Broker, advertised_api_versions
from kafka_compat.server.kafka_config import BrokerConfig
from kafka_compat.server.partition import LogReadResult
from kafka_compat.testing import EmbeddedBroker


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker({"num.partitions": 1}) as b:
        yield b


def client(broker) -> WireClient:
    return WireClient("127.0.0.1", broker.port)


def produce_body(topic: str, records: bytes, acks: int = 1, partition: int = 0) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=records)])])


def test_advertised_api_versions_match_the_schemas(broker):
    c = client(broker)
    resp = c.call(18, 3, ApiVersionsRequest(client_software_name="wire", client_software_version="1"))
    assert resp.error_code == 0
    table = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    schema = {a.key: (a.versions.lo, a.versions.hi) for a in SCHEMAS.apis}
    for key, (lo, hi) in table.items():
        assert key in schema, f"advertised key {key} has no schema"
        assert schema[key][0] <= lo <= hi <= schema[key][1], (key, (lo, hi), schema[key])
    assert table == advertised_api_versions()  # exactly what the handlers register
    assert table[0][0] == 0                    # Produce v0 advertised: old librdkafka needs it
    assert {0, 1, 2, 3, 18}.issubset(table)
    # every advertised version really decodes: ask Metadata at each one
    for v in range(table[3][0], table[3][1] + 1):
        body = MetadataRequest(topics=[]) if v else MetadataRequest(topics=[])
        assert c.call(3, v, body).brokers[0].port == broker.port
    c.close()


def test_api_versions_v0_and_the_too_high_fallback(broker):
    c = client(broker)
    v0 = c.call(18, 0, ApiVersionsRequest())
    assert v0.error_code == 0 and len(v0.api_keys) >= 5
    # a version from the future: UNSUPPORTED_VERSION in a v0 body, connection kept open
    frame = bytearray(encode_request(18, 4, ApiVersionsRequest(client_software_name="x"), 77))
    struct.pack_into(">h", frame, 6, 42)
    c.send_raw(bytes(frame))
    cid, body = c.receive(18, 0)
    assert cid == 77 and body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.max_version) for k in body.api_keys] == [(18, 5)]
    assert c.call(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1")).error_code == 0
    c.close()


@pytest.mark.parametrize("name, version", [("", "1"), ("bad name", "1"), ("t", ""), ("t", "1.0-"), ("-t", "1")])
def test_api_versions_v3_refuses_a_bad_software_name(broker, name, version):
    """v3+ checks the client's software name and version as Kafka does: INVALID_REQUEST and no table."""
    c = client(broker)
    resp = c.call(18, 3, ApiVersionsRequest(client_software_name=name, client_software_version=version))
    assert (resp.error_code, resp.api_keys) == (ErrorCode.INVALID_REQUEST, [])
    ok = c.call(18, 3, ApiVersionsRequest(client_software_name="kafka.python", client_software_version="3.0.12"))
    assert ok.error_code == 0 and ok.api_keys
    c.close()


@pytest.mark.parametrize("bad", [
    b"\x00\x00\x00\x08" + b"\xde\xad\xbe\xef" * 2,                     # garbage header: unknown api key
    struct.pack(">i", 200 * 1024 * 1024),                               # larger than socket.request.max.bytes
    struct.pack(">i", -1),                                              # negative length
    struct.pack(">ihhi", 8, 3, 99, 1),                                   # Metadata v99
    struct.pack(">ihhih", 11, 0, 9, 1, -1) + b"\xff",                     # Produce v9 header cut short
])
def test_bad_input_closes_only_that_connection(broker, bad):
    good = client(broker)
    evil = client(broker)
    evil.send_raw(bad)
    assert evil.is_closed_by_peer()
    assert good.call(3, 12, MetadataRequest(topics=None)).cluster_id
    good.close()


def test_acks_zero_gets_no_response(broker):
    c = client(broker)
    c.call(3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="acks0")]))
    batch = build_batch([(b"k", b"v", [], 1000)])
    c.send(0, 9, produce_body("acks0", batch, acks=0))
    # the next response to arrive is the Metadata answer, not a Produce response
    cid = c.send(3, 12, MetadataRequest(topics=None))
    got, body = c.receive(3, 12)
    assert got == cid and any(t.name == "acks0" for t in body.topics)
    c.close()


# ---------------------------------------------------------------- in-process broker

def in_process_config(tmp_path):
    return BrokerConfig.from_properties({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path),
                                         "num.partitions": "1"})


async def _started(tmp_path):
    b = Broker(in_process_config(tmp_path))
    await b.start()
    return b, await AsyncWireClient.connect("127.0.0.1", b.bound[0].port)


def fetch_body(topic: str, offset: int, max_wait_ms: int = 0, min_bytes: int = 1) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=50 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                            topic=topic, partitions=[FetchRequest.FetchPartition(
                                partition=0, fetch_offset=offset, partition_max_bytes=10 << 20)])])


def test_plaintext_fetch_sends_records_with_sendfile(tmp_path, monkeypatch):
    calls = []
    real = os.sendfile

    def spy(out_fd, in_fd, offset, count):
        calls.append(count)
        return real(out_fd, in_fd, offset, count)

    monkeypatch.setattr(os, "sendfile", spy)

    async def scenario():
        b, c = await _started(tmp_path)
        try:
            await c.call(3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="sf")]))
            value = os.urandom(200_000)
            batch = build_batch([(b"k", value, [], 1000)])
            r = await c.call(0, 9, produce_body("sf", batch))
            assert r.responses[0].partition_responses[0].error_code == 0
            resp = await c.call(1, 12, fetch_body("sf", 0))
            records = bytes(resp.responses[0].partitions[0].records)
            return records, batch
        finally:
            await c.close()
            await b.stop()

    records, batch = asyncio.run(scenario())
    assert calls and sum(calls) >= len(batch)           # the record bytes went through os.sendfile
    got = RecordBatch(memoryview(records))
    assert got.crc_valid() and bytes(next(iter(got.records())).value) == bytes(
        next(iter(RecordBatch(memoryview(batch)).records())).value)


def test_long_poll_fetch_completes_when_a_record_arrives(tmp_path):
    async def scenario():
        b, c = await _started(tmp_path)
        producer = await AsyncWireClient.connect("127.0.0.1", b.bound[0].port)
        try:
            await c.call(3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="lp")]))
            await c.send(1, 12, fetch_body("lp", 0, max_wait_ms=60_000))
            waiting = asyncio.ensure_future(c.receive(1, 12))
            for _ in range(200):                     # until the fetch is parked in the purgatory
                if b.replica_manager.fetch_purgatory.delayed():
                    break
                await asyncio.sleep(0.01)
            assert b.replica_manager.fetch_purgatory.delayed() == 1 and not waiting.done()
            order = []
            waiting.add_done_callback(lambda _: order.append("fetch answered"))
            await producer.call(0, 9, produce_body("lp", build_batch([(b"k", b"hello", [], 1000)])))
            order.append("produce acknowledged")
            _, resp = await asyncio.wait_for(waiting, 30)
            return order, resp
        finally:
            await producer.close()
            await c.close()
            await b.stop()

    order, resp = asyncio.run(scenario())
    part = resp.responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == 1
    assert bytes(next(iter(RecordBatch(memoryview(bytes(part.records))).records())).value) == b"hello"
    # woken by the append itself, not by the 60 s timeout: the fetch is answered by the time the
    # producer has its acknowledgement back
    assert order[0] == "fetch answered" or order == ["produce acknowledged", "fetch answered"]


def test_a_completed_fetch_left_in_other_watch_lists_holds_neither_request_nor_records(tmp_path):
    """A fetch over two partitions, completed by an append to one, stays in the other's watch list until the
    purge; it must not keep its request and read results alive there (a follower's session names every
    partition it follows: thousands of such leftovers filled the collector's oldest generation)."""
    async def scenario():
        b = Broker(BrokerConfig.from_properties({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path),
                                                 "num.partitions": "2"}))
        await b.start()
        c = await AsyncWireClient.connect("127.0.0.1", b.bound[0].port)
        producer = await AsyncWireClient.connect("127.0.0.1", b.bound[0].port)
        try:
            await c.call(3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="two")]))
            body = fetch_body("two", 0, max_wait_ms=60_000)
            body.topics[0].partitions.append(FetchRequest.FetchPartition(partition=1, fetch_offset=0,
                                                                         partition_max_bytes=10 << 20))
            await c.send(1, 12, body)
            waiting = asyncio.ensure_future(c.receive(1, 12))
            purgatory = b.replica_manager.fetch_purgatory
            for _ in range(200):
                if purgatory.delayed():
                    break
                await asyncio.sleep(0.01)
            assert purgatory.delayed() == 1
            await producer.call(0, 9, produce_body("two", build_batch([(b"k", b"v" * 1000, [], 1000)])))
            _, resp = await asyncio.wait_for(waiting, 30)
            leftovers = list(purgatory._watchers_by_key[("two", 1)].ops.values())
            return resp, leftovers
        finally:
            await producer.close()
            await c.close()
            await b.stop()

    resp, leftovers = asyncio.run(scenario())
    assert len(bytes(resp.responses[0].partitions[0].records)) > 1000
    assert len(leftovers) == 1 and leftovers[0].is_completed
    reachable, todo = set(), [leftovers[0]]
    for _ in range(4):                   # the objects within four references of the leftover operation
        todo = [r for o in todo for r in gc.get_referents(o) if id(r) not in reachable]
        reachable.update(id(r) for r in todo)
        assert not any(isinstance(r, (LogReadResult, asyncio.Future, FetchRequest)) for r in todo)


@pytest.mark.parametrize("name, partitions_key", [("__consumer_offsets", "offsets.topic.num.partitions"),
                                                   ("__transaction_state", "transaction.state.log.num.partitions")])
def test_metadata_auto_creates_an_internal_topic_as_its_coordinator_would(name, partitions_key):
    """Kafka's AutoTopicCreationManager: an internal topic gets its own partition count and configs, never
    num.partitions; an invalid name is INVALID_TOPIC_EXCEPTION whether or not auto-creation is allowed."""
    with EmbeddedBroker({partitions_key: 7, "num.partitions": 2}) as b:
        c = client(b)
        T = MetadataRequest.MetadataRequestTopic
        missing = c.call(3, 12, MetadataRequest(topics=[T(name=name)], allow_auto_topic_creation=False)).topics[0]
        assert (missing.error_code, missing.is_internal) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, True)
        created = c.call(3, 12, MetadataRequest(topics=[T(name=name)], allow_auto_topic_creation=True)).topics[0]
        assert (created.error_code, created.is_internal, len(created.partitions)) == (0, True, 7)
        for allow in (False, True):
            bad = c.call(3, 12, MetadataRequest(topics=[T(name="no/such")], allow_auto_topic_creation=allow))
            assert bad.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        c.close()
