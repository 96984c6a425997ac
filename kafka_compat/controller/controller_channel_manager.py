"""How the controller's decisions reach the brokers: Kafka's ControllerChannelManager and
ControllerBrokerRequestBatch.

Every live broker gets its own queue and sender thread, so a slow or dead broker delays no other:
the thread sends one request at a time, and retries it (after `retry_backoff_ms`) until the broker
answers or the controller removes the broker (it died). The requests go out through the injected
`send(broker, api_key, api_version, body) -> concurrent.futures.Future[response body]` of the
broker's network client; this module does no I/O itself.

A controller event collects its LeaderAndIsr, UpdateMetadata and StopReplica requests in a batch and
sends them together at its end, per broker in that order: a broker learns the new leaders before the
metadata that clients will read, and stops replicas last. The versions are those a Kafka 3.4+ ZooKeeper
controller sends: LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4.
"""
from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from ..endpoint import SecurityProtocol
from ..leader_and_isr import LeaderIsrAndControllerEpoch
from ..protocol.messages.leader_and_isr import LeaderAndIsrRequest
from ..protocol.messages.stop_replica import StopReplicaRequest
from ..protocol.messages.update_metadata import UpdateMetadataRequest
from ..protocol.primitives import ZERO_UUID
from ..sentinels import LEADER_DURING_DELETE
from ..zk.zk_data import BrokerInfo, ReplicaAssignment, TopicPartition
from .controller_context import ControllerContext

log = logging.getLogger(__name__)

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA = 4, 5, 6
LEADER_AND_ISR_VERSION = 7
UPDATE_METADATA_VERSION = 8
STOP_REPLICA_VERSION = 4

SendFn = Callable[[BrokerInfo, int, int, Any], "concurrent.futures.Future[Any]"]


class _QueueItem(NamedTuple):
    api_key: int
    api_version: int
    body: Any
    callback: Callable[[Any], None] | None


class _RequestSendThread:
    """One broker's sender: one request in flight, retried until answered or stopped."""

    def __init__(self, controller_id: int, broker: BrokerInfo, send: SendFn, request_timeout_ms: int,
                 retry_backoff_ms: int):
        self.broker = broker
        self.queue: queue.Queue[_QueueItem | None] = queue.Queue()
        self._send = send
        self._timeout = request_timeout_ms / 1000
        self._backoff = retry_backoff_ms / 1000
        self._stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name=f"controller-{controller_id}-to-broker-{broker.id}-send-thread")

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self.queue.put(None)

    def _run(self) -> None:
        while not self._stopped.is_set():
            item = self.queue.get()
            if item is None:
                return
            try:
                response = self._send_until_answered(item)
                if response is not None and item.callback is not None and not self._stopped.is_set():
                    try:
                        item.callback(response)
                    except Exception:
                        log.exception("controller: handling the response of broker %d failed", self.broker.id)
            finally:
                self.queue.task_done()

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing in flight."""
        return self.queue.unfinished_tasks == 0

    def _send_until_answered(self, item: _QueueItem) -> Any:
        while not self._stopped.is_set():
            future = None
            try:
                started = time.monotonic()
                log.debug("controller: sending API %d to broker %d (%d queued behind)", item.api_key, self.broker.id,
                          self.queue.qsize())
                future = self._send(self.broker, item.api_key, item.api_version, item.body)
                response = future.result(timeout=self._timeout)
                log.debug("controller: broker %d answered API %d in %.3f s", self.broker.id, item.api_key,
                          time.monotonic() - started)
                return response
            except Exception as e:
                if future is not None:
                    future.cancel()
                log.warning("controller: sending API %d to broker %d failed (%s); retrying",
                            item.api_key, self.broker.id, e or type(e).__name__)
                self._stopped.wait(self._backoff)
        return None


class ControllerChannelManager:
    def __init__(self, controller_id: int, send: SendFn, *, request_timeout_ms: int = 30000,
                 retry_backoff_ms: int = 100):
        self.controller_id = controller_id
        self._send = send
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._brokers: dict[int, _RequestSendThread] = {}
        self._lock = threading.Lock()

    def startup(self, brokers: Iterable[BrokerInfo]) -> None:
        for broker in brokers:
            self.add_broker(broker)

    def shutdown(self) -> None:
        with self._lock:
            senders, self._brokers = list(self._brokers.values()), {}
        for sender in senders:
            sender.stop()

    def idle(self) -> bool:
        """Every queued request answered: a controller shutting down its own broker waits for this, so that
        the UpdateMetadata naming the new leaders reaches every broker before it resigns."""
        return not self.busy_brokers()

    def busy_brokers(self) -> list[int]:
        """The brokers with a request queued or not yet answered."""
        with self._lock:
            senders = list(self._brokers.items())
        return [broker_id for broker_id, sender in senders if not sender.idle]

    def add_broker(self, broker: BrokerInfo) -> None:
        with self._lock:
            if broker.id in self._brokers:
                return
            sender = self._brokers[broker.id] = _RequestSendThread(
                self.controller_id, broker, self._send, self._request_timeout_ms, self._retry_backoff_ms)
        sender.start()

    def remove_broker(self, broker_id: int) -> None:
        """Stop sending to a dead broker; what it had queued is dropped."""
        with self._lock:
            sender = self._brokers.pop(broker_id, None)
        if sender is not None:
            sender.stop()

    def send_request(self, broker_id: int, api_key: int, api_version: int, body: Any,
                     callback: Callable[[Any], None] | None = None) -> None:
        """Queue a request for a broker; `callback(response)` runs on the broker's sender thread."""
        with self._lock:
            sender = self._brokers.get(broker_id)
        if sender is None:
            log.warning("controller: no channel to broker %d; dropping API %d", broker_id, api_key)
            return
        sender.queue.put(_QueueItem(api_key, api_version, body, callback))


class ControllerBrokerRequestBatch:
    """The control requests one controller event produces, sent together by send_requests_to_brokers.

    `on_leader_and_isr_response(broker_id, response)` and
    `on_stop_replica_deletion_response(broker_id, error_code, {tp: error_code})` run on a sender
    thread: they must only hand the response over to the controller's event queue."""

    def __init__(self, context: ControllerContext, channel: ControllerChannelManager, controller_id: int,
                 inter_broker_listener_name: str,
                 on_leader_and_isr_response: Callable[[int, Any], None],
                 on_stop_replica_deletion_response: Callable[[int, int, dict[TopicPartition, int]], None]):
        self.context = context
        self.channel = channel
        self.controller_id = controller_id
        self.inter_broker_listener_name = inter_broker_listener_name
        self._on_leader_and_isr_response = on_leader_and_isr_response
        self._on_stop_replica_deletion_response = on_stop_replica_deletion_response
        self._leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrRequest.LeaderAndIsrPartitionState]] = {}
        self._stop_replica: dict[int, dict[TopicPartition, StopReplicaRequest.StopReplicaPartitionState]] = {}
        self._update_metadata_brokers: set[int] = set()
        self._update_metadata_partitions: dict[TopicPartition, UpdateMetadataRequest.UpdateMetadataPartitionState] = {}

    def new_batch(self) -> None:
        if self._leader_and_isr or self._stop_replica or self._update_metadata_brokers:
            raise RuntimeError("the controller's request batch is not empty while starting a new one")

    def clear(self) -> None:
        self._leader_and_isr.clear()
        self._stop_replica.clear()
        self._update_metadata_brokers.clear()
        self._update_metadata_partitions.clear()

    # -- collecting ---------------------------------------------------------------------------

    def add_leader_and_isr_request_for_brokers(self, broker_ids: Iterable[int], tp: TopicPartition,
                                               state: LeaderIsrAndControllerEpoch, is_new: bool,
                                               assignment: ReplicaAssignment | None = None) -> None:
        """`assignment` defaults to the partition's assignment in the context."""
        if assignment is None:
            assignment = self.context.partition_full_replica_assignment(tp)
        lai = state.leader_and_isr
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            per_broker = self._leader_and_isr.setdefault(broker_id, {})
            previous = per_broker.get(tp)
            per_broker[tp] = LeaderAndIsrRequest.LeaderAndIsrPartitionState(
                topic_name=tp.topic, partition_index=tp.partition, controller_epoch=state.controller_epoch,
                leader=lai.leader, leader_epoch=lai.leader_epoch, isr=list(lai.isr),
                partition_epoch=lai.partition_epoch, replicas=list(assignment.replicas),
                adding_replicas=list(assignment.adding_replicas), removing_replicas=list(assignment.removing_replicas),
                is_new=is_new or (previous is not None and previous.is_new),
                leader_recovery_state=int(lai.leader_recovery_state))
        self.add_update_metadata_request_for_brokers(self.context.live_or_shutting_down_broker_ids, [tp])

    def add_stop_replica_request_for_brokers(self, broker_ids: Iterable[int], tp: TopicPartition,
                                             delete_partition: bool) -> None:
        leader_epoch = self.context.leader_epoch(tp)
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            per_broker = self._stop_replica.setdefault(broker_id, {})
            previous = per_broker.get(tp)
            per_broker[tp] = StopReplicaRequest.StopReplicaPartitionState(
                partition_index=tp.partition, leader_epoch=leader_epoch,
                delete_partition=delete_partition or (previous is not None and previous.delete_partition))

    def add_update_metadata_request_for_brokers(self, broker_ids: Iterable[int],
                                                partitions: Iterable[TopicPartition] = ()) -> None:
        """The brokers get an UpdateMetadata with the partitions' current state (leader -2 while their
        topic is being deleted); partitions without a leader yet are left out."""
        ctx = self.context
        self._update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        for tp in partitions:
            info = ctx.partition_leadership_info(tp)
            if info is None:
                continue
            lai = info.leader_and_isr
            replicas = ctx.partition_replica_assignment(tp)
            if ctx.is_topic_queued_up_for_deletion(tp.topic):
                leader, leader_epoch, partition_epoch = LEADER_DURING_DELETE, 0, 0
            else:
                leader, leader_epoch, partition_epoch = lai.leader, lai.leader_epoch, lai.partition_epoch
            self._update_metadata_partitions[tp] = UpdateMetadataRequest.UpdateMetadataPartitionState(
                topic_name=tp.topic, partition_index=tp.partition, controller_epoch=info.controller_epoch,
                leader=leader, leader_epoch=leader_epoch, isr=list(lai.isr), zk_version=partition_epoch,
                replicas=list(replicas), offline_replicas=[r for r in replicas if not ctx.is_replica_online(r, tp)])

    # -- sending ------------------------------------------------------------------------------

    def send_requests_to_brokers(self, controller_epoch: int) -> None:
        try:
            self._send_leader_and_isr(controller_epoch)
            self._send_update_metadata(controller_epoch)
            self._send_stop_replica(controller_epoch)
        finally:
            self.clear()

    def _live(self) -> set[int]:
        return self.context.live_or_shutting_down_broker_ids

    def _send_leader_and_isr(self, controller_epoch: int) -> None:
        ctx = self.context
        live = self._live()
        for broker_id, states in self._leader_and_isr.items():
            if broker_id not in live:
                continue
            leader_ids = {s.leader for s in states.values()}
            leaders = []
            for broker in ctx.live_or_shutting_down_brokers:
                endpoint = self._endpoint(broker) if broker.id in leader_ids else None
                if endpoint is not None:
                    leaders.append(LeaderAndIsrRequest.LeaderAndIsrLiveLeader(
                        broker_id=broker.id, host_name=endpoint.host or "", port=endpoint.port))
            topics: dict[str, LeaderAndIsrRequest.LeaderAndIsrTopicState] = {}
            for tp, state in states.items():
                topic = topics.get(tp.topic)
                if topic is None:
                    topic = topics[tp.topic] = LeaderAndIsrRequest.LeaderAndIsrTopicState(
                        topic_name=tp.topic, topic_id=ctx.topic_ids.get(tp.topic, ZERO_UUID))
                topic.partition_states.append(state)
            body = LeaderAndIsrRequest(controller_id=self.controller_id, is_k_raft_controller=False,
                                       controller_epoch=controller_epoch, broker_epoch=ctx.broker_epoch(broker_id),
                                       type=0, topic_states=list(topics.values()), live_leaders=leaders)
            self.channel.send_request(broker_id, LEADER_AND_ISR, LEADER_AND_ISR_VERSION, body,
                                      lambda response, b=broker_id: self._on_leader_and_isr_response(b, response))

    def _endpoint(self, broker: BrokerInfo):
        """The broker's inter-broker listener (its first listener if it has no such one)."""
        return broker.endpoint(self.inter_broker_listener_name) or (broker.endpoints[0] if broker.endpoints else None)

    def _send_update_metadata(self, controller_epoch: int) -> None:
        ctx = self.context
        if not self._update_metadata_brokers:
            return
        live_brokers = [UpdateMetadataRequest.UpdateMetadataBroker(
            id=b.id, rack=b.rack,
            endpoints=[UpdateMetadataRequest.UpdateMetadataEndpoint(
                port=e.port, host=e.host or "", listener=e.listener_name,
                security_protocol=SecurityProtocol(e.security_protocol).id) for e in b.endpoints])
            for b in ctx.live_or_shutting_down_brokers]
        topics: dict[str, list] = {}
        for tp, state in self._update_metadata_partitions.items():
            topics.setdefault(tp.topic, []).append(state)
        topic_states = [UpdateMetadataRequest.UpdateMetadataTopicState(
            topic_name=t, topic_id=ctx.topic_ids.get(t, ZERO_UUID), partition_states=s) for t, s in topics.items()]
        for broker_id in sorted(self._update_metadata_brokers & self._live()):
            body = UpdateMetadataRequest(controller_id=self.controller_id, is_k_raft_controller=False, type=0,
                                         controller_epoch=controller_epoch, broker_epoch=ctx.broker_epoch(broker_id),
                                         topic_states=topic_states, live_brokers=live_brokers)
            self.channel.send_request(broker_id, UPDATE_METADATA, UPDATE_METADATA_VERSION, body)

    def _send_stop_replica(self, controller_epoch: int) -> None:
        ctx = self.context
        live = self._live()
        for broker_id, states in self._stop_replica.items():
            if broker_id not in live:
                continue
            topics: dict[str, StopReplicaRequest.StopReplicaTopicState] = {}
            for tp, state in states.items():
                topic = topics.get(tp.topic)
                if topic is None:
                    topic = topics[tp.topic] = StopReplicaRequest.StopReplicaTopicState(topic_name=tp.topic)
                topic.partition_states.append(state)
            deleted = {tp for tp, s in states.items() if s.delete_partition}
            body = StopReplicaRequest(controller_id=self.controller_id, is_k_raft_controller=False,
                                      controller_epoch=controller_epoch, broker_epoch=ctx.broker_epoch(broker_id),
                                      delete_partitions=False, topic_states=list(topics.values()))
            self.channel.send_request(broker_id, STOP_REPLICA, STOP_REPLICA_VERSION, body,
                                      lambda r, b=broker_id, d=deleted: self._stop_replica_answered(b, d, r))

    def _stop_replica_answered(self, broker_id: int, deleted: set[TopicPartition], response) -> None:
        """Report the answers for partitions whose deletion was asked, while their topic is being deleted."""
        errors = {}
        for e in response.partition_errors:
            tp = TopicPartition(e.topic_name, e.partition_index)
            if tp in deleted:
                errors[tp] = e.error_code
        if errors:
            self._on_stop_replica_deletion_response(broker_id, response.error_code, errors)
