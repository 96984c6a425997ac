"""Topic administration and the controller's APIs in a ZooKeeper cluster, over the wire.

A `Front` is one broker as a client reaches it: the topic handlers (CreateTopics, CreatePartitions,
DeleteTopics, configs, Metadata) with a ZkAdminManager, and the controller handlers, behind a real
SocketServer; its MetadataCache is fed, on the loop, by the UpdateMetadata requests that its controller
sends to it (the broker side's job, simulated here), which also completes the handlers' waits. The
controllers and their fake brokers are those of tests/controller_cluster.py, on a real ZooKeeper.
"""
from __future__ import annotations

import asyncio
import json
import random

import pytest
from controller_cluster import cluster_fixture, hold, raw_fixture, server_fixture, wait_until  # noqa: F401
from wire import AsyncWireClient

from kafka_compat.controller.replica_assignment import BrokerMetadata, assign_new_partitions, assign_replicas_to_brokers
from kafka_compat.endpoint import EndPoint, SecurityProtocol
from kafka_compat.network.socket_server import SocketServer
from kafka_compat.protocol.errors import ErrorCode, KafkaError
from kafka_compat.protocol.messages.alter_partition import AlterPartitionRequest
from kafka_compat.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from kafka_compat.protocol.messages.controlled_shutdown import ControlledShutdownRequest
from kafka_compat.protocol.messages.create_partitions import CreatePartitionsRequest
from kafka_compat.protocol.messages.create_topics import CreateTopicsRequest
from kafka_compat.protocol.messages.delete_topics import DeleteTopicsRequest
from kafka_compat.protocol.messages.describe_configs import DescribeConfigsRequest
from kafka_compat.protocol.messages.elect_leaders import ElectLeadersRequest
from kafka_compat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kafka_compat.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from kafka_compat.protocol.messages.metadata import MetadataRequest
from kafka_compat.server.client_quota_manager import QuotaManagers
from kafka_compat.server.config_store import ZkConfigStore
from kafka_compat.server.configs import ConfigsApi
from kafka_compat.server.controller_apis import controller_api_handlers
from kafka_compat.server.create_topics import CreateTopicsApi
from kafka_compat.server.delete_topics import DeleteTopicsApi
from kafka_compat.server.dynamic_broker_config import DynamicBrokerConfig
from kafka_compat.server.dynamic_config_manager import DynamicConfigManager
from kafka_compat.server.kafka_apis import KafkaApis
from kafka_compat.server.metadata import MetadataApi
from kafka_compat.server.metadata_cache import BrokerEndpoint, BrokerInfo, MetadataCache, PartitionLeadership
from kafka_compat.server.zk_admin_manager import ZkAdminManager
from kafka_compat.server.zk_config_manager import ZkConfigManager
from kafka_compat.testing import zookeeper_missing
from kafka_compat.zk import zk_data as zd

pytestmark = pytest.mark.skipif(zookeeper_missing() is not None, reason=str(zookeeper_missing()))

SEED = 7
CREATE_TOPICS, DELETE_TOPICS, METADATA, CREATE_PARTITIONS = 19, 20, 3, 37


def apply_update_metadata(cache: MetadataCache, body) -> list[str]:
    """What a broker's UpdateMetadata handler does to its cache (a topic led by -2 is being deleted: gone)."""
    protocols = list(SecurityProtocol)
    cache.update_brokers([BrokerInfo(b.id, tuple(BrokerEndpoint(e.listener, e.host, e.port,
                                                                protocols[e.security_protocol].value)
                                                 for e in b.endpoints), b.rack) for b in body.live_brokers],
                         body.controller_id, body.controller_epoch)
    for t in body.topic_states:
        if any(p.leader == -2 for p in t.partition_states):
            cache.remove_topic(t.topic_name)
            continue
        cache.update_partitions(t.topic_name, t.topic_id, {p.partition_index: PartitionLeadership(
            p.leader, p.leader_epoch, tuple(p.isr), tuple(p.replicas), p.zk_version, p.controller_epoch,
            tuple(p.offline_replicas)) for p in t.partition_states})
    return [t.topic_name for t in body.topic_states]


class Front:
    """One broker as clients reach it (see the module docstring)."""

    @classmethod
    async def start(cls, cluster, broker_id: int, *, controller: bool = True, rack: str | None = None,
                    **config) -> "Front":
        self = cls()
        loop = asyncio.get_running_loop()
        self.cluster = cluster
        self.node = cluster.start(broker_id, with_controller=False, rack=rack, config=config)
        self.cache = MetadataCache(broker_id, "test-cluster")
        cfg = self.node.config_object()
        self.config_manager = ZkConfigManager(self.node.zk)       # one /config/changes listener, as a broker's
        self.admin = ZkAdminManager(cfg, self.node.zk, self.cache, config_manager=self.config_manager,
                                    rng=random.Random(SEED))

        def on_update_metadata(body):
            def apply():
                self.admin.try_complete_delayed_topic_operations(apply_update_metadata(self.cache, body))
            loop.call_soon_threadsafe(apply)
        self.node.fake.on_update_metadata = on_update_metadata
        self.controller = self.admin.controller = self.node.start_controller() if controller else None
        await self.admin.startup()
        self.dynamic_config = DynamicConfigManager(ZkConfigStore(self.node.zk, self.config_manager),
                                                   QuotaManagers.from_config(cfg), DynamicBrokerConfig(cfg, broker_id))
        await self.dynamic_config.startup()
        await asyncio.to_thread(self.config_manager.startup)
        handlers = [CreateTopicsApi(cfg, self.cache, self.admin), DeleteTopicsApi(cfg, self.cache, self.admin),
                    ConfigsApi(broker_id, self.cache, cfg, self.admin, self.dynamic_config),
                    MetadataApi(cfg, self.cache, self.admin)]
        if controller:
            handlers += controller_api_handlers(self.controller, self.cache, self.admin)
        apis = KafkaApis(handlers)
        self.server = SocketServer([EndPoint("PLAINTEXT", "127.0.0.1", 0, SecurityProtocol.PLAINTEXT)], apis.handle,
                                   apis.supported_versions(), max_request_bytes=1 << 20)
        await self.server.start()
        self.client = await AsyncWireClient.connect("127.0.0.1", self.server.bound[0].port)
        return self

    async def join(self, *broker_ids: int, **kwargs) -> None:
        """Start these brokers (without a controller) and wait until this broker's cache has them."""
        for broker_id in broker_ids:
            self.cluster.start(broker_id, with_controller=False, **kwargs.get(f"b{broker_id}", {}))
        await self.wait(lambda: {b.broker_id for b in self.cache.alive_brokers()} >= set(broker_ids),
                        f"brokers {broker_ids} in the metadata cache")

    async def call(self, api_key: int, version: int, body):
        return await self.client.call(api_key, version, body)

    async def wait(self, condition, what: str):
        for _ in range(1000):
            if condition():
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"timed out waiting for {what}")

    async def close(self) -> None:
        self.node.fake.on_update_metadata = None
        await self.client.close()
        await self.server.stop()
        await self.dynamic_config.shutdown()
        await self.admin.shutdown()
        self.config_manager.shutdown()


def run(cluster, scenario):
    """Run `scenario(fronts)` in a loop; the fronts it starts are closed at the end."""
    async def main():
        fronts = []

        async def front(broker_id, **kwargs):
            f = await Front.start(cluster, broker_id, **kwargs)
            fronts.append(f)
            return f
        try:
            return await scenario(front)
        finally:
            for f in fronts:
                await f.close()
    return asyncio.run(main())


def create_request(name: str, partitions: int = -1, rf: int = -1, configs=None, assignments=None,
                   timeout_ms: int = 20000, validate_only: bool = False) -> CreateTopicsRequest:
    T = CreateTopicsRequest.CreatableTopic
    return CreateTopicsRequest(timeout_ms=timeout_ms, validate_only=validate_only, topics=[T(
        name=name, num_partitions=partitions, replication_factor=rf,
        assignments=[CreateTopicsRequest.CreatableReplicaAssignment(partition_index=p, broker_ids=b)
                     for p, b in (assignments or {}).items()],
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])])


# -- CreateTopics -------------------------------------------------------------------------------------


def test_create_topics_writes_the_config_then_the_topic_and_answers_once_leaders_are_known(cluster):
    async def scenario(front):
        f = await front(1)
        await f.join(2, 3)
        got = await f.call(CREATE_TOPICS, 7, create_request("orders", 3, 2, {"retention.ms": "3600000"}))
        [result] = got.topics
        assert (result.error_code, result.num_partitions, result.replication_factor) == (ErrorCode.NONE, 3, 2)
        assert {p: f.cache.partition_state("orders", p).leader for p in range(3)} == \
            {p: r[0] for p, r in expected.items()}                    # the answer came once the leaders were known
        return result

    expected = assign_replicas_to_brokers([BrokerMetadata(i) for i in (1, 2, 3)], 3, 2, rng=random.Random(SEED))
    result = run(cluster, scenario)
    assert cluster.znode("/config/topics/orders") == {"version": 1, "config": {"retention.ms": "3600000"}}
    assert cluster.znode(zd.topic_path("orders")) == {
        "version": 3, "topic_id": zd.uuid_to_string(result.topic_id),
        "partitions": {str(p): r for p, r in expected.items()}, "adding_replicas": {}, "removing_replicas": {}}


def test_create_topics_places_replicas_on_distinct_racks(cluster):
    async def scenario(front):
        f = await front(1, rack="r1")
        await f.join(2, 3, 4, b2={"rack": "r1"}, b3={"rack": "r2"}, b4={"rack": "r2"})
        [result] = (await f.call(CREATE_TOPICS, 7, create_request("racked", 4, 2))).topics
        assert result.error_code == ErrorCode.NONE

    run(cluster, scenario)
    racks = {1: "r1", 2: "r1", 3: "r2", 4: "r2"}
    partitions = cluster.znode(zd.topic_path("racked"))["partitions"]
    expected = assign_replicas_to_brokers([BrokerMetadata(i, racks[i]) for i in (1, 2, 3, 4)], 4, 2,
                                          rng=random.Random(SEED))
    assert partitions == {str(p): r for p, r in expected.items()}
    assert all({racks[b] for b in replicas} == {"r1", "r2"} for replicas in partitions.values())


def test_create_topics_with_an_explicit_assignment_and_the_errors(cluster):
    async def scenario(front):
        f = await front(1)
        other = await front(2, controller=False)
        await f.wait(lambda: len(f.cache.alive_brokers()) == 2, "two brokers")
        [placed] = (await f.call(CREATE_TOPICS, 7, create_request("placed", assignments={0: [2, 1], 1: [1, 2]}))).topics
        assert (placed.error_code, placed.num_partitions, placed.replication_factor) == (ErrorCode.NONE, 2, 2)
        [again] = (await f.call(CREATE_TOPICS, 7, create_request("placed", 1, 1))).topics
        assert again.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        [bad] = (await f.call(CREATE_TOPICS, 7, create_request("bad", 1, 1, {"retention.ms": "x"}))).topics
        assert bad.error_code == ErrorCode.INVALID_CONFIG
        [elsewhere] = (await other.call(CREATE_TOPICS, 7, create_request("elsewhere", 1, 1))).topics
        assert elsewhere.error_code == ErrorCode.NOT_CONTROLLER
        # timeout 0: written, but not waited for (Kafka answers REQUEST_TIMED_OUT)
        [quick] = (await f.call(CREATE_TOPICS, 7, create_request("quick", 1, 1, timeout_ms=0))).topics
        assert (quick.error_code, quick.num_partitions, quick.configs) == (ErrorCode.REQUEST_TIMED_OUT, -1, [])
        # the controller is busy: no leaders within the timeout
        gate = hold(f.controller)
        [slow] = (await f.call(CREATE_TOPICS, 7, create_request("slow", 1, 1, timeout_ms=300))).topics
        gate.set()
        assert slow.error_code == ErrorCode.REQUEST_TIMED_OUT
        [checked] = (await f.call(CREATE_TOPICS, 7, create_request("checked", 1, 1, validate_only=True))).topics
        assert checked.error_code == ErrorCode.NONE

    run(cluster, scenario)
    assert cluster.znode(zd.topic_path("placed"))["partitions"] == {"0": [2, 1], "1": [1, 2]}
    assert cluster.exists(zd.topic_path("quick")) and cluster.exists(zd.topic_path("slow"))
    for absent in ("bad", "elsewhere", "checked"):
        assert not cluster.exists(zd.topic_path(absent)) and not cluster.exists(f"/config/topics/{absent}")


def test_zookeeper_checks_for_a_new_topic(cluster):
    """What only ZooKeeper knows: a topic marked for deletion, a name that collides, a concurrent creation."""
    async def scenario(front):
        f = await front(1, controller=False)
        f.node.zk.create_delete_topic_path("dying")
        f.node.zk.create_topic_assignment("a.b", zd.random_uuid(), {0: [1]})
        for name, code, text in (("dying", ErrorCode.TOPIC_ALREADY_EXISTS, "marked for deletion"),
                                 ("a_b", ErrorCode.INVALID_TOPIC_EXCEPTION, "collides with existing topics: a.b"),
                                 ("a.b", ErrorCode.TOPIC_ALREADY_EXISTS, "already exists")):
            with pytest.raises(KafkaError) as e:
                await f.admin.create_topic(name, assignments={0: [1]})
            assert e.value.error_code == code and text in e.value.message
        with pytest.raises(KafkaError) as e:
            await f.admin.create_topic("t", assignments={0: [1], 2: [1]})
        assert e.value.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT

    run(cluster, scenario)


# -- DeleteTopics and CreatePartitions ---------------------------------------------------------------


def test_delete_topics_marks_the_topic_and_answers_once_the_brokers_forgot_it(cluster):
    async def scenario(front):
        f = await front(1)
        await f.join(2)
        for name in ("doomed", "slow"):
            [created] = (await f.call(CREATE_TOPICS, 7, create_request(name, 2, 2))).topics
            assert created.error_code == ErrorCode.NONE
        got = await f.call(DELETE_TOPICS, 6, DeleteTopicsRequest(timeout_ms=20000, topics=[
            DeleteTopicsRequest.DeleteTopicState(name="doomed"), DeleteTopicsRequest.DeleteTopicState(name="nope")]))
        assert {r.name: r.error_code for r in got.responses} == {
            "doomed": ErrorCode.NONE, "nope": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert f.cache.get("doomed") is None
        gate = hold(f.controller)
        got = await f.call(DELETE_TOPICS, 5, DeleteTopicsRequest(timeout_ms=300, topic_names=["slow"]))
        assert [r.error_code for r in got.responses] == [ErrorCode.REQUEST_TIMED_OUT]
        assert cluster.exists("/admin/delete_topics/slow")
        gate.set()

    run(cluster, scenario)
    wait_until(lambda: not cluster.exists("/admin/delete_topics/doomed"))
    assert not cluster.exists(zd.topic_path("doomed")) and not cluster.exists("/config/topics/doomed")


def test_create_partitions_extends_the_assignment_as_kafka_places_it(cluster):
    async def scenario(front):
        f = await front(1)
        await f.join(2, 3)
        [created] = (await f.call(CREATE_TOPICS, 7, create_request("t", assignments={0: [2, 3], 1: [3, 1]}))).topics
        assert created.error_code == ErrorCode.NONE
        T = CreatePartitionsRequest.CreatePartitionsTopic
        A = CreatePartitionsRequest.CreatePartitionsAssignment

        async def grow(count, assignments=None, timeout_ms=20000):
            got = await f.call(CREATE_PARTITIONS, 3, CreatePartitionsRequest(timeout_ms=timeout_ms, topics=[
                T(name="t", count=count, assignments=None if assignments is None else
                  [A(broker_ids=b) for b in assignments])]))
            return got.results[0].error_code
        assert await grow(4) == ErrorCode.NONE
        assert [f.cache.partition_state("t", p).leader >= 0 for p in range(4)] == [True] * 4
        assert await grow(3) == ErrorCode.INVALID_PARTITIONS
        assert await grow(5, [[1]]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT          # one replica, not two
        assert await grow(5, [[1, 9]]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT       # no broker 9
        assert await grow(6, [[1, 2]]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT       # two partitions, one assignment
        assert await grow(5, [[1, 2]]) == ErrorCode.NONE

    run(cluster, scenario)
    brokers = [BrokerMetadata(i) for i in (1, 2, 3)]
    expected = {0: [2, 3], 1: [3, 1], **assign_new_partitions("t", {0: [2, 3], 1: [3, 1]}, brokers, 4), 4: [1, 2]}
    assert cluster.znode(zd.topic_path("t"))["partitions"] == {str(p): r for p, r in expected.items()}


# -- configs -------------------------------------------------------------------------------------


def test_topic_config_changes_are_written_and_announced_to_every_broker(cluster):
    async def scenario(front):
        f = await front(1)
        other = await front(2, controller=False)
        await f.wait(lambda: len(f.cache.alive_brokers()) == 2, "two brokers")
        [created] = (await f.call(CREATE_TOPICS, 7, create_request("t", 1, 2))).topics
        assert created.error_code == ErrorCode.NONE
        op = IncrementalAlterConfigsRequest.AlterableConfig(name="retention.ms", config_operation=0, value="5000")
        got = await f.call(44, 1, IncrementalAlterConfigsRequest(resources=[
            IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=2, resource_name="t", configs=[op])]))
        assert got.responses[0].error_code == ErrorCode.NONE
        await other.wait(lambda: other.admin.log_config("t").retention_ms == 5000, "the other broker to hear of it")
        described = await other.call(32, 4, DescribeConfigsRequest(resources=[
            DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name="t",
                                                           configuration_keys=["retention.ms"])]))
        [entry] = described.results[0].configs
        assert (entry.name, entry.value, entry.config_source) == ("retention.ms", "5000", 1)   # DYNAMIC_TOPIC_CONFIG
        bad = IncrementalAlterConfigsRequest.AlterableConfig(name="retention.ms", config_operation=0, value="soon")
        got = await f.call(44, 1, IncrementalAlterConfigsRequest(resources=[
            IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=2, resource_name="t", configs=[bad])]))
        assert got.responses[0].error_code == ErrorCode.INVALID_CONFIG

    run(cluster, scenario)
    assert cluster.znode("/config/topics/t") == {"version": 1, "config": {"retention.ms": "5000"}}
    [change] = [c for c in cluster.raw.get_children(cluster.chroot + "/config/changes")]
    assert change.startswith("config_change_") and len(change) == len("config_change_") + 10
    assert cluster.znode(f"/config/changes/{change}") == {"version": 2, "entity_path": "topics/t"}


def test_turning_unclean_election_on_elects_a_leader_for_an_offline_partition(cluster):
    async def scenario(front):
        f = await front(1)
        await f.join(2)
        cluster.create_topic("t", {0: [2, 3]})                     # broker 3 is down: ISR [2]
        await f.wait(lambda: f.cache.partition_state("t", 0), "the topic")
        cluster.start(3, with_controller=False)
        cluster.kill(2)
        await f.wait(lambda: f.cache.partition_state("t", 0).leader == -1, "the partition to go offline")
        op = IncrementalAlterConfigsRequest.AlterableConfig(name="unclean.leader.election.enable",
                                                            config_operation=0, value="true")
        got = await f.call(44, 1, IncrementalAlterConfigsRequest(resources=[
            IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=2, resource_name="t", configs=[op])]))
        assert got.responses[0].error_code == ErrorCode.NONE
        await f.wait(lambda: f.cache.partition_state("t", 0).leader == 3, "an unclean election")

    run(cluster, scenario)
    assert cluster.state("t", 0)["isr"] == [3]


def test_one_config_manager_dispatches_each_notification_to_its_types_handlers_and_purges_old_ones(cluster):
    """Kafka's ZkConfigManager: existing entities to the handlers that ask for them, then each notification
    (version 2 and version 1 JSON) in sequence order to its entity type's handlers, none for an unsubscribed
    type; notifications older than the expiration are deleted."""
    node = cluster.start(1, with_controller=False)
    node.zk.set_or_create_entity_configs("topics", "old", {"cleanup.policy": "compact"})
    node.zk.change_entity_config("clients", "app", {"producer_byte_rate": "1024"})
    seen = []
    manager = ZkConfigManager(node.zk, change_expiration_ms=0)
    manager.subscribe("topics", lambda *change: seen.append(("topics", *change)))
    manager.subscribe("clients", lambda *change: seen.append(("clients", *change)), existing=False)
    manager.startup()
    try:
        assert seen[0] == ("topics", "old", {"cleanup.policy": "compact"})           # reported before listening
        wait_until(lambda: ("clients", "app", {"producer_byte_rate": "1024"}) in seen)   # from its notification
        node.zk.change_entity_config("users", "bob", {"producer_byte_rate": "1"})    # nobody subscribed to users
        node.zk.set_or_create_entity_configs("clients", "v1", {"consumer_byte_rate": "2048"})
        cluster.raw.create(cluster.chroot + "/config/changes/config_change_",
                           b'{"version":1,"entity_type":"clients","entity_name":"v1"}', sequence=True)
        node.zk.change_entity_config("topics", "new", {"retention.ms": "1"})
        wait_until(lambda: ("topics", "new", {"retention.ms": "1"}) in seen)
        assert seen[-2:] == [("clients", "v1", {"consumer_byte_rate": "2048"}), ("topics", "new", {"retention.ms": "1"})]
        assert not [s for s in seen if s[1] == "bob"]
        wait_until(lambda: not cluster.raw.get_children(cluster.chroot + "/config/changes"),
                   what="the expired notifications to be purged")
        with pytest.raises(RuntimeError):
            manager.subscribe("brokers", print)                  # too late: the existing ones were reported
    finally:
        manager.shutdown()


# -- Metadata auto-creation ----------------------------------------------------------------------


def test_metadata_creates_an_unknown_topic_in_zookeeper(cluster):
    async def scenario(front):
        f = await front(1)
        await f.wait(lambda: f.cache.alive_brokers(), "the broker itself")
        ask = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="auto")], allow_auto_topic_creation=True)
        [first] = (await f.call(METADATA, 9, ask)).topics
        assert (first.name, first.error_code) == ("auto", ErrorCode.LEADER_NOT_AVAILABLE)
        await f.wait(lambda: f.cache.partition_state("auto", 0), "the leader")
        [later] = (await f.call(METADATA, 9, ask)).topics
        assert (later.error_code, [p.leader_id for p in later.partitions]) == (ErrorCode.NONE, [1])
        [bad] = (await f.call(METADATA, 9, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            name="bad name")], allow_auto_topic_creation=True))).topics
        assert bad.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION

    run(cluster, scenario)
    assert cluster.znode(zd.topic_path("auto"))["partitions"] == {"0": [1]}


# -- the controller's APIs -------------------------------------------------------------------------


def test_controlled_shutdown_over_the_wire(cluster):
    async def scenario(front):
        f = await front(1)
        other = await front(2, controller=False)
        await f.wait(lambda: len(f.cache.alive_brokers()) == 2, "two brokers")
        [t] = (await f.call(CREATE_TOPICS, 7, create_request("t", assignments={0: [2, 1]}))).topics
        assert t.error_code == ErrorCode.NONE
        stale = await f.call(7, 3, ControlledShutdownRequest(broker_id=2, broker_epoch=other.node.broker_epoch - 1))
        assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
        done = await f.call(7, 3, ControlledShutdownRequest(broker_id=2, broker_epoch=other.node.broker_epoch))
        assert (done.error_code, done.remaining_partitions) == (ErrorCode.NONE, [])
        await f.wait(lambda: f.cache.partition_state("t", 0).leader == 1, "leadership to move")
        v0 = await f.call(7, 0, ControlledShutdownRequest(broker_id=2))
        assert v0.error_code == ErrorCode.NONE
        f.controller.shutdown()                     # no longer the controller
        gone = await f.call(7, 3, ControlledShutdownRequest(broker_id=2, broker_epoch=other.node.broker_epoch))
        assert gone.error_code == ErrorCode.NOT_CONTROLLER

    run(cluster, scenario)


def test_alter_partition_over_the_wire(cluster):
    async def scenario(front):
        f = await front(1)
        two = await front(2, controller=False)
        await f.wait(lambda: len(f.cache.alive_brokers()) == 2, "two brokers")
        [t] = (await f.call(CREATE_TOPICS, 7, create_request("t", assignments={0: [2, 1]}))).topics
        shrink = AlterPartitionRequest(broker_id=2, broker_epoch=two.node.broker_epoch, topics=[
            AlterPartitionRequest.TopicData(topic_id=t.topic_id, partitions=[AlterPartitionRequest.PartitionData(
                partition_index=0, leader_epoch=0, new_isr_with_epochs=[AlterPartitionRequest.BrokerState(
                    broker_id=2, broker_epoch=two.node.broker_epoch)], partition_epoch=0)])])
        got = await f.call(56, 3, shrink)
        [topic] = got.topics
        assert (got.error_code, topic.topic_id) == (ErrorCode.NONE, t.topic_id)
        [p] = topic.partitions
        assert (p.error_code, p.leader_id, p.isr, p.partition_epoch) == (ErrorCode.NONE, 2, [2], 1)
        await f.wait(lambda: f.cache.partition_state("t", 0).isr == (2,), "the brokers to hear of the new ISR")
        f.controller.shutdown()
        assert (await f.call(56, 3, shrink)).error_code == ErrorCode.NOT_CONTROLLER

    run(cluster, scenario)
    assert cluster.state("t", 0)["isr"] == [2]


def test_elect_leaders_over_the_wire_waits_for_the_metadata(cluster):
    async def scenario(front):
        f = await front(1)
        await f.join(2)
        [t] = (await f.call(CREATE_TOPICS, 7, create_request("t", assignments={0: [2, 1], 1: [1, 2]}))).topics
        # broker 2 restarts: broker 1 leads t-0 meanwhile, and lets broker 2 back into the ISR
        cluster.kill(2)
        await f.wait(lambda: f.cache.partition_state("t", 0).leader == 1, "broker 1 to lead")
        cluster.start(2, with_controller=False)
        await f.wait(lambda: 2 in f.cache.brokers, "broker 2 back")
        state, stat = cluster.get(zd.topic_partition_state_path("t", 0))
        epoch = json.loads(state)["leader_epoch"]
        grow = AlterPartitionRequest(broker_id=1, broker_epoch=f.node.broker_epoch, topics=[
            AlterPartitionRequest.TopicData(topic_id=t.topic_id, partitions=[AlterPartitionRequest.PartitionData(
                partition_index=0, leader_epoch=epoch, new_isr=[1, 2], partition_epoch=stat.version)])])
        assert (await f.call(56, 2, grow)).topics[0].partitions[0].error_code == ErrorCode.NONE
        everything = await f.call(43, 2, ElectLeadersRequest(election_type=0, topic_partitions=None, timeout_ms=20000))
        assert [(r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
                for r in everything.replica_election_results] == [("t", [(0, ErrorCode.NONE)])]
        assert f.cache.partition_state("t", 0).leader == 2          # the answer waited for the metadata
        named = await f.call(43, 2, ElectLeadersRequest(election_type=0, timeout_ms=20000, topic_partitions=[
            ElectLeadersRequest.TopicPartitions(topic="t", partitions=[0, 1, 7])]))
        assert [(p.partition_id, p.error_code) for p in named.replica_election_results[0].partition_result] == [
            (0, ErrorCode.ELECTION_NOT_NEEDED), (1, ErrorCode.ELECTION_NOT_NEEDED),
            (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        unknown_type = await f.call(43, 2, ElectLeadersRequest(election_type=5, timeout_ms=100, topic_partitions=[
            ElectLeadersRequest.TopicPartitions(topic="t", partitions=[0])]))
        assert unknown_type.error_code == ErrorCode.INVALID_REQUEST

    run(cluster, scenario)


def test_partition_reassignment_over_the_wire(cluster):
    async def scenario(front):
        f = await front(1)
        await f.join(2, 3)
        [t] = (await f.call(CREATE_TOPICS, 7, create_request("t", assignments={0: [1, 2]}))).topics
        R = AlterPartitionReassignmentsRequest
        got = await f.call(45, 0, R(timeout_ms=1000, topics=[R.ReassignableTopic(name="t", partitions=[
            R.ReassignablePartition(partition_index=0, replicas=[2, 3]),
            R.ReassignablePartition(partition_index=3, replicas=[1])])]))
        assert got.error_code == ErrorCode.NONE
        assert [(p.partition_index, p.error_code) for p in got.responses[0].partitions] == [
            (0, ErrorCode.NONE), (3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        listed = await f.call(46, 0, ListPartitionReassignmentsRequest(timeout_ms=1000, topics=None))
        [(topic, [p])] = [(r.name, r.partitions) for r in listed.topics]
        assert (topic, p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas) == (
            "t", 0, [2, 3, 1], [3], [1])
        cancel = await f.call(45, 0, R(timeout_ms=1000, topics=[R.ReassignableTopic(name="t", partitions=[
            R.ReassignablePartition(partition_index=0, replicas=None)])]))
        assert cancel.responses[0].partitions[0].error_code == ErrorCode.NONE
        listed = await f.call(46, 0, ListPartitionReassignmentsRequest(timeout_ms=1000, topics=[
            ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(name="t", partition_indexes=[0])]))
        assert listed.topics == []

    run(cluster, scenario)
    # the original replicas are back, in the reassignment's order (as in Kafka: the original order is not kept)
    assert cluster.znode(zd.topic_path("t"))["partitions"] == {"0": [2, 1]}
