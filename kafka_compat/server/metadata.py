"""Metadata: brokers, the controller, and topics with their partitions' leaders, from the MetadataCache.

Null versus empty matters (v1+): a null topic list asks for every topic, an
empty one for none. v0 has no null, so an empty list means every topic there.
Unknown topics are created on the fly when `auto.create.topics.enable` and the
request (v4+) allow it. Brokers are shown at the address of the listener the
request came in on; a partition whose leader is gone answers
LEADER_NOT_AVAILABLE with leader -1, as Kafka's ZkMetadataCache does.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Callable

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.metadata import MetadataResponse
from ..protocol.primitives import ZERO_UUID
from ..sentinels import INTERNAL_TOPICS
from .auth_helper import AUTHORIZED_OPS_NOT_REQUESTED, CREATE, DESCRIBE, NO_AUTHORIZER, TOPIC, AuthHelper
from .controller_mutation_quota import ControllerMutationQuotaManager, unlimited
from .metadata_cache import MetadataCache, TopicMetadata
from .registry import handles
from .topics import validate_name

Partition = MetadataResponse.MetadataResponsePartition
log = logging.getLogger(__name__)


def _background(awaitable, topic: str) -> None:
    """Let an auto-creation run on; a failure is only logged (the client asks again)."""
    def done(f: asyncio.Future) -> None:
        if not f.cancelled() and f.exception() is not None:
            log.info("auto-creating %s failed: %s", topic, f.exception())
    asyncio.ensure_future(awaitable).add_done_callback(done)


def listener_of(request) -> str | None:
    """The listener a request arrived on (its connection knows); None outside a connection."""
    return getattr(request.connection, "listener", None)


def broker_entries(cache: MetadataCache, listener: str | None) -> list:
    out = []
    for b in cache.alive_brokers():
        e = b.endpoint(listener) if listener is not None else (b.endpoints[0] if b.endpoints else None)
        if e is not None:
            out.append(MetadataResponse.MetadataResponseBroker(node_id=b.broker_id, host=e.host, port=e.port,
                                                               rack=b.rack))
    return out


def partition_entries(cache: MetadataCache, topic: TopicMetadata, listener: str | None, version: int = 1) -> list:
    parts = []
    for index, state in sorted(topic.partition_states.items()):
        leader = state.leader
        error = ErrorCode.NONE
        if leader < 0 or not cache.is_alive(leader):
            error, leader = ErrorCode.LEADER_NOT_AVAILABLE, -1
        elif listener is not None and cache.endpoint(leader, listener) is None:
            # the leader lives but not on this listener: v6+ name that, older versions cannot
            error = ErrorCode.LISTENER_NOT_FOUND if version >= 6 else ErrorCode.LEADER_NOT_AVAILABLE
            leader = -1
        replicas, isr = list(state.replicas), list(state.isr)
        if version == 0:        # v0 shows only live replicas, and says so
            live = [r for r in replicas if cache.is_alive(r)]
            if len(live) < len(replicas) and not error:
                error = ErrorCode.REPLICA_NOT_AVAILABLE
            replicas, isr = live, [r for r in isr if cache.is_alive(r)]
        # the controller's OfflineReplicas (brokers down or with the partition's log dir offline); a
        # single node's states carry none
        offline = list(state.offline_replicas) or [r for r in state.replicas if not cache.is_alive(r)]
        parts.append(Partition(error_code=error, partition_index=index, leader_id=leader,
                               leader_epoch=state.leader_epoch, replica_nodes=replicas, isr_nodes=isr,
                               offline_replicas=offline))
    return parts


class MetadataApi:
    def __init__(self, config, metadata_cache: MetadataCache, controller, auth: AuthHelper = NO_AUTHORIZER,
                 quotas: ControllerMutationQuotaManager | None = None,
                 internal_topics: dict[str, Callable[[], bool]] | None = None):
        """``internal_topics``: for each internal topic, its coordinator's ``ensure_topic``. An internal topic is
        auto-created with its own partition count, replication factor and configs, as Kafka's
        AutoTopicCreationManager does, never with num.partitions."""
        self.config = config
        self.internal_topics = internal_topics or {}
        self.metadata_cache = metadata_cache
        self.controller = controller            # auto-creation goes through it
        self.auth = auth
        self.quotas = quotas or unlimited()     # auto-creation takes from the client's mutation quota

    def _topic_entry(self, request, topic: TopicMetadata, listener, include_ops: bool, version: int):
        return MetadataResponse.MetadataResponseTopic(
            error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id, is_internal=topic.internal,
            partitions=partition_entries(self.metadata_cache, topic, listener, version),
            topic_authorized_operations=self.auth.authorized_operations(request, TOPIC, topic.name) if include_ops
            else AUTHORIZED_OPS_NOT_REQUESTED)

    @staticmethod
    def _error_entry(code: int, name: str | None, topic_id: bytes = ZERO_UUID):
        # as Kafka, an unknown internal topic is still called internal; a refused one tells nothing
        internal = name in INTERNAL_TOPICS and code != ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return MetadataResponse.MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id,
                                                      is_internal=internal, partitions=[])

    def _may_create(self, request, name: str) -> bool:
        return self.auth.authorize_cluster(request, CREATE) or self.auth.authorize(request, CREATE, TOPIC, name)

    @handles(3)
    def handle_metadata(self, request):
        """DESCRIBE on a topic shows it. Listing every topic leaves out the others without a word; a
        topic named but not describable answers TOPIC_AUTHORIZATION_FAILED with a zero id before its
        existence is looked at; auto-creation also needs CREATE on the cluster or the topic."""
        req = request.body
        v = request.api_version
        cache = self.metadata_cache
        auth = self.auth
        listener = listener_of(request)
        include_ops = bool(req.include_topic_authorized_operations)
        if req.topics is None or (v == 0 and not req.topics):
            wanted = [self._topic_entry(request, t, listener, include_ops, v) for t in list(cache.topics.values())
                      if auth.authorize(request, DESCRIBE, TOPIC, t.name)]
        else:
            allow_create = self.config["auto.create.topics.enable"] and (v < 4 or req.allow_auto_topic_creation)
            wanted = []
            quota = self.quotas.quota_for_request(request, strict=True) if allow_create else None
            for t in req.topics:
                # By id: a null name, or (the Java client 4.x, for broker-side regex subscriptions)
                # an empty name beside a topic id.
                if t.name is None or (not t.name and t.topic_id != ZERO_UUID):
                    topic = cache.topic_by_id(t.topic_id)
                    if topic is None:
                        wanted.append(self._error_entry(ErrorCode.UNKNOWN_TOPIC_ID, None, t.topic_id))
                    elif not auth.authorize(request, DESCRIBE, TOPIC, topic.name):
                        # topic ids are not secret: the id is echoed, the name is not
                        wanted.append(self._error_entry(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, t.topic_id))
                    else:
                        wanted.append(self._topic_entry(request, topic, listener, include_ops, v))
                    continue
                if not auth.authorize(request, DESCRIBE, TOPIC, t.name):
                    wanted.append(self._error_entry(ErrorCode.TOPIC_AUTHORIZATION_FAILED, t.name))
                    continue
                topic = cache.get_topic(t.name)
                if topic is None:
                    try:
                        validate_name(t.name)
                    except KafkaError as e:       # as Kafka: an invalid name is said so, created or not
                        wanted.append(self._error_entry(e.error_code, t.name))
                        continue
                if topic is None and allow_create:
                    if not self._may_create(request, t.name):
                        wanted.append(self._error_entry(ErrorCode.TOPIC_AUTHORIZATION_FAILED, t.name))
                        continue
                    if t.name in self.internal_topics:
                        topic = cache.get_topic(t.name) if self.internal_topics[t.name]() else None
                        wanted.append(self._topic_entry(request, topic, listener, include_ops, v) if topic
                                      else self._error_entry(ErrorCode.LEADER_NOT_AVAILABLE, t.name))
                        continue
                    try:
                        validate_name(t.name)
                        quota.record(self.config["num.partitions"])
                        created = self.controller.create_topic(t.name)
                    except KafkaError as e:
                        # a client over its quota is told the topic is unknown, and asks again later
                        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION \
                            if e.error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED else e.error_code
                        wanted.append(self._error_entry(code, t.name))
                        continue
                    if inspect.isawaitable(created):
                        # a cluster's controller makes the partitions; until they have leaders, say so
                        _background(created, t.name)
                        wanted.append(self._error_entry(ErrorCode.LEADER_NOT_AVAILABLE, t.name))
                        continue
                    topic = cache.get_topic(t.name)
                wanted.append(self._topic_entry(request, topic, listener, include_ops, v) if topic
                              else self._error_entry(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, t.name))
        return MetadataResponse(
            throttle_time_ms=0, brokers=broker_entries(cache, listener), cluster_id=cache.cluster_id,
            controller_id=cache.controller_id, topics=wanted,
            cluster_authorized_operations=auth.cluster_authorized_operations(
                request, bool(req.include_cluster_authorized_operations)))
