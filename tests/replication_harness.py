"""Brokers' replication parts in one process, for tests that need two sides of the protocol at once.

Each `Node` has real logs, a MetadataCache, a ReplicaManager with its fetchers,
the handler objects of a cluster member and an AlterPartitionManager. What is
not real is the transport: `LocalLink.send` encodes each request with our
codecs, hands the frame to the other node's KafkaApis, and decodes the framed
answer (file slices spliced in), so both sides run exactly as over TCP, minus
the sockets. A node can be "down" (its link raises DisconnectedError). The
controller is played by `ScriptedController`: it answers AlterPartition by a
policy the test sets and records what it was asked.
"""
from __future__ import annotations

import asyncio
import os

from kafka_compat.storage.log_config import LogConfig
from kafka_compat.storage.log_manager import LogManager
from kafka_compat.storage.unified_log import FetchIsolation

from kafka_compat.network.client import DisconnectedError
from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.frames import decode_response, encode_request, encode_response, parse_request
from kafka_compat.protocol.messages.alter_partition import AlterPartitionResponse
from kafka_compat.protocol.records import build_batch
from kafka_compat.server.alter_partition_manager import AlterPartitionManager
from kafka_compat.server.control_requests import ControlRequestsApi
from kafka_compat.server.fetch import FetchApi
from kafka_compat.server.kafka_apis import KafkaApis
from kafka_compat.server.metadata_cache import BrokerEndpoint, BrokerInfo, MetadataCache, PartitionLeadership
from kafka_compat.server.offsets import OffsetsApi
from kafka_compat.server.produce import ProduceApi
from kafka_compat.server.replica_fetcher import FetcherConfig, ReplicaFetcherManager
from kafka_compat.server.replica_manager import ReplicaManager

TOPIC = "t"
TOPIC_ID = b"\x07" * 16
LISTENER = "PLAINTEXT"


def batch(*values: bytes) -> bytearray:
    return bytearray(build_batch([(b"k", v, [], 1000) for v in values]))


def _materialize(frame: bytearray, holes: list) -> bytes:
    """A response frame with its file slices read in, as the socket would carry it."""
    out = bytearray()
    pos = 0
    for at, records in holes:
        out += frame[pos:at]
        for s in records.slices():
            out += os.pread(s.fd, s.length, s.position)
        pos = at
    out += frame[pos:]
    return bytes(out)


class LocalLink:
    """A client whose requests reach other in-process nodes' handlers through the real codecs."""

    def __init__(self, cluster: "Cluster"):
        self.cluster = cluster
        self.correlation = 0
        self.sent: list[tuple[int, int, object]] = []

    async def send(self, node, api_key: int, api_version: int, body, timeout_ms=None):
        await asyncio.sleep(0)              # a network round trip lets others run
        target = self.cluster.nodes.get(node.node_id)
        if target is None or target.down:
            raise DisconnectedError(f"node {node.node_id} is down")
        self.correlation += 1
        self.sent.append((node.node_id, api_key, body))
        request = parse_request(encode_request(api_key, api_version, body, self.correlation)[4:])
        result = target.apis.handle(request, None)
        if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
            result = await result
        holes: list = []
        frame = _materialize(encode_response(request, result, holes), holes)
        return decode_response(api_key, api_version, memoryview(frame)[4:])[1]

    async def close(self) -> None:
        pass


class ScriptedController:
    """Answers AlterPartition like a ZooKeeper controller would, or with the error the test chooses."""

    def __init__(self):
        self.requests: list = []
        self.partition_error: int = ErrorCode.NONE
        self.top_level_error: int = ErrorCode.NONE
        self.reachable = True
        self.answered = asyncio.Event()

    async def send(self, api_key: int, api_version: int, body, timeout_ms=None):
        await asyncio.sleep(0)
        if not self.reachable:
            raise DisconnectedError("no controller")
        self.requests.append((api_version, body))
        self.answered.set()
        if self.top_level_error:
            return AlterPartitionResponse(error_code=self.top_level_error)
        topics = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                isr = p.new_isr if api_version < 3 else [b.broker_id for b in p.new_isr_with_epochs]
                parts.append(AlterPartitionResponse.PartitionData(
                    partition_index=p.partition_index, error_code=self.partition_error, leader_id=body.broker_id,
                    leader_epoch=p.leader_epoch, isr=isr, partition_epoch=p.partition_epoch + 1))
            topics.append(AlterPartitionResponse.TopicData(topic_name=t.topic_name, topic_id=t.topic_id,
                                                           partitions=parts))
        return AlterPartitionResponse(error_code=ErrorCode.NONE, topics=topics)


class Node:
    def __init__(self, cluster: "Cluster", broker_id: int, directory: str, lag_ms: int, **topic_props):
        self.cluster = cluster
        self.broker_id = broker_id
        self.down = False
        self.epoch = 100 + broker_id
        self.config = LogConfig(topic_props)
        self.logs = LogManager([directory], self.config, topic_config=lambda t: self.config, cleaner_enabled=False)
        self.logs.startup(background=False)
        self.cache = MetadataCache(broker_id, "cluster")
        self.alter = AlterPartitionManager(broker_id, lambda: self.epoch, cluster.controller.send,
                                           retry_backoff_ms=10)
        fetch_config = FetcherConfig(broker_id, max_wait_ms=50, backoff_ms=20, request_timeout_ms=5000)
        self.rm = ReplicaManager(
            broker_id, self.logs, lambda t: self.config, hw_checkpoint_interval_ms=3_600_000,
            metadata_cache=self.cache, alter_partition_manager=self.alter, inter_broker_listener=LISTENER,
            replica_lag_time_max_ms=lag_ms,
            fetcher_manager_factory=lambda rm: ReplicaFetcherManager(rm, lambda: LocalLink(cluster), fetch_config,
                                                                     lambda: self.epoch))
        self.rm.startup()
        self.control = ControlRequestsApi(broker_id, self.rm, self.cache, _NoGroups(), lambda: self.epoch)
        self.apis = KafkaApis([FetchApi(self.rm, self.cache), OffsetsApi(self.rm), ProduceApi(self.rm, self.cache),
                               self.control])

    @property
    def info(self) -> BrokerInfo:
        return BrokerInfo(self.broker_id, (BrokerEndpoint(LISTENER, "node", 9000 + self.broker_id, LISTENER),))

    def partition(self, index: int = 0):
        return self.rm.get_partition(TOPIC, index)

    def produce(self, acks: int, *batches, timeout_ms: int = 30_000, index: int = 0):
        return self.rm.append_records(timeout_ms, acks, [(TOPIC, index, b) for b in batches])

    def data(self, index: int = 0) -> bytes:
        """Every byte of the partition's log, from its start (as the segment files hold them)."""
        p = self.partition(index)
        out, offset = bytearray(), p.log_start_offset
        while offset < p.log_end_offset:
            info = self.rm.read_local(TOPIC, index, offset, 1 << 20, FetchIsolation.LOG_END)
            chunk = info.records.read_bytes()
            if not chunk:
                break
            out += chunk
            offset = self._next_offset(chunk)
        return bytes(out)

    @staticmethod
    def _next_offset(chunk: bytes) -> int:
        from kafka_compat.protocol.records import batches
        return max(b.last_offset for b in batches(chunk)) + 1

    async def close(self) -> None:
        await self.rm.shutdown_fetchers()
        await self.alter.shutdown()
        self.rm.shutdown()
        self.logs.shutdown()


class _NoGroups:
    """These tests host no `__consumer_offsets`: the coordinator is never asked anything."""

    def on_election(self, *a):
        raise AssertionError("no offsets partition here")

    on_resignation = handle_deleted_partitions = on_election


class Cluster:
    """Nodes 0..n-1 on the running loop, and the controller's view of them."""

    def __init__(self, tmp_path, n: int = 2, lag_ms: int = 30_000, **topic_props):
        self.controller = ScriptedController()
        self.nodes: dict[int, Node] = {}
        for i in range(n):
            self.nodes[i] = Node(self, i, str(tmp_path / f"node{i}"), lag_ms, **topic_props)
        self.publish_brokers()

    def __getitem__(self, i: int) -> Node:
        return self.nodes[i]

    def publish_brokers(self, controller_id: int = 100) -> None:
        live = [n.info for n in self.nodes.values() if not n.down]
        for n in self.nodes.values():
            n.cache.update_metadata(controller_id, 1, live, [])
            n.rm.maybe_start_fetchers()

    def lead(self, leader: int, epoch: int, isr, replicas=None, index: int = 0, to=None):
        """A LeaderAndIsr for one partition to each replica (or to the nodes in ``to``)."""
        replicas = tuple(replicas or sorted(self.nodes))
        state = PartitionLeadership(leader, epoch, tuple(isr), replicas, partition_epoch=epoch, controller_epoch=1)
        results = {}
        for i in (to if to is not None else replicas):
            results[i] = self.nodes[i].rm.become_leader_or_follower(100, 1, [(TOPIC, TOPIC_ID, {index: state})])
        return results

    async def close(self) -> None:
        for n in self.nodes.values():
            await n.close()


async def until(predicate, timeout: float = 10.0, what: str = "condition"):
    """Wait (polling the loop) until ``predicate()`` is true; outcome checks, never a timing claim."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)
