"""SASL and ACL refusals: kafka-compat against Kafka 4.x, both with a SASL_PLAINTEXT listener and ACLs.

Both brokers have the same PLAIN users and no ACL for `alice` (reference.SECURE_USERS); every request
she sends is compared, field by field, with what Kafka's StandardAuthorizer makes of it: the topic,
group, transactional-id and cluster refusals of each API, what is filtered out rather than refused,
and then the same requests once an ACL grants them. The SASL exchange itself (a wrong password, an
unknown mechanism, a request before authenticating) is compared too. Setting up (topics, ACLs) goes
through each broker's PLAINTEXT listener, whose ANONYMOUS is a super user on both.
"""
from __future__ import annotations

import struct

import conformance
import pytest
from conformance import coordinator_ready, create
from wire import WireClient

from kafka_compat.protocol.messages import (
    create_acls,
    create_topics,
    delete_groups,
    delete_topics,
    describe_acls,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    fetch,
    find_coordinator,
    init_producer_id,
    join_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_fetch,
    produce,
    sasl_authenticate,
    sasl_handshake,
)
from kafka_compat.protocol.records import build_batch

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = 2, 3, 4, 5
READ, WRITE, DESCRIBE, ALLOW, LITERAL = 3, 4, 8, 3, 3


class _At:
    """What conformance.Pair needs of a broker: where to connect."""

    def __init__(self, host: str, port: int):
        self.port, self.address = port, (host, port)


def login(client: WireClient, user: str, password: str):
    """SaslHandshake v1 then SaslAuthenticate v2 with PLAIN: the SaslAuthenticate answer."""
    hello = client.call(SASL_HANDSHAKE, 1, sasl_handshake.SaslHandshakeRequest(mechanism="PLAIN"))
    assert hello.error_code == 0, hello
    token = b"\x00" + user.encode() + b"\x00" + password.encode()
    return client.call(SASL_AUTHENTICATE, 2, sasl_authenticate.SaslAuthenticateRequest(auth_bytes=token))


@pytest.fixture(scope="module")
def secured(conformance_secured_broker, reference_kafka_secured):
    ours, kafka = conformance_secured_broker, reference_kafka_secured
    ours_sasl = _At("127.0.0.1", ours.ports["SASL_PLAINTEXT"])
    kafka_sasl = _At(kafka.address[0], kafka.sasl_ports[0])
    return ours, kafka, ours_sasl, kafka_sasl


@pytest.fixture
def admin(request, secured, conformance_tally):
    ours, kafka, _, _ = secured
    p = conformance.Pair(_At("127.0.0.1", ours.ports["PLAINTEXT"]), kafka, conformance_tally,
                         request.node.name + "@setup")
    yield p
    p.close()


@pytest.fixture
def alice(request, secured, conformance_tally):
    """A pair of connections logged in as alice, who has no ACL of her own until a test grants one."""
    _, _, ours_sasl, kafka_sasl = secured
    p = conformance.Pair(ours_sasl, kafka_sasl, conformance_tally, request.node.name)
    for side in ("ours", "kafka"):
        assert login(p.client(side), "alice", "alice-secret").error_code == 0
    yield p
    p.close()


def test_the_sasl_exchange(secured, conformance_tally):
    _, _, ours_sasl, kafka_sasl = secured
    for v in (0, 1):        # each on a new connection: both brokers close one after a failed handshake
        p = conformance.Pair(ours_sasl, kafka_sasl, conformance_tally, "test_the_sasl_exchange")
        p.call(SASL_HANDSHAKE, v, sasl_handshake.SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), "unknown mechanism")
        assert p.client("ours").is_closed_by_peer() == p.client("kafka").is_closed_by_peer()
        p.check()
        p.close()
    for what, password in (("wrong password", "nope"), ("right password", "alice-secret")):
        answers = {}
        for side, at in (("ours", ours_sasl), ("kafka", kafka_sasl)):
            c = WireClient(*at.address)
            answers[side] = login(c, "alice", password)
            c.close()
        conformance_tally.compare(SASL_AUTHENTICATE, 2, answers["ours"], answers["kafka"], f"sasl {what}")
    # a request other than ApiVersions/SaslHandshake before logging in: both close the connection
    closed = {}
    for side, at in (("ours", ours_sasl), ("kafka", kafka_sasl)):
        c = WireClient(*at.address)
        c.send(3, 12, metadata.MetadataRequest(topics=[], allow_auto_topic_creation=False))
        closed[side] = c.is_closed_by_peer()
        c.close()
    assert closed == {"ours": True, "kafka": True}


def _topic_requests():
    M = metadata.MetadataRequest
    P = produce.ProduceRequest
    F = fetch.FetchRequest
    L = list_offsets.ListOffsetsRequest
    batch = bytes(build_batch([(None, b"refused")]))
    return {
        "metadata named": (3, 12, lambda side: M(topics=[M.MetadataRequestTopic(name="sec-t")],
                                                allow_auto_topic_creation=True,
                                                include_topic_authorized_operations=True)),
        "metadata all": (3, 12, lambda side: M(topics=None, allow_auto_topic_creation=False)),
        "metadata auto-create": (3, 12, lambda side: M(topics=[M.MetadataRequestTopic(name="sec-new")],
                                                      allow_auto_topic_creation=True)),
        "produce": (0, 9, lambda side: P(acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
            name="sec-t", partition_data=[P.PartitionProduceData(index=0, records=batch)])])),
        "fetch": (1, 12, lambda side: F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                        isolation_level=0, topics=[F.FetchTopic(topic="sec-t", partitions=[
                                            F.FetchPartition(partition=0, fetch_offset=0,
                                                             partition_max_bytes=1 << 20)])])),
        "list offsets": (2, 7, lambda side: L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
            name="sec-t", partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=-1)])])),
    }


def _refusals():
    C = create_topics.CreateTopicsRequest
    D = describe_configs.DescribeConfigsRequest
    OC = offset_commit.OffsetCommitRequest
    Q = offset_fetch.OffsetFetchRequest
    A = describe_acls.DescribeAclsRequest
    return {
        "create topic": (19, 5, C(timeout_ms=5000, validate_only=False, topics=[C.CreatableTopic(
            name="sec-created", num_partitions=1, replication_factor=1, assignments=[], configs=[])])),
        "delete topic": (20, 4, delete_topics.DeleteTopicsRequest(topic_names=["sec-t"], timeout_ms=5000)),
        "describe topic configs": (32, 4, D(resources=[D.DescribeConfigsResource(
            resource_type=TOPIC, resource_name="sec-t", configuration_keys=None)])),
        "describe broker configs": (32, 4, D(resources=[D.DescribeConfigsResource(
            resource_type=4, resource_name="0", configuration_keys=None)])),
        "find group coordinator": (10, 3, find_coordinator.FindCoordinatorRequest(key="sec-g", key_type=0)),
        "find transaction coordinator": (10, 3, find_coordinator.FindCoordinatorRequest(key="sec-tx",
                                                                                        key_type=1)),
        "join group": (11, 5, join_group.JoinGroupRequest(
            group_id="sec-g", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
            group_instance_id=None, protocol_type="consumer",
            protocols=[join_group.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])),
        "commit offsets": (8, 8, OC(group_id="sec-g", generation_id_or_member_epoch=-1, member_id="",
                                   group_instance_id=None, topics=[OC.OffsetCommitRequestTopic(
                                       name="sec-t", partitions=[OC.OffsetCommitRequestPartition(
                                           partition_index=0, committed_offset=1)])])),
        "fetch offsets": (9, 7, Q(group_id="sec-g", topics=[Q.OffsetFetchRequestTopic(
            name="sec-t", partition_indexes=[0])], require_stable=False)),
        "describe groups": (15, 5, describe_groups.DescribeGroupsRequest(groups=["sec-g"],
                                                                          include_authorized_operations=True)),
        "list groups": (16, 4, list_groups.ListGroupsRequest(states_filter=[])),
        "delete groups": (42, 2, delete_groups.DeleteGroupsRequest(groups_names=["sec-g"])),
        "transactional producer id": (22, 4, init_producer_id.InitProducerIdRequest(
            transactional_id="sec-tx", transaction_timeout_ms=10000, producer_id=-1, producer_epoch=-1)),
        "idempotent producer id": (22, 4, init_producer_id.InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=10000, producer_id=-1, producer_epoch=-1)),
        "describe acls": (29, 2, A(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                   principal_filter=None, host_filter=None, operation=1, permission_type=1)),
        "describe log dirs": (35, 2, describe_log_dirs.DescribeLogDirsRequest(topics=None)),
    }


def grant(admin, operation: int, resource_type: int, name: str) -> None:
    C = create_acls.CreateAclsRequest
    admin.call(30, 3, C(creations=[C.AclCreation(
        resource_type=resource_type, resource_name=name, resource_pattern_type=LITERAL, principal="User:alice",
        host="*", operation=operation, permission_type=ALLOW)]), "grant")


def test_acl_refusals_then_grants(admin, alice):
    create(admin, "sec-t")
    coordinator_ready(admin, "sec-g")          # __consumer_offsets made and loaded on both, before comparing
    for what, (key, version, body) in _topic_requests().items():
        alice.call(key, version, body, f"{what} without an ACL")
    for what, (key, version, body) in _refusals().items():
        alice.call(key, version, body, f"{what} without an ACL")
    grant(admin, READ, TOPIC, "sec-t")
    grant(admin, WRITE, TOPIC, "sec-t")
    grant(admin, DESCRIBE, TOPIC, "sec-t")
    grant(admin, READ, GROUP, "sec-g")
    for what in ("metadata named", "metadata all", "produce", "list offsets"):
        key, version, body = _topic_requests()[what]
        alice.call(key, version, body, f"{what} with ACLs")
    for what in ("fetch offsets", "describe groups", "find group coordinator"):
        key, version, body = _refusals()[what]
        alice.call(key, version, body, f"{what} with ACLs")
    admin.check()
    alice.check()


def test_cidr_acl_hosts(admin, alice):
    """metadata.version 4.4-IV1 (both finalize 4.4-IV2): an ACL host may be a CIDR network, and it applies to the
    addresses inside it; a malformed network or an empty host is INVALID_REQUEST."""
    create(admin, "sec-cidr")
    C = create_acls.CreateAclsRequest
    M = metadata.MetadataRequest
    named = M(topics=[M.MetadataRequestTopic(name="sec-cidr")], allow_auto_topic_creation=False,
              include_topic_authorized_operations=True)
    alice.call(3, 12, named, "metadata before the CIDR grant")

    def acl(host, operation=DESCRIBE):
        return C.AclCreation(resource_type=TOPIC, resource_name="sec-cidr", resource_pattern_type=LITERAL,
                             principal="User:alice", host=host, operation=operation, permission_type=ALLOW)
    admin.call(30, 3, C(creations=[acl("127.0.0.0/8"), acl("10.0.0.0/99", READ), acl("", READ),
                                   acl("192.168.0.0/16", WRITE)]), "CIDR hosts")
    alice.call(3, 12, named, "metadata granted through 127.0.0.0/8")
    admin.check()
    alice.check()


def test_a_frame_before_the_handshake_ends_with_the_same_bytes(secured):
    """ApiVersions is answered before SASL on both; what else arrives is refused by closing."""
    _, _, ours_sasl, kafka_sasl = secured
    for side, at in (("ours", ours_sasl), ("kafka", kafka_sasl)):
        c = WireClient(*at.address)
        c.send_raw(struct.pack(">i", 3) + b"\x00\x12\x00")          # a truncated ApiVersions header
        assert c.is_closed_by_peer(), side
        c.close()
