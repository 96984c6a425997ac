"""Dynamic broker configs (KIP-226) and where dynamic configs live.

A retention change through IncrementalAlterConfigs on the broker reaches every
topic without its own override at once (the retention task really deletes the
segments) and is still in force after a restart; a cluster-wide default
(resource name "") applies under a per-broker value. In a ZooKeeper cluster the
same entities live in Kafka's znodes, and a change made through one broker
reaches another through /config/changes.
"""
from __future__ import annotations

import asyncio
import glob
import json
import os
import time

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from kazoo.client import KazooClient
from wire import WireClient

from kafka_compat.configdef import ConfigSource as KafkaConfigSource
from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.messages.alter_client_quotas import AlterClientQuotasRequest
from kafka_compat.protocol.messages.create_topics import CreateTopicsRequest
from kafka_compat.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest
from kafka_compat.protocol.messages.describe_configs import DescribeConfigsRequest
from kafka_compat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kafka_compat.protocol.messages.list_offsets import ListOffsetsRequest
from kafka_compat.protocol.messages.produce import ProduceRequest
from kafka_compat.protocol.records import build_batch
from kafka_compat.server.client_quota_manager import QuotaManagers
from kafka_compat.server.config_store import LocalConfigStore, ZkConfigStore
from kafka_compat.server.dynamic_broker_config import DynamicBrokerConfig
from kafka_compat.server.dynamic_config_manager import DynamicConfigManager
from kafka_compat.server.kafka_config import BrokerConfig
from kafka_compat.testing import EmbeddedBroker, zookeeper  # noqa: F401  (fixture)
from kafka_compat.zk.kafka_zk_client import KafkaZkClient

TIMEOUT = 30
TOPIC = "retained"
HOUR_MS = 3_600_000
DYNAMIC_BROKER = KafkaConfigSource.DYNAMIC_BROKER_CONFIG
DYNAMIC_DEFAULT = KafkaConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG


def produce(c: WireClient, topic: str, batch: bytes) -> int:
    resp = c.call(0, 9, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])]))
    return resp.responses[0].partition_responses[0].error_code


def earliest(c: WireClient, topic: str) -> int:
    L = ListOffsetsRequest
    resp = c.call(2, 7, L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(name=topic, partitions=[
        L.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-2)])]))
    return resp.topics[0].partitions[0].offset


def alter_broker(c: WireClient, name: str, **configs) -> tuple[int, str | None]:
    """IncrementalAlterConfigs SET (None: DELETE) on broker resource ``name`` ("" = cluster default)."""
    R = IncrementalAlterConfigsRequest
    resp = c.call(44, 1, R(validate_only=False, resources=[R.AlterConfigsResource(
        resource_type=4, resource_name=name, configs=[
            R.AlterableConfig(name=k.replace("_", "."), config_operation=1 if v is None else 0, value=v)
            for k, v in configs.items()])]))
    return resp.responses[0].error_code, resp.responses[0].error_message


def describe_broker(c: WireClient, name: str) -> dict:
    R = DescribeConfigsRequest
    resp = c.call(32, 4, R(resources=[R.DescribeConfigsResource(resource_type=4, resource_name=name,
                                                               configuration_keys=None)],
                           include_synonyms=True, include_documentation=False))
    assert resp.results[0].error_code == 0, resp.results[0].error_message
    return {e.name: e for e in resp.results[0].configs}


def segments(broker: EmbeddedBroker, topic: str) -> int:
    return len(glob.glob(os.path.join(broker.data_dir, "logs", f"{topic}-0", "*.log")))


def wait_for(condition, what: str, timeout: float = TIMEOUT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_retention_change_applies_at_once_and_survives_a_restart(tmp_path):
    with EmbeddedBroker({"log.retention.check.interval.ms": 200}, data_dir=str(tmp_path)) as broker:
        c = WireClient("127.0.0.1", broker.port)
        C = CreateTopicsRequest
        resp = c.call(19, 5, C(timeout_ms=10000, topics=[C.CreatableTopic(
            name=TOPIC, num_partitions=1, replication_factor=1, assignments=[],
            configs=[C.CreatableTopicConfig(name="segment.bytes", value="16384")])]))
        assert resp.topics[0].error_code == 0
        hour_ago = int(time.time() * 1000) - HOUR_MS      # kept by the default 7 days, not by one minute
        for i in range(40):
            assert produce(c, TOPIC, build_batch([(b"k", b"v" * 2000, [], hour_ago + i)])) == 0
        time.sleep(1.0)                                    # a few retention passes: nothing goes yet
        assert earliest(c, TOPIC) == 0 and segments(broker, TOPIC) > 3

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        r = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
            ConfigEntry("log.retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
        assert admin.incremental_alter_configs([r])[r].result(TIMEOUT) is None
        # the log start moves before the old files are renamed: wait for both
        wait_for(lambda: earliest(c, TOPIC) > 0 and segments(broker, TOPIC) == 1,
                 "the retention task to delete every old segment (only the active one is left)")

        described = admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")])
        cfg = list(described.values())[0].result(TIMEOUT)
        assert cfg["log.retention.ms"].value == "60000"
        assert cfg["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        topic_cfg = list(admin.describe_configs([ConfigResource(ResourceType.TOPIC, TOPIC)]).values())[0]
        retention = topic_cfg.result(TIMEOUT)["retention.ms"]
        assert (retention.value, retention.source) == ("60000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)

        # a cluster-wide default: here message.max.bytes for every topic without an override
        assert alter_broker(c, "", message_max_bytes="4096") == (0, None)
        assert produce(c, TOPIC, build_batch([(b"k", b"x" * 8000, [], hour_ago)])) == ErrorCode.MESSAGE_TOO_LARGE
        default = describe_broker(c, "")
        assert set(default) == {"message.max.bytes"}
        assert (default["message.max.bytes"].value, default["message.max.bytes"].config_source) == ("4096", DYNAMIC_DEFAULT)
        mine = describe_broker(c, "0")["message.max.bytes"]
        assert (mine.value, mine.config_source) == ("4096", DYNAMIC_DEFAULT)     # DYNAMIC_DEFAULT_BROKER_CONFIG
        # a per-broker value wins over the default
        assert alter_broker(c, "0", message_max_bytes="20000") == (0, None)
        assert produce(c, TOPIC, build_batch([(b"k", b"x" * 8000, [], hour_ago)])) == 0
        # Kafka's refusals
        assert alter_broker(c, "", listeners="PLAINTEXT://:1")[0] == ErrorCode.INVALID_REQUEST
        assert alter_broker(c, "0", broker_id="3")[0] == ErrorCode.INVALID_REQUEST
        assert alter_broker(c, "0", num_io_threads="100")[0] == ErrorCode.INVALID_REQUEST    # more than double
        assert alter_broker(c, "0", num_io_threads="12") == (0, None)
        assert alter_broker(c, "7", message_max_bytes="1")[0] == ErrorCode.INVALID_REQUEST
        A = AlterClientQuotasRequest
        assert c.call(49, 1, A(validate_only=False, entries=[A.EntryData(
            entity=[A.EntityData(entity_type="client-id", entity_name="kept")],
            ops=[A.OpData(key="producer_byte_rate", value=1024.0, remove=False)])])).entries[0].error_code == 0
        c.close()

        broker.restart()
        c = WireClient("127.0.0.1", broker.port)
        cfg = describe_broker(c, "0")
        assert (cfg["log.retention.ms"].value, cfg["log.retention.ms"].config_source) == ("60000", DYNAMIC_BROKER)
        assert (cfg["message.max.bytes"].value, cfg["message.max.bytes"].config_source) == ("20000", DYNAMIC_BROKER)
        assert describe_broker(c, "")["message.max.bytes"].value == "4096"
        start = earliest(c, TOPIC)
        for i in range(20):
            assert produce(c, TOPIC, build_batch([(b"k", b"v" * 2000, [], hour_ago + i)])) == 0
        wait_for(lambda: earliest(c, TOPIC) > start, "retention after the restart")
        D = DescribeClientQuotasRequest
        quotas = c.call(48, 1, D(components=[D.ComponentData(entity_type="client-id", match_type=0, match="kept")],
                                 strict=True))
        assert [[(v.key, v.value) for v in e.values] for e in quotas.entries] == [[("producer_byte_rate", 1024.0)]]
        with open(os.path.join(broker.data_dir, "logs", "dynamic-config.json")) as f:
            stored = json.load(f)["entities"]
        assert stored["clients"] == {"kept": {"producer_byte_rate": "1024"}}
        assert stored["brokers"] == {"0": {"log.retention.ms": "60000", "message.max.bytes": "20000",
                                           "num.io.threads": "12"}, "<default>": {"message.max.bytes": "4096"}}


def test_zookeeper_store_as_kafka_keeps_it_and_changes_reach_another_broker(zookeeper):  # noqa: F811
    async def scenario():
        clients = [KafkaZkClient(zookeeper.connect_string("/kafka")).start() for _ in range(2)]
        for z in clients:
            z.create_top_level_paths()
        managers = []
        for broker_id, z in enumerate(clients):
            cfg = BrokerConfig.from_properties({"broker.id": str(broker_id), "log.dirs": "/nonexistent"})
            m = DynamicConfigManager(ZkConfigStore(z), QuotaManagers(), DynamicBrokerConfig(cfg, broker_id))
            await m.startup()
            managers.append(m)
        one, two = managers
        await one.change("clients", "app%201", {"producer_byte_rate": "2048"})
        await one.change("users", "alice/clients/<default>", {"consumer_byte_rate": "4096",
                                                               "controller_mutation_rate": "2.5"})
        await one.change("brokers", "<default>", {"log.retention.ms": "123456"})

        def seen():
            return (two.quotas.produce.quota("ANONYMOUS", "app 1") == 2048.0 and
                    two.quotas.fetch.quota("alice", "any") == 4096.0 and
                    two.quotas.controller_mutation.quota("alice", "any") == 2.5 and
                    two.broker_config.config["log.retention.ms"] == 123456)
        deadline = time.monotonic() + TIMEOUT
        while not seen() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert seen()
        for m in managers:
            await m.shutdown()
        for z in clients:
            z.close()

    asyncio.run(scenario())
    raw = KazooClient(zookeeper.address)
    raw.start()
    try:
        def data(path):
            return json.loads(raw.get("/kafka" + path)[0])
        assert data("/config/clients/app%201") == {"version": 1, "config": {"producer_byte_rate": "2048"}}
        assert data("/config/users/alice/clients/<default>") == {"version": 1, "config": {
            "consumer_byte_rate": "4096", "controller_mutation_rate": "2.5"}}
        assert data("/config/brokers/<default>") == {"version": 1, "config": {"log.retention.ms": "123456"}}
        changes = sorted(raw.get_children("/kafka/config/changes"))
        assert [data(f"/config/changes/{n}")["entity_path"] for n in changes] == [
            "clients/app%201", "users/alice/clients/<default>", "brokers/<default>"]
    finally:
        raw.stop()
        raw.close()


@pytest.mark.parametrize("name, expected", [("alice", "alice"), ("app 1*", "app%201%2A"), ("é~/", "%C3%A9%7E%2F")])
def test_names_are_sanitized_as_kafka_does(name, expected):
    from kafka_compat.sanitizer import desanitize, sanitize
    assert sanitize(name) == expected and desanitize(expected) == name


def test_an_unreadable_local_store_starts_empty_and_is_rewritten(tmp_path):
    (tmp_path / "dynamic-config.json").write_text('{"entities": {"clients": ["not", "a", "map"]')
    store = LocalConfigStore(str(tmp_path))
    assert store.all_entity_configs("clients") == {} and store.all_user_client_configs() == {}
    store.change_entity_config("users", "bob/clients/<default>", {"request_percentage": "50.0"})
    again = LocalConfigStore(str(tmp_path))
    assert again.all_user_client_configs() == {"bob/clients/<default>": {"request_percentage": "50.0"}}
    assert again.all_entity_configs("users") == {}


def test_a_broker_with_zookeeper_connect_keeps_quotas_and_broker_configs_in_zookeeper(zookeeper, tmp_path):  # noqa: F811
    """zookeeper.connect set: AlterClientQuotas and IncrementalAlterConfigs write Kafka's znodes (not the
    local file), a change another writer makes in ZooKeeper reaches the broker, and a restart reads them back."""
    chroot = "/zk-quotas"
    overrides = {"zookeeper.connect": zookeeper.connect_string(chroot)}
    raw = KazooClient(zookeeper.address)
    raw.start()
    try:
        with EmbeddedBroker(overrides, data_dir=str(tmp_path)) as broker:
            c = WireClient("127.0.0.1", broker.port)
            A = AlterClientQuotasRequest
            assert c.call(49, 1, A(validate_only=False, entries=[A.EntryData(
                entity=[A.EntityData(entity_type="client-id", entity_name="zk app")],
                ops=[A.OpData(key="producer_byte_rate", value=2048.0, remove=False)])])).entries[0].error_code == 0
            assert alter_broker(c, "0", log_retention_ms="654321") == (0, None)
            assert json.loads(raw.get(f"{chroot}/config/clients/zk%20app")[0])["config"] == {
                "producer_byte_rate": "2048"}
            assert json.loads(raw.get(f"{chroot}/config/brokers/0")[0])["config"] == {"log.retention.ms": "654321"}
            assert not os.path.exists(os.path.join(broker.data_dir, "logs", "dynamic-config.json"))
            # another broker's (or kafka-configs') change, announced in /config/changes
            writer = KafkaZkClient(zookeeper.connect_string(chroot)).start()
            try:
                writer.change_entity_config("brokers", "<default>", {"message.max.bytes": "5000"})
            finally:
                writer.close()
            wait_for(lambda: getattr(describe_broker(c, "").get("message.max.bytes"), "value", None) == "5000",
                     "the default from ZooKeeper")
            c.close()
            broker.restart()
            c = WireClient("127.0.0.1", broker.port)
            cfg = describe_broker(c, "0")
            assert (cfg["log.retention.ms"].value, cfg["message.max.bytes"].value) == ("654321", "5000")
            D = DescribeClientQuotasRequest
            r = c.call(48, 1, D(components=[D.ComponentData(entity_type="client-id", match_type=0, match="zk app")],
                                strict=True))
            assert [[(v.key, v.value) for v in e.values] for e in r.entries] == [[("producer_byte_rate", 2048.0)]]
            c.close()
    finally:
        raw.stop()
        raw.close()
