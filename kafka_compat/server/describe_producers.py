"""DescribeProducers: the idempotent producers each partition's log remembers.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.describe_producers import DescribeProducersResponse
from .auth_helper import NO_AUTHORIZER, READ, TOPIC, AuthHelper
from .registry import handles
from .topics import validate_name


class DescribeProducersApi:
    def __init__(self, replica_manager, metadata_cache, auth: AuthHelper = NO_AUTHORIZER):
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.auth = auth

    def _producers(self, name: str, index: int, topic_error) -> DescribeProducersResponse.PartitionResponse:
        out = DescribeProducersResponse.PartitionResponse(partition_index=index, error_code=ErrorCode.NONE,
                                                          error_message=None, active_producers=[])
        if topic_error is not None:
            out.error_code, out.error_message = topic_error
            return out
        partition = self.replica_manager.get_partition(name, index)
        if partition is None:
            out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return out
        for p in partition.active_producers():
            out.active_producers.append(DescribeProducersResponse.ProducerState(
                producer_id=p.producer_id, producer_epoch=p.producer_epoch, last_sequence=p.last_sequence,
                last_timestamp=p.last_timestamp, coordinator_epoch=p.coordinator_epoch,
                current_txn_start_offset=p.current_txn_start_offset))
        return out

    @handles(61)
    def handle_describe_producers(self, request):
        """The idempotent producers each partition remembers, with their last sequence and timestamp."""
        topics = []
        for t in request.body.topics:
            topic_error = None
            if not self.auth.authorize(request, READ, TOPIC, t.name):
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                topics.append(DescribeProducersResponse.TopicResponse(
                    name=t.name, partitions=[self._producers(t.name, i, (code, code.message))
                                             for i in t.partition_indexes]))
                continue
            try:
                validate_name(t.name)
                if self.metadata_cache.get(t.name) is None:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    topic_error = (code, code.message)
            except KafkaError as e:
                topic_error = (e.error_code, e.message)
            topics.append(DescribeProducersResponse.TopicResponse(
                name=t.name, partitions=[self._producers(t.name, i, topic_error) for i in t.partition_indexes]))
        return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
