"""StreamsGroupHeartbeat (88) and StreamsGroupDescribe (89): Streams groups (KIP-1071).

Built when `group.coordinator.rebalance.protocols` names "streams" (the default), so ApiVersions
advertises the two keys; with `streams.version` finalized at 0 (KIP-584) they answer UNSUPPORTED_VERSION,
as Kafka's KafkaApis does for a feature finalized off. Authorization as Kafka's: READ on the group, and
DESCRIBE on the source topics (CREATE on the cluster or the internal topics to have them created).

The v1s (Kafka 4.4): the heartbeat answers the acceptable recovery lag as an int64, may report
MISSING_CLIENT_TAGS, and says whether the broker wants a topology description (KIP-1331); the describe
names the group's assignor (KIP-1357) and the description's status. KIP-1331's descriptions live in a
broker plugin (group.streams.topology.description.plugin.class); without one, as here and in Kafka's
default configuration, none is ever wanted, the describe says NOT_STORED when asked, and
StreamsGroupTopologyDescriptionUpdate (93) answers what Kafka's GroupCoordinatorService answers then.
"""
from __future__ import annotations

from ..group.streams.streams_group_protocol import (
    ACCEPTABLE_RECOVERY_LAG,
    ACCEPTABLE_RECOVERY_LAG_V1,
    TASK_OFFSET_INTERVAL_MS,
    StreamsHeartbeat,
)
from ..group.streams.tasks import TasksTuple
from ..group.streams.topology import topology_from_request
from ..protocol.errors import ErrorCode
from ..protocol.messages.streams_group_describe import StreamsGroupDescribeResponse as D
from ..protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatResponse as H
from ..protocol.messages.streams_group_topology_description_update import (
    StreamsGroupTopologyDescriptionUpdateResponse as TDU,
)
from .auth_helper import AUTHORIZED_OPS_NOT_REQUESTED, DESCRIBE, GROUP, READ, TOPIC
from .consumer_groups import FeatureGatedGroupsApi
from .features import STREAMS_VERSION
from .groups import _client_host, _parked
from .registry import handles

E = ErrorCode
# StreamsGroupDescribe v1's TopologyDescriptionStatus (no plugin here, so never ERROR or AVAILABLE)
NOT_REQUESTED, NOT_STORED = 0, 1


def _tasks_in(items):
    return None if items is None else [(t.subtopology_id, t.partitions) for t in items]


def _task_ids(cls, tasks: dict) -> list:
    return [cls(subtopology_id=s, partitions=sorted(p)) for s, p in sorted(tasks.items())]


class StreamsGroupsApi(FeatureGatedGroupsApi):
    FEATURE = STREAMS_VERSION       # on from StreamsVersion.SV_1

    @handles(88)
    async def handle_streams_group_heartbeat(self, request):
        req = request.body
        denied = None
        sources = sorted({t for s in (req.topology.subtopologies if req.topology is not None else ())
                          for t in s.source_topics or ()})
        if not self._enabled():
            denied = E.UNSUPPORTED_VERSION
        elif not self.auth.authorize(request, READ, GROUP, req.group_id):
            denied = E.GROUP_AUTHORIZATION_FAILED
        elif sources and len(self.auth.filter_authorized(request, DESCRIBE, TOPIC, sources)) < len(sources):
            denied = E.TOPIC_AUTHORIZATION_FAILED
        if denied is None and req.topology is not None and any(s.source_topic_regex
                                                               for s in req.topology.subtopologies or ()):
            return H(error_code=E.INVALID_REQUEST, status=[],     # as Kafka 4.4
                     error_message="Regular expressions for source topics are not supported yet.")
        if denied is not None:
            return H(error_code=denied, error_message=None if denied == E.UNSUPPORTED_VERSION else E(denied).message,
                     status=[])
        owned = None
        if req.active_tasks is not None or req.standby_tasks is not None or req.warmup_tasks is not None:
            owned = TasksTuple.of(_tasks_in(req.active_tasks) or (), _tasks_in(req.standby_tasks) or (),
                                  _tasks_in(req.warmup_tasks) or ())
        endpoint = req.user_endpoint
        hb = StreamsHeartbeat(
            req.group_id, req.member_id, req.member_epoch, req.endpoint_information_epoch, req.instance_id,
            req.rack_id, req.rebalance_timeout_ms,
            topology_from_request(req.topology) if req.topology is not None else None, owned, req.process_id,
            (endpoint.host, endpoint.port) if endpoint is not None else None,
            None if req.client_tags is None else tuple(sorted((kv.key, kv.value) for kv in req.client_tags)),
            None if req.task_offsets is None else tuple((o.subtopology_id, o.partition, o.offset)
                                                        for o in req.task_offsets),
            None if req.task_end_offsets is None else tuple((o.subtopology_id, o.partition, o.offset)
                                                            for o in req.task_end_offsets),
            req.shutdown_application, request.client_id or "", _client_host(request), request.api_version)
        result = await _parked(lambda done: self.group_coordinator.handle_streams_group_heartbeat(hb, done))
        if result.error:
            return H(error_code=result.error, error_message=result.message, status=[])    # Kafka: [], not null
        resp = H(member_id=result.member_id, member_epoch=result.member_epoch,
                 heartbeat_interval_ms=result.heartbeat_interval_ms,
                 acceptable_recovery_lag_legacy=ACCEPTABLE_RECOVERY_LAG,
                 acceptable_recovery_lag=ACCEPTABLE_RECOVERY_LAG_V1,
                 task_offset_interval_ms=TASK_OFFSET_INTERVAL_MS,
                 status=[H.Status(status_code=c, status_detail=d) for c, d in result.status],
                 endpoint_information_epoch=result.endpoint_information_epoch)
        if result.tasks is not None:
            resp.active_tasks = _task_ids(H.TaskIds, result.tasks.active)
            resp.standby_tasks = _task_ids(H.TaskIds, result.tasks.standby)
            resp.warmup_tasks = _task_ids(H.TaskIds, result.tasks.warmup)
        if result.partitions_by_endpoint is not None:
            resp.partitions_by_user_endpoint = [H.EndpointToPartitions(
                user_endpoint=H.Endpoint(host=host, port=port),
                active_partitions=[H.TopicPartition(topic=t, partitions=p) for t, p in active.items()],
                standby_partitions=[H.TopicPartition(topic=t, partitions=p) for t, p in standby.items()])
                for (host, port), active, standby in result.partitions_by_endpoint]
        return resp

    @staticmethod
    def _assignment(tasks: TasksTuple) -> D.Assignment:
        return D.Assignment(active_tasks=_task_ids(D.TaskIds, tasks.active),
                            standby_tasks=_task_ids(D.TaskIds, tasks.standby),
                            warmup_tasks=_task_ids(D.TaskIds, tasks.warmup))

    @staticmethod
    def _topology(group) -> D.Topology | None:
        t = group.topology
        if t is None:
            return None

        def info(i, partitions):
            return D.TopicInfo(name=i.name, partitions=partitions, replication_factor=i.replication_factor,
                               topic_configs=[D.KeyValue(key=k, value=v) for k, v in i.configs])
        configured = group.configured.to_create if group.configured is not None else {}
        subs = []
        for s in t.subtopologies:
            n = group.configured.tasks.get(s.subtopology_id, 0) if group.configured is not None else 0
            subs.append(D.Subtopology(
                subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
                repartition_sink_topics=list(s.repartition_sink_topics),
                state_changelog_topics=[info(i, i.partitions or n) for i in s.state_changelog_topics],
                repartition_source_topics=[info(i, i.partitions or (configured[i.name].partitions
                                                                   if i.name in configured else n))
                                           for i in s.repartition_source_topics]))
        return D.Topology(epoch=t.epoch, subtopologies=subs)

    @handles(89)
    def handle_streams_group_describe(self, request):
        req = request.body
        if not self._enabled():
            return D(groups=[D.DescribedGroup(error_code=E.UNSUPPORTED_VERSION, group_id=g) for g in req.group_ids])
        out = []
        for group_id in req.group_ids:
            if not self.auth.authorize(request, DESCRIBE, GROUP, group_id):
                out.append(D.DescribedGroup(error_code=E.GROUP_AUTHORIZATION_FAILED,
                                            error_message=E.GROUP_AUTHORIZATION_FAILED.message, group_id=group_id))
                continue
            error, message, group = self.group_coordinator.handle_streams_group_describe(group_id)
            if group is None:
                out.append(D.DescribedGroup(error_code=error, error_message=message or E(error).message,
                                            group_id=group_id))
                continue
            members = []
            for m in group.members.values():
                members.append(D.Member(
                    member_id=m.member_id, member_epoch=m.member_epoch, instance_id=m.instance_id, rack_id=m.rack_id,
                    client_id=m.client_id, client_host=m.client_host, topology_epoch=m.topology_epoch,
                    process_id=m.process_id,
                    user_endpoint=D.Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1])
                    if m.user_endpoint else None,
                    client_tags=[D.KeyValue(key=k, value=v) for k, v in m.client_tags],
                    task_offsets=[D.TaskOffset(subtopology_id=s, partition=p, offset=o) for s, p, o in m.task_offsets],
                    task_end_offsets=[D.TaskOffset(subtopology_id=s, partition=p, offset=o)
                                      for s, p, o in m.task_end_offsets],
                    assignment=self._assignment(m.assigned),
                    target_assignment=self._assignment(group.target_assignment.get(m.member_id, TasksTuple())),
                    is_classic=False))
            out.append(D.DescribedGroup(
                error_code=E.NONE, group_id=group_id, group_state=group.state_string, group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch, topology=self._topology(group), members=members,
                authorized_operations=self.auth.authorized_operations(request, GROUP, group_id)
                if req.include_authorized_operations else AUTHORIZED_OPS_NOT_REQUESTED,
                topology_description_status=NOT_STORED if req.include_topology_description else NOT_REQUESTED,
                assignor_name=self.group_coordinator.group_configs.group_config(group_id)["streams.assignor.name"]))
        return D(groups=out)

    @handles(93)
    def handle_streams_group_topology_description_update(self, request):
        """KafkaApis' checks (the streams protocol on, READ on the group), then the coordinator's: active, and a
        topology description plugin to hand the description to, which this broker never has."""
        if not self._enabled():
            return TDU(error_code=E.UNSUPPORTED_VERSION, error_message=E.UNSUPPORTED_VERSION.message)
        if not self.auth.authorize(request, READ, GROUP, request.body.group_id):
            return TDU(error_code=E.GROUP_AUTHORIZATION_FAILED, error_message=E.GROUP_AUTHORIZATION_FAILED.message)
        if not self.group_coordinator.active:
            return TDU(error_code=E.COORDINATOR_NOT_AVAILABLE)
        return TDU(error_code=E.UNSUPPORTED_VERSION,
                   error_message="The broker has no streams group topology description plugin configured.")
