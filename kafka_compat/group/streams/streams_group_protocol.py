"""StreamsGroupHeartbeat: the streams group protocol of KIP-1071, on the group coordinator.

One heartbeat, in Kafka's order: check the request, get or create the group, get or create the member
and check its epoch, take the topology a joining member declares (a higher topology epoch replaces the
group's), configure the topology against the metadata (asking for the internal topics that are missing
to be created; until they exist the group is NotReady and the Status says why), bump the group epoch
when membership, a member's process or tags, the topology or the partition counts changed, compute a
new target assignment with the sticky task assignor when the group epoch is ahead of it, move the member
one step toward its target (revoke before assign), re-arm its session timer, answer.

The session timeout and heartbeat interval come from the group's configs (streams.session.timeout.ms,
streams.heartbeat.interval.ms, falling back to group.streams.*), the standby count from
streams.num.standby.replicas. A member that does not revoke within its rebalance timeout is fenced.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ...clock import now_ms
from ...protocol.errors import ErrorCode, KafkaError
from ..classic.classic_group import ClassicGroup
from ..group_metadata_manager import STORE_GROUP_ERRORS
from ..timer import Timer
from .assignor import MemberSpec, TaskSpec, assign
from .records import EMPTY_SNAPSHOT, changes, signature_hash, snapshot
from .streams_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    MemberState,
    StreamsGroup,
    StreamsGroupMember,
    reconcile,
)
from .tasks import EMPTY, TasksTuple, minus
from .topology import (
    ASSIGNMENT_DELAYED,
    MISSING_CLIENT_TAGS,
    SHUTDOWN_APPLICATION,
    STALE_TOPOLOGY,
    configure,
    validate_topology,
)

log = logging.getLogger(__name__)
E = ErrorCode

ACCEPTABLE_RECOVERY_LAG = 0         # v0's AcceptableRecoveryLagLegacy: Kafka 4.4 leaves it at 0
# v1's AcceptableRecoveryLag: Kafka 4.4's group.streams.acceptable.recovery.lag, an internal config (not
# described, not settable per group) at its default
ACCEPTABLE_RECOVERY_LAG_V1 = 10000
TASK_OFFSET_INTERVAL_MS = 60000


@dataclass
class StreamsHeartbeat:
    """The request, as the coordinator needs it (tasks as TasksTuple, the topology parsed)."""
    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: object = None                 # StreamsTopology or None
    owned: TasksTuple | None = None         # None: not reported
    process_id: str | None = None
    user_endpoint: tuple | None = None
    client_tags: tuple | None = None
    task_offsets: tuple | None = None
    task_end_offsets: tuple | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""
    api_version: int = 0            # v1 clients understand MISSING_CLIENT_TAGS (KAFKA-20744)


@dataclass
class StreamsHeartbeatResult:
    error: int = E.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    status: list = field(default_factory=list)     # [(code, detail)]
    tasks: TasksTuple | None = None                 # None: unchanged
    endpoint_information_epoch: int = 0
    partitions_by_endpoint: list | None = None      # [((host, port), active {topic: [p]}, standby {topic: [p]})]


def _fail(code: int, message: str | None = None):
    raise KafkaError(code, message)


class StreamsGroupProtocol:
    def __init__(self, config, groups, metadata_cache, create_topics, clock=now_ms, group_configs=None):
        """`groups` is the GroupMetadataManager; `create_topics({name: TopicInfo})` asks for internal topics."""
        self.groups = groups
        self.metadata_cache = metadata_cache
        self.create_topics = create_topics
        self.clock = clock
        self.group_configs = group_configs
        self.config = config
        self.max_size = config["group.streams.max.size"]
        self.timer = Timer()

    def shutdown(self) -> None:
        self.timer.cancel_all()

    def _group_config(self, group_id: str, name: str) -> int:
        if self.group_configs is None:
            return self.config["group." + name]
        return self.group_configs.group_config(group_id)[name]

    def _partitions_of(self, topic: str) -> int | None:
        t = self.metadata_cache.get_topic(topic)
        return t.partitions if t is not None and t.partitions > 0 else None

    # ------------------------------------------------------------ the heartbeat
    def heartbeat(self, hb: StreamsHeartbeat, callback) -> None:
        """``callback(StreamsHeartbeatResult)`` once what the heartbeat changed is durable."""
        group = self.groups.get_group(hb.group_id)
        before = snapshot(group) if isinstance(group, StreamsGroup) else EMPTY_SNAPSHOT
        try:
            self._validate(hb)
            if hb.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                result = self._leave(hb)
            else:
                result = self._heartbeat(hb)
        except KafkaError as e:
            result = StreamsHeartbeatResult(e.error_code, str(e) or None)
        group = self.groups.get_group(hb.group_id)
        if not isinstance(group, StreamsGroup):
            callback(result)
            return
        self._persist(group, before, lambda error: callback(
            result if error == E.NONE or result.error else StreamsHeartbeatResult(error)))

    def _persist(self, group: StreamsGroup, before, callback=None) -> None:
        """Append the records that take the stored group from `before` to what it is now (acks=-1)."""
        records = [r.encode() for r in changes(before, group)]
        if not records:
            if callback is not None:
                callback(E.NONE)
            return
        self.groups.runtime.append(group.group_id, records, lambda error: callback(
            STORE_GROUP_ERRORS.get(error, error)) if callback is not None else None)

    @staticmethod
    def _validate(hb: StreamsHeartbeat) -> None:
        """Kafka's throwIfStreamsGroupHeartbeatRequestIsInvalid."""
        for value, what in ((hb.member_id, "MemberId"), (hb.group_id, "GroupId"), (hb.instance_id, "InstanceId"),
                            (hb.rack_id, "RackId")):
            if value == "" or (value is None and what in ("MemberId", "GroupId")):
                _fail(E.INVALID_REQUEST, f"{what} can't be empty.")
        if hb.member_epoch == 0:
            if hb.rebalance_timeout_ms == -1:
                _fail(E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if hb.owned is not None and not hb.owned.is_empty():
                _fail(E.INVALID_REQUEST, "ActiveTasks, StandbyTasks and WarmupTasks must be empty when (re-)joining.")
            if hb.topology is None:
                _fail(E.INVALID_REQUEST, "Topology must be non-null when (re-)joining.")
            if hb.process_id is None:
                _fail(E.INVALID_REQUEST, "ProcessId can't be null.")
            validate_topology(hb.topology)
        elif hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if hb.instance_id is None:
                _fail(E.INVALID_REQUEST, "InstanceId can't be null.")
        elif hb.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            _fail(E.INVALID_REQUEST, f"MemberEpoch is {hb.member_epoch}, but must be greater than or equal to -2.")
        if hb.member_epoch != 0 and hb.topology is not None:
            _fail(E.INVALID_REQUEST, "Topology can only be provided when (re-)joining.")

    def _get_or_create_group(self, group_id: str, create: bool) -> StreamsGroup:
        group = self.groups.get_group(group_id)
        if isinstance(group, StreamsGroup):
            return group
        if group is None or (create and isinstance(group, ClassicGroup) and group.is_empty):
            if not create:
                _fail(E.GROUP_ID_NOT_FOUND, f"Streams group {group_id} not found.")
            group = StreamsGroup(group_id)
            self.groups.put(group)
            log.info("streams group %s created", group_id)
            return group
        _fail(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")

    def _member(self, group: StreamsGroup, hb: StreamsHeartbeat) -> StreamsGroupMember:
        member = group.members.get(hb.member_id)
        if hb.member_epoch == 0:
            if len(group.members) >= self.max_size and member is None:
                _fail(E.GROUP_MAX_SIZE_REACHED, f"The streams group has reached its maximum capacity of "
                                                f"{self.max_size} members.")
            if hb.instance_id is not None:
                other = group.static_member(hb.instance_id)
                if other is not None and other.member_id != hb.member_id:
                    if other.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                        _fail(E.UNRELEASED_INSTANCE_ID, f"Static member {other.member_id} with instance id "
                                                        f"{hb.instance_id} is not released yet.")
                    self._remove(group, other.member_id, "it is replaced by a new static member")
            if member is None:
                return StreamsGroupMember(hb.member_id)
            # a repeated join (its answer was lost) or a member starting over: it holds nothing now
            reset = member.with_(member_epoch=0, state=MemberState.STABLE, assigned=EMPTY, pending_revocation=EMPTY)
            group.put_member(reset)
            return reset
        if member is None:
            _fail(E.UNKNOWN_MEMBER_ID, f"Member {hb.member_id} is not a member of group {group.group_id}.")
        if hb.member_epoch > member.member_epoch:
            _fail(E.FENCED_MEMBER_EPOCH, f"The streams group member has a greater member epoch "
                                         f"({hb.member_epoch}) than the one known by the group coordinator "
                                         f"({member.member_epoch}). The member must abandon all its tasks and rejoin.")
        if hb.member_epoch < member.member_epoch:
            lost_answer = hb.member_epoch == member.previous_member_epoch and hb.owned is not None and \
                not any(minus(o, a) for o, a in zip(hb.owned, member.assigned))
            if not lost_answer:
                _fail(E.FENCED_MEMBER_EPOCH, f"The streams group member has a smaller member epoch "
                                             f"({hb.member_epoch}) than the one known by the group coordinator "
                                             f"({member.member_epoch}). The member must abandon all its tasks and "
                                             f"rejoin.")
        return member

    def _heartbeat(self, hb: StreamsHeartbeat) -> StreamsHeartbeatResult:
        group = self._get_or_create_group(hb.group_id, hb.member_epoch == 0)
        member = self._member(group, hb)
        is_new = hb.member_id not in group.members
        if hb.shutdown_application:
            group.shutdown_requested = True
        bump = is_new
        if hb.topology is not None and (group.topology is None or hb.topology.epoch > group.topology.epoch
                                        or (is_new and not group.members)):
            if group.topology != hb.topology:
                log.info("streams group %s: topology epoch %d with %d subtopologies", group.group_id,
                         hb.topology.epoch, len(hb.topology.subtopologies))
                group.topology = hb.topology
                bump = True
        updated = member.with_(
            instance_id=hb.instance_id if hb.instance_id is not None else member.instance_id,
            rack_id=hb.rack_id if hb.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=hb.rebalance_timeout_ms if hb.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            topology_epoch=hb.topology.epoch if hb.topology is not None else member.topology_epoch,
            process_id=hb.process_id if hb.process_id is not None else member.process_id,
            user_endpoint=hb.user_endpoint if hb.user_endpoint is not None else member.user_endpoint,
            client_tags=hb.client_tags if hb.client_tags is not None else member.client_tags,
            task_offsets=hb.task_offsets if hb.task_offsets is not None else member.task_offsets,
            task_end_offsets=hb.task_end_offsets if hb.task_end_offsets is not None else member.task_end_offsets,
            client_id=hb.client_id, client_host=hb.client_host)
        if not is_new and (updated.process_id, updated.rack_id, updated.client_tags, updated.topology_epoch) != \
                (member.process_id, member.rack_id, member.client_tags, member.topology_epoch):
            bump = True
        group.put_member(updated)
        status = self._configure(group)
        if status is None:
            bump = True
            status = list(group.configured.status)
        if bump:
            group.group_epoch += 1
            log.info("streams group %s: epoch bumped to %d", group.group_id, group.group_epoch)
        if self._assignment_delayed(group):
            status.insert(0, (ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance "
                                                  "delay."))
            if group.group_epoch > group.assignment_epoch:
                self._update_target_assignment(group, empty=True)     # members move on, with no tasks yet
        else:
            if not group.initial_assignment_done:
                group.initial_assignment_done = True
                if group.assignment_epoch and group.assignment_epoch == group.group_epoch:
                    group.group_epoch += 1      # the delay is over: a new epoch for the first real assignment
            if group.group_epoch > group.assignment_epoch:
                self._update_target_assignment(group)
        before = group.members[hb.member_id]
        if before.state == MemberState.UNREVOKED_TASKS and hb.owned is not None and \
                not hb.owned.contains_any(before.pending_revocation):
            group.put_member(before.with_(pending_revocation=EMPTY))      # revoked: others may take them now
        after = reconcile(before, group.assignment_epoch, group.target_assignment.get(hb.member_id, EMPTY),
                          hb.owned, group.active_owner, group.other_copies)
        group.put_member(after)
        self._arm_timers(group, after)
        if group.topology is not None and after.topology_epoch < group.topology.epoch:
            status.append((STALE_TOPOLOGY, f"The member's topology epoch {after.topology_epoch} is behind the "
                                           f"group's {group.topology.epoch}."))
        if group.shutdown_requested:
            status.append((SHUTDOWN_APPLICATION, "An application instance requested a shutdown."))
        if hb.api_version >= 1:
            missing = self._missing_client_tags(group.group_id, after)
            if missing:
                status.append((MISSING_CLIENT_TAGS, f"Missing required client tags for rack-aware standby "
                                                    f"assignment: [{', '.join(missing)}]. Configure them via "
                                                    f"'client.tag.<tagKey>' in your Streams config."))
        changed = hb.member_epoch == 0 or after.assigned != member.assigned or after.member_epoch != hb.member_epoch
        if log.isEnabledFor(logging.DEBUG):
            log.debug("streams heartbeat %s/%s: epoch %d -> %d %s, active %s standby %s%s", group.group_id,
                      hb.member_id, hb.member_epoch, after.member_epoch, after.state.name, after.assigned.active,
                      after.assigned.standby, " (sent)" if changed else "")
        result = StreamsHeartbeatResult(E.NONE, None, hb.member_id, after.member_epoch,
                                        self._group_config(group.group_id, "streams.heartbeat.interval.ms"),
                                        status, after.assigned if changed else None,
                                        group.endpoint_information_epoch)
        if hb.endpoint_information_epoch < group.endpoint_information_epoch and \
                any(m.user_endpoint for m in group.members.values()):
            result.partitions_by_endpoint = self._endpoints(group)
        return result

    def _missing_client_tags(self, group_id: str, member: StreamsGroupMember) -> list[str]:
        """The tags streams.rack.aware.assignment.tags asks for that the member does not report."""
        wanted = self._group_config(group_id, "streams.rack.aware.assignment.tags") or []
        if isinstance(wanted, str):
            wanted = [t.strip() for t in wanted.split(",") if t.strip()]
        have = {k for k, _ in member.client_tags or ()}
        return [t for t in wanted if t not in have]

    def _assignment_delayed(self, group: StreamsGroup) -> bool:
        """A new group's first assignment waits streams.initial.rebalance.delay.ms for more members to join."""
        if group.initial_assignment_done:
            return False
        delay = self._group_config(group.group_id, "streams.initial.rebalance.delay.ms")
        if group.created_ms is None:
            group.created_ms = self.clock()
        return self.clock() < group.created_ms + delay

    def _configure(self, group: StreamsGroup) -> list | None:
        """Configure the topology; None when the result moved the group epoch (it changed), else the status."""
        if group.topology is None:
            return []
        configured = configure(group.topology, self._partitions_of)
        if configured.to_create:
            self.create_topics(configured.to_create)
        h = signature_hash(configured.signature)
        changed = h != group.metadata_hash or group.configured_topology_epoch != group.topology.epoch or \
            (group.configured is not None and group.configured.topology != group.topology)
        group.configured = configured
        if changed:
            group.metadata_hash, group.configured_topology_epoch = h, group.topology.epoch
            return None
        return list(configured.status)

    def _update_target_assignment(self, group: StreamsGroup, empty: bool = False) -> None:
        configured = group.configured
        if empty or configured is None or not configured.is_ready:
            group.target_assignment = {m: EMPTY for m in group.members}
        else:
            specs = {m: MemberSpec(x.process_id, group.target_assignment.get(m, x.assigned))
                     for m, x in group.members.items()}
            subs = {s.subtopology_id: TaskSpec(configured.tasks[s.subtopology_id], s.is_stateful)
                    for s in group.topology.subtopologies}
            standbys = self._group_config(group.group_id, "streams.num.standby.replicas")
            group.target_assignment = assign(specs, subs, standbys)
        group.assignment_epoch = group.group_epoch
        if not empty and configured is not None and configured.is_ready:
            group.endpoint_information_epoch += 1
        log.info("streams group %s: target assignment at epoch %d for %d members", group.group_id,
                 group.assignment_epoch, len(group.members))

    def _endpoints(self, group: StreamsGroup) -> list:
        out = []
        topology = group.topology
        for m in sorted(group.members.values(), key=lambda x: x.member_id):
            if not m.user_endpoint:
                continue
            kinds = []
            for tasks in (m.assigned.active, m.assigned.standby):
                by_topic: dict = {}
                for sub, parts in tasks.items():
                    s = topology.subtopology(sub) if topology is not None else None
                    if s is None:
                        continue
                    for t in (*s.source_topics, *(i.name for i in s.repartition_source_topics)):
                        by_topic.setdefault(t, set()).update(parts)
                kinds.append({t: sorted(p) for t, p in sorted(by_topic.items())})
            out.append((m.user_endpoint, kinds[0], kinds[1]))
        return out

    # ------------------------------------------------------------ timers, leaving, fencing
    def _arm_timers(self, group: StreamsGroup, member: StreamsGroupMember) -> None:
        gid, mid = group.group_id, member.member_id
        self.timer.schedule(("session", gid, mid), self._group_config(gid, "streams.session.timeout.ms"),
                            lambda: self._expire(gid, mid, "its session timed out"))
        if member.state == MemberState.UNREVOKED_TASKS and member.rebalance_timeout_ms > 0:
            self.timer.schedule_if_absent(("revoke", gid, mid), member.rebalance_timeout_ms,
                                          lambda: self._expire(gid, mid, "it did not revoke its tasks in time"))
        else:
            self.timer.cancel(("revoke", gid, mid))

    def _expire(self, group_id: str, member_id: str, why: str) -> None:
        group = self.groups.get_group(group_id)
        if isinstance(group, StreamsGroup) and member_id in group.members:
            before = snapshot(group)
            self._remove(group, member_id, why)
            self._persist(group, before)

    def on_group_loaded(self, group: StreamsGroup) -> None:
        """A group read back from the log: its topology is checked against the metadata (the group epoch
        moves at the next heartbeat if that changed meanwhile), its members' sessions start now."""
        group.initial_assignment_done = group.assignment_epoch > 0
        if group.topology is not None:
            group.configured = configure(group.topology, self._partitions_of)
        for member in group.members.values():
            self._arm_timers(group, member)

    def _remove(self, group: StreamsGroup, member_id: str, why: str) -> None:
        log.info("streams group %s: member %s leaves: %s", group.group_id, member_id, why)
        group.remove_member(member_id)
        self.timer.cancel(("session", group.group_id, member_id))
        self.timer.cancel(("revoke", group.group_id, member_id))
        group.group_epoch += 1
        if not group.members:
            group.shutdown_requested = False

    def _leave(self, hb: StreamsHeartbeat) -> StreamsHeartbeatResult:
        group = self._get_or_create_group(hb.group_id, False)
        member = group.members.get(hb.member_id)
        if member is None and hb.instance_id is not None:
            member = group.static_member(hb.instance_id)
        if member is None:
            _fail(E.UNKNOWN_MEMBER_ID, f"Member {hb.member_id} is not a member of group {group.group_id}.")
        if hb.instance_id is not None and member.member_id != hb.member_id:
            _fail(E.FENCED_INSTANCE_ID, f"Static member {hb.instance_id} was replaced.")
        self._remove(group, member.member_id, "it left the group")
        return StreamsHeartbeatResult(E.NONE, None, hb.member_id, hb.member_epoch,
                                      self._group_config(group.group_id, "streams.heartbeat.interval.ms"))

    def on_group_unloaded(self, group: StreamsGroup) -> None:
        for member_id in group.members:
            self.timer.cancel(("session", group.group_id, member_id))
            self.timer.cancel(("revoke", group.group_id, member_id))

