"""Kafka's znode JSON, field by field: what we write is what Kafka 3.8 writes (ZkData.scala), and we
read what Kafka of every version wrote.

Samples called "as Kafka writes it" are typed here from the formats in ZkData.scala, with keys in a
different order than ours (Jackson's HashMap order is not ours; key order is not significant).
"""
from __future__ import annotations

import base64
import json

import pytest

from kafka_compat.endpoint import EndPoint, SecurityProtocol
from kafka_compat.leader_and_isr import LeaderAndIsr, LeaderIsrAndControllerEpoch, LeaderRecoveryState
from kafka_compat.zk import zk_data as zd
from kafka_compat.zk.zk_data import TopicPartition, ZkDataError

PLAIN = EndPoint("PLAINTEXT", "h1", 9092, SecurityProtocol("PLAINTEXT"))
SSL = EndPoint("SSL", "h1", 9093, SecurityProtocol("SSL"))
INTERNAL = EndPoint("INTERNAL", "10.0.0.1", 9094, SecurityProtocol("SASL_PLAINTEXT"))


def fields(data: bytes) -> dict:
    """The decoded JSON object, after checking that it is compact UTF-8 JSON as Jackson writes it."""
    value = json.loads(data)
    assert json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode() == data
    return value


# -- paths ---------------------------------------------------------------------------------------


def test_paths_are_kafkas():
    assert zd.broker_id_path(3) == "/brokers/ids/3"
    assert zd.topic_path("t") == "/brokers/topics/t"
    assert zd.topic_partition_state_path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert zd.config_entity_path("topics", "t") == "/config/topics/t"
    assert zd.config_entity_path("users", "alice/clients/app") == "/config/users/alice/clients/app"
    assert zd.delete_topic_path("t") == "/admin/delete_topics/t"
    assert zd.acl_path("Topic", "t") == "/kafka-acl/Topic/t"
    assert zd.acl_path("TRANSACTIONAL_ID", "x", "PREFIXED") == "/kafka-acl-extended/prefixed/TransactionalId/x"
    assert zd.sequence_number("isr_change_0000000012", zd.ISR_CHANGE_PREFIX) == "0000000012"
    # ZkData.PersistentZkPaths, in its order
    assert zd.PERSISTENT_ZK_PATHS == (
        "/consumers", "/brokers/ids", "/brokers/topics", "/config/changes", "/admin/delete_topics", "/brokers/seqid",
        "/isr_change_notification", "/latest_producer_id_block", "/log_dir_event_notification",
        "/config/topics", "/config/clients", "/config/users", "/config/brokers", "/config/ips")


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../x", "x\0"])
def test_a_name_cannot_climb_or_split_a_path(name):
    with pytest.raises(ValueError):
        zd.topic_path(name)
    with pytest.raises(ValueError):
        zd.delete_topic_path(name)


# -- /brokers/ids/<id> -----------------------------------------------------------------------------


def test_broker_registration_v5_fields():
    info = zd.BrokerInfo(1, [SSL, PLAIN, INTERNAL], rack="r1", features={"metadata.version": zd.VersionRange(1, 20)},
                         jmx_port=9999)
    got = fields(info.encode(timestamp_ms=1700000000123))
    assert got == {
        "version": 5,
        "host": "h1", "port": 9092,               # the first PLAINTEXT endpoint, though SSL comes first
        "jmx_port": 9999,
        "timestamp": "1700000000123",
        "endpoints": ["SSL://h1:9093", "PLAINTEXT://h1:9092", "INTERNAL://10.0.0.1:9094"],
        "rack": "r1",
        "listener_security_protocol_map": {"SSL": "SSL", "PLAINTEXT": "PLAINTEXT", "INTERNAL": "SASL_PLAINTEXT"},
        "features": {"metadata.version": {"min_version": 1, "max_version": 20}},
    }
    assert isinstance(got["timestamp"], str)


def test_broker_registration_without_plaintext_or_rack():
    v6, anywhere = EndPoint("V6", "::1", 9095, SecurityProtocol.SSL), EndPoint("ANY", None, 9096, SecurityProtocol.SSL)
    got = fields(zd.BrokerInfo(2, [SSL, v6, anywhere])
                 .encode(timestamp_ms=5))
    assert got["host"] is None and got["port"] == -1
    assert "rack" not in got
    assert got["endpoints"] == ["SSL://h1:9093", "V6://[::1]:9095", "ANY://:9096"]
    assert got["features"] == {} and got["jmx_port"] == -1


def test_broker_registration_round_trip_and_timestamp_now():
    v6, anywhere = EndPoint("V6", "::1", 9095, SecurityProtocol.SSL), EndPoint("ANY", None, 9096, SecurityProtocol.SSL)
    info = zd.BrokerInfo(7, [PLAIN, v6, anywhere],
                         rack="r", features={"f": zd.VersionRange(0, 3)})
    back = zd.BrokerInfo.decode(7, info.encode())
    assert back.endpoints == info.endpoints and back.rack == "r" and back.features == {"f": (0, 3)}
    assert back.timestamp_ms > 1_600_000_000_000


def test_broker_registrations_of_every_version_decode():
    # v1 (0.8): host/port only, read as one PLAINTEXT endpoint
    v1 = zd.BrokerInfo.decode(1, b'{"jmx_port":-1,"timestamp":"1","host":"old","version":1,"port":9092}')
    assert v1.endpoints == (EndPoint("PLAINTEXT", "old", 9092, SecurityProtocol("PLAINTEXT")),) and v1.version == 1
    # v2/v3: endpoints named by security protocol, no map
    v3 = zd.BrokerInfo.decode(2, b'{"rack":"dc1","endpoints":["PLAINTEXT://a:1","SSL://a:2"],"jmx_port":7,'
                                 b'"host":"a","port":1,"version":3,"timestamp":"1"}')
    assert [e.security_protocol for e in v3.endpoints] == ["PLAINTEXT", "SSL"] and v3.rack == "dc1"
    assert v3.jmx_port == 7
    # v5 as Kafka writes it, plus a key from the future
    v5 = zd.BrokerInfo.decode(3, b'{"features":{"metadata.version":{"max_version":20,"min_version":1}},'
                                 b'"listener_security_protocol_map":{"CLIENT":"SASL_SSL","REPL":"PLAINTEXT"},'
                                 b'"endpoints":["CLIENT://c:9092","REPL://:9093"],"jmx_port":-1,"port":-1,'
                                 b'"host":null,"version":5,"timestamp":"1700000000000","some_future_key":[1]}')
    assert v5.endpoints == (EndPoint("CLIENT", "c", 9092, SecurityProtocol.SASL_SSL),
                            EndPoint("REPL", None, 9093, SecurityProtocol.PLAINTEXT))
    assert v5.features == {"metadata.version": (1, 20)} and v5.rack is None and v5.timestamp_ms == 1700000000000


@pytest.mark.parametrize("data, complaint", [
    (b"{", "not valid JSON"),
    (b"[1]", "expected a JSON object"),
    (b'{"version":5,"endpoints":[]}', "jmx_port"),
    (b'{"version":0,"jmx_port":-1,"endpoints":[]}', "unsupported version"),
    (b'{"version":4,"jmx_port":-1,"endpoints":["CLIENT://c:1"],"listener_security_protocol_map":{}}',
     "No security protocol defined for listener CLIENT"),
    (b'{"version":2,"jmx_port":-1,"endpoints":["CLIENT://c:1"]}', "No security protocol"),
    (b'{"version":4,"jmx_port":-1,"endpoints":["nonsense"]}', "Unable to parse"),
    (b'{"version":"5","jmx_port":-1,"endpoints":[]}', "'version' must be an integer"),
    (b'{"version":5,"jmx_port":true,"endpoints":[]}', "'jmx_port' must be an integer"),
    (None, "holds no data"),
])
def test_bad_broker_registrations_are_clear_errors(data, complaint):
    with pytest.raises(ZkDataError, match=complaint) as e:
        zd.BrokerInfo.decode(4, data)
    assert "/brokers/ids/4" in str(e.value)


# -- /brokers/topics/<t> ---------------------------------------------------------------------------


def test_topic_assignment_v3_fields():
    topic_id = bytes(range(16))
    got = fields(zd.encode_topic(topic_id, {1: zd.ReplicaAssignment((2, 3, 4), adding_replicas=(4,),
                                                                     removing_replicas=(3,)), 0: [1, 2, 3]}))
    assert got == {"version": 3, "topic_id": "AAECAwQFBgcICQoLDA0ODw",
                   "partitions": {"0": [1, 2, 3], "1": [2, 3, 4]},
                   "adding_replicas": {"1": [4]}, "removing_replicas": {"1": [3]}}
    # Kafka's Uuid.toString: URL-safe base64, no padding
    assert base64.urlsafe_b64decode(got["topic_id"] + "==") == topic_id
    # no topic id: the key is left out (the version stays 3), empty reassignment maps stay
    assert fields(zd.encode_topic(None, {0: [1]})) == {"version": 3, "partitions": {"0": [1]},
                                                        "adding_replicas": {}, "removing_replicas": {}}


def test_topic_assignments_of_every_version_decode():
    v1 = zd.decode_topic("t", b'{"version":1,"partitions":{"1":[2,1],"0":[1,2]}}')
    assert v1 == zd.TopicAssignment(None, {0: zd.ReplicaAssignment((1, 2)), 1: zd.ReplicaAssignment((2, 1))})
    v2 = zd.decode_topic("t", b'{"removing_replicas":{"0":[3]},"partitions":{"0":[1,2,3]},'
                              b'"adding_replicas":{"0":[1]},"version":2}')
    a = v2.partitions[0]
    assert (a.replicas, a.adding_replicas, a.removing_replicas) == ((1, 2, 3), (1,), (3,))
    assert a.target_replicas == (1, 2) and a.origin_replicas == (2, 3) and a.is_being_reassigned
    v3 = zd.decode_topic("t", b'{"version":3,"topic_id":"AAECAwQFBgcICQoLDA0ODw","partitions":{"0":[1]},'
                              b'"adding_replicas":{},"removing_replicas":{},"later":true}')
    assert v3.topic_id == bytes(range(16)) and v3.partitions[0].replicas == (1,)
    assert zd.decode_topic("t", None) == zd.TopicAssignment(None, {})


@pytest.mark.parametrize("data, complaint", [
    (b'{"version":3,"partitions":{"x":[1]}}', "partition key 'x'"),
    (b'{"version":3,"partitions":{"0":[1,"2"]}}', "list of integers"),
    (b'{"version":3,"partitions":{"0":[1]},"topic_id":"AAAA"}', "decodes to 3 bytes"),
    (b'{"version":3,"partitions":{"0":[1]},"topic_id":"short"}', "not a base64 Kafka Uuid"),
    (b'{"version":3,"partitions":{"0":[1]},"topic_id":"AAECAwQFBgcICQoLDA0ODwAAAAAAAA"}', "not a base64 Kafka Uuid"),
    (b'{"version":3,"partitions":[]}', "expected a JSON object"),
    (b'not json', "not valid JSON"),
])
def test_bad_topic_assignments_are_clear_errors(data, complaint):
    with pytest.raises(ZkDataError, match=complaint):
        zd.decode_topic("t", data)


def test_random_uuids_are_kafka_uuids():
    for _ in range(200):
        raw = zd.random_uuid()
        text = zd.uuid_to_string(raw)
        assert len(text) == 22 and not text.startswith("-") and zd.uuid_from_string(text) == raw
        assert raw not in (bytes(16), bytes(15) + b"\x01") and raw[6] >> 4 == 4


# -- partition state -------------------------------------------------------------------------------


def test_partition_state_fields():
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 7, (2, 3, 1), partition_epoch=12), controller_epoch=5)
    assert fields(zd.encode_partition_state(state)) == {
        "version": 1, "leader": 2, "leader_epoch": 7, "controller_epoch": 5, "isr": [2, 3, 1]}
    recovering = LeaderIsrAndControllerEpoch(LeaderAndIsr(3, 8, (3,), LeaderRecoveryState.RECOVERING), 5)
    assert fields(zd.encode_partition_state(recovering))["leader_recovery_state"] == 1


def test_partition_state_decodes_with_its_zk_version_as_partition_epoch():
    # as Kafka writes it, before 3.2 (no recovery state) and after (recovering)
    old = zd.decode_partition_state(b'{"controller_epoch":4,"leader":1,"version":1,"leader_epoch":3,"isr":[1,2]}', 9)
    assert old == LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 3, (1, 2), LeaderRecoveryState.RECOVERED, 9), 4)
    new = zd.decode_partition_state(b'{"controller_epoch":4,"leader":-1,"version":1,"leader_epoch":3,"isr":[1],'
                                    b'"leader_recovery_state":1}', 0)
    assert new.leader_and_isr.leader_recovery_state is LeaderRecoveryState.RECOVERING
    assert new.leader_and_isr.leader_or_none is None
    for bad, complaint in [(b'{"leader":1,"leader_epoch":0,"isr":[1]}', "missing 'controller_epoch'"),
                           (b'{"leader":1,"leader_epoch":0,"isr":[1],"controller_epoch":1,'
                            b'"leader_recovery_state":7}', "unknown leader_recovery_state 7"),
                           (b'{"leader":1.5,"leader_epoch":0,"isr":[1],"controller_epoch":1}', "'leader' must be"),
                           (b'{"leader":1,"leader_epoch":0,"isr":[1],"controller_epoch":99999999999}', "in \\[")]:
        with pytest.raises(ZkDataError, match=complaint):
            zd.decode_partition_state(bad, 0)


# -- controller, cluster id, configs, notifications --------------------------------------------------


def test_controller_znodes():
    assert fields(zd.encode_controller(3, 1700000000000)) == {
        "version": 2, "brokerid": 3, "timestamp": "1700000000000", "kraftControllerEpoch": -1}
    assert zd.decode_controller(b'{"version":1,"brokerid":2,"timestamp":"1"}') == (2, None)   # Kafka <= 3.3
    assert zd.decode_controller(zd.encode_controller(4)) == (4, -1)
    assert zd.encode_controller_epoch(17) == b"17"                   # plain text, not JSON
    assert zd.decode_controller_epoch(b"17") == 17
    for bad in (b" 17", b"1_7", b"+17", b"", None, b"x", b"99999999999"):
        with pytest.raises(ZkDataError, match="/controller_epoch"):
            zd.decode_controller_epoch(bad)
    with pytest.raises(ZkDataError, match="missing 'brokerid'"):
        zd.decode_controller(b'{"version":2}')


def test_cluster_id_version_is_a_string():
    got = fields(zd.encode_cluster_id("AAECAwQFBgcICQoLDA0ODw"))
    assert got == {"version": "1", "id": "AAECAwQFBgcICQoLDA0ODw"}
    assert zd.decode_cluster_id(b'{"id":"abc","version":"1"}') == "abc"


def test_entity_config_and_change_notification():
    assert fields(zd.encode_config({"min.insync.replicas": "2", "retention.ms": "1000"})) == {
        "version": 1, "config": {"min.insync.replicas": "2", "retention.ms": "1000"}}
    assert zd.decode_config(b'{"config":{"a":"1"},"version":1}') == {"a": "1"}
    assert zd.decode_config(None) == {} and zd.decode_config(b'{"version":1}') == {}
    with pytest.raises(ZkDataError, match="'a' must be a string"):
        zd.decode_config(b'{"version":1,"config":{"a":1}}')
    assert fields(zd.encode_config_change("topics/foo")) == {"version": 2, "entity_path": "topics/foo"}
    assert zd.decode_config_change(b'{"entity_path":"users/alice/clients/app","version":2}') == (
        "users", "alice/clients/app")
    assert zd.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"t"}') == ("topics", "t")
    for bad in (b'{"version":2,"entity_path":"nope/x"}', b'{"version":2}', b'{"version":1,"entity_type":"users"}',
                b'{"version":3,"entity_path":"topics/x"}'):
        with pytest.raises(ZkDataError):
            zd.decode_config_change(bad)


def test_admin_and_notification_znodes():
    tps = [TopicPartition("a", 0), TopicPartition("b", 3)]
    assert fields(zd.encode_partitions_notification(tps)) == {
        "version": 1, "partitions": [{"topic": "a", "partition": 0}, {"topic": "b", "partition": 3}]}
    assert zd.decode_partitions_notification(
        b'{"version":1,"partitions":[{"partition":3,"topic":"b","x":0}]}') == {("b", 3)}
    assert fields(zd.encode_reassignment({TopicPartition("a", 1): [3, 2]})) == {
        "version": 1, "partitions": [{"topic": "a", "partition": 1, "replicas": [3, 2]}]}
    assert zd.decode_reassignment(b'{"partitions":[{"replicas":[1],"partition":0,"topic":"t"}],"version":1}') == {
        ("t", 0): [1]}
    assert fields(zd.encode_log_dir_event(2)) == {"version": 1, "broker": 2, "event": 1}
    assert zd.decode_log_dir_event(b'{"version":1,"broker":2,"event":1}') == 2
    with pytest.raises(ZkDataError, match="missing 'partitions'"):
        zd.decode_partitions_notification(b'{"version":1}')


def test_producer_id_block_bounds_are_strings():
    block = zd.ProducerIdsBlock(1, 0, zd.PRODUCER_ID_BLOCK_SIZE)
    assert fields(zd.encode_producer_id_block(block)) == {
        "version": 1, "broker": 1, "block_start": "0", "block_end": "999"}
    back = zd.decode_producer_id_block(b'{"block_end":"1999","broker":3,"version":1,"block_start":"1000"}')
    assert back == (3, 1000, 1000) and back.last_producer_id == 1999 and back.next_block_first_id == 2000
    for bad in (b'{"broker":1,"block_start":0,"block_end":"9"}', b'{"broker":1,"block_start":"9","block_end":"0"}',
                b'{"broker":1,"block_start":" 1","block_end":"9"}'):
        with pytest.raises(ZkDataError, match="latest_producer_id_block"):
            zd.decode_producer_id_block(bad)


def test_feature_znode():
    v2 = zd.FeatureZNode(2, zd.FeatureZNodeStatus.ENABLED, {"metadata.version": 7})
    assert fields(zd.encode_feature(v2)) == {"version": 2, "status": 1,
                                             "features": {"metadata.version": {"max_version_level": 7}}}
    v1 = zd.FeatureZNode(1, zd.FeatureZNodeStatus.DISABLED, {"f": 2})
    assert fields(zd.encode_feature(v1)) == {"version": 1, "status": 0,
                                             "features": {"f": {"max_version_level": 2, "min_version_level": 2}}}
    assert zd.decode_feature(zd.encode_feature(v1)) == v1 and zd.decode_feature(zd.encode_feature(v2)) == v2
    for bad, complaint in [(b'{"version":3,"status":1,"features":{}}', "unsupported version"),
                           (b'{"version":2,"features":{}}', "status"),
                           (b'{"version":2,"status":1}', "missing 'features'"),
                           (b'{"version":1,"status":1,"features":{"f":{"max_version_level":2}}}', "min_version_level"),
                           (b'{"version":2,"status":1,"features":{"f":{"max_version_level":0}}}', "< 1")]:
        with pytest.raises(ZkDataError, match=complaint):
            zd.decode_feature(bad)


def test_acl_znodes():
    acls = [zd.AclEntry("User:alice", "ALLOW", "DESCRIBE_CONFIGS", "*")]
    assert fields(zd.encode_acls(acls)) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "DescribeConfigs", "host": "*"}]}
    got = zd.decode_acls(b'{"version":1,"acls":[{"host":"h","operation":"READ","permissionType":"Deny",'
                         b'"principal":"User:bob"}]}')
    assert got == {zd.AclEntry("User:bob", "Deny", "Read", "h")}
    assert zd.decode_acls(b"") == set()
    with pytest.raises(ZkDataError, match="unsupported ACL version"):
        zd.decode_acls(b'{"version":2,"acls":[]}')
    with pytest.raises(ZkDataError, match="Type:name"):
        zd.decode_acls(b'{"version":1,"acls":[{"principal":"bob","permissionType":"Allow","operation":"Read",'
                       b'"host":"*"}]}')
    # change notifications: literal as text with the enum name, others as JSON
    assert zd.encode_acl_change("Topic", "foo") == b"TOPIC:foo"
    assert zd.decode_acl_change(b"Topic:foo", extended=False) == ("Topic", "foo", "LITERAL")   # Kafka 2.x wrote this
    assert fields(zd.encode_acl_change("TransactionalId", "tx", "PREFIXED")) == {
        "version": 1, "resourceType": "TRANSACTIONAL_ID", "name": "tx", "patternType": "PREFIXED"}
    assert zd.decode_acl_change(zd.encode_acl_change("Group", "g", "PREFIXED"), extended=True) == (
        "Group", "g", "PREFIXED")
    assert "/kafka-acl/Topic" in zd.acl_zk_paths() and "/kafka-acl-extended/prefixed/User" in zd.acl_zk_paths()


def test_deeply_nested_json_is_a_clear_error():
    with pytest.raises(ZkDataError, match="not valid JSON"):
        zd.decode_partition_state(b"[" * 100000 + b"]" * 100000, 0)
