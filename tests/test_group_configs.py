"""The GROUP config resource (KIP-848/932/1071): a group's own consumer.*, share.* and streams.* configs.

Described with the broker's settings as their defaults and synonyms, validated with Kafka 4.4's
messages (the same requests against Kafka 4.4 are compared in interop/test_conformance_admin.py),
kept across a restart, and in force: a KIP-848 member of a group with its own
consumer.heartbeat.interval.ms is told that interval. In a ZooKeeper cluster an override made
through one broker reaches the others through /config/changes.
"""
from __future__ import annotations

import json
import time

import pytest
from wire import WireClient

from kafka_compat.configdef import ConfigSource
from kafka_compat.group.group_config import GROUP_CONFIG_DEF, GroupConfigManager, parse_duration_ms, validate
from kafka_compat.protocol.errors import ErrorCode, KafkaError
from kafka_compat.protocol.messages.alter_configs import AlterConfigsRequest
from kafka_compat.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kafka_compat.protocol.messages.describe_configs import DescribeConfigsRequest
from kafka_compat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kafka_compat.server.kafka_config import BrokerConfig
from kafka_compat.testing import EmbeddedBroker, EmbeddedCluster, zookeeper_missing

GROUP, SET, DELETE, APPEND = 32, 0, 1, 2
A = IncrementalAlterConfigsRequest
R = DescribeConfigsRequest.DescribeConfigsResource


def describe(c: WireClient, group: str, keys=None):
    r = c.call(32, 4, DescribeConfigsRequest(resources=[R(resource_type=GROUP, resource_name=group,
                                                          configuration_keys=keys)],
                                             include_synonyms=True, include_documentation=False)).results[0]
    return r.error_code, r.error_message, {e.name: e for e in r.configs}


def alter(c: WireClient, group: str, *ops, validate_only=False):
    r = c.call(44, 1, A(resources=[A.AlterConfigsResource(resource_type=GROUP, resource_name=group, configs=[
        A.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])], validate_only=validate_only))
    return r.responses[0].error_code, r.responses[0].error_message


def test_every_group_config_is_described_with_the_broker_setting_as_its_default():
    with EmbeddedBroker({"group.share.delivery.count.limit": 7}) as broker:
        c = WireClient("127.0.0.1", broker.port)
        code, _, configs = describe(c, "never-seen")       # a group need not exist
        assert code == 0 and set(configs) == set(GROUP_CONFIG_DEF) and len(configs) == 21
        limit = configs["share.delivery.count.limit"]
        assert (limit.value, limit.config_source, limit.read_only) == ("7", ConfigSource.STATIC_BROKER_CONFIG, False)
        assert [(s.name, s.value, s.source) for s in limit.synonyms] == [
            ("group.share.delivery.count.limit", "7", ConfigSource.STATIC_BROKER_CONFIG)]
        session = configs["consumer.session.timeout.ms"]
        assert (session.value, session.config_source) == ("45000", ConfigSource.DEFAULT_CONFIG)
        reset = configs["share.auto.offset.reset"]       # no broker setting: its own name is its synonym
        assert [(s.name, s.value) for s in reset.synonyms] == [("share.auto.offset.reset", "latest")]
        assert configs["streams.assignor.name"].synonyms[0].name == "group.streams.assignors"
        assert set(describe(c, "g", ["share.isolation.level", "no.such"])[2]) == {"share.isolation.level"}
        assert describe(c, "")[:2] == (ErrorCode.INVALID_REQUEST, "Group name must not be empty")
        c.close()


# (ops, error code, message) as Kafka 4.4 answers them
REFUSALS = [
    ([("share.auto.offset.reset", SET, "by_duration:1h")], ErrorCode.INVALID_CONFIG,
     "Invalid value by_duration:1h for configuration share.auto.offset.reset: Invalid value `by_duration:1h` for "
     "configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format "
     "'by_duration:<PnDTnHnMn.nS>'."),
    ([("share.record.lock.duration.ms", SET, "100")], ErrorCode.INVALID_CONFIG,
     "Invalid value 100 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
    ([("share.record.lock.duration.ms", SET, "10000")], ErrorCode.INVALID_CONFIG,
     "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive."),
    ([("consumer.session.timeout.ms", SET, "abc")], ErrorCode.INVALID_CONFIG,
     "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"),
    ([("share.partition.max.record.locks", SET, "20000")], ErrorCode.INVALID_CONFIG,
     "share.partition.max.record.locks must be in the range 100 to 4000 inclusive."),
    ([("streams.num.standby.replicas", SET, "5")], ErrorCode.INVALID_CONFIG,
     "streams.num.standby.replicas must be less than or equal to 2"),
    ([("streams.assignor.name", SET, "nope")], ErrorCode.INVALID_CONFIG,
     "streams.assignor.name 'nope' is not a registered task assignor. Registered assignors are: [sticky]."),
    ([("share.isolation.level", SET, "x")], ErrorCode.INVALID_CONFIG,
     "Invalid value x for configuration share.isolation.level: String must be one of: read_committed, "
     "read_uncommitted"),
    ([("no.such", SET, "1")], ErrorCode.INVALID_CONFIG, "Unknown group config name: no.such"),
    ([("share.delivery.count.limit", APPEND, "3")], ErrorCode.INVALID_CONFIG,
     "Can't APPEND to key share.delivery.count.limit because its type is not LIST."),
    ([("share.session.timeout.ms", SET, None)], ErrorCode.INVALID_REQUEST,
     "Null value not supported for : share.session.timeout.ms"),
]


@pytest.mark.parametrize("ops,code,message", [r for r in REFUSALS if r[1] == ErrorCode.INVALID_CONFIG
                                              and r[0][0][1] == SET and r[0][0][0] != "no.such"])
def test_each_value_is_checked_in_process_as_the_api_checks_it(ops, code, message):
    broker = BrokerConfig.from_properties({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": "/nonexistent"})
    (name, _, value), = ops
    with pytest.raises(KafkaError) as e:
        validate({name: value}, broker)
    assert (e.value.error_code, e.value.message) == (code, message)
    manager = GroupConfigManager(broker)
    manager.update("g", {name: value, "share.delivery.count.limit": "3"})   # stored elsewhere: the rest applies
    assert manager.group_config("g")["share.delivery.count.limit"] == 3
    assert manager.group_config("g")[name] == GroupConfigManager(broker).group_config("g")[name]


def test_refusals_over_the_wire_and_nothing_is_stored():
    with EmbeddedBroker() as broker:
        c = WireClient("127.0.0.1", broker.port)
        for ops, code, message in REFUSALS:
            assert alter(c, "g", *ops) == (code, message), ops
        assert alter(c, "", ("share.delivery.count.limit", SET, "3")) == (
            ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
        assert alter(c, "g", ("share.delivery.count.limit", 9, "3"))[0] == ErrorCode.UNKNOWN_SERVER_ERROR
        assert alter(c, "g", ("share.delivery.count.limit", SET, "3"), validate_only=True) == (0, None)
        _, _, configs = describe(c, "g")
        assert all(e.config_source != ConfigSource.DYNAMIC_GROUP_CONFIG for e in configs.values())
        c.close()


def heartbeat(c: WireClient, group: str):
    return c.call(68, 0, ConsumerGroupHeartbeatRequest(
        group_id=group, member_id="", member_epoch=0, rebalance_timeout_ms=30000,
        subscribed_topic_names=["t"], server_assignor=None, topic_partitions=[]))


def test_an_override_is_kept_across_a_restart_and_a_consumer_group_uses_it(tmp_path):
    with EmbeddedBroker(data_dir=str(tmp_path)) as broker:
        c = WireClient("127.0.0.1", broker.port)
        assert alter(c, "fast", ("consumer.heartbeat.interval.ms", SET, "6000"),
                     ("consumer.session.timeout.ms", SET, "50000"),
                     ("share.auto.offset.reset", SET, "by_duration:P1DT2H0.5S")) == (0, None)
        assert alter(c, "fast", ("share.auto.offset.reset", DELETE, None),
                     ("share.auto.offset.reset", SET, "earliest"))[0] == ErrorCode.INVALID_REQUEST   # key twice
        answer = heartbeat(c, "fast")
        assert answer.error_code == 0 and answer.heartbeat_interval_ms == 6000
        assert heartbeat(c, "default").heartbeat_interval_ms == 5000
        c.close()
        broker.restart()
        c = WireClient("127.0.0.1", broker.port)
        _, _, configs = describe(c, "fast")
        interval = configs["consumer.heartbeat.interval.ms"]
        assert (interval.value, interval.config_source) == ("6000", ConfigSource.DYNAMIC_GROUP_CONFIG)
        assert [(s.name, s.value, s.source) for s in interval.synonyms] == [
            ("consumer.heartbeat.interval.ms", "6000", ConfigSource.DYNAMIC_GROUP_CONFIG),
            ("group.consumer.heartbeat.interval.ms", "5000", ConfigSource.DEFAULT_CONFIG)]
        assert configs["share.auto.offset.reset"].value == "by_duration:P1DT2H0.5S"
        assert heartbeat(c, "fast").heartbeat_interval_ms == 6000
        # the legacy AlterConfigs replaces the whole set
        L = AlterConfigsRequest
        r = c.call(33, 2, L(resources=[L.AlterConfigsResource(resource_type=GROUP, resource_name="fast", configs=[
            L.AlterableConfig(name="share.delivery.count.limit", value="4")])], validate_only=False))
        assert r.responses[0].error_code == 0
        _, _, configs = describe(c, "fast")
        assert {n for n, e in configs.items() if e.config_source == ConfigSource.DYNAMIC_GROUP_CONFIG} == {
            "share.delivery.count.limit"}
        assert heartbeat(c, "fast").heartbeat_interval_ms == 5000
        c.close()


@pytest.mark.parametrize("text,ms", [("PT1H", 3_600_000), ("P1D", 86_400_000), ("PT0.5S", 500), ("pt1m", 60_000),
                                     ("P1DT2H0.5S", 93_600_500), ("-PT1S", -1000), ("PT-1.5S", -1500),
                                     ("P", None), ("PT", None), ("1h", None), ("P1H", None), ("PT1S2M", None)])
def test_durations_are_read_as_javas_duration_parse(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.skipif(zookeeper_missing() is not None, reason=str(zookeeper_missing()))
def test_in_a_cluster_an_override_reaches_every_broker_through_zookeeper():
    with EmbeddedCluster(2) as cluster:
        first = WireClient("127.0.0.1", cluster.brokers[0].port)
        assert alter(first, "shared g", ("share.record.lock.duration.ms", SET, "20000")) == (0, None)
        stored = json.loads(cluster.zk.get("/config/groups/shared%20g")[0])
        assert stored["config"] == {"share.record.lock.duration.ms": "20000"}
        second = WireClient("127.0.0.1", cluster.brokers[1].port)
        deadline = time.monotonic() + 30
        while describe(second, "shared g")[2]["share.record.lock.duration.ms"].value != "20000":
            assert time.monotonic() < deadline, "the override never reached broker 1"
            time.sleep(0.2)
        cluster.restart(1)
        second.close()
        second = WireClient("127.0.0.1", cluster.brokers[1].port)
        assert describe(second, "shared g")[2]["share.record.lock.duration.ms"].value == "20000"
        first.close()
        second.close()
