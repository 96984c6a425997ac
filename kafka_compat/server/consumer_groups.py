"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69): the consumer group protocol of KIP-848.

Built only when `group.coordinator.rebalance.protocols` names "consumer" (Kafka 4's
default), so ApiVersions advertises the two keys exactly then; without them clients
stay on the classic protocol. With `group.version` finalized at 0 (KIP-584) both stay advertised and
answer UNSUPPORTED_VERSION, as Kafka 4's KafkaApis does. Topic ids on the wire, names in the coordinator's
answers to Describe come from the MetadataCache.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode
from ..protocol.messages.consumer_group_describe import ConsumerGroupDescribeResponse
from ..protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse
from .auth_helper import AUTHORIZED_OPS_NOT_REQUESTED, DESCRIBE, GROUP, NO_AUTHORIZER, READ, TOPIC, AuthHelper
from .features import GROUP_VERSION, FeatureCache
from .groups import _client_host, _parked
from .registry import handles

E = ErrorCode
MEMBER_TYPE_CLASSIC, MEMBER_TYPE_CONSUMER = 0, 1


def described_assignment(metadata_cache, response_cls, assignment: dict):
    """A member's {topic id: partitions} as a describe response's Assignment, with the topics' names."""
    out = []
    for topic_id, partitions in sorted(assignment.items()):
        topic = metadata_cache.topic_by_id(topic_id)
        out.append(response_cls.TopicPartitions(topic_id=topic_id, topic_name=topic.name if topic is not None else "",
                                                partitions=sorted(partitions)))
    return response_cls.Assignment(topic_partitions=out)


class FeatureGatedGroupsApi:
    """The collaborators of the modern group protocols' handlers, and the feature turning them on."""
    FEATURE = GROUP_VERSION

    def __init__(self, group_coordinator, metadata_cache, auth: AuthHelper = NO_AUTHORIZER,
                 features: FeatureCache | None = None):
        self.group_coordinator = group_coordinator
        self.metadata_cache = metadata_cache
        self.auth = auth
        self.features = features if features is not None else FeatureCache()

    def _enabled(self) -> bool:
        """On while the feature is finalized at 1 or more (GroupVersion.GV_1, StreamsVersion.SV_1)."""
        return self.features.finalized_level(self.FEATURE) >= 1


class ConsumerGroupsApi(FeatureGatedGroupsApi):

    @handles(68)
    async def handle_consumer_group_heartbeat(self, request):
        """READ on the group, DESCRIBE on every topic subscribed by name (as Kafka's KafkaApis)."""
        req = request.body
        denied = None
        if not self._enabled():
            denied = E.UNSUPPORTED_VERSION
        elif not self.auth.authorize(request, READ, GROUP, req.group_id):
            denied = E.GROUP_AUTHORIZATION_FAILED
        elif req.subscribed_topic_names and len(self.auth.filter_authorized(
                request, DESCRIBE, TOPIC, req.subscribed_topic_names)) < len(set(req.subscribed_topic_names)):
            denied = E.TOPIC_AUTHORIZATION_FAILED
        if denied is not None:
            return ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=denied,
                                                  error_message=None if denied == E.UNSUPPORTED_VERSION
                                                  else E(denied).message, member_id=None, member_epoch=0,
                                                  heartbeat_interval_ms=0)
        owned = None if req.topic_partitions is None else [
            (tp.topic_id, list(tp.partitions)) for tp in req.topic_partitions]
        regex = req.subscribed_topic_regex if request.api_version >= 1 else None
        result = await _parked(lambda done: self.group_coordinator.handle_consumer_group_heartbeat(
            request.api_version, req.group_id, req.member_id, req.member_epoch, req.instance_id, req.rack_id,
            req.rebalance_timeout_ms, req.subscribed_topic_names, regex, req.server_assignor, owned,
            request.client_id or "", _client_host(request), done))
        if result.error:        # as Kafka: an error answer carries only the error
            return ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=result.error,
                                                  error_message=result.message, member_id=None, member_epoch=0,
                                                  heartbeat_interval_ms=0)
        assignment = None
        if result.assignment is not None:
            assignment = ConsumerGroupHeartbeatResponse.Assignment(topic_partitions=[
                ConsumerGroupHeartbeatResponse.TopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(result.assignment.items())])
        return ConsumerGroupHeartbeatResponse(
            throttle_time_ms=0, error_code=result.error,
            error_message=None, member_id=result.member_id, member_epoch=result.member_epoch,
            heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)

    def _assignment(self, assignment: dict) -> ConsumerGroupDescribeResponse.Assignment:
        return described_assignment(self.metadata_cache, ConsumerGroupDescribeResponse, assignment)

    @handles(69)
    def handle_consumer_group_describe(self, request):
        req = request.body
        v = request.api_version
        out = []
        if not self._enabled():
            return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=[
                ConsumerGroupDescribeResponse.DescribedGroup(error_code=E.UNSUPPORTED_VERSION, group_id=g)
                for g in req.group_ids])
        for group_id in req.group_ids:
            if not self.auth.authorize(request, DESCRIBE, GROUP, group_id):
                out.append(ConsumerGroupDescribeResponse.DescribedGroup(
                    error_code=E.GROUP_AUTHORIZATION_FAILED, error_message=E.GROUP_AUTHORIZATION_FAILED.message,
                    group_id=group_id))
                continue
            error, message, group = self.group_coordinator.handle_consumer_group_describe(group_id)
            if group is None:
                out.append(ConsumerGroupDescribeResponse.DescribedGroup(
                    error_code=error, error_message=message or E(error).message, group_id=group_id,
                    group_state="Dead" if error == E.GROUP_ID_NOT_FOUND else ""))
                continue
            members = []
            for m in group.members.values():
                members.append(ConsumerGroupDescribeResponse.Member(
                    member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                    client_id=m.client_id, client_host=m.client_host,
                    subscribed_topic_names=list(m.subscribed_topic_names),
                    subscribed_topic_regex=m.subscribed_topic_regex,
                    assignment=self._assignment(m.assigned_partitions),
                    target_assignment=self._assignment(group.target_assignment.get(m.member_id, {})),
                    member_type=(MEMBER_TYPE_CLASSIC if m.use_classic_protocol else MEMBER_TYPE_CONSUMER)
                    if v >= 1 else -1))
            out.append(ConsumerGroupDescribeResponse.DescribedGroup(
                error_code=E.NONE, group_id=group_id, group_state=group.state_string, group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch, assignor_name=self.group_coordinator.assignor_name(group),
                members=members,
                authorized_operations=self.auth.authorized_operations(request, GROUP, group_id)
                if req.include_authorized_operations else AUTHORIZED_OPS_NOT_REQUESTED))
        return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=out)
