"""Admin APIs against a real broker process, driven by real clients' admin APIs.

confluent_kafka's AdminClient (librdkafka) and kafka-python's KafkaAdminClient
exercise the common paths; a few exact protocol facts (paging cursors, old
versions, topic ids, endpoint types) are checked with raw requests built from
our generated codecs. One broker serves the whole module.
"""
from __future__ import annotations

import os
import socket
import struct

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka.admin import ConfigResource as KConfigResource  # noqa: E402
from kafka.admin import ConfigResourceType as KType
from kafka.admin import KafkaAdminClient  # noqa: E402
from kafka.admin import NewTopic as KNewTopic  # noqa: E402
from kafka_compat.storage.log_config import TOPIC_CONFIG_DEF  # noqa: E402

from kafka_compat.protocol.errors import ErrorCode  # noqa: E402
from kafka_compat.protocol.frames import request_header_version, response_header_version  # noqa: E402
from kafka_compat.protocol.messages import APIS  # noqa: E402
from kafka_compat.protocol.messages.alter_configs import AlterConfigsRequest  # noqa: E402
from kafka_compat.protocol.messages.create_topics import CreateTopicsRequest  # noqa: E402
from kafka_compat.protocol.messages.delete_topics import DeleteTopicsRequest  # noqa: E402
from kafka_compat.protocol.messages.describe_cluster import DescribeClusterRequest  # noqa: E402
from kafka_compat.protocol.messages.describe_configs import DescribeConfigsRequest  # noqa: E402
from kafka_compat.protocol.messages.describe_producers import DescribeProducersRequest  # noqa: E402
from kafka_compat.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest  # noqa: E402
from kafka_compat.protocol.messages.elect_leaders import ElectLeadersRequest  # noqa: E402
from kafka_compat.protocol.messages.headers import RequestHeader, ResponseHeader  # noqa: E402
from kafka_compat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest  # noqa: E402
from kafka_compat.protocol.messages.metadata import MetadataRequest  # noqa: E402
from kafka_compat.protocol.primitives import ZERO_UUID  # noqa: E402
from kafka_compat.testing import EmbeddedBroker  # noqa: E402

TIMEOUT = 10


@pytest.fixture(scope="module")
def broker():
    # A static segment size shows up as STATIC_BROKER_CONFIG on every topic's segment.bytes.
    with EmbeddedBroker({"log.segment.bytes": "1048576"}) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture(scope="module")
def kadmin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    yield client
    client.close()


def _recv(sock, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        out += chunk
    return bytes(out)


def call(broker, body, version: int):
    """One request, one decoded response body, over a fresh connection."""
    info = APIS[body.API_KEY]
    frame = bytearray(4)
    RequestHeader(request_api_key=info.key, request_api_version=version, correlation_id=11,
                  client_id="test-admin").encode_into(frame, request_header_version(info, version))
    body.encode_into(frame, version)
    struct.pack_into(">i", frame, 0, len(frame) - 4)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=TIMEOUT) as s:
        s.sendall(frame)
        size, = struct.unpack(">i", _recv(s, 4))
        data = _recv(s, size)
    header, pos = ResponseHeader.decode(data, response_header_version(info, version))
    assert header.correlation_id == 11
    return info.response.decode(data, version, pos)[0]


def create(admin, *topics, **kw):
    for future in admin.create_topics(list(topics), **kw).values():
        future.result(TIMEOUT)


def error_of(future) -> KafkaError:
    with pytest.raises(KafkaException) as e:
        future.result(TIMEOUT)
    return e.value.args[0]


def describe_topic(admin, name: str) -> dict:
    resource = ConfigResource(ResourceType.TOPIC, name)
    return admin.describe_configs([resource])[resource].result(TIMEOUT)


# -- CreateTopics -----------------------------------------------------------------------

def test_create_topic_with_configs_and_describe_every_config(admin):
    create(admin, NewTopic("cfg-topic", 3, 1, config={"retention.ms": "12345", "cleanup.policy": "compact"}))
    cfg = describe_topic(admin, "cfg-topic")  # librdkafka asks for synonyms itself
    assert set(cfg) == set(TOPIC_CONFIG_DEF)  # every topic config, defaults included
    assert cfg["retention.ms"].value == "12345"
    assert cfg["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert cfg["cleanup.policy"].value == "compact"
    assert cfg["max.message.bytes"].value == "1048588"
    assert cfg["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    segment = cfg["segment.bytes"]
    assert (segment.value, segment.source) == ("1048576", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert "log.segment.bytes" in segment.synonyms  # (their order is checked on the wire below)
    md = admin.list_topics("cfg-topic", timeout=TIMEOUT).topics["cfg-topic"]
    assert sorted(md.partitions) == [0, 1, 2]


def test_create_topic_broker_defaults_and_validate_only(admin):
    create(admin, NewTopic("defaults-topic"))  # -1 / -1: num.partitions and default.replication.factor
    assert len(admin.list_topics("defaults-topic", timeout=TIMEOUT).topics["defaults-topic"].partitions) == 1
    create(admin, NewTopic("never-made", 2, 1, config={"retention.ms": "1"}), validate_only=True)
    assert "never-made" not in admin.list_topics(timeout=TIMEOUT).topics


@pytest.mark.parametrize("topic, code", [
    (NewTopic("cfg-bad", 1, 1, config={"retention.ms": "soon"}), KafkaError.INVALID_CONFIG),
    (NewTopic("cfg-unknown", 1, 1, config={"no.such.config": "1"}), KafkaError.INVALID_CONFIG),
    (NewTopic("bad name!", 1, 1), KafkaError.TOPIC_EXCEPTION),
    (NewTopic("rf-three", 1, 3), KafkaError.INVALID_REPLICATION_FACTOR),
    (NewTopic("zero-partitions", 0, 1), KafkaError.INVALID_PARTITIONS),
    (NewTopic("elsewhere", 2, replica_assignment=[[0], [1]]), KafkaError.INVALID_REPLICA_ASSIGNMENT),
    (NewTopic("twice-here", 1, replica_assignment=[[0, 0]]), KafkaError.INVALID_REPLICA_ASSIGNMENT),
])
def test_create_topic_errors(admin, topic, code):
    err = error_of(admin.create_topics([topic])[topic.topic])
    assert err.code() == code
    assert err.str()  # Kafka sends an error message with every failure
    assert topic.topic not in admin.list_topics(timeout=TIMEOUT).topics


def test_create_existing_topic_and_manual_assignment(admin):
    create(admin, NewTopic("assigned", 2, replica_assignment=[[0], [0]]))
    assert len(admin.list_topics("assigned", timeout=TIMEOUT).topics["assigned"].partitions) == 2
    err = error_of(admin.create_topics([NewTopic("assigned", 1, 1)])["assigned"])
    assert err.code() == KafkaError.TOPIC_ALREADY_EXISTS


def test_create_topics_v5_reports_configs_and_v7_topic_id(broker):
    T = CreateTopicsRequest.CreatableTopic
    req = CreateTopicsRequest(topics=[
        T(name="v7-topic", num_partitions=2, replication_factor=-1,
          configs=[CreateTopicsRequest.CreatableTopicConfig(name="retention.ms", value="777")]),
        T(name="dup", num_partitions=1, replication_factor=1), T(name="dup", num_partitions=1, replication_factor=1),
    ], timeout_ms=5000)
    resp = call(broker, req, 7)
    by_name = {t.name: t for t in resp.topics}
    assert len(resp.topics) == 2
    assert by_name["dup"].error_code == ErrorCode.INVALID_REQUEST
    made = by_name["v7-topic"]
    assert (made.error_code, made.num_partitions, made.replication_factor) == (0, 2, 1)
    configs = {c.name: c for c in made.configs}
    assert [c.name for c in made.configs] == sorted(configs) and set(configs) == set(TOPIC_CONFIG_DEF)
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == ("777", 1)
    assert (configs["segment.bytes"].value, configs["segment.bytes"].config_source) == ("1048576", 4)
    assert configs["cleanup.policy"].config_source == 5
    md = call(broker, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="v7-topic")]), 12)
    assert md.topics[0].topic_id == made.topic_id != ZERO_UUID
    # validate_only answers the same shape without making a topic (so no topic id)
    again = call(broker, CreateTopicsRequest(topics=[T(name="v7-dry", num_partitions=-1, replication_factor=-1)],
                                             validate_only=True), 7)
    assert (again.topics[0].error_code, again.topics[0].num_partitions, again.topics[0].topic_id) == (0, 1, ZERO_UUID)
    assert len(again.topics[0].configs) == len(TOPIC_CONFIG_DEF)


# -- AlterConfigs and IncrementalAlterConfigs -------------------------------------------

@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_alter_configs_replaces_the_override_set(admin):
    create(admin, NewTopic("legacy-alter", 1, 1, config={"retention.ms": "1000", "cleanup.policy": "compact"}))
    resource = ConfigResource(ResourceType.TOPIC, "legacy-alter", set_config={"max.message.bytes": "2000"})
    admin.alter_configs([resource])[resource].result(TIMEOUT)
    cfg = describe_topic(admin, "legacy-alter")
    assert (cfg["max.message.bytes"].value, cfg["max.message.bytes"].source) == ("2000", 1)
    assert (cfg["retention.ms"].value, cfg["retention.ms"].source) == ("604800000", 5)
    assert cfg["cleanup.policy"].value == "delete"
    bad = ConfigResource(ResourceType.TOPIC, "legacy-alter", set_config={"max.message.bytes": "-5"})
    assert error_of(admin.alter_configs([bad])[bad]).code() == KafkaError.INVALID_CONFIG
    dry = ConfigResource(ResourceType.TOPIC, "legacy-alter", set_config={"retention.ms": "5"})
    admin.alter_configs([dry], validate_only=True)[dry].result(TIMEOUT)
    assert describe_topic(admin, "legacy-alter")["max.message.bytes"].value == "2000"
    missing = ConfigResource(ResourceType.TOPIC, "no-such-topic", set_config={"retention.ms": "5"})
    assert error_of(admin.alter_configs([missing])[missing]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def _incremental(admin, topic, *ops, **kw):
    entries = [ConfigEntry(name, value, incremental_operation=op) for name, op, value in ops]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    return admin.incremental_alter_configs([resource], **kw)[resource]


def test_incremental_alter_configs(admin):
    create(admin, NewTopic("incr", 1, 1, config={"retention.ms": "1000"}))
    _incremental(admin, "incr", ("cleanup.policy", AlterConfigOpType.APPEND, "compact")).result(TIMEOUT)
    assert describe_topic(admin, "incr")["cleanup.policy"].value == "delete,compact"  # appended to the default
    _incremental(admin, "incr", ("cleanup.policy", AlterConfigOpType.SUBTRACT, "delete"),
                 ("retention.ms", AlterConfigOpType.DELETE, None),
                 ("segment.ms", AlterConfigOpType.SET, "60000")).result(TIMEOUT)
    cfg = describe_topic(admin, "incr")
    assert cfg["cleanup.policy"].value == "compact"
    assert (cfg["retention.ms"].value, cfg["retention.ms"].source) == ("604800000", 5)
    assert (cfg["segment.ms"].value, cfg["segment.ms"].source) == ("60000", 1)
    _incremental(admin, "incr", ("segment.ms", AlterConfigOpType.SET, "70000"), validate_only=True).result(TIMEOUT)
    assert describe_topic(admin, "incr")["segment.ms"].value == "60000"
    err = error_of(_incremental(admin, "incr", ("retention.ms", AlterConfigOpType.APPEND, "5")))
    assert err.code() == KafkaError.INVALID_CONFIG
    err = error_of(_incremental(admin, "incr", ("cleanup.policy", AlterConfigOpType.SET, "forever")))
    assert err.code() == KafkaError.INVALID_CONFIG


def test_broker_configs_describe_and_validate_changes(admin):
    resource = ConfigResource(ResourceType.BROKER, "0")
    cfg = admin.describe_configs([resource])[resource].result(TIMEOUT)
    assert cfg["log.segment.bytes"].value == "1048576"
    assert cfg["log.segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert cfg["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    assert cfg["log.dirs"].is_read_only and not cfg["log.retention.ms"].is_read_only

    def alter(name, value):
        r = ConfigResource(ResourceType.BROKER, "0",
                           incremental_configs=[ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
        return admin.incremental_alter_configs([r], validate_only=True)[r]   # the broker is shared: change nothing
    assert error_of(alter("log.dirs", "/elsewhere")).code() == KafkaError.INVALID_REQUEST  # read-only in Kafka
    assert alter("log.retention.ms", "1000").result(TIMEOUT) is None                       # dynamic, applied
    assert error_of(alter("log.retention.ms", "soon")).code() == KafkaError.INVALID_REQUEST
    assert alter("max.connections", "10").result(TIMEOUT) is None                          # dynamic, applied
    assert error_of(alter("log.cleaner.threads", "2")).code() == KafkaError.POLICY_VIOLATION  # dynamic, not applied
    # only a GSSAPI login reads sasl.kerberos.*, and there is none here, as on a Kafka broker without one
    assert alter("sasl.kerberos.min.time.before.relogin", "58000").result(TIMEOUT) is None


def test_describe_configs_versions_on_the_wire(broker, admin):
    create(admin, NewTopic("wire-cfg", 1, 1, config={"retention.ms": "99"}))
    R = DescribeConfigsRequest.DescribeConfigsResource
    names = ["retention.ms", "segment.bytes", "cleanup.policy"]

    def entries(version, **kw):
        resp = call(broker, DescribeConfigsRequest(resources=[R(resource_type=2, resource_name="wire-cfg",
                                                                configuration_keys=names)], **kw), version)
        assert resp.results[0].error_code == 0
        return {c.name: c for c in resp.results[0].configs}

    v0 = entries(0)
    assert set(v0) == set(names)
    assert [v0[n].is_default for n in names] == [False, False, True]
    v1 = entries(1, include_synonyms=True)
    assert [(s.name, s.source) for s in v1["retention.ms"].synonyms] == [("retention.ms", 1)]
    assert [(s.name, s.source) for s in v1["segment.bytes"].synonyms] == [("log.segment.bytes", 4),
                                                                         ("log.segment.bytes", 5)]
    v4 = entries(4, include_documentation=True)
    assert (v4["retention.ms"].config_type, v4["cleanup.policy"].config_type) == (5, 7)  # LONG, LIST
    assert v4["retention.ms"].documentation and not v4["retention.ms"].synonyms
    errors = call(broker, DescribeConfigsRequest(resources=[
        R(resource_type=2, resource_name="nowhere", configuration_keys=None),
        R(resource_type=4, resource_name="7", configuration_keys=None),
        R(resource_type=4, resource_name="", configuration_keys=None),
        R(resource_type=8, resource_name="0", configuration_keys=None)]), 4)
    assert [(r.error_code, len(r.configs) > 0) for r in errors.results] == [
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, False), (ErrorCode.INVALID_REQUEST, False),
        (0, False),  # cluster-wide dynamic defaults: none set
        (0, True)]   # loggers, root first
    assert errors.results[3].configs[0].name == "root"


def test_incremental_alter_rejects_duplicates_and_nulls(broker, admin):
    create(admin, NewTopic("wire-incr", 1, 1))
    R, C = IncrementalAlterConfigsRequest.AlterConfigsResource, IncrementalAlterConfigsRequest.AlterableConfig
    resp = call(broker, IncrementalAlterConfigsRequest(resources=[
        R(resource_type=2, resource_name="wire-incr", configs=[C(name="retention.ms", config_operation=0, value=None)]),
        R(resource_type=2, resource_name="wire-incr-2", configs=[]),
        R(resource_type=2, resource_name="wire-incr-2", configs=[]),
    ]), 1)
    assert [r.error_code for r in resp.responses] == [ErrorCode.INVALID_REQUEST] * 3


def test_an_unknown_topic_is_reported_before_its_bad_configs(broker):
    """Existence comes before the values, as in Kafka: a broker-only key on a missing topic is
    UNKNOWN_TOPIC_OR_PARTITION, on an existing one INVALID_CONFIG."""
    call(broker, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name="alter-order", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=10000), 4)
    R, C = AlterConfigsRequest.AlterConfigsResource, AlterConfigsRequest.AlterableConfig
    resp = call(broker, AlterConfigsRequest(resources=[
        R(resource_type=2, resource_name=name, configs=[C(name="offset.metadata.max.bytes", value="1")])
        for name in ("alter-order", "alter-order-missing")]), 1)
    assert [r.error_code for r in resp.responses] == [ErrorCode.INVALID_CONFIG, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]


def test_broker_logger_levels(broker):
    R, C = IncrementalAlterConfigsRequest.AlterConfigsResource, IncrementalAlterConfigsRequest.AlterableConfig

    def alter(*ops):
        req = IncrementalAlterConfigsRequest(resources=[
            R(resource_type=8, resource_name="0", configs=[C(name=n, config_operation=op, value=v) for n, op, v in ops])])
        return call(broker, req, 1).responses[0].error_code

    def levels():
        R2 = DescribeConfigsRequest.DescribeConfigsResource
        resp = call(broker, DescribeConfigsRequest(resources=[R2(resource_type=8, resource_name="0",
                                                                 configuration_keys=None)]), 4)
        return {c.name: c.value for c in resp.results[0].configs}

    assert alter(("kafka_compat", 0, "TRACE")) == 0
    assert levels()["kafka_compat.server.broker"] == "TRACE"  # children inherit, as in log4j
    assert alter(("kafka_compat", 1, None)) == 0
    assert levels()["kafka_compat.server.broker"] == levels()["root"]
    assert alter(("root", 1, None)) == ErrorCode.INVALID_REQUEST
    assert alter(("root", 2, "INFO")) == ErrorCode.INVALID_REQUEST
    assert alter(("no.such.logger", 0, "INFO")) == ErrorCode.INVALID_CONFIG
    assert alter(("kafka_compat", 0, "LOUD")) == ErrorCode.INVALID_CONFIG


def test_delete_topics_disabled_answers_every_topic():
    """Decided before any topic is looked at, so a handler with only its config (no cache, no controller)
    shows it."""
    from kafka_compat.protocol.frames import Request
    from kafka_compat.server.delete_topics import DeleteTopicsApi
    from kafka_compat.server.kafka_config import BrokerConfig
    api = DeleteTopicsApi(BrokerConfig({"delete.topic.enable": "false"}), metadata_cache=None, controller=None)
    for version, code in [(2, ErrorCode.INVALID_REQUEST), (5, ErrorCode.TOPIC_DELETION_DISABLED)]:
        req = Request(20, version, 1, "t", None, DeleteTopicsRequest(topic_names=["a", "b"]), APIS[20])
        resp = api.handle_delete_topics(req)
        assert [(r.name, r.error_code) for r in resp.responses] == [("a", code), ("b", code)]


# -- partitions, deletion, cluster --------------------------------------------------------

def test_create_partitions(admin):
    create(admin, NewTopic("grow", 1, 1))
    admin.create_partitions([NewPartitions("grow", 3)])["grow"].result(TIMEOUT)
    admin.create_partitions([NewPartitions("grow", 6)], validate_only=True)["grow"].result(TIMEOUT)
    assert len(admin.list_topics("grow", timeout=TIMEOUT).topics["grow"].partitions) == 3
    admin.create_partitions([NewPartitions("grow", 4, replica_assignment=[[0]])])["grow"].result(TIMEOUT)
    assert len(admin.list_topics("grow", timeout=TIMEOUT).topics["grow"].partitions) == 4
    for request, code in [(NewPartitions("grow", 2), KafkaError.INVALID_PARTITIONS),
                          (NewPartitions("grow", 4), KafkaError.INVALID_PARTITIONS),
                          (NewPartitions("grow", 5, replica_assignment=[[1]]), KafkaError.INVALID_REPLICA_ASSIGNMENT),
                          (NewPartitions("nowhere", 5), KafkaError.UNKNOWN_TOPIC_OR_PART)]:
        assert error_of(admin.create_partitions([request])[request.topic]).code() == code


def test_delete_topics(admin, broker):
    create(admin, NewTopic("doomed", 2, 1))
    futures = admin.delete_topics(["doomed", "never-was"], operation_timeout=5)
    futures["doomed"].result(TIMEOUT)
    assert error_of(futures["never-was"]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert "doomed" not in admin.list_topics(timeout=TIMEOUT).topics
    # (Kafka renames a deleted partition's directory to <name>.<id>-delete before removing it)
    assert not {"doomed-0", "doomed-1"} & set(os.listdir(os.path.join(broker.data_dir, "logs")))


def test_delete_topics_by_id(broker, admin):
    create(admin, NewTopic("by-id", 1, 1))
    md = call(broker, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="by-id")]), 12)
    topic_id = md.topics[0].topic_id
    S = DeleteTopicsRequest.DeleteTopicState
    resp = call(broker, DeleteTopicsRequest(topics=[S(topic_id=topic_id), S(topic_id=b"\x01" * 16),
                                                    S(name="by-id-too", topic_id=topic_id)], timeout_ms=5000), 6)
    got = sorted((r.name or "", r.error_code) for r in resp.responses)
    assert got == [("", ErrorCode.UNKNOWN_TOPIC_ID), ("by-id", 0), ("by-id-too", ErrorCode.INVALID_REQUEST)]
    assert "by-id" not in admin.list_topics(timeout=TIMEOUT).topics


def test_describe_cluster(admin, broker):
    cluster = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT)
    assert [(n.id, n.port) for n in cluster.nodes] == [(0, broker.port)]
    assert cluster.controller.id == 0 and cluster.cluster_id
    assert cluster.authorized_operations  # every cluster operation, there being no authorizer
    v1 = call(broker, DescribeClusterRequest(endpoint_type=2), 1)
    assert (v1.error_code, v1.brokers) == (ErrorCode.MISMATCHED_ENDPOINT_TYPE, [])
    assert call(broker, DescribeClusterRequest(endpoint_type=9), 1).error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
    v2 = call(broker, DescribeClusterRequest(include_fenced_brokers=True), 2)
    assert (v2.error_code, v2.cluster_id, v2.endpoint_type) == (0, cluster.cluster_id, 1)
    assert [(b.broker_id, b.is_fenced) for b in v2.brokers] == [(0, False)]


def test_describe_topics_through_confluent(admin):
    create(admin, NewTopic("described", 2, 1))
    desc = admin.describe_topics(TopicCollection(["described"]))["described"].result(TIMEOUT)
    assert [(p.id, p.leader.id, [r.id for r in p.replicas]) for p in desc.partitions] == [(0, 0, [0]), (1, 0, [0])]


# -- DescribeTopicPartitions ------------------------------------------------------------------

def _dtp(broker, names, limit, cursor=None):
    C = DescribeTopicPartitionsRequest.Cursor
    req = DescribeTopicPartitionsRequest(
        topics=[DescribeTopicPartitionsRequest.TopicRequest(name=n) for n in names],
        response_partition_limit=limit, cursor=C(topic_name=cursor[0], partition_index=cursor[1]) if cursor else None)
    resp = call(broker, req, 0)
    pages = [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in resp.topics]
    nxt = (resp.next_cursor.topic_name, resp.next_cursor.partition_index) if resp.next_cursor else None
    return pages, nxt, resp


def test_describe_topic_partitions_paging(broker, admin):
    create(admin, NewTopic("dtp-a", 3, 1), NewTopic("dtp-b", 2, 1))
    names = ["dtp-b", "dtp-missing", "dtp-a"]  # answered in name order
    assert _dtp(broker, names, 2)[:2] == ([("dtp-a", 0, [0, 1])], ("dtp-a", 2))
    assert _dtp(broker, names, 2, ("dtp-a", 2))[:2] == ([("dtp-a", 0, [2]), ("dtp-b", 0, [0])], ("dtp-b", 1))
    assert _dtp(broker, names, 2, ("dtp-b", 1))[:2] == (
        [("dtp-b", 0, [1]), ("dtp-missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])], None)
    # exactly filling the limit points the cursor at the start of the next topic
    assert _dtp(broker, ["dtp-a", "dtp-b"], 3)[:2] == ([("dtp-a", 0, [0, 1, 2])], ("dtp-b", 0))
    pages, nxt, resp = _dtp(broker, ["dtp-a"], 2000)
    p = resp.topics[0].partitions[0]
    assert (p.leader_id, p.replica_nodes, p.isr_nodes, p.eligible_leader_replicas, p.last_known_elr) == (
        0, [0], [0], [], [])
    assert resp.topics[0].topic_authorized_operations > 0 and nxt is None
    bad, _, _ = _dtp(broker, ["dtp-a"], 10, ("dtp-b", 0))  # the cursor must name a requested topic
    assert bad == [("dtp-a", ErrorCode.INVALID_REQUEST, [])]


def test_describe_topic_partitions_all_topics_in_pages(broker, admin):
    create(admin, NewTopic("dtp-all", 5, 1))
    seen, cursor = [], None
    while True:
        pages, cursor, _ = _dtp(broker, [], 3, cursor)
        assert sum(len(parts) for _, _, parts in pages) <= 3
        seen += [(name, i) for name, _, parts in pages for i in parts]
        if cursor is None:
            break
    md = call(broker, MetadataRequest(topics=None), 12)
    assert seen == sorted((t.name, p.partition_index) for t in md.topics for p in t.partitions)


def test_kafka_python_describe_topic_partitions(kadmin, admin):
    create(admin, NewTopic("kp-dtp", 3, 1))
    out = kadmin.describe_topic_partitions(["kp-dtp"], response_partition_limit=2)
    assert [p["partition_index"] for p in out["topics"][0]["partitions"]] == [0, 1]
    assert out["next_cursor"]["topic_name"] == "kp-dtp" and out["next_cursor"]["partition_index"] == 2


# -- kafka-python admin --------------------------------------------------------------------

def test_kafka_python_topic_lifecycle(kadmin):
    kadmin.create_topics([KNewTopic("kp-topic", 2, 1, topic_configs={"retention.bytes": "4096"})])
    described = kadmin.describe_configs([KConfigResource(KType.TOPIC, "kp-topic")])
    entry = described["topic"]["kp-topic"]["retention.bytes"]
    assert (entry["value"], entry["config_source"]) == ("4096", "DYNAMIC_TOPIC_CONFIG")
    kadmin.create_partitions({"kp-topic": 3})
    assert len(kadmin.describe_topics(["kp-topic"])[0]["partitions"]) == 3
    with pytest.raises(kafka.errors.InvalidPartitionsError):
        kadmin.create_partitions({"kp-topic": 1})
    with pytest.raises(kafka.errors.TopicAlreadyExistsError):
        kadmin.create_topics([KNewTopic("kp-topic", 1, 1)])
    kadmin.delete_topics(["kp-topic"])
    assert "kp-topic" not in kadmin.list_topics()


def test_describe_log_dirs_sizes(kadmin, admin, broker):
    create(admin, NewTopic("sized", 2, 1))
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        producer.produce("sized", value=b"x" * 100, partition=i % 2)
    assert producer.flush(TIMEOUT) == 0
    dirs = kadmin.describe_log_dirs({"sized": [0, 1]})[0]["log_dirs"]
    assert len(dirs) == 1 and dirs[0]["error_code"] == 0
    [topic] = dirs[0]["topics"]
    assert topic["name"] == "sized"
    for p in topic["partitions"]:
        path = os.path.join(dirs[0]["log_dir"], f"sized-{p['partition_index']}")
        on_disk = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path) if f.endswith(".log"))
        assert p["partition_size"] == on_disk > 0
        assert (p["offset_lag"], p["is_future_key"]) == (0, False)
    assert 0 < dirs[0]["usable_bytes"] <= dirs[0]["total_bytes"]


def test_describe_producers(broker, admin):
    create(admin, NewTopic("idem", 1, 1))
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for _ in range(5):
        producer.produce("idem", value=b"v", partition=0)
        producer.flush(TIMEOUT)
    T = DescribeProducersRequest.TopicRequest
    resp = call(broker, DescribeProducersRequest(topics=[T(name="idem", partition_indexes=[0, 7]),
                                                         T(name="nope", partition_indexes=[0])]), 0)
    found, missing = resp.topics[0].partitions
    assert (found.error_code, missing.error_code) == (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    [state] = found.active_producers
    assert (state.producer_epoch, state.last_sequence, state.coordinator_epoch, state.current_txn_start_offset) == (
        0, 4, -1, -1)
    assert state.producer_id >= 0 and state.last_timestamp > 0
    assert resp.topics[1].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_elect_leaders(broker, admin, kadmin):
    create(admin, NewTopic("elect", 2, 1))
    T = ElectLeadersRequest.TopicPartitions
    resp = call(broker, ElectLeadersRequest(election_type=0, topic_partitions=[T(topic="elect", partitions=[0, 5]),
                                                                               T(topic="gone", partitions=[0])]), 2)
    codes = [[p.error_code for p in r.partition_result] for r in resp.replica_election_results]
    assert codes == [[ErrorCode.ELECTION_NOT_NEEDED, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
                     [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]]
    everything = call(broker, ElectLeadersRequest(election_type=0, topic_partitions=None), 2)
    assert everything.error_code == 0
    assert all(r.partition_result == [] for r in everything.replica_election_results)  # nothing needed electing
    assert call(broker, ElectLeadersRequest(election_type=7, topic_partitions=[]), 2).error_code == \
        ErrorCode.INVALID_REQUEST
    kadmin.elect_leaders(0, {"elect": [0, 1]})  # ELECTION_NOT_NEEDED is not an error to the client
