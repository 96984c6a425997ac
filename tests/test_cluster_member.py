"""A broker as a member of a ZooKeeper cluster, against a real ZooKeeper; the test plays the controller over the
wire. Registration (Kafka's znode JSON, the cluster id and meta.properties), producer-id blocks from ZooKeeper,
fencing when the session is lost (no acknowledged write as a leader until registered again and told again by
LeaderAndIsr, with the new broker epoch), the same session coming back, and controlled shutdown."""
from __future__ import annotations

import asyncio
import json
import os
import threading
import uuid
from contextlib import asynccontextmanager

import pytest
from kazoo.client import KazooClient
from wire import AsyncWireClient

from kafka_compat.network.socket_server import BrokerStartError
from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.frames import FrameReader, frame_response, parse_request
from kafka_compat.protocol.messages import APIS
from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest
from kafka_compat.protocol.messages.controlled_shutdown import ControlledShutdownResponse
from kafka_compat.protocol.messages.create_topics import CreateTopicsRequest
from kafka_compat.protocol.messages.fetch import FetchRequest
from kafka_compat.protocol.messages.init_producer_id import InitProducerIdRequest
from kafka_compat.protocol.messages.leader_and_isr import LeaderAndIsrRequest
from kafka_compat.protocol.messages.produce import ProduceRequest
from kafka_compat.protocol.messages.update_metadata import UpdateMetadataRequest
from kafka_compat.protocol.records import build_batch
from kafka_compat.security.scram import ScramCredential, credential_from_password, format_credential
from kafka_compat.server.broker import Broker
from kafka_compat.server.kafka_config import BrokerConfig
from kafka_compat.server.zk_controller_service import zk_admin_manager
from kafka_compat.testing import EmbeddedZooKeeper, zookeeper_missing

pytestmark = pytest.mark.skipif(zookeeper_missing() is not None, reason=str(zookeeper_missing()))
TOPIC_ID = b"\x03" * 16


@pytest.fixture(scope="module")
def zk_server():
    with EmbeddedZooKeeper() as zk:
        yield zk


@pytest.fixture
def chroot():
    return f"/kc-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def raw(zk_server, chroot):
    """A plain kazoo client in the test's chroot, to read znodes as Kafka's tools would."""
    zk = KazooClient(zk_server.address)
    zk.start()
    zk.ensure_path(chroot)
    zk.chroot = chroot
    yield zk
    zk.stop()
    zk.close()


# a broker that only follows: the tests play the controller (PlayedController), so it must not stand itself
FOLLOWER = {"controller_factory": None, "admin_manager_factory": None}


def config(tmp_path, zk_server, chroot, broker_id: int = 0, **overrides) -> BrokerConfig:
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / f"broker-{broker_id}"),
             "broker.id": broker_id, "zookeeper.connect": zk_server.connect_string(chroot),
             "zookeeper.session.timeout.ms": 6000, "controlled.shutdown.enable": "false"}
    props.update({k: str(v) for k, v in overrides.items()})
    return BrokerConfig(props)


async def until(predicate, timeout: float = 30.0, what: str = "condition"):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


class PlayedController:
    """The test's controller: UpdateMetadata and LeaderAndIsr to one broker, over its listener."""

    def __init__(self, broker: Broker, controller_id: int = 9, controller_epoch: int = 1):
        self.broker = broker
        self.controller_id = controller_id
        self.controller_epoch = controller_epoch

    async def client(self) -> AsyncWireClient:
        return await AsyncWireClient.connect("127.0.0.1", self.broker.bound[0].port)

    async def update_metadata(self, broker_epoch: int, extra_brokers=(), leader: int | None = None,
                              replicas: list[int] | None = None, leader_epoch: int = 0):
        b = self.broker
        leader = b.broker_id if leader is None else leader
        replicas = replicas or [b.broker_id]
        live = [UpdateMetadataRequest.UpdateMetadataBroker(id=b.broker_id, endpoints=[
            UpdateMetadataRequest.UpdateMetadataEndpoint(listener="PLAINTEXT", host="127.0.0.1",
                                                         port=b.bound[0].port, security_protocol=0)])]
        live += [UpdateMetadataRequest.UpdateMetadataBroker(id=i, endpoints=[
            UpdateMetadataRequest.UpdateMetadataEndpoint(listener="PLAINTEXT", host="127.0.0.1", port=port,
                                                         security_protocol=0)]) for i, port in extra_brokers]
        state = UpdateMetadataRequest.UpdateMetadataPartitionState(
            partition_index=0, controller_epoch=self.controller_epoch, leader=leader, leader_epoch=leader_epoch,
            isr=replicas, zk_version=0, replicas=replicas)
        body = UpdateMetadataRequest(controller_id=self.controller_id, controller_epoch=self.controller_epoch,
                                     broker_epoch=broker_epoch, live_brokers=live, topic_states=[
                                         UpdateMetadataRequest.UpdateMetadataTopicState(
                                             topic_name="t", topic_id=TOPIC_ID, partition_states=[state])])
        c = await self.client()
        try:
            return (await c.call(6, 8, body)).error_code
        finally:
            await c.close()

    async def lead_here(self, broker_epoch: int, leader_epoch: int = 0, leader: int | None = None,
                        replicas: list[int] | None = None):
        b = self.broker
        leader = b.broker_id if leader is None else leader
        replicas = replicas or [b.broker_id]
        body = LeaderAndIsrRequest(controller_id=self.controller_id, controller_epoch=self.controller_epoch,
                                   broker_epoch=broker_epoch, type=1, topic_states=[
                                       LeaderAndIsrRequest.LeaderAndIsrTopicState(
                                           topic_name="t", topic_id=TOPIC_ID, partition_states=[
                                               LeaderAndIsrRequest.LeaderAndIsrPartitionState(
                                                   partition_index=0, controller_epoch=self.controller_epoch,
                                                   leader=leader, leader_epoch=leader_epoch,
                                                   isr=replicas, partition_epoch=leader_epoch,
                                                   replicas=replicas, is_new=True)])])
        c = await self.client()
        try:
            return (await c.call(4, 7, body)).error_code
        finally:
            await c.close()


@asynccontextmanager
async def leading(tmp_path, zk_server, chroot, factories: dict | None = None, **overrides):
    """A started broker the played controller has made leader of t-0: (broker, controller).
    ``factories``: the Broker's controller/admin manager factories (default: none, a follower of the cluster)."""
    b = Broker(config(tmp_path, zk_server, chroot, **overrides), **(factories or FOLLOWER))
    await b.start()
    controller = PlayedController(b)
    try:
        epoch = b.registration.epoch
        assert await controller.update_metadata(epoch) == ErrorCode.NONE
        assert await controller.lead_here(epoch) == ErrorCode.NONE
        yield b, controller
    finally:
        await b.stop()


async def produce(broker: Broker, value: bytes, acks: int = 1) -> int:
    c = await AsyncWireClient.connect("127.0.0.1", broker.bound[0].port)
    try:
        body = ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
            name="t", partition_data=[ProduceRequest.PartitionProduceData(
                index=0, records=build_batch([(None, value, [], 1)]))])])
        return (await c.call(0, 9, body)).responses[0].partition_responses[0].error_code
    finally:
        await c.close()


async def consume_error(broker: Broker) -> int:
    c = await AsyncWireClient.connect("127.0.0.1", broker.bound[0].port)
    try:
        body = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, topics=[FetchRequest.FetchTopic(
            topic="t", topic_id=TOPIC_ID, partitions=[FetchRequest.FetchPartition(
                partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
        return (await c.call(1, 13, body)).responses[0].partitions[0].error_code
    finally:
        await c.close()


def run(coro):
    return asyncio.run(coro)


# ---------------------------------------------------------------- registration
def test_registration_znodes_and_meta_properties(tmp_path, zk_server, chroot, raw):
    async def scenario():
        b = Broker(config(tmp_path, zk_server, chroot, 4, **{"broker.rack": "rack-7"}), **FOLLOWER)
        await b.start()
        try:
            c = await AsyncWireClient.connect("127.0.0.1", b.bound[0].port)
            versions = {k.api_key for k in (await c.call(18, 3, ApiVersionsRequest(
                client_software_name="t", client_software_version="1"))).api_keys}
            await c.close()
            data, stat = raw.get("/brokers/ids/4")
            return json.loads(data), stat.czxid, b.registration.epoch, b.bound[0].port, versions, b.cluster_id
        finally:
            await b.stop()

    znode, czxid, epoch, port, versions, cluster_id = run(scenario())
    assert znode["version"] == 5 and znode["host"] == "127.0.0.1" and znode["port"] == port
    assert znode["endpoints"] == [f"PLAINTEXT://127.0.0.1:{port}"]
    assert znode["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert znode["rack"] == "rack-7" and znode["jmx_port"] == -1 and znode["timestamp"].isdigit()
    assert czxid == epoch                                       # the broker epoch is the czxid (KIP-380)
    assert {4, 5, 6} <= versions                                # a cluster member answers the control requests
    assert json.loads(raw.get("/cluster/id")[0]) == {"version": "1", "id": cluster_id}
    for path in ("/brokers/topics", "/config/changes", "/admin/delete_topics", "/latest_producer_id_block"):
        assert raw.exists(path), path
    meta = (tmp_path / "broker-4" / "meta.properties").read_text()
    assert "broker.id=4" in meta and f"cluster.id={cluster_id}" in meta
    assert not raw.exists("/brokers/ids/4")                     # gone with the session at shutdown


def test_data_of_another_cluster_is_refused(tmp_path, zk_server, chroot):
    data = tmp_path / "broker-0"
    os.makedirs(data)
    (data / "meta.properties").write_text("version=0\nbroker.id=0\ncluster.id=someone-elses-cluster\n")

    async def scenario():
        b = Broker(config(tmp_path, zk_server, chroot), **FOLLOWER)
        with pytest.raises(BrokerStartError, match="wrong cluster"):
            await b.start()

    run(scenario())


def test_producer_id_blocks_come_from_zookeeper(tmp_path, zk_server, chroot, raw):
    async def scenario():
        brokers = [Broker(config(tmp_path, zk_server, chroot, i), **FOLLOWER) for i in (0, 1)]
        for b in brokers:
            await b.start()
        try:
            ids = []
            for b in brokers + brokers:
                c = await AsyncWireClient.connect("127.0.0.1", b.bound[0].port)
                ids.append((await c.call(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000))).producer_id)
                await c.close()
            return ids, json.loads(raw.get("/latest_producer_id_block")[0])
        finally:
            for b in brokers:
                await b.stop()

    ids, block = run(scenario())
    assert ids == [0, 1000, 1, 1001]                          # one block each, never shared
    assert block == {"version": 1, "broker": 1, "block_start": "1000", "block_end": "1999"}


def test_a_broker_built_directly_becomes_controller_and_serves_a_replicated_topic(tmp_path, zk_server, chroot, raw):
    """``Broker(config)`` with zookeeper.connect and nothing else, as an embedder builds it: one of two stands
    for controller, CreateTopics makes a topic of replication factor 2, and an acks=all record is on both."""
    async def scenario():
        brokers = [Broker(config(tmp_path, zk_server, chroot, i)) for i in (0, 1)]
        for b in brokers:
            await b.start()
        try:
            await until(lambda: raw.exists("/controller"), what="a controller")
            controller = json.loads(raw.get("/controller")[0])["brokerid"]
            await until(lambda: len(brokers[controller].metadata_cache.alive_brokers()) == 2,
                        what="the controller to know both brokers")     # else CreateTopics: too few brokers
            c = await AsyncWireClient.connect("127.0.0.1", brokers[controller].bound[0].port)    # as Kafka's
            try:
                created = await c.call(19, 7, CreateTopicsRequest(timeout_ms=30000, topics=[
                    CreateTopicsRequest.CreatableTopic(name="t", num_partitions=1, replication_factor=2)]))
            finally:
                await c.close()
            await until(lambda: all(b.replica_manager.get_partition("t", 0) is not None for b in brokers)
                        and any(b.replica_manager.get_partition("t", 0).is_leader for b in brokers), what="a leader")
            leader = next(b for b in brokers if b.replica_manager.get_partition("t", 0).is_leader)
            error = await produce(leader, b"on both", acks=-1)
            await until(lambda: all(b.replica_manager.get_partition("t", 0).log_end_offset == 1
                                    for b in brokers), what="the record on the follower")
            return controller, created.topics[0].error_code, error
        finally:
            for b in brokers:
                await b.stop()

    controller, created, produced = run(scenario())
    assert controller in (0, 1)
    assert (created, produced) == (ErrorCode.NONE, ErrorCode.NONE)


# ---------------------------------------------------------------- the session
def test_a_lost_session_fences_leadership_until_registered_and_told_again(tmp_path, zk_server, chroot, raw):
    async def scenario():
        async with leading(tmp_path, zk_server, chroot) as (b, controller):
            first = b.registration.epoch
            steps = {"produce as leader": await produce(b, b"before")}
            zk_server.expire_session(b.zk_client.zk.client_id)
            await until(lambda: b.registration.epoch not in (None, first), what="registering again")
            second = b.registration.epoch
            steps["produce after the session went"] = await produce(b, b"while fenced")
            steps["consume after the session went"] = await consume_error(b)
            steps["lead, old broker epoch"] = await controller.lead_here(first)
            steps["produce, still fenced"] = await produce(b, b"still fenced")
            steps["lead, new broker epoch"] = await controller.lead_here(second)
            steps["produce, leader again"] = await produce(b, b"after")
            return first, second, raw.get("/brokers/ids/0")[1].czxid, steps, b.replica_manager.get_partition(
                "t", 0).log_end_offset

    first, second, czxid, steps, leo = run(scenario())
    assert second > first and czxid == second
    assert steps == {"produce as leader": ErrorCode.NONE,
                     "produce after the session went": ErrorCode.NOT_LEADER_OR_FOLLOWER,
                     "consume after the session went": ErrorCode.NOT_LEADER_OR_FOLLOWER,
                     "lead, old broker epoch": ErrorCode.STALE_BROKER_EPOCH,
                     "produce, still fenced": ErrorCode.NOT_LEADER_OR_FOLLOWER,
                     "lead, new broker epoch": ErrorCode.NONE,      # the same leader epoch, re-sent by the controller
                     "produce, leader again": ErrorCode.NONE}
    assert leo == 2                                              # nothing was written while fenced


def test_a_connection_that_comes_back_in_the_same_session_restores_leadership(tmp_path, zk_server, chroot):
    """A dropped connection leaves the broker leading while the session cannot have expired at the server
    (a third of its timeout), fences it after that, and the same session coming back restores it."""
    async def scenario():
        async with leading(tmp_path, zk_server, chroot, **{"zookeeper.session.timeout.ms": 3000}) as (b, _):
            epoch = b.registration.epoch
            steps = {}
            for _ in range(2):
                b.registration._on_state_in_loop("SUSPENDED")   # as kazoo reports a dropped connection
                steps["at once"] = await produce(b, b"x")
                if not steps.get("fenced"):
                    await until(lambda: b.registration.suspended, what="the grace to end")
                    steps["fenced"] = await produce(b, b"y")
                b.registration._on_state_in_loop("CONNECTED")   # the same session: nobody replaced us
                steps["back"] = await produce(b, b"z")
            return steps, b.registration.epoch == epoch, b.replica_manager.get_partition("t", 0).log_end_offset

    steps, same_epoch, leo = run(scenario())
    assert steps == {"at once": ErrorCode.NONE, "fenced": ErrorCode.NOT_LEADER_OR_FOLLOWER, "back": ErrorCode.NONE}
    assert same_epoch and leo == 4                               # x, z, x, z: nothing while fenced


# ---------------------------------------------------------------- controlled shutdown
class ShutdownController:
    """A controller that answers ControlledShutdown: first with a partition still to move, then with none."""

    def __init__(self):
        self.requests = []

    async def serve(self, reader, writer):
        frames = FrameReader()
        while data := await reader.read(65536):
            frames.feed(data)
            for frame in frames.frames():
                request = parse_request(frame)
                self.requests.append((request.api_version, request.body))
                remaining = [ControlledShutdownResponse.RemainingPartition(topic_name="t", partition_index=0)] \
                    if len(self.requests) == 1 else []
                writer.write(bytes(frame_response(APIS[7], request.api_version, request.correlation_id,
                                                  ControlledShutdownResponse(error_code=0,
                                                                             remaining_partitions=remaining))))
                await writer.drain()
        writer.close()


async def shutting_down_broker(tmp_path, zk_server, chroot):
    """A started broker with controlled shutdown on, and the ShutdownController it will ask (and its server)."""
    fake = ShutdownController()
    server = await asyncio.start_server(fake.serve, "127.0.0.1", 0)
    b = Broker(config(tmp_path, zk_server, chroot, **{"controlled.shutdown.enable": "true",
                                                      "controlled.shutdown.retry.backoff.ms": 50}), **FOLLOWER)
    await b.start()
    return fake, server, b


def test_controlled_shutdown_asks_the_controller_until_nothing_is_left(tmp_path, zk_server, chroot):
    async def scenario():
        fake, server, b = await shutting_down_broker(tmp_path, zk_server, chroot)
        epoch = b.registration.epoch
        await PlayedController(b, controller_id=9).update_metadata(
            epoch, extra_brokers=[(9, server.sockets[0].getsockname()[1])])
        await b.stop()
        server.close()
        return [(v, r.broker_id, r.broker_epoch) for v, r in fake.requests], epoch

    requests, epoch = run(scenario())
    assert requests == [(3, 0, epoch), (3, 0, epoch)]


def test_controlled_shutdown_serves_until_the_leadership_has_moved(tmp_path, zk_server, chroot):
    """Once the controller says nothing is left to move, the broker still answers until the LeaderAndIsr and
    UpdateMetadata moving its replicated partition are here: an acks=all produce waiting on it hears
    NOT_LEADER_OR_FOLLOWER (and the client refreshes its metadata) instead of finding the connection closed.
    Made a follower meanwhile, it does not fetch from the new leader: caught up, it would be proposed for the
    ISR and hold the new leader's high watermark until the controller refused it."""
    async def scenario():
        fake, server, b = await shutting_down_broker(tmp_path, zk_server, chroot)
        epoch = b.registration.epoch
        played = PlayedController(b, controller_id=9)
        other = [(9, server.sockets[0].getsockname()[1])]
        await played.update_metadata(epoch, extra_brokers=other, replicas=[0, 9])
        await played.lead_here(epoch, replicas=[0, 9])
        stopping = asyncio.create_task(b.stop())
        await until(lambda: len(fake.requests) >= 2, what="the controller to say nothing is left")
        as_leader = await produce(b, b"x")                 # the move has not arrived: still the leader
        # acks=all waits for replica 9, which never fetches, until the move makes this broker a follower
        waiting = asyncio.create_task(produce(b, b"y", acks=-1))
        partition = b.replica_manager.get_partition("t", 0)
        await until(lambda: partition.log_end_offset == 2, what="the acks=all record to be appended")
        await played.lead_here(epoch, leader_epoch=1, leader=9, replicas=[0, 9])
        fetchers = dict(b.replica_manager.fetcher_manager.fetchers)     # the leader's address is known
        moved = await asyncio.wait_for(waiting, 30)
        try:            # if the LeaderAndIsr already moved it in the broker's metadata, it may be gone
            await played.update_metadata(epoch, extra_brokers=other, leader=9, replicas=[0, 9])
        except OSError:
            pass
        await asyncio.wait_for(stopping, 30)
        server.close()
        return as_leader, moved, fetchers

    assert run(scenario()) == (ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER, {})


def test_not_leader_answers_name_the_new_leader_and_its_address(tmp_path, zk_server, chroot):
    """KIP-951: from Produce v10 a NOT_LEADER_OR_FOLLOWER answer carries the leader this broker knows
    (CurrentLeader) and its address on the request's listener (NodeEndpoints), so a client moves to it
    without a metadata round trip, which is what lets a controlled shutdown hand over without a pause."""
    async def scenario():
        async with leading(tmp_path, zk_server, chroot) as (b, played):
            epoch = b.registration.epoch
            other = [(9, 19092)]
            await played.update_metadata(epoch, extra_brokers=other, leader=9, replicas=[0, 9])
            assert await played.lead_here(epoch, leader_epoch=3, leader=9, replicas=[0, 9]) == ErrorCode.NONE
            return {v: await produce_response(b, b"x", v) for v in (9, 10, 13)}

    answers = run(scenario())
    for v in (10, 13):
        part = answers[v].responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (9, 3)
        assert [(n.node_id, n.host, n.port) for n in answers[v].node_endpoints] == [(9, "127.0.0.1", 19092)]
    old = answers[9].responses[0].partition_responses[0]
    assert old.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and old.current_leader.leader_id == -1
    assert answers[9].node_endpoints == []


def test_fetch_answers_name_the_current_leader_and_its_address(tmp_path, zk_server, chroot):
    """KIP-951 for Fetch v16+: FENCED_LEADER_EPOCH and NOT_LEADER_OR_FOLLOWER answers carry CurrentLeader (the
    local replica's view first, then the metadata cache) and the leader's address in NodeEndpoints, whether
    the fetch is answered at once, after waiting in the purgatory while the leadership moved, or in an
    incremental fetch session (which always carries a partition with an error)."""
    async def scenario():
        async with leading(tmp_path, zk_server, chroot) as (b, played):
            epoch, port = b.registration.epoch, b.bound[0].port
            await played.update_metadata(epoch, extra_brokers=[(9, 19092)], replicas=[0, 9], leader_epoch=3)
            assert await played.lead_here(epoch, leader_epoch=3, replicas=[0, 9]) == ErrorCode.NONE
            c = await AsyncWireClient.connect("127.0.0.1", port)
            try:
                stale = {v: await c.call(1, v, fetch_body(current_leader_epoch=1)) for v in (15, 16)}
                opened = await c.call(1, 16, fetch_body(replica_id=9, session_epoch=0))    # a follower's session
                waiting = asyncio.create_task(c.call(1, 16, fetch_body(current_leader_epoch=3, wait_ms=30000)))
                await until(lambda: b.replica_manager.fetch_purgatory.delayed() == 1, what="the fetch to wait")
                assert await played.lead_here(epoch, leader_epoch=4, leader=9, replicas=[0, 9]) == ErrorCode.NONE
                delayed = await asyncio.wait_for(waiting, 30)
                incremental = await c.call(1, 16, FetchRequest(
                    replica_state=FetchRequest.ReplicaState(replica_id=9), max_wait_ms=0, min_bytes=0,
                    session_id=opened.session_id, session_epoch=1))
            finally:
                await c.close()
            return port, stale, opened, delayed, incremental

    def answer(response):
        part = response.responses[0].partitions[0]
        return (part.error_code, part.current_leader.leader_id, part.current_leader.leader_epoch,
                [(n.node_id, n.host, n.port) for n in response.node_endpoints])

    port, stale, opened, delayed, incremental = run(scenario())
    assert answer(stale[16]) == (ErrorCode.FENCED_LEADER_EPOCH, 0, 3, [(0, "127.0.0.1", port)])
    assert answer(stale[15]) == (ErrorCode.FENCED_LEADER_EPOCH, -1, -1, [])         # before v16: neither
    assert opened.session_id != 0 and answer(opened)[0] == ErrorCode.NONE
    # the cache still says broker 0 at epoch 3: the replica's own LeaderAndIsr view comes first
    assert answer(delayed) == (ErrorCode.FENCED_LEADER_EPOCH, 9, 4, [(9, "127.0.0.1", 19092)])
    assert answer(incremental) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, 9, 4, [(9, "127.0.0.1", 19092)])


def fetch_body(current_leader_epoch: int = -1, wait_ms: int = 0, replica_id: int = -1,
               session_epoch: int = -1) -> FetchRequest:
    """A Fetch v15+ of t-0 from offset 0 (by a follower when ``replica_id`` >= 0); ``wait_ms`` for 1 byte."""
    return FetchRequest(replica_state=FetchRequest.ReplicaState(replica_id=replica_id), max_wait_ms=wait_ms,
                        min_bytes=1 if wait_ms else 0, session_epoch=session_epoch,
                        topics=[FetchRequest.FetchTopic(topic="t", topic_id=TOPIC_ID, partitions=[
                            FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                                                        current_leader_epoch=current_leader_epoch)])])


async def produce_response(broker: Broker, value: bytes, version: int):
    c = await AsyncWireClient.connect("127.0.0.1", broker.bound[0].port)
    try:
        data = ProduceRequest.TopicProduceData(name="t", topic_id=TOPIC_ID, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=build_batch([(None, value, [], 1)]))])
        return await c.call(0, version, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[data]))
    finally:
        await c.close()


# ---------------------------------------------------------------- topic configs
@pytest.mark.parametrize("subscribers", ["topic configs alone", "with the admin manager"])
def test_topic_overrides_are_read_before_the_log_is_made_and_followed_after(tmp_path, zk_server, chroot, raw,
                                                                           subscribers):
    """Whoever else subscribes to topic changes on the broker's config change listener (the ZooKeeper admin
    manager keeps every topic's overrides), the change reaches the log."""
    raw.create("/config/topics/t", b'{"version":1,"config":{"min.insync.replicas":"2"}}', makepath=True)
    factories = None
    if subscribers == "with the admin manager":
        factories = {**FOLLOWER, "admin_manager_factory": zk_admin_manager}

    async def scenario():
        async with leading(tmp_path, zk_server, chroot, factories) as (b, _):
            partition = b.replica_manager.get_partition("t", 0)
            at_creation = partition.min_insync_replicas
            # as Kafka's admin tools change a topic config: the overrides, then a change notification
            raw.set("/config/topics/t", b'{"version":1,"config":{"min.insync.replicas":"3"}}')
            raw.create("/config/changes/config_change_", b'{"version":2,"entity_path":"topics/t"}', sequence=True)
            await until(lambda: partition.min_insync_replicas == 3, what="the change to reach the log")
            return at_creation

    assert run(scenario()) == 2


def test_one_config_change_listener_applies_topic_overrides_client_quotas_and_scram_users_also_after_a_restart(
        tmp_path, zk_server, chroot, raw):
    """One /config/changes listener per broker, as Kafka's ZkConfigManager: the notifications of a topic
    override, of a client quota and of a SCRAM user, written to ZooKeeper as Kafka's tools write them, are
    all applied by the running broker (one with a SCRAM listener); changed while it is down, a restarted
    broker applies them all."""
    factories = {**FOLLOWER, "admin_manager_factory": zk_admin_manager}
    scram = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
             "sasl.enabled.mechanisms": "SCRAM-SHA-256"}

    def change(entity_path: str, configs: dict) -> None:
        path = f"/config/{entity_path}"
        data = json.dumps({"version": 1, "config": configs}).encode()
        if raw.exists(path):
            raw.set(path, data)
        else:
            raw.create(path, data, makepath=True)
        raw.create("/config/changes/config_change_", json.dumps({"version": 2, "entity_path": entity_path}).encode(),
                   sequence=True, makepath=True)

    def change_all(min_isr: int, rate: int, password: str) -> ScramCredential:
        change("topics/t", {"min.insync.replicas": str(min_isr)})
        change("clients/app", {"producer_byte_rate": str(rate)})
        cred = credential_from_password("SCRAM-SHA-256", password, 4096)
        change("users/alice", {"SCRAM-SHA-256": format_credential(cred)})
        return cred

    def listeners() -> set:     # the ACL changes have their own path and listener, as in Kafka
        return {(t.ident, t.name) for t in threading.enumerate()
                if t.name.endswith("change-listener") and t.name != "acl-change-listener"}

    async def applied(min_isr: int, rate: int, cred: ScramCredential) -> None:
        before = listeners()
        async with leading(tmp_path, zk_server, chroot, factories, **scram) as (b, _):
            # quotas, topic configs, the admin manager and the SCRAM credentials share it
            assert [name for _, name in listeners() - before] == ["config-change-listener"]
            partition = b.replica_manager.get_partition("t", 0)
            credentials = b.security_stores.credentials

            def now():
                return (partition.min_insync_replicas, b.quotas.produce.quota("ANONYMOUS", "app"),
                        credentials.lookup("SCRAM-SHA-256", "alice"))
            await until(lambda: now() == (min_isr, rate, cred), what="the overrides to be applied")
            if min_isr == 2:                                   # running: the changes arrive as notifications
                changed = change_all(3, 2048, "pw-running")
                await until(lambda: now() == (3, 2048, changed), what="the notified changes to be applied")

    run(applied(2, 1024, change_all(2, 1024, "pw-first")))
    run(applied(1, 4096, change_all(1, 4096, "pw-while-down")))        # changed while the broker is down
