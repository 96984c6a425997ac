"""DeleteTopics: by name (all versions) or by topic id (v6+), through the controller.

In a ZooKeeper cluster (an asynchronous admin manager) only the controller's broker answers, and
the answer waits until the metadata cache no longer has the topics or `timeoutMs` passes
(REQUEST_TIMED_OUT), as Kafka's DelayedDeleteTopics.
"""
from __future__ import annotations

from collections import Counter

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.delete_topics import DeleteTopicsResponse
from ..protocol.primitives import ZERO_UUID
from .admin_manager import is_asynchronous, resolved, respond
from .auth_helper import DELETE, DESCRIBE, NO_AUTHORIZER, TOPIC, AuthHelper
from .registry import handles


class DeleteTopicsApi:
    def __init__(self, config, metadata_cache, controller, auth: AuthHelper = NO_AUTHORIZER):
        self.config = config
        self.metadata_cache = metadata_cache
        self.controller = controller
        self.auth = auth

    def _may_delete(self, request, name: str) -> bool:
        """DELETE on the topic (ZooKeeper brokers), or on the cluster (accepted by KRaft controllers)."""
        return self.auth.authorize(request, DELETE, TOPIC, name) or self.auth.authorize_cluster(request, DELETE)

    @handles(20)
    def handle_delete_topics(self, request):
        """By name (all versions) or by topic id (v6+), with Kafka's checks for duplicates and mixes."""
        return respond(self.controller, self._delete_topics(request))

    async def _delete_topics(self, request):
        req = request.body
        v = request.api_version
        Result = DeleteTopicsResponse.DeletableTopicResult
        asked = [(n, ZERO_UUID) for n in req.topic_names] if v < 6 else [(t.name, t.topic_id) for t in req.topics]
        clustered = is_asynchronous(self.controller)
        if clustered and not self.controller.is_active_controller():
            return DeleteTopicsResponse(throttle_time_ms=0, responses=[
                Result(name=n, topic_id=i, error_code=ErrorCode.NOT_CONTROLLER, error_message=None) for n, i in asked])
        if not self.config["delete.topic.enable"]:
            code = ErrorCode.INVALID_REQUEST if v < 3 else ErrorCode.TOPIC_DELETION_DISABLED
            return DeleteTopicsResponse(throttle_time_ms=0, responses=[
                Result(name=n, topic_id=i, error_code=code, error_message="Topic deletion is disabled.")
                for n, i in asked])
        results = []

        def answer(name, topic_id, code=ErrorCode.NONE, message=None):
            if code and message is None:
                message = code.message
            results.append(Result(name=name, topic_id=topic_id, error_code=code, error_message=message))

        by_name = Counter(n for n, i in asked if n is not None and i == ZERO_UUID)
        by_id = Counter(i for n, i in asked if n is None and i != ZERO_UUID)
        for name, topic_id in asked:
            if name is None and topic_id == ZERO_UUID:
                answer(None, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified.")
            elif name is not None and topic_id != ZERO_UUID:
                answer(name, topic_id, ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id.")
        for name in (n for n, c in by_name.items() if c > 1):
            answer(name, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
        for topic_id in (i for i, c in by_id.items() if c > 1):
            answer(None, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id.")
        doomed: dict[bytes, str] = {}
        for topic_id in (i for i, c in by_id.items() if c == 1):
            topic = self.metadata_cache.by_id.get(topic_id)
            if topic is None:
                answer(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID)
            elif not self.auth.authorize(request, DESCRIBE, TOPIC, topic.name):
                answer(None, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED)   # the name stays hidden
            elif not self._may_delete(request, topic.name):
                answer(topic.name, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            else:
                doomed[topic_id] = topic.name
        for name in (n for n, c in by_name.items() if c == 1):
            topic = self.metadata_cache.get(name)
            if not self._may_delete(request, name):
                answer(name, ZERO_UUID, ErrorCode.TOPIC_AUTHORIZATION_FAILED)     # whether or not it exists
            elif topic is None:
                answer(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif topic.topic_id in doomed:
                # Kafka answers only this entry when a name repeats an id given in the same request.
                del doomed[topic.topic_id]
                answer(name, topic.topic_id, ErrorCode.INVALID_REQUEST,
                       "The provided topic name maps to an ID that was already supplied.")
            else:
                doomed[topic.topic_id] = name
        outcomes = []
        for topic_id, name in doomed.items():
            try:
                await resolved(self.controller.delete_topic(name))
                outcomes.append((name, topic_id, ErrorCode.NONE, None))
            except KafkaError as e:
                outcomes.append((name, topic_id, e.error_code, e.message))
        deleted = [name for name, _, code, _ in outcomes if code == ErrorCode.NONE]
        remaining = set()
        if clustered and deleted:
            remaining = set(deleted) if req.timeout_ms <= 0 else \
                await self.controller.wait_for_deletions(deleted, req.timeout_ms)
        for name, topic_id, code, message in outcomes:
            if name in remaining:
                code, message = ErrorCode.REQUEST_TIMED_OUT, None
            answer(name, topic_id, code, message)
        return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
