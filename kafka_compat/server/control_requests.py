"""LeaderAndIsr, UpdateMetadata and StopReplica: what the ZooKeeper controller tells this broker.

As Kafka's KafkaApis and ReplicaManager handle them. Each request first has its
BrokerEpoch checked: one older than our registration's (the controller has not
seen us come back) is refused whole with STALE_BROKER_EPOCH, and so is every
request while we are not registered at all (our session is gone and the
controller's view of us with it). Then the controller epoch: an older one is
refused with STALE_CONTROLLER_EPOCH. LeaderAndIsr and StopReplica then go to the
ReplicaManager partition by partition (its rules are there); UpdateMetadata
replaces what the MetadataCache knows. The group coordinator follows: it loads
a `__consumer_offsets` partition this broker starts leading and unloads one it
stops leading or deletes; the transaction coordinator does so with `__transaction_state`, the share
coordinator with `__share_group_state`.

Before all of that, as in Kafka, the sender must hold CLUSTER_ACTION on the cluster (the
inter-broker principal, normally a super user): anyone else gets CLUSTER_AUTHORIZATION_FAILED.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Sequence

from ..endpoint import SecurityProtocol
from ..protocol.errors import ErrorCode
from ..protocol.messages.leader_and_isr import LeaderAndIsrResponse
from ..protocol.messages.stop_replica import StopReplicaResponse
from ..protocol.messages.update_metadata import UpdateMetadataResponse
from ..protocol.primitives import ZERO_UUID
from ..sentinels import (
    GROUP_METADATA_TOPIC_NAME,
    SHARE_GROUP_STATE_TOPIC_NAME,
    TRANSACTION_STATE_TOPIC_NAME,
    UNKNOWN_BROKER_EPOCH,
)
from .auth_helper import CLUSTER_ACTION, NO_AUTHORIZER, AuthHelper
from .metadata_cache import BrokerEndpoint, BrokerInfo, MetadataCache, PartitionLeadership
from .registry import handles
from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)

DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
_PROTOCOLS = list(SecurityProtocol)


def _protocol_name(protocol_id: int) -> str:
    return _PROTOCOLS[protocol_id].value if 0 <= protocol_id < len(_PROTOCOLS) else str(protocol_id)


def _partition_state(s) -> PartitionLeadership:
    return PartitionLeadership(s.leader, s.leader_epoch, tuple(s.isr), tuple(s.replicas), s.partition_epoch,
                          s.controller_epoch, adding_replicas=tuple(getattr(s, "adding_replicas", ()) or ()),
                          removing_replicas=tuple(getattr(s, "removing_replicas", ()) or ()))


def _topics(req, grouped: bool, with_ids: bool, state) -> list[tuple[str, bytes, dict[int, PartitionLeadership]]]:
    """(topic, topic id, {partition: state}) from a request's TopicStates, or from the ungrouped
    partition states of the versions before topics were grouped."""
    if grouped:
        return [(t.topic_name, t.topic_id if with_ids else ZERO_UUID,
                 {s.partition_index: state(s) for s in t.partition_states}) for t in req.topic_states]
    by_topic: dict[str, dict[int, PartitionLeadership]] = {}
    for s in req.ungrouped_partition_states:
        by_topic.setdefault(s.topic_name, {})[s.partition_index] = state(s)
    return [(name, ZERO_UUID, states) for name, states in by_topic.items()]


class ControlRequestsApi:
    def __init__(self, broker_id: int, replica_manager: ReplicaManager, metadata_cache: MetadataCache,
                 group_coordinator, broker_epoch: Callable[[], int | None], topic_configs=None,
                 metadata_listeners: Sequence[Callable[[list[str]], None]] = (), txn_coordinator=None,
                 wait_registered: Callable[[int], Awaitable[bool]] | None = None,
                 auth: AuthHelper = NO_AUTHORIZER, share_coordinator=None,
                 leadership_lost: Sequence[Callable[[str, int], None]] = ()):
        """``broker_epoch()`` is our registration's czxid, None while not registered; ``topic_configs``
        (optional) gives the overrides of topics new to this broker before their logs are made
        (``missing(names)``, and the coroutine ``refresh_topic_configs(names)``); ``metadata_listeners``
        are told the topics each UpdateMetadata touched (delayed topic operations wait on them); the
        ``txn_coordinator`` (optional) loads and unloads `__transaction_state` partitions as the group
        coordinator does `__consumer_offsets`. ``wait_registered(epoch)``: while we are not registered, whether
        a request carrying ``epoch`` is for the registration under way (ZkBrokerRegistration.wait_registered),
        once it is done."""
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.group_coordinator = group_coordinator
        self.broker_epoch = broker_epoch
        self.topic_configs = topic_configs
        self.metadata_listeners = list(metadata_listeners)
        self.txn_coordinator = txn_coordinator
        self.wait_registered = wait_registered
        self.auth = auth
        self.share_coordinator = share_coordinator
        self.leadership_lost = list(leadership_lost)     # (topic, index) once this broker stops leading it

    def _refused(self, request, epoch_since: int) -> bool:
        """Kafka's isBrokerEpochStale (BrokerEpoch exists from version ``epoch_since``), and also: no
        registration, no control."""
        ours = self.broker_epoch()
        req = request.body
        theirs = req.broker_epoch if request.api_version >= epoch_since else UNKNOWN_BROKER_EPOCH
        if ours is not None and (theirs == UNKNOWN_BROKER_EPOCH or theirs >= ours):
            return False
        log.info("refusing %s from controller %d: broker epoch %d, ours %s", request.info.name, req.controller_id,
                 theirs, ours)
        return True

    def _refusal(self, request, epoch_since: int, handler, refusal):
        """``refusal``; or, when we are not registered and the request carries a broker epoch, a coroutine
        that handles it once our registration is done if the epoch is that registration's. A controller
        sees our new znode as soon as it exists, before our own create has returned, and it sends each
        request once: refused, the partitions would never be ours again."""
        if (self.wait_registered is None or self.broker_epoch() is not None or request.api_version < epoch_since
                or request.body.broker_epoch == UNKNOWN_BROKER_EPOCH):
            return refusal
        return self._once_registered(request, handler, refusal)

    async def _once_registered(self, request, handler, refusal):
        if not await self.wait_registered(request.body.broker_epoch) or self.broker_epoch() is None:
            return refusal
        result = handler(request)
        return await result if asyncio.iscoroutine(result) else result

    # ---------------------------------------------------------------- LeaderAndIsr
    @handles(4)
    def handle_leader_and_isr(self, request):
        req, v = request.body, request.api_version
        log.debug("leader_and_isr from controller %d (epoch %d)", req.controller_id, req.controller_epoch)
        if not self.auth.authorize_cluster(request, CLUSTER_ACTION):
            return self._leader_and_isr_error(req, v, DENIED)
        if self._refused(request, 2):
            return self._refusal(request, 2, self.handle_leader_and_isr,
                                 self._leader_and_isr_error(req, v, ErrorCode.STALE_BROKER_EPOCH))
        topics = self._leader_and_isr_topics(req, v)
        names = [name for name, _, _ in topics]
        missing = self.topic_configs.missing(names) if self.topic_configs is not None else []
        if missing:
            return self._leader_and_isr_after_loading(request, topics, missing)
        return self._apply_leader_and_isr(request, topics)

    async def _leader_and_isr_after_loading(self, request, topics, missing):
        try:
            await self.topic_configs.refresh_topic_configs(missing)
        except Exception as e:      # the controller sends it again; our logs must not start with wrong configs
            log.warning("cannot read the configs of %s: %s", missing, e)
            return self._leader_and_isr_error(request.body, request.api_version, ErrorCode.UNKNOWN_SERVER_ERROR)
        return self._apply_leader_and_isr(request, topics)

    @staticmethod
    def _leader_and_isr_topics(req, v) -> list[tuple[str, bytes, dict[int, PartitionLeadership]]]:
        return _topics(req, grouped=v >= 2, with_ids=v >= 5, state=_partition_state)

    def _apply_leader_and_isr(self, request, topics):
        req, v = request.body, request.api_version
        result = self.replica_manager.become_leader_or_follower(req.controller_id, req.controller_epoch, topics)
        if result.error_code:
            return self._leader_and_isr_error(req, v, result.error_code)
        for partition in result.leaders:
            if partition.topic == GROUP_METADATA_TOPIC_NAME:
                self.group_coordinator.on_election(partition.index, partition.leader_epoch)
            elif partition.topic == TRANSACTION_STATE_TOPIC_NAME and self.txn_coordinator is not None:
                self.txn_coordinator.on_become_leader(partition.index, partition.leader_epoch)
            elif partition.topic == SHARE_GROUP_STATE_TOPIC_NAME and self.share_coordinator is not None:
                self.share_coordinator.on_election(partition.index, partition.leader_epoch)
        for partition in result.followers:
            if partition.topic == GROUP_METADATA_TOPIC_NAME:
                self.group_coordinator.on_resignation(partition.index, partition.leader_epoch)
            elif partition.topic == TRANSACTION_STATE_TOPIC_NAME and self.txn_coordinator is not None:
                self.txn_coordinator.on_resign(partition.index, partition.leader_epoch)
            elif partition.topic == SHARE_GROUP_STATE_TOPIC_NAME and self.share_coordinator is not None:
                self.share_coordinator.on_resignation(partition.index, partition.leader_epoch)
            self._lost(partition.topic, partition.index)
        if self.replica_manager.fetcher_manager is not None:
            self.replica_manager.fetcher_manager.shutdown_idle_fetchers()
        ids = {name: topic_id for name, topic_id, _ in topics}
        return self._leader_and_isr_response(v, ErrorCode.NONE, result.partition_errors, ids)

    def _lost(self, topic: str, index: int) -> None:
        for listener in self.leadership_lost:
            try:
                listener(topic, index)
            except Exception:
                log.exception("leadership listener failed")

    def _leader_and_isr_error(self, req, v, code):
        topics = self._leader_and_isr_topics(req, v)
        errors = {(name, i): code for name, _, states in topics for i in states}
        return self._leader_and_isr_response(v, code, errors, {name: tid for name, tid, _ in topics})

    @staticmethod
    def _leader_and_isr_response(v, code, errors, topic_ids) -> LeaderAndIsrResponse:
        PartitionError = LeaderAndIsrResponse.LeaderAndIsrPartitionError
        if v < 5:
            return LeaderAndIsrResponse(error_code=code, partition_errors=[
                PartitionError(topic_name=t, partition_index=i, error_code=e) for (t, i), e in errors.items()])
        by_topic: dict[str, list] = {}
        for (t, i), e in errors.items():
            by_topic.setdefault(t, []).append(PartitionError(partition_index=i, error_code=e))
        return LeaderAndIsrResponse(error_code=code, topics=[
            LeaderAndIsrResponse.LeaderAndIsrTopicError(topic_id=topic_ids.get(t, ZERO_UUID), partition_errors=p)
            for t, p in by_topic.items()])

    # ---------------------------------------------------------------- UpdateMetadata
    @handles(6)
    def handle_update_metadata(self, request):
        req, v = request.body, request.api_version
        log.debug("update_metadata from controller %d (epoch %d)", req.controller_id, req.controller_epoch)
        if not self.auth.authorize_cluster(request, CLUSTER_ACTION):
            return UpdateMetadataResponse(error_code=DENIED)
        if self._refused(request, 5):
            return self._refusal(request, 5, self.handle_update_metadata,
                                 UpdateMetadataResponse(error_code=ErrorCode.STALE_BROKER_EPOCH))
        rm = self.replica_manager
        if req.controller_epoch < rm.controller_epoch:
            log.warning("refusing UpdateMetadata from controller %d: its epoch %d is older than %d",
                        req.controller_id, req.controller_epoch, rm.controller_epoch)
            return UpdateMetadataResponse(error_code=ErrorCode.STALE_CONTROLLER_EPOCH)
        rm.controller_epoch = req.controller_epoch
        brokers = [self._live_broker(b, v) for b in req.live_brokers]
        topics = self._update_metadata_topics(req, v)
        gone = set(self.metadata_cache.brokers).difference(b.broker_id for b in brokers)
        deleted = self.metadata_cache.update_metadata(req.controller_id, req.controller_epoch, brokers, topics)
        if gone:
            rm.brokers_gone(gone)
        if deleted:
            self.group_coordinator.handle_deleted_partitions(deleted)
        rm.maybe_start_fetchers()           # followers whose leader had no known address yet
        names = [name for name, _, _ in topics]
        for listener in self.metadata_listeners:
            try:
                listener(names)
            except Exception:
                log.exception("metadata listener failed")
        return UpdateMetadataResponse(error_code=ErrorCode.NONE)

    @staticmethod
    def _live_broker(b, v) -> BrokerInfo:
        if v == 0:
            endpoints = (BrokerEndpoint("PLAINTEXT", b.v0_host, b.v0_port, "PLAINTEXT"),)
        else:
            endpoints = tuple(BrokerEndpoint(e.listener if v >= 3 else _protocol_name(e.security_protocol), e.host,
                                             e.port, _protocol_name(e.security_protocol)) for e in b.endpoints)
        return BrokerInfo(b.id, endpoints, b.rack if v >= 2 else None)

    @staticmethod
    def _update_metadata_topics(req, v) -> list[tuple[str, bytes, dict[int, PartitionLeadership]]]:
        def state(s) -> PartitionLeadership:
            return PartitionLeadership(s.leader, s.leader_epoch, tuple(s.isr), tuple(s.replicas), s.zk_version,
                                  s.controller_epoch, offline_replicas=tuple(s.offline_replicas if v >= 4 else ()))
        return _topics(req, grouped=v >= 5, with_ids=v >= 7, state=state)

    # ---------------------------------------------------------------- StopReplica
    @handles(5)
    def handle_stop_replica(self, request):
        req, v = request.body, request.api_version
        log.debug("stop_replica from controller %d (epoch %d)", req.controller_id, req.controller_epoch)
        entries = self._stop_replica_entries(req, v)
        if not self.auth.authorize_cluster(request, CLUSTER_ACTION):
            return self._stop_replica_response(DENIED, {(t, i): DENIED for t, i, _, _ in entries})
        if self._refused(request, 1):
            return self._refusal(request, 1, self.handle_stop_replica, self._stop_replica_response(
                ErrorCode.STALE_BROKER_EPOCH, {(t, i): ErrorCode.STALE_BROKER_EPOCH for t, i, _, _ in entries}))
        error, errors = self.replica_manager.apply_stop_replica(req.controller_id, req.controller_epoch, entries)
        if error:
            return self._stop_replica_response(error, {(t, i): error for t, i, _, _ in entries})
        for topic, index, leader_epoch, delete in entries:
            # a reassignment moves replicas away without a LeaderAndIsr to them: unload here too
            if topic == GROUP_METADATA_TOPIC_NAME and delete and errors.get((topic, index)) == ErrorCode.NONE:
                self.group_coordinator.on_resignation(index, leader_epoch)
            elif topic == TRANSACTION_STATE_TOPIC_NAME and errors.get((topic, index)) == ErrorCode.NONE \
                    and self.txn_coordinator is not None:
                self.txn_coordinator.on_resign(index, leader_epoch)
            elif topic == SHARE_GROUP_STATE_TOPIC_NAME and errors.get((topic, index)) == ErrorCode.NONE \
                    and self.share_coordinator is not None:
                self.share_coordinator.on_resignation(index, leader_epoch)
            if errors.get((topic, index)) == ErrorCode.NONE:
                self._lost(topic, index)
        if self.replica_manager.fetcher_manager is not None:
            self.replica_manager.fetcher_manager.shutdown_idle_fetchers()
        return self._stop_replica_response(ErrorCode.NONE, errors)

    @staticmethod
    def _stop_replica_entries(req, v) -> list[tuple[str, int, int, bool]]:
        if v == 0:
            return [(p.topic_name, p.partition_index, -1, req.delete_partitions) for p in req.ungrouped_partitions]
        if v <= 2:
            return [(t.name, i, -1, req.delete_partitions) for t in req.topics for i in t.partition_indexes]
        return [(t.topic_name, p.partition_index, p.leader_epoch, p.delete_partition)
                for t in req.topic_states for p in t.partition_states]

    @staticmethod
    def _stop_replica_response(code, errors) -> StopReplicaResponse:
        return StopReplicaResponse(error_code=code, partition_errors=[
            StopReplicaResponse.StopReplicaPartitionError(topic_name=t, partition_index=i, error_code=e)
            for (t, i), e in errors.items()])
