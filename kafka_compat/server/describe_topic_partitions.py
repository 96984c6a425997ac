"""DescribeTopicPartitions: topics' partitions a page at a time, with Kafka's cursor.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.describe_topic_partitions import DescribeTopicPartitionsResponse
from ..protocol.primitives import ZERO_UUID
from ..sentinels import INTERNAL_TOPICS
from .auth_helper import DESCRIBE, NO_AUTHORIZER, TOPIC, AuthHelper
from .registry import handles
from .topics import validate_name

MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000  # Kafka's max.request.partition.size.limit default


class DescribeTopicPartitionsApi:
    def __init__(self, metadata_cache, config, auth: AuthHelper = NO_AUTHORIZER):
        self.metadata_cache = metadata_cache
        self.config = config
        self.auth = auth

    def _dtp_partitions(self, topic, start: int, limit: int) -> tuple[list, int]:
        """Partitions start..start+limit of a topic, and the next index to ask for (-1 if none)."""
        upper = min(topic.partitions, start + limit)
        parts = []
        for index in range(start, upper):
            state = self.metadata_cache.partition_state(topic.name, index)
            parts.append(DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition(
                error_code=ErrorCode.NONE, partition_index=index, leader_id=state.leader,
                leader_epoch=state.leader_epoch, replica_nodes=list(state.replicas), isr_nodes=list(state.isr),
                eligible_leader_replicas=[], last_known_elr=[], offline_replicas=[]))
        return parts, (upper if upper < topic.partitions else -1)

    @handles(75)
    def handle_describe_topic_partitions(self, request):
        """Topics in name order from the cursor on, at most `response_partition_limit` partitions
        (capped at 2000) per answer; `next_cursor` says where the next request starts.

        An empty topic list means every topic (then unknown ones are simply absent);
        otherwise an unknown topic answers UNKNOWN_TOPIC_OR_PARTITION (or
        INVALID_TOPIC_EXCEPTION for an illegal name) and still counts its place.
        """
        req = request.body
        Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
        everything = not req.topics
        cursor = req.cursor
        after = cursor.topic_name if cursor is not None else ""
        names = set(self.metadata_cache.topics) if everything else {t.name for t in req.topics}
        names = {n for n in names if n >= after}
        # as Metadata: listing all leaves out what the caller may not describe; a named one says so
        allowed = self.auth.filter_authorized(request, DESCRIBE, TOPIC, names)
        if everything:
            names = allowed
        if cursor is not None and ((not everything and cursor.topic_name not in names) or cursor.partition_index < 0):
            # Kafka's INVALID_REQUEST: the cursor must name a requested topic and a real partition.
            return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[
                Topic(error_code=ErrorCode.INVALID_REQUEST, name=t.name, is_internal=False, partitions=[])
                for t in req.topics])
        limit = max(min(self.config.get("max.request.partition.size.limit", MAX_REQUEST_PARTITION_SIZE_LIMIT),
                        req.response_partition_limit), 1)
        out = DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[], next_cursor=None)
        remaining = limit
        for name in sorted(names):
            if remaining == 0:
                out.next_cursor = DescribeTopicPartitionsResponse.Cursor(topic_name=name, partition_index=0)
                break
            if name not in allowed:
                out.topics.append(Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name,
                                        topic_id=ZERO_UUID, is_internal=False, partitions=[]))
                continue
            topic = self.metadata_cache.get(name)
            if topic is None:
                if not everything:
                    try:
                        validate_name(name)
                        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    except KafkaError:
                        code = ErrorCode.INVALID_TOPIC_EXCEPTION
                    out.topics.append(Topic(error_code=code, name=name, topic_id=ZERO_UUID,
                                            is_internal=name in INTERNAL_TOPICS, partitions=[],
                                            topic_authorized_operations=self.auth.authorized_operations(
                                                request, TOPIC, name)))
                continue
            start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
            parts, following = self._dtp_partitions(topic, start, remaining)
            out.topics.append(Topic(error_code=ErrorCode.NONE, name=name, topic_id=topic.topic_id,
                                    is_internal=topic.internal, partitions=parts,
                                    topic_authorized_operations=self.auth.authorized_operations(
                                        request, TOPIC, name)))
            if following != -1:
                out.next_cursor = DescribeTopicPartitionsResponse.Cursor(topic_name=name, partition_index=following)
                break
            remaining -= len(parts)
        return out
