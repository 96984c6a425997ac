"""Metadata: brokers, the controller, and topics with their partitions' leaders.

Null versus empty matters (v1+): a null topic list asks for every topic, an
empty one for none. v0 has no null, so an empty list means every topic there.
Unknown topics are created on the fly when `auto.create.topics.enable` and the
request (v4+) allow it.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.metadata import MetadataResponse
from ..protocol.primitives import ZERO_UUID
from .registry import handles

AUTHORIZED_OPS_NOT_REQUESTED = -2147483648
# With no authorizer every operation is allowed: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE,
# DESCRIBE_CONFIGS, ALTER_CONFIGS as bits of Kafka's AclOperation codes.
TOPIC_OPS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def broker_entries(broker) -> list:
    host, port = broker.advertised_endpoint()
    return [MetadataResponse.MetadataResponseBroker(node_id=broker.node_id, host=host, port=port,
                                                    rack=broker.config.get("broker.rack"))]


def topic_entry(broker, topic, include_ops: bool) -> MetadataResponse.MetadataResponseTopic:
    parts = []
    for index in range(topic.partitions):
        state = broker.replicas.partition_state(topic.name, index)
        parts.append(MetadataResponse.MetadataResponsePartition(
            error_code=ErrorCode.NONE, partition_index=index, leader_id=state.leader,
            leader_epoch=state.leader_epoch, replica_nodes=list(state.replicas),
            isr_nodes=list(state.isr), offline_replicas=[]))
    return MetadataResponse.MetadataResponseTopic(
        error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id, is_internal=topic.internal,
        partitions=parts, topic_authorized_operations=TOPIC_OPS if include_ops else AUTHORIZED_OPS_NOT_REQUESTED)


def error_entry(code: int, name: str | None, topic_id: bytes = ZERO_UUID):
    return MetadataResponse.MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id,
                                                  partitions=[])


@handles(3)
def handle_metadata(broker, request):
    req = request.body
    v = request.api_version
    include_ops = bool(req.include_topic_authorized_operations)
    topics = broker.topics
    if req.topics is None or (v == 0 and not req.topics):
        wanted = [topic_entry(broker, t, include_ops) for t in list(topics.topics.values())]
    else:
        allow_create = broker.config["auto.create.topics.enable"] and (v < 4 or req.allow_auto_topic_creation)
        wanted = []
        for t in req.topics:
            if t.name is None:
                topic = topics.by_id.get(t.topic_id)
                wanted.append(topic_entry(broker, topic, include_ops) if topic
                              else error_entry(ErrorCode.UNKNOWN_TOPIC_ID, None, t.topic_id))
                continue
            topic = topics.get(t.name)
            if topic is None and allow_create:
                try:
                    topic = broker.controller.create_topic(t.name)
                except KafkaError as e:
                    wanted.append(error_entry(e.error_code, t.name))
                    continue
            wanted.append(topic_entry(broker, topic, include_ops) if topic
                          else error_entry(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, t.name))
    return MetadataResponse(
        throttle_time_ms=0, brokers=broker_entries(broker), cluster_id=broker.cluster_id,
        controller_id=broker.node_id, topics=wanted,
        cluster_authorized_operations=CLUSTER_OPS if req.include_cluster_authorized_operations
        else AUTHORIZED_OPS_NOT_REQUESTED)
