"""The same request sequences to Apache Kafka 4.x and to kafka-compat, answers compared field by field.

Each test drives one API (or one sequence across several) at every version that both
brokers advertise, over raw sockets, through `Pair`. Differences must be on
`conformance.ALLOWED` or `conformance.KNOWN`; any other fails the test with the fields named.
"""
from __future__ import annotations

import struct
import time

import crc32c
from conformance import Pair, coordinator_ready, create
from wire import encode_request

from kafka_compat.protocol import records
from kafka_compat.protocol.messages import (
    api_versions,
    create_partitions,
    create_topics,
    delete_topics,
    describe_configs,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
)

API_VERSIONS, METADATA, CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 18, 3, 19, 20, 37
DESCRIBE_CONFIGS, LIST_OFFSETS, PRODUCE, FETCH, INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH = 32, 2, 0, 1, 22, 23


# --- ApiVersions ------------------------------------------------------------------------

def test_api_versions(pair):
    for v in pair.versions(API_VERSIONS):
        pair.call(API_VERSIONS, v, api_versions.ApiVersionsRequest(
            client_software_name="conformance", client_software_version="1.0"))
    pair.check()


def test_api_versions_bad_software_name(pair):
    """A client software name with characters Kafka refuses: INVALID_REQUEST (v3+ validates it)."""
    for v in pair.versions(API_VERSIONS, lo=3):
        pair.call(API_VERSIONS, v, api_versions.ApiVersionsRequest(
            client_software_name="bad name!", client_software_version="1.0"))
    pair.check()


def test_api_versions_of_a_future_version(pair):
    """A version neither knows (KIP-511): UNSUPPORTED_VERSION in a v0 body that lists ApiVersions' own range."""
    answers = {}
    for side in ("ours", "kafka"):
        frame = bytearray(encode_request(API_VERSIONS, 3, api_versions.ApiVersionsRequest(
            client_software_name="conformance", client_software_version="1.0"), 4242))
        struct.pack_into(">h", frame, 6, 42)        # the header's api version
        client = pair.client(side)
        client.send_raw(bytes(frame))
        answers[side] = client.receive(API_VERSIONS, 0)[1]
    pair.unexplained += pair.tally.compare(API_VERSIONS, 0, answers["ours"], answers["kafka"],
                                           f"{pair.context} future version")
    pair.check()


def test_api_versions_target_check(pair):
    """v5 (KIP-1242): the client names the cluster and node it means; half of that is INVALID_REQUEST, another
    cluster or node REBOOTSTRAP_REQUIRED, this broker's own the usual answer."""
    own = {}
    for side in ("ours", "kafka"):
        client = pair.client(side)
        md = client.call(METADATA, 12, metadata.MetadataRequest(topics=[]))
        port = client.sock.getpeername()[1]
        own[side] = (md.cluster_id, next(b.node_id for b in md.brokers if b.port == port))

    def body(cluster_id, node_id):
        return lambda side: api_versions.ApiVersionsRequest(
            client_software_name="conformance", client_software_version="1.0",
            cluster_id=own[side][0] if cluster_id is True else cluster_id,
            node_id=own[side][1] if node_id is True else node_id)
    for v in pair.versions(API_VERSIONS, lo=5):
        pair.call(API_VERSIONS, v, body("conf-not-this-cluster", -1), "cluster id without node id")
        pair.call(API_VERSIONS, v, body(None, 7), "node id without cluster id")
        pair.call(API_VERSIONS, v, body("conf-not-this-cluster", True), "another cluster")
        pair.call(API_VERSIONS, v, body(True, 4242), "another node")
        pair.call(API_VERSIONS, v, body(True, True), "this broker")
    pair.check()


# --- Metadata ---------------------------------------------------------------------------

def test_metadata(pair):
    create(pair, "conf-md", partitions=3)
    T = metadata.MetadataRequest.MetadataRequestTopic
    for v in pair.versions(METADATA):
        pair.call(METADATA, v, metadata.MetadataRequest(topics=[T(name="conf-md")]), "existing")
        if v >= 4:      # below v4 every named topic is auto-created
            named = [T(name="conf-md"), T(name="conf-md-missing"), T(name="__transaction_state")]
            pair.call(METADATA, v, metadata.MetadataRequest(topics=named, allow_auto_topic_creation=False), "named")
            pair.call(METADATA, v, metadata.MetadataRequest(topics=[T(name="bad/name")],
                                                            allow_auto_topic_creation=False), "invalid name")
        if v >= 1:      # v0's empty list means every topic
            pair.call(METADATA, v, metadata.MetadataRequest(topics=[], allow_auto_topic_creation=False), "none")
    pair.check()


# --- CreateTopics -----------------------------------------------------------------------

def _topic(name, partitions=1, rf=1, configs=None, assignments=None):
    R = create_topics.CreateTopicsRequest
    return R.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf,
        assignments=[R.CreatableReplicaAssignment(partition_index=p, broker_ids=b) for p, b in (assignments or [])],
        configs=[R.CreatableTopicConfig(name=k, value=val) for k, val in (configs or {}).items()])


def test_create_topics_errors(pair):
    create(pair, "conf-ct-exists")
    cases = {
        "exists": _topic("conf-ct-exists"),
        "bad name": _topic("bad/name"),
        "dot name": _topic("."),
        "long name": _topic("x" * 250),
        "zero partitions": _topic("conf-ct-zero", partitions=0),
        "negative rf": _topic("conf-ct-rf", rf=-2),
        "rf too big": _topic("conf-ct-rf3", rf=3),
        "bad config name": _topic("conf-ct-cfg", configs={"no.such.config": "1"}),
        "bad config value": _topic("conf-ct-cfgv", configs={"retention.ms": "soon"}),
        "assignment and partitions": _topic("conf-ct-asg", partitions=2, assignments=[(0, [0])]),
        "assignment to unknown broker": _topic("conf-ct-asgb", partitions=-1, rf=-1, assignments=[(0, [7])]),
    }
    for v in pair.versions(CREATE_TOPICS, lo=2):
        for what, t in cases.items():
            pair.call_controller(CREATE_TOPICS, v, create_topics.CreateTopicsRequest(
                topics=[t], timeout_ms=30000, validate_only=True), what + " (validate)")
        pair.call_controller(CREATE_TOPICS, v, create_topics.CreateTopicsRequest(
            topics=[_topic("conf-ct-dup"), _topic("conf-ct-dup")], timeout_ms=30000, validate_only=True), "twice")
    pair.check()


def test_create_topics_validate_only(pair):
    for v in pair.versions(CREATE_TOPICS, lo=1):
        pair.call_controller(CREATE_TOPICS, v, create_topics.CreateTopicsRequest(
            topics=[_topic(f"conf-ct-vo{v}", partitions=2, configs={"cleanup.policy": "compact"})],
            timeout_ms=30000, validate_only=True))
    pair.check()


def test_delete_topics_and_create_partitions(pair):
    create(pair, "conf-cp", partitions=2)
    P = create_partitions.CreatePartitionsRequest.CreatePartitionsTopic
    for v in pair.versions(CREATE_PARTITIONS):
        for what, t in {"fewer": P(name="conf-cp", count=1, assignments=None),
                        "same": P(name="conf-cp", count=2, assignments=None),
                        "missing": P(name="conf-cp-missing", count=3, assignments=None)}.items():
            pair.call_controller(CREATE_PARTITIONS, v, create_partitions.CreatePartitionsRequest(
                topics=[t], timeout_ms=30000, validate_only=True), what)
    for v in pair.versions(DELETE_TOPICS, hi=5):
        pair.call_controller(DELETE_TOPICS, v, delete_topics.DeleteTopicsRequest(topic_names=["conf-dt-missing"],
                                                                      timeout_ms=30000), "missing")
    pair.check()


# --- DescribeConfigs --------------------------------------------------------------------

def test_describe_topic_configs(pair):
    create(pair, "conf-dc", configs={"retention.ms": "3600000"})
    R = describe_configs.DescribeConfigsRequest.DescribeConfigsResource
    for v in pair.versions(DESCRIBE_CONFIGS):
        for synonyms in (False, True):
            pair.call(DESCRIBE_CONFIGS, v, describe_configs.DescribeConfigsRequest(
                resources=[R(resource_type=2, resource_name="conf-dc", configuration_keys=None)],
                include_synonyms=synonyms, include_documentation=False), f"synonyms={synonyms}")
        pair.call(DESCRIBE_CONFIGS, v, describe_configs.DescribeConfigsRequest(
            resources=[R(resource_type=2, resource_name="conf-dc-missing", configuration_keys=None)]), "missing")
    pair.check()


# --- ListOffsets ------------------------------------------------------------------------

def test_list_offsets_sentinels_empty_topic(pair):
    create(pair, "conf-lo")
    L = list_offsets.ListOffsetsRequest
    for v in pair.versions(LIST_OFFSETS):
        for ts in (-1, -2, -3, -4, -5, -6, 0):
            pair.call(LIST_OFFSETS, v, L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
                name="conf-lo", partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=ts,
                                                                   current_leader_epoch=-1, max_num_offsets=1)])]),
                      f"timestamp {ts}")
    pair.check()


# --- Produce ----------------------------------------------------------------------------

BASE_TS = 1_700_000_000_000


def batch(*values: bytes, ts: int = BASE_TS, **kw) -> bytes:
    return records.build_batch([(None, v, [], ts + i) for i, v in enumerate(values)], **kw)


def produce_body(pair: Pair, topic: str, data, acks: int = -1, transactional_id=None):
    """A ProduceRequest for partition 0 of topic (a function of the side, for v13's topic ids)."""
    P = produce.ProduceRequest
    ids = {side: pair.topic_id(side, topic) for side in ("ours", "kafka")}

    def body(side):
        d = data(side) if callable(data) else data
        return P(transactional_id=transactional_id, acks=acks, timeout_ms=30000, topic_data=[P.TopicProduceData(
            name=topic, topic_id=ids[side], partition_data=[P.PartitionProduceData(index=0, records=d)])])
    return body


def corrupt_crc(data: bytes) -> bytes:
    b = bytearray(data)
    b[-1] ^= 0xFF
    return bytes(b)


def test_produce_errors(pair):
    create(pair, "conf-pr", configs={"max.message.bytes": "2000"})
    good = batch(b"a", b"b", b"c")
    bad_magic = bytearray(good)
    bad_magic[16] = 3
    now = int(time.time() * 1000)
    cases = {
        "good": good,
        "bad crc": corrupt_crc(good),
        "unknown magic": bytes(bad_magic),
        "too large": batch(b"y" * 3000),
        "timestamp far in the future": batch(b"f", ts=now + 2 * 3600_000),
        "empty": b"",
    }
    for v in pair.versions(PRODUCE, lo=3):
        for what, data in cases.items():
            pair.call(PRODUCE, v, produce_body(pair, "conf-pr", data), what)
        pair.call(PRODUCE, v, produce_body(pair, "conf-pr", good, acks=2), "invalid acks")
        pair.call(PRODUCE, v, produce_body(pair, "conf-pr", good), "good again")
    pair.check()


def test_produce_compressed_garbage(pair):
    """A gzip batch whose compressed bytes are junk (with a right CRC)."""
    create(pair, "conf-pr-gz")
    garbage = bytearray(batch(b"x" * 50, compression=1))
    garbage[61:90] = b"\xff" * 29
    garbage[17:21] = crc32c.crc32c(bytes(garbage[21:])).to_bytes(4, "big")
    pair.call(PRODUCE, 9, produce_body(pair, "conf-pr-gz", bytes(garbage)))
    pair.check()


def test_produce_timestamp_bounds(pair):
    create(pair, "conf-pr-ts", configs={"message.timestamp.before.max.ms": "60000",
                                         "message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    for v in pair.versions(PRODUCE, lo=3):
        for what, ts in {"past": now - 3600_000, "future": now + 3600_000, "now": now}.items():
            pair.call(PRODUCE, v, produce_body(pair, "conf-pr-ts", batch(b"t", ts=ts)), what)
    pair.check()


def test_produce_idempotent_sequences(pair):
    """Duplicate and out-of-order sequences of an idempotent producer; each cluster's own producer id."""
    create(pair, "conf-pr-idem")
    pids = {}
    for side in ("ours", "kafka"):
        deadline = time.monotonic() + 30
        while True:     # a broker that has just started may still be loading its producer id block
            r = pair.client(side).call(INIT_PRODUCER_ID, 4, init_producer_id.InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
            if r.error_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert r.error_code == 0, (side, r)
        pids[side] = r.producer_id

    def seq(n):
        return lambda side: batch(b"s", producer_id=pids[side], producer_epoch=0, base_sequence=n)
    v = max(pair.versions(PRODUCE, lo=3, hi=12))
    for what, n in [("first", 0), ("duplicate", 0), ("next", 1), ("gap", 5), ("next after gap", 2)]:
        pair.call(PRODUCE, v, produce_body(pair, "conf-pr-idem", seq(n)), what)
    pair.check()


def test_produce_transactional_without_transaction(pair):
    create(pair, "conf-pr-txn")
    coordinator_ready(pair, "conf-no-txn", key_type=1)      # the coordinator can be asked
    v = max(pair.versions(PRODUCE, lo=3, hi=12))
    data = batch(b"t", producer_id=4242, producer_epoch=0, base_sequence=0, is_transactional=True)
    pair.call(PRODUCE, v, produce_body(pair, "conf-pr-txn", data, transactional_id="conf-no-txn"), "unknown pid")
    pair.check()


# --- Fetch -------------------------------------------------------------------------------

def fetch_body(pair: Pair, topic: str, offset: int, isolation: int = 0, max_bytes: int = 1 << 20,
               partition_max: int = 1 << 20, session_id: int = 0, session_epoch: int = -1):
    F = fetch.FetchRequest
    ids = {side: pair.topic_id(side, topic) for side in ("ours", "kafka")}
    return lambda side: F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes,
                          isolation_level=isolation, session_id=session_id, session_epoch=session_epoch,
                          topics=[F.FetchTopic(topic=topic, topic_id=ids[side], partitions=[F.FetchPartition(
                              partition=0, fetch_offset=offset, partition_max_bytes=partition_max,
                              current_leader_epoch=-1, log_start_offset=-1)])],
                          forgotten_topics_data=[], rack_id="")


def test_fetch(pair):
    create(pair, "conf-fe")
    pair.call(PRODUCE, 9, produce_body(pair, "conf-fe", batch(b"one", b"two", b"three")), "set-up")
    for v in pair.versions(FETCH, lo=4):
        for what, kw in {"from 0": dict(offset=0), "from 1": dict(offset=1), "at the end": dict(offset=3),
                         "out of range": dict(offset=99), "negative": dict(offset=-5),
                         "read committed": dict(offset=0, isolation=1), "max_bytes 0": dict(offset=0, max_bytes=0),
                         "partition max 0": dict(offset=0, partition_max=0)}.items():
            pair.call(FETCH, v, fetch_body(pair, "conf-fe", **kw), what)
    pair.check()


def test_fetch_session_errors(pair):
    create(pair, "conf-fs")
    for v in pair.versions(FETCH, lo=7):
        pair.call(FETCH, v, fetch_body(pair, "conf-fs", 0, session_id=12345, session_epoch=1), "unknown session")
        pair.call(FETCH, v, fetch_body(pair, "conf-fs", 0, session_id=0, session_epoch=5), "epoch without session")
    pair.check()


# --- OffsetForLeaderEpoch ------------------------------------------------------------------

def test_offset_for_leader_epoch(pair):
    create(pair, "conf-ofle")
    pair.call(PRODUCE, 9, produce_body(pair, "conf-ofle", batch(b"e")), "set-up")
    Req = offset_for_leader_epoch.OffsetForLeaderEpochRequest
    for v in pair.versions(OFFSET_FOR_LEADER_EPOCH):
        for what, (part, epoch) in {"epoch 0": (0, 0), "epoch 5": (0, 5), "missing partition": (3, 0),
                                    "negative": (0, -1)}.items():
            pair.call(OFFSET_FOR_LEADER_EPOCH, v, Req(replica_id=-1, topics=[Req.OffsetForLeaderTopic(
                topic="conf-ofle", partitions=[Req.OffsetForLeaderPartition(
                    partition=part, current_leader_epoch=-1, leader_epoch=epoch)])]), what)
    pair.check()
