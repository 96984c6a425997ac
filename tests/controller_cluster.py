"""Test cluster for the ZooKeeper-mode controller: real ZooKeeper sessions, real sockets, fake brokers.

A `Node` is one broker as the controller sees it: a ZooKeeper session holding /brokers/ids/<id>, a
`FakeBroker` socket server that decodes what controllers send it (our generated codecs) and answers
as a broker would, and the node's own KafkaController. The controllers talk to the fake brokers
through `wire_send`, a tiny blocking wire client standing in for the broker's network client.
"""
from __future__ import annotations

import concurrent.futures
import json
import socket
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from kazoo.client import KazooClient
from wire import decode_response, encode_request

from kafka_compat.controller.controller_event_manager import ControllerEvent
from kafka_compat.controller.kafka_controller import KafkaController
from kafka_compat.endpoint import EndPoint, SecurityProtocol
from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.frames import encode_response, parse_request
from kafka_compat.protocol.messages.leader_and_isr import LeaderAndIsrResponse
from kafka_compat.protocol.messages.stop_replica import StopReplicaResponse
from kafka_compat.protocol.messages.update_metadata import UpdateMetadataResponse
from kafka_compat.server.kafka_config import BrokerConfig
from kafka_compat.testing import EmbeddedZooKeeper
from kafka_compat.zk import zk_data as zd
from kafka_compat.zk.kafka_zk_client import KafkaZkClient

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA = 4, 5, 6
WAIT = 20.0


def wait_until(condition, timeout: float = WAIT, what: str = "condition"):
    """Poll `condition` until it returns something truthy; that value, or AssertionError at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def hold(controller: KafkaController) -> threading.Event:
    """Hold the controller's event thread (behind what is queued now) until the returned event is set."""
    gate = threading.Event()
    controller._events.put(ControllerEvent("test-gate", gate.wait))
    return gate


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def wire_send(broker: zd.BrokerInfo, api_key: int, api_version: int, body) -> concurrent.futures.Future:
    """The controller's `send`: one connection per request to the broker's PLAINTEXT listener."""
    future: concurrent.futures.Future = concurrent.futures.Future()
    endpoint = broker.endpoint("PLAINTEXT")
    try:
        with socket.create_connection((endpoint.host, endpoint.port), timeout=5) as sock:
            sock.sendall(encode_request(api_key, api_version, body, correlation_id=7, client_id="controller"))
            head = _read_exact(sock, 4)
            frame = None if head is None else _read_exact(sock, struct.unpack(">i", head)[0])
            if frame is None:
                raise ConnectionError(f"broker {broker.id} closed the connection")
            future.set_result(decode_response(api_key, api_version, frame)[1])
    except Exception as e:
        future.set_exception(e)
    return future


@dataclass
class Received:
    api_key: int
    api_version: int
    body: Any


class FakeBroker:
    """A socket server that records every control request and answers it with success, unless
    `stop_replica_error` (partition error for StopReplica with delete) is set."""

    def __init__(self, broker_id: int):
        self.broker_id = broker_id
        self.received: list[Received] = []
        self.lock = threading.Lock()
        self.stop_replica_error = ErrorCode.NONE
        self.offline_partitions: set[tuple[str, int]] = set()   # LeaderAndIsr answers KAFKA_STORAGE_ERROR for these
        self.on_update_metadata = None          # called with each UpdateMetadata body, on a server thread
        self.drop_next = 0                      # how many requests to take and leave unanswered (connection closed)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name=f"fake-broker-{broker_id}").start()

    def close(self) -> None:
        self._closed = True
        self._server.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while not self._closed:
                head = _read_exact(conn, 4)
                if head is None:
                    return
                frame = _read_exact(conn, struct.unpack(">i", head)[0])
                request = parse_request(bytearray(frame))
                with self.lock:
                    self.received.append(Received(request.api_key, request.api_version, request.body))
                    if self.drop_next > 0:
                        self.drop_next -= 1
                        return
                if request.api_key == UPDATE_METADATA and self.on_update_metadata is not None:
                    self.on_update_metadata(request.body)
                if self._closed:
                    return
                conn.sendall(encode_response(request, self._answer(request.api_key, request.body)))

    def _answer(self, api_key: int, body):
        if api_key == LEADER_AND_ISR:
            return LeaderAndIsrResponse(error_code=0, topics=[LeaderAndIsrResponse.LeaderAndIsrTopicError(
                topic_id=t.topic_id, partition_errors=[LeaderAndIsrResponse.LeaderAndIsrPartitionError(
                    partition_index=p.partition_index,
                    error_code=ErrorCode.KAFKA_STORAGE_ERROR if (t.topic_name, p.partition_index)
                    in self.offline_partitions else 0) for p in t.partition_states])
                for t in body.topic_states])
        if api_key == UPDATE_METADATA:
            return UpdateMetadataResponse(error_code=0)
        if api_key == STOP_REPLICA:
            return StopReplicaResponse(error_code=0, partition_errors=[StopReplicaResponse.StopReplicaPartitionError(
                topic_name=t.topic_name, partition_index=p.partition_index,
                error_code=self.stop_replica_error if p.delete_partition else 0)
                for t in body.topic_states for p in t.partition_states])
        raise AssertionError(f"a fake broker got API {api_key}")

    # -- what it was told ------------------------------------------------------------------------

    def requests(self, api_key: int | None = None, controller_epoch: int | None = None) -> list[Received]:
        with self.lock:
            got = list(self.received)
        return [r for r in got if (api_key is None or r.api_key == api_key)
                and (controller_epoch is None or r.body.controller_epoch == controller_epoch)]

    def leader_and_isr_states(self, topic: str, partition: int) -> list:
        """Every LeaderAndIsr partition state received for the partition, oldest first."""
        return [p for r in self.requests(LEADER_AND_ISR) for t in r.body.topic_states if t.topic_name == topic
                for p in t.partition_states if p.partition_index == partition]

    def metadata_states(self, topic: str, partition: int) -> list:
        return [p for r in self.requests(UPDATE_METADATA) for t in r.body.topic_states if t.topic_name == topic
                for p in t.partition_states if p.partition_index == partition]

    def stop_replicas(self, topic: str, partition: int) -> list:
        return [p for r in self.requests(STOP_REPLICA) for t in r.body.topic_states if t.topic_name == topic
                for p in t.partition_states if p.partition_index == partition]


def broker_config(broker_id: int, **overrides) -> BrokerConfig:
    props = {"broker.id": broker_id, "auto.leader.rebalance.enable": False, "controller.socket.timeout.ms": 5000}
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    return BrokerConfig(props)


@dataclass
class Node:
    """One broker of the test cluster (see the module docstring)."""

    broker_id: int
    connect: str
    rack: str | None = None
    config: dict = field(default_factory=dict)
    first_rebalance_delay_s: float = 5.0
    zk: KafkaZkClient | None = None
    fake: FakeBroker | None = None
    controller: KafkaController | None = None
    broker_epoch: int = -1
    info: zd.BrokerInfo | None = None

    def start(self, with_controller: bool = True) -> "Node":
        self.fake = FakeBroker(self.broker_id)
        self.zk = KafkaZkClient(self.connect, 6000).start()
        self.zk.create_top_level_paths()
        self.info = zd.BrokerInfo(self.broker_id, [EndPoint("PLAINTEXT", "127.0.0.1", self.fake.port,
                                                            SecurityProtocol.PLAINTEXT)], rack=self.rack)
        self.broker_epoch = self.zk.register_broker(self.info)
        if with_controller:
            self.start_controller()
        return self

    def config_object(self) -> BrokerConfig:
        return broker_config(self.broker_id, **self.config)

    def register(self) -> int:
        """Register again (after a session expiry): a new broker epoch."""
        self.broker_epoch = self.zk.register_broker(self.info)
        return self.broker_epoch

    def start_controller(self) -> KafkaController:
        self.controller = KafkaController(self.config_object(), self.zk, wire_send, register_broker=self.register,
                                          retry_backoff_ms=50, auto_rebalance_first_delay_s=self.first_rebalance_delay_s)
        self.controller.startup()
        return self.controller

    def kill(self) -> None:
        """The broker dies: its controller stops, its session ends (its ephemeral znodes go), its socket closes."""
        if self.controller is not None:
            self.controller.shutdown()
        if self.zk is not None:
            self.zk.close()
        if self.fake is not None:
            self.fake.close()


@pytest.fixture(scope="module", name="server")
def server_fixture():
    with EmbeddedZooKeeper() as zk:
        yield zk


@pytest.fixture(scope="module", name="raw")
def raw_fixture(server):
    zk = KazooClient(server.address)
    zk.start()
    yield zk
    zk.stop()
    zk.close()


class Cluster:
    """The nodes of one test, in one chroot; `znode(path)` reads JSON as Kafka's tools would."""

    def __init__(self, server, raw):
        self.chroot = f"/kafka-{uuid.uuid4().hex[:10]}"
        self.connect = server.connect_string(self.chroot)
        self.raw = raw
        self.nodes: dict[int, Node] = {}

    def start(self, broker_id: int, with_controller: bool = True, **kwargs) -> Node:
        config = kwargs.pop("config", {})
        node = Node(broker_id, self.connect, config=config, **kwargs)
        self.nodes[broker_id] = node
        return node.start(with_controller)

    def controlled_by(self, controller_id: int, *others: int, **kwargs):
        """The controller's broker first (it wins the election), then brokers without a controller."""
        self.start(controller_id, **kwargs)
        controller = self.active().controller
        for broker_id in others:
            self.start(broker_id, with_controller=False)
        return controller

    def kill(self, broker_id: int) -> None:
        self.nodes.pop(broker_id).kill()

    def close(self) -> None:
        for node in list(self.nodes.values()):
            node.kill()

    def get(self, path: str):
        return self.raw.get(self.chroot + path)

    def znode(self, path: str):
        data, _ = self.get(path)
        return json.loads(data)

    def exists(self, path: str) -> bool:
        return self.raw.exists(self.chroot + path) is not None

    def state(self, topic: str, partition: int) -> dict:
        return self.znode(zd.topic_partition_state_path(topic, partition))

    def active(self) -> Node:
        return wait_until(lambda: next((n for n in self.nodes.values() if n.controller and n.controller.is_active),
                                       None), what="an active controller")

    def create_topic(self, topic: str, assignment: dict[int, list[int]]) -> bytes:
        """What ZkAdminManager writes: the config znode, then the topic znode (the controller takes it from there)."""
        any_zk = next(iter(self.nodes.values())).zk
        any_zk.set_or_create_entity_configs("topics", topic, {})
        topic_id = zd.random_uuid()
        any_zk.create_topic_assignment(topic, topic_id, assignment)
        return topic_id

    def wait_state(self, topic: str, partition: int, **expected) -> dict:
        def matches():
            if not self.exists(zd.topic_partition_state_path(topic, partition)):
                return None
            state = self.state(topic, partition)
            return state if all(state.get(k) == v for k, v in expected.items()) else None
        return wait_until(matches, what=f"{topic}-{partition} state {expected}")


@pytest.fixture(name="cluster")
def cluster_fixture(server, raw):
    c = Cluster(server, raw)
    yield c
    c.close()
