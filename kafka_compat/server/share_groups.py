"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77): share group membership (KIP-932).

Thin, as Kafka's KafkaApis: the checks Kafka makes here (share groups enabled, READ on the group,
DESCRIBE on the subscribed topics, a member id the client made up), then the group coordinator.
Version 1 only: v0 was Kafka 4.0's early access, refused since 4.1. While share groups are off
(``share.version`` finalized below 1: ``enabled()`` is False) they answer UNSUPPORTED_VERSION, as Kafka does.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode
from ..protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsResponse
from ..protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsResponse
from ..protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsResponse
from ..protocol.messages.share_group_describe import ShareGroupDescribeResponse
from ..protocol.messages.share_group_heartbeat import ShareGroupHeartbeatResponse
from .auth_helper import (
    AUTHORIZED_OPS_NOT_REQUESTED,
    DELETE,
    DESCRIBE,
    GROUP,
    NO_AUTHORIZER,
    READ,
    TOPIC,
    AuthHelper,
)
from .consumer_groups import described_assignment
from .groups import _client_host
from .registry import handles

E = ErrorCode


MAX_MEMBER_ID_LENGTH = 36       # a printed UUID (Kafka's KafkaApis.isMemberIdValid)


def always() -> bool:
    return True


def member_id_valid(member_id: str | None) -> bool:
    """Share RPCs' member ids are made up by the client: not empty, at most a UUID's length."""
    return bool(member_id) and len(member_id) <= MAX_MEMBER_ID_LENGTH


class ShareGroupsApi:
    def __init__(self, group_coordinator, metadata_cache, auth: AuthHelper = NO_AUTHORIZER, share_partitions=None,
                 enabled=always):
        """``share_partitions``: the SharePartitionManager DescribeShareGroupOffsets asks (a single node's share
        partitions all live on it)."""
        self.group_coordinator = group_coordinator
        self.share_partitions = share_partitions
        self.metadata_cache = metadata_cache
        self.auth = auth
        self.enabled = enabled

    @handles(76, 1, 1)
    def handle_share_group_heartbeat(self, request):
        req = request.body
        denied = None
        if not self.enabled():
            denied = E.UNSUPPORTED_VERSION
        elif not self.auth.authorize(request, READ, GROUP, req.group_id):
            denied = E.GROUP_AUTHORIZATION_FAILED
        elif req.subscribed_topic_names and len(self.auth.filter_authorized(
                request, DESCRIBE, TOPIC, req.subscribed_topic_names)) < len(set(req.subscribed_topic_names)):
            denied = E.TOPIC_AUTHORIZATION_FAILED
        if denied is not None:
            return ShareGroupHeartbeatResponse(throttle_time_ms=0, error_code=denied, error_message=E(denied).message,
                                               member_id=None, member_epoch=0, heartbeat_interval_ms=0)
        result = self.group_coordinator.handle_share_group_heartbeat(
            req.group_id, req.member_id, req.member_epoch, req.rack_id, req.subscribed_topic_names,
            request.client_id or "", _client_host(request))
        if result.error:
            return ShareGroupHeartbeatResponse(throttle_time_ms=0, error_code=result.error,
                                               error_message=result.message or E(result.error).message,
                                               member_id=None, member_epoch=0, heartbeat_interval_ms=0)
        assignment = None
        if result.assignment is not None:
            assignment = ShareGroupHeartbeatResponse.Assignment(topic_partitions=[
                ShareGroupHeartbeatResponse.TopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(result.assignment.items())])
        return ShareGroupHeartbeatResponse(
            throttle_time_ms=0, error_code=E.NONE, error_message=None, member_id=result.member_id,
            member_epoch=result.member_epoch, heartbeat_interval_ms=result.heartbeat_interval_ms,
            assignment=assignment)

    def _assignment(self, assignment: dict) -> ShareGroupDescribeResponse.Assignment:
        return described_assignment(self.metadata_cache, ShareGroupDescribeResponse, assignment)

    @handles(77, 1, 1)
    def handle_share_group_describe(self, request):
        req = request.body
        Described = ShareGroupDescribeResponse.DescribedGroup
        out = []
        for group_id in req.group_ids:
            if not self.enabled():
                out.append(Described(error_code=E.UNSUPPORTED_VERSION, error_message=E.UNSUPPORTED_VERSION.message,
                                     group_id=group_id))
                continue
            if not self.auth.authorize(request, DESCRIBE, GROUP, group_id):
                out.append(Described(error_code=E.GROUP_AUTHORIZATION_FAILED,
                                     error_message=E.GROUP_AUTHORIZATION_FAILED.message, group_id=group_id))
                continue
            error, message, group = self.group_coordinator.handle_share_group_describe(group_id)
            if group is None:
                out.append(Described(error_code=error, error_message=message or E(error).message, group_id=group_id,
                                     group_state="Dead" if error == E.GROUP_ID_NOT_FOUND else ""))
                continue
            members = [ShareGroupDescribeResponse.Member(
                member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch, client_id=m.client_id,
                client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
                assignment=self._assignment(m.assigned_partitions)) for m in group.members.values()]
            out.append(Described(
                error_code=E.NONE, group_id=group_id, group_state=group.state_string, group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch, assignor_name="simple", members=members,
                authorized_operations=self.auth.authorized_operations(request, GROUP, group_id)
                if req.include_authorized_operations else AUTHORIZED_OPS_NOT_REQUESTED))
        return ShareGroupDescribeResponse(throttle_time_ms=0, groups=out)

    @handles(90)
    def handle_describe_share_group_offsets(self, request):
        return _describe_offsets(self, request)

    def _offsets_change_error(self, request, op: int, create: bool) -> tuple[int, str | None]:
        group_id = request.body.group_id
        if not self.enabled():
            return E.UNSUPPORTED_VERSION, None
        if not self.auth.authorize(request, op, GROUP, group_id):
            return E.GROUP_AUTHORIZATION_FAILED, None
        return self.group_coordinator.share_group_for_offsets(group_id, create)

    def _topic_error(self, request, name: str) -> tuple[int, object]:
        """(error, topic): READ on the topic, and the topic known."""
        if not self.auth.authorize(request, READ, TOPIC, name):
            return E.TOPIC_AUTHORIZATION_FAILED, None
        topic = self.metadata_cache.get_topic(name)
        return (E.UNKNOWN_TOPIC_OR_PARTITION, None) if topic is None else (E.NONE, topic)

    @handles(91)
    def handle_alter_share_group_offsets(self, request):
        """AlterShareGroupOffsets (kafka-share-groups --reset-offsets): READ on the group and the topics; the
        share group must be empty (it is made if it does not exist yet)."""
        R = AlterShareGroupOffsetsResponse
        error, message = self._offsets_change_error(request, READ, create=True)
        if error:
            return R(throttle_time_ms=0, error_code=error, error_message=message or E(error).message, responses=[])
        out = []
        for t in request.body.topics:
            error, topic = self._topic_error(request, t.topic_name)
            parts = []
            for p in t.partitions:
                code = error
                if not code and not 0 <= p.partition_index < topic.partitions:
                    code = E.UNKNOWN_TOPIC_OR_PARTITION
                if not code:
                    self.share_partitions.alter_start_offset(request.body.group_id, t.topic_name, p.partition_index,
                                                             p.start_offset)
                parts.append(R.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index,
                                                                       error_code=code,
                                                                       error_message=E(code).message if code else None))
            out.append(R.AlterShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name, topic_id=topic.topic_id if topic is not None else bytes(16), partitions=parts))
        return R(throttle_time_ms=0, error_code=E.NONE, error_message=None, responses=out)

    @handles(92)
    def handle_delete_share_group_offsets(self, request):
        """DeleteShareGroupOffsets (kafka-share-groups --delete-offsets): DELETE on the group, READ on the
        topics; the share group must exist and be empty."""
        R = DeleteShareGroupOffsetsResponse
        error, message = self._offsets_change_error(request, DELETE, create=False)
        if error:
            return R(throttle_time_ms=0, error_code=error, error_message=message or E(error).message, responses=[])
        out = []
        for t in request.body.topics:
            code, topic = self._topic_error(request, t.topic_name)
            if not code:
                self.share_partitions.delete_offsets(request.body.group_id, t.topic_name)
            out.append(R.DeleteShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name, topic_id=topic.topic_id if topic is not None else bytes(16), error_code=code,
                error_message=E(code).message if code else None))
        return R(throttle_time_ms=0, error_code=E.NONE, error_message=None, responses=out)


class _Offsets:
    Group = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
    Topic = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseTopic
    Partition = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponsePartition


def _describe_offsets(self, request):
    """DescribeShareGroupOffsets (90): each share partition's start offset, leader epoch and (v1) lag.
    DESCRIBE on the group, DESCRIBE on each topic; without topics, every topic the group has state for."""
    req = request.body
    out = []
    for g in req.groups:
        error = None if self.enabled() else E.UNSUPPORTED_VERSION
        if error is None and not self.auth.authorize(request, DESCRIBE, GROUP, g.group_id):
            error = E.GROUP_AUTHORIZATION_FAILED
        if error is None:
            error, message, _ = self.group_coordinator.handle_share_group_describe(g.group_id)
            error = None if error == E.NONE else error
        if error is not None:
            out.append(_Offsets.Group(group_id=g.group_id, topics=[], error_code=error, error_message=E(error).message))
            continue
        wanted = [(t.topic_name, list(t.partitions)) for t in g.topics] if g.topics is not None else [
            (name, None) for name in sorted(self.share_partitions.group_topics(g.group_id))]
        topics = []
        for name, partitions in wanted:
            topic = self.metadata_cache.get_topic(name)
            if partitions is None:
                partitions = list(range(topic.partitions)) if topic is not None else []
            allowed = self.auth.authorize(request, DESCRIBE, TOPIC, name)
            parts = []
            for index in partitions:
                if not allowed or topic is None:
                    code = E.TOPIC_AUTHORIZATION_FAILED if not allowed else E.UNKNOWN_TOPIC_OR_PARTITION
                    parts.append(_Offsets.Partition(partition_index=index, start_offset=-1, leader_epoch=-1, lag=-1,
                                                    error_code=code, error_message=E(code).message))
                    continue
                start, epoch, lag = self.share_partitions.offsets_summary(g.group_id, name, index)
                parts.append(_Offsets.Partition(partition_index=index, start_offset=start, leader_epoch=epoch,
                                                lag=lag, error_code=E.NONE, error_message=None))
            topics.append(_Offsets.Topic(topic_name=name, topic_id=topic.topic_id if topic is not None else bytes(16),
                                         partitions=parts))
        out.append(_Offsets.Group(group_id=g.group_id, topics=topics, error_code=E.NONE, error_message=None))
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=out)

