"""The consumer group protocol (KIP-848): ConsumerGroupHeartbeat, and classic members inside consumer groups.

One heartbeat does all of it, in Kafka's order: get or create the group (a
non-empty classic group is upgraded when the migration policy allows), get or
create the member and check its epoch, store what changed of its subscription,
bump the group epoch when subscriptions or the subscribed topics changed, compute
a new target assignment when the group epoch is ahead of it, move the member one
step toward its target (revoke before assign), re-arm its session timer, answer.

Every change is a record: replayed on the group at once (the same code loading
uses) and appended to `__consumer_offsets`; the answer waits for the append.

Members that speak the classic protocol (a consumer not upgraded yet in a rolling
upgrade) join the same group through JoinGroup, SyncGroup and Heartbeat: their
member epoch is their generation, SyncGroup hands them the coordinator's
assignment in the consumer protocol's bytes, and Heartbeat answers
REBALANCE_IN_PROGRESS when they must rejoin to move toward their target. When the
last member speaking the new protocol leaves, the group turns classic again.
"""
from __future__ import annotations

import logging
import uuid
from collections import Counter
from dataclasses import dataclass

from ...clock import now_ms
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from ..assignor import assignors_from_config
from ..classic.classic_group import ClassicGroup, GroupState, JoinResult, SyncResult
from ..classic.classic_group_member import ClassicGroupMember
from ..coordinator_records import group_metadata_key, group_metadata_value
from ..group import CONSUMER_PROTOCOL_TYPE, GroupType
from ..group_metadata_manager import STORE_GROUP_ERRORS, classic_group_to_value
from ..timer import Timer
from .consumer_group import ConsumerGroup, TopicMetadata
from .consumer_group_member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
)
from .current_assignment_builder import reconcile
from .records import (
    current_assignment_record,
    group_epoch_record,
    member_metadata_record,
    member_tombstones,
    regular_expression_record,
    subscription_metadata_record,
    target_assignment_epoch_record,
)
from .regex import resolve_regex, validate_regex
from .target_assignment_builder import build_target_assignment, target_assignment_record

log = logging.getLogger(__name__)
E = ErrorCode

MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


@dataclass
class HeartbeatResult:
    error: int = E.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: dict | None = None      # {topic id: frozenset}, None when not sent


def _fail(code: int, message: str | None = None):
    raise KafkaError(code, message)


def _subset(owned, assigned: dict) -> bool:
    if owned is None:
        return False
    for topic_id, parts in owned:
        have = assigned.get(topic_id)
        if have is None and parts:
            return False
        if any(p not in have for p in parts):
            return False
    return True


class ConsumerGroupProtocol:
    def __init__(self, config, groups, classic, metadata_cache, clock=now_ms, group_configs=None):
        """`groups` is the GroupMetadataManager, `classic` the ClassicGroupProtocol (downgrades hand groups to it);
        `group_configs` the GroupConfigManager, whose consumer.* overrides win over the broker's defaults."""
        cfg = config
        self.group_configs = group_configs
        self.groups = groups
        self.classic = classic
        self.metadata_cache = metadata_cache
        self.clock = clock
        self.heartbeat_interval_ms = cfg["group.consumer.heartbeat.interval.ms"]
        # A member waiting for partitions others still own asks again this often (Kafka's defaults make
        # it the same interval; lowering group.consumer.min.heartbeat.interval.ms shortens that wait).
        self.waiting_heartbeat_interval_ms = min(cfg["group.consumer.min.heartbeat.interval.ms"],
                                                 self.heartbeat_interval_ms)
        self.session_timeout_ms = cfg["group.consumer.session.timeout.ms"]
        self.max_size = cfg["group.consumer.max.size"]
        self.classic_max_size = cfg["group.max.size"]
        self.assignors = assignors_from_config(cfg["group.consumer.assignors"])
        self.default_assignor = next(iter(self.assignors))
        policy = cfg["group.consumer.migration.policy"].lower()
        self.upgrade_enabled = policy in ("upgrade", "bidirectional")
        self.downgrade_enabled = policy in ("downgrade", "bidirectional")
        self.timer = Timer()
        self.metadata_version = 0

    def shutdown(self) -> None:
        self.timer.cancel_all()

    def _session_timeout_ms(self, group_id: str) -> int:
        if self.group_configs is None:
            return self.session_timeout_ms
        return self.group_configs.group_config(group_id)["consumer.session.timeout.ms"]

    def _heartbeat_interval_ms(self, group_id: str) -> int:
        if self.group_configs is None:
            return self.heartbeat_interval_ms
        return self.group_configs.group_config(group_id)["consumer.heartbeat.interval.ms"]

    # ------------------------------------------------------------ metadata
    def on_metadata_change(self, topics: set[str]) -> None:
        """Topics were created, deleted or grew partitions: groups that consume them (or whose regex
        may now match differently) recompute their subscription metadata at their next heartbeat."""
        self.metadata_version += 1
        for group in self.groups.consumer_groups():
            if group.subscribed_regexes() or any(group.is_subscribed_to_topic(t) for t in topics):
                group.metadata_refresh_needed = True

    def _subscription_metadata(self, group: ConsumerGroup) -> dict:
        out = {}
        for name in group.subscribed_topic_names():
            topic = self.metadata_cache.get_topic(name)
            if topic is not None and topic.partitions > 0:
                out[name] = TopicMetadata(topic.topic_id, name, topic.partitions)
        return out

    def topic_name(self, topic_id: bytes) -> str | None:
        topic = self.metadata_cache.topic_by_id(topic_id)
        return topic.name if topic is not None else None

    def topic_id(self, name: str) -> bytes | None:
        topic = self.metadata_cache.get_topic(name)
        return topic.topic_id if topic is not None else None

    # ------------------------------------------------------------ ConsumerGroupHeartbeat
    def heartbeat(self, api_version: int, group_id: str, member_id: str, member_epoch: int,
                  instance_id: str | None, rack_id: str | None, rebalance_timeout_ms: int,
                  subscribed_topic_names: list[str] | None, subscribed_topic_regex: str | None,
                  server_assignor: str | None, owned: list | None, client_id: str, client_host: str,
                  callback) -> None:
        """``callback(HeartbeatResult)`` once what changed is durable. `owned` is [(topic id, [partitions])]."""
        records: list = []
        try:
            self._validate_request(api_version, group_id, member_id, member_epoch, instance_id, rack_id,
                                   rebalance_timeout_ms, subscribed_topic_names, subscribed_topic_regex,
                                   server_assignor, owned)
            if member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                self._leave(group_id, member_id, instance_id, member_epoch, callback)
                return
            result = self._heartbeat(group_id, member_id or str(uuid.uuid4()), member_epoch, instance_id, rack_id,
                                     rebalance_timeout_ms, subscribed_topic_names, subscribed_topic_regex,
                                     server_assignor, owned, client_id, client_host, records)
        except KafkaError as e:
            if records:
                # What was applied before the error (a conversion, a replaced member) stays: store it too.
                self._append(group_id, records, lambda error: None)
            callback(HeartbeatResult(e.error_code, str(e), member_id or None, member_epoch))
            return
        self._append(group_id, records, lambda error: callback(
            result if error == E.NONE else HeartbeatResult(error, None, member_id or None, member_epoch)))

    def _validate_request(self, v, group_id, member_id, epoch, instance_id, rack_id, rebalance_timeout_ms, names,
                          regex, assignor, owned) -> None:
        if not group_id:
            _fail(E.INVALID_REQUEST, "GroupId can't be empty.")
        if (v >= 1 or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH) and not member_id:
            _fail(E.INVALID_REQUEST, "MemberId can't be empty.")
        if instance_id == "":
            _fail(E.INVALID_REQUEST, "InstanceId can't be empty.")
        if rack_id == "":
            _fail(E.INVALID_REQUEST, "RackId can't be empty.")
        if epoch == 0:
            if rebalance_timeout_ms == -1:
                _fail(E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if owned is None or owned:
                _fail(E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if names is None and regex is None:
                _fail(E.INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if instance_id is None:
                _fail(E.INVALID_REQUEST, "InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            _fail(E.INVALID_REQUEST, f"MemberEpoch is invalid: {epoch}.")
        if assignor is not None and assignor not in self.assignors:
            _fail(E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {assignor} is not supported. Supported assignors: "
                                          f"{', '.join(self.assignors)}.")
        if regex:
            error = validate_regex(regex)
            if error is not None:
                _fail(E.INVALID_REGULAR_EXPRESSION, error)

    def _heartbeat(self, group_id, member_id, epoch, instance_id, rack_id, rebalance_timeout_ms, names, regex,
                   assignor, owned, client_id, client_host, records) -> HeartbeatResult:
        group = self._get_or_maybe_create_group(group_id, epoch == 0, records)
        self._throw_if_full(group, member_id)
        if instance_id is None:
            member = self._dynamic_member(group, member_id, epoch, owned, records)
        else:
            member = self._static_member(group, member_id, epoch, instance_id, owned, records)
        before = member
        if names is not None or regex is not None:
            log.debug("group %s: member %s subscribes to %s / %r", group_id, member_id, names, regex)
        updated = member.with_(
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=rack_id if rack_id is not None else member.rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms if rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
            server_assignor=assignor if assignor is not None else member.server_assignor,
            subscribed_topic_names=tuple(sorted(set(names))) if names is not None
            else member.subscribed_topic_names,
            subscribed_topic_regex=(regex or None) if regex is not None else member.subscribed_topic_regex,
            client_id=client_id, client_host=client_host, classic_member_metadata=None)
        self._update_member(group, member, updated, records, epoch == 0)
        updated = self._maybe_reconcile(group, group.members[member_id], owned, records)
        self._schedule_session_timeout(group_id, member_id, self._session_timeout_ms(group_id))
        full = epoch == 0 or (rebalance_timeout_ms != -1 and names is not None and owned is not None)
        changed = updated.assigned_partitions != before.assigned_partitions
        interval = self._heartbeat_interval_ms(group_id)
        if updated.state == MemberState.UNRELEASED_PARTITIONS:
            interval = min(interval, self.waiting_heartbeat_interval_ms)
        if log.isEnabledFor(logging.DEBUG):     # one line per heartbeat: what the member said, what it is told
            log.debug("heartbeat group %s member %s (%s): epoch %d owned %s -> epoch %d %s, %d assigned%s, "
                      "%d pending revocation", group_id, member_id, client_id, epoch,
                      "-" if owned is None else sum(len(p) for _, p in owned), updated.member_epoch,
                      updated.state.name, sum(len(p) for p in updated.assigned_partitions.values()),
                      " (sent)" if full or changed else "",
                      sum(len(p) for p in updated.partitions_pending_revocation.values()))
        return HeartbeatResult(E.NONE, None, member_id, updated.member_epoch, interval,
                               dict(updated.assigned_partitions) if full or changed else None)

    def _update_member(self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                       records: list, joining: bool) -> None:
        """Store the member if it changed; bump the group epoch when its subscription changed or the
        subscribed topics' metadata did; compute the target assignment when the group epoch is ahead."""
        is_new = member.member_id not in group.members
        if is_new or updated != member.with_(member_epoch=updated.member_epoch):
            self._emit(group, records, member_metadata_record(group.group_id, updated))
        bump = is_new or not member.same_subscription(updated)
        if bump or group.metadata_refresh_needed:
            group.metadata_refresh_needed = False
            self._refresh_regexes(group, records)
            metadata = self._subscription_metadata(group)
            if metadata != group.subscription_metadata:
                self._emit(group, records, subscription_metadata_record(group.group_id, metadata))
                bump = True
            if bump:
                self._emit(group, records, group_epoch_record(group.group_id, group.group_epoch + 1))
                log.info("group %s: epoch bumped to %d", group.group_id, group.group_epoch)
        if group.group_epoch > group.assignment_epoch:
            self._update_target_assignment(group, records)

    def _refresh_regexes(self, group: ConsumerGroup, records: list) -> None:
        wanted = group.subscribed_regexes()
        if not wanted and not group.resolved_regexes:
            return
        names = [t for t in self.metadata_cache.topic_names() if not self.metadata_cache.get_topic(t).internal]
        for regex in wanted:
            topics = resolve_regex(regex, names)
            resolved = group.resolved_regexes.get(regex)
            if resolved is None or resolved.topics != topics:
                self._emit(group, records, regular_expression_record(group.group_id, regex, topics,
                                                                     self.metadata_version, self.clock()))
        for regex in list(group.resolved_regexes):
            if regex not in wanted:
                self._emit(group, records, regular_expression_record(group.group_id, regex, (), 0, 0)._replace(
                    value=None))

    def _update_target_assignment(self, group: ConsumerGroup, records: list) -> None:
        name = self.preferred_assignor(group)
        target, out = build_target_assignment(group, group.group_epoch, self.assignors[name], dict(group.members),
                                              group.subscription_metadata, group.member_topics)
        log.info("group %s: new target assignment at epoch %d with the %r assignor over %s", group.group_id,
                 group.group_epoch, name, sorted(group.subscription_metadata))
        for r in out:
            self._emit(group, records, r)

    def preferred_assignor(self, group: ConsumerGroup) -> str:
        counts = Counter(m.server_assignor for m in group.members.values() if m.server_assignor in self.assignors)
        return counts.most_common(1)[0][0] if counts else self.default_assignor

    def _maybe_reconcile(self, group: ConsumerGroup, member: ConsumerGroupMember, owned, records: list
                         ) -> ConsumerGroupMember:
        epoch = group.assignment_epoch
        if member.is_reconciled_to(epoch):
            return member
        target = group.target_assignment.get(member.member_id, {})
        updated = reconcile(member, epoch, target, group.current_partition_epoch, owned)
        if updated != member:
            if log.isEnabledFor(logging.DEBUG):
                log.debug("group %s: member %s %s epoch %d -> %s epoch %d, %d assigned, %d to revoke",
                          group.group_id, member.member_id, member.state.name, member.member_epoch,
                          updated.state.name, updated.member_epoch,
                          sum(len(p) for p in updated.assigned_partitions.values()),
                          sum(len(p) for p in updated.partitions_pending_revocation.values()))
            self._emit(group, records, current_assignment_record(group.group_id, updated))
            if not updated.use_classic_protocol:
                self._schedule_rebalance_timeout(group.group_id, updated)
        return group.members[member.member_id]

    def _schedule_rebalance_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        """A member told to revoke has its rebalance timeout to do so, else it is fenced; any other state
        has none."""
        key = ("rebalance", group_id, member.member_id)
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            self.timer.schedule(key, max(member.rebalance_timeout_ms, 0), lambda: self._on_rebalance_timeout(
                group_id, member.member_id, member.member_epoch))
        else:
            self.timer.cancel(key)

    def _emit(self, group, records: list, record) -> None:
        self.groups.replay(record)
        records.append(record)

    def _append(self, group_id: str, records: list, callback) -> None:
        raw = [r.encode() if hasattr(r, "encode") else r for r in records]
        self.groups.runtime.append(group_id, raw, lambda error: callback(STORE_GROUP_ERRORS.get(error, error)))

    # ------------------------------------------------------------ groups and members
    def _get_or_maybe_create_group(self, group_id: str, create: bool, records: list) -> ConsumerGroup:
        group = self.groups.get_group(group_id)
        if isinstance(group, ConsumerGroup):
            return group
        if group is None:
            if not create:
                _fail(E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
            group = ConsumerGroup(group_id)
            self.groups.put(group)
            return group
        if group.type == GroupType.SHARE:
            _fail(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if create and group.is_empty:
            # An empty classic group is simply replaced (its offsets stay).
            records.extend(self.groups.tombstones(group))
            self.groups.remove(group_id)
            group = ConsumerGroup(group_id)
            self.groups.put(group)
            return group
        if create and self._online_upgrade_allowed(group):
            return self._convert_to_consumer_group(group, records)
        _fail(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    def _throw_if_full(self, group: ConsumerGroup, member_id: str) -> None:
        if len(group.members) >= self.max_size and (not member_id or member_id not in group.members):
            _fail(E.GROUP_MAX_SIZE_REACHED,
                  f"The consumer group has reached its maximum capacity of {self.max_size} members.")

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, received: int, owned) -> None:
        if received > member.member_epoch:
            _fail(E.FENCED_MEMBER_EPOCH, f"The member epoch {received} is greater than the coordinator's "
                                         f"{member.member_epoch}: the member must give up its partitions and rejoin.")
        if received < member.member_epoch and (received != member.previous_member_epoch
                                              or not _subset(owned, member.assigned_partitions)):
            _fail(E.FENCED_MEMBER_EPOCH, f"The member epoch {received} is smaller than the coordinator's "
                                         f"{member.member_epoch}: the member must give up its partitions and rejoin.")

    def _dynamic_member(self, group, member_id, epoch, owned, records) -> ConsumerGroupMember:
        member = group.members.get(member_id)
        if member is None:
            if epoch != 0:
                _fail(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
            log.info("group %s: member %s joins with the consumer protocol", group.group_id, member_id)
            return ConsumerGroupMember(member_id)
        if epoch == 0 and member.member_epoch != 0:
            try:
                self._check_epoch(member, epoch, owned)
            except KafkaError:
                return self._reset_member(group, member, records)
            return member
        self._check_epoch(member, epoch, owned)
        return member

    def _reset_member(self, group, member, records) -> ConsumerGroupMember:
        """A member rejoins with epoch 0 after losing its place (it was fenced): it starts over, owning nothing."""
        log.info("group %s: member %s rejoins from epoch %d", group.group_id, member.member_id, member.member_epoch)
        fresh = member.with_(member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE,
                             assigned_partitions={}, partitions_pending_revocation={})
        self._emit(group, records, current_assignment_record(group.group_id, fresh))
        return group.members[member.member_id]

    def _static_member(self, group, member_id, epoch, instance_id, owned, records,
                       use_classic: bool = False) -> ConsumerGroupMember:
        existing = group.static_member(instance_id)
        if epoch == 0 or (use_classic and existing is None):
            if existing is None:
                log.info("group %s: static member %s (%s) joins", group.group_id, instance_id, member_id)
                return group.members.get(member_id) or ConsumerGroupMember(member_id)
            if existing.member_id == member_id:
                if not use_classic and existing.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    # Back from a temporary leave under the same id: it resumes with what it had.
                    back = existing.with_(member_epoch=0, previous_member_epoch=0)
                    self._emit(group, records, current_assignment_record(group.group_id, back))
                    return group.members[member_id]
                return existing if use_classic else self._dynamic_member(group, member_id, epoch, owned, records)
            if not use_classic and not existing.use_classic_protocol \
                    and existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                _fail(E.UNRELEASED_INSTANCE_ID, f"Static member {existing.member_id} with instance id {instance_id} "
                                                "is present in the consumer group.")
            return self._replace_static_member(group, existing, member_id, records)
        if existing is None:
            _fail(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            _fail(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} was fenced "
                                        f"by member {existing.member_id}.")
        if not use_classic:
            self._check_epoch(existing, epoch, owned)
        return existing

    def _replace_static_member(self, group, existing, member_id, records) -> ConsumerGroupMember:
        """The same instance is back under a new member id: it takes over the old member's assignment."""
        log.info("group %s: static member %s is back as %s, replacing %s", group.group_id, existing.instance_id,
                 member_id, existing.member_id)
        target = group.target_assignment.get(existing.member_id)
        replacement = existing.with_(member_id=member_id, member_epoch=0, previous_member_epoch=0)
        self._cancel_timers(group.group_id, existing.member_id)
        for r in member_tombstones(group.group_id, existing.member_id):
            self._emit(group, records, r)
        self._emit(group, records, member_metadata_record(group.group_id, replacement))
        if target is not None:
            self._emit(group, records, target_assignment_record(group.group_id, member_id, target))
        self._emit(group, records, current_assignment_record(group.group_id, replacement))
        return group.members[member_id]

    # ------------------------------------------------------------ leaving and fencing
    def _leave(self, group_id, member_id, instance_id, epoch, callback) -> None:
        group = self.groups.get_group(group_id)
        if not isinstance(group, ConsumerGroup):
            _fail(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        records: list = []
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                _fail(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
            log.info("group %s: member %s leaves", group_id, member_id)
            self._fence_member(group, member, records)
        else:
            member = group.static_member(instance_id)
            if member is None:
                _fail(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if member.member_id != member_id:
                _fail(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} was fenced.")
            if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                log.info("group %s: static member %s (%s) leaves for now", group_id, member_id, instance_id)
                away = member.with_(member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={})
                self._emit(group, records, current_assignment_record(group_id, away))
            else:
                self._fence_member(group, member, records)
        result = HeartbeatResult(E.NONE, None, member_id, epoch, 0, None)
        self._append(group_id, records, lambda error: callback(
            result if error == E.NONE else HeartbeatResult(error, None, member_id, epoch)))

    def _fence_member(self, group: ConsumerGroup, member: ConsumerGroupMember, records: list) -> None:
        """Remove the member and bump the group epoch; or, if only classic members remain, turn classic."""
        self._cancel_timers(group.group_id, member.member_id)
        if self._online_downgrade_allowed(group, member.member_id):
            self._convert_to_classic_group(group, member.member_id, records)
            return
        for r in member_tombstones(group.group_id, member.member_id):
            self._emit(group, records, r)
        self._refresh_regexes(group, records)
        metadata = self._subscription_metadata(group)
        if metadata != group.subscription_metadata:
            self._emit(group, records, subscription_metadata_record(group.group_id, metadata))
        self._emit(group, records, group_epoch_record(group.group_id, group.group_epoch + 1))

    def _fence_later(self, group_id: str, member_id: str, why: str, epoch: int | None = None) -> None:
        group = self.groups.consumer_group(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is None or (epoch is not None and member.member_epoch != epoch):
            return
        log.info("group %s: member %s fenced: %s", group_id, member_id, why)
        records: list = []
        self._fence_member(group, member, records)
        self._append(group_id, records, lambda error: None)

    def _schedule_session_timeout(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        self.timer.schedule(("session", group_id, member_id), timeout_ms,
                            lambda: self._fence_later(group_id, member_id, "its session expired"))

    def _on_rebalance_timeout(self, group_id: str, member_id: str, epoch: int) -> None:
        self._fence_later(group_id, member_id, f"it did not revoke its partitions at epoch {epoch} in time", epoch)

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        for kind in ("session", "rebalance", "join", "sync"):
            self.timer.cancel((kind, group_id, member_id))

    def on_group_loaded(self, group: ConsumerGroup) -> None:
        """A loaded group's members have a fresh session each (as after a coordinator move in Kafka), and
        those that were revoking a fresh rebalance timeout to finish (else one that never does would
        hold its partitions from their new owner until its session ends)."""
        for member in group.members.values():
            timeout = member.classic_member_metadata.session_timeout_ms if member.use_classic_protocol \
                else self._session_timeout_ms(group.group_id)
            self._schedule_session_timeout(group.group_id, member.member_id, timeout)
            if not member.use_classic_protocol:
                self._schedule_rebalance_timeout(group.group_id, member)

    def on_group_unloaded(self, group: ConsumerGroup) -> None:
        for member_id in group.members:
            self._cancel_timers(group.group_id, member_id)

    # ------------------------------------------------------------ migration
    def _online_upgrade_allowed(self, group: ClassicGroup) -> bool:
        if not self.upgrade_enabled:
            log.info("group %s stays classic: online upgrade is disabled", group.group_id)
            return False
        if not group.is_consumer_group:
            log.info("group %s stays classic: it does not use the consumer protocol", group.group_id)
            return False
        if group.size > self.max_size:
            log.info("group %s stays classic: it is larger than group.consumer.max.size", group.group_id)
            return False
        return True

    def _online_downgrade_allowed(self, group: ConsumerGroup, leaving_member_id: str) -> bool:
        if not group.all_members_use_classic_protocol_except(leaving_member_id) or len(group.members) <= 1:
            return False
        if not self.downgrade_enabled:
            log.info("group %s stays a consumer group: online downgrade is disabled", group.group_id)
            return False
        return len(group.members) - 1 <= self.classic_max_size

    def _convert_to_consumer_group(self, classic: ClassicGroup, records: list) -> ConsumerGroup:
        """Upgrade: every classic member becomes a member at its generation, owning what it was assigned."""
        log.info("group %s: upgrading from classic to consumer", classic.group_id)
        for member in list(classic.members.values()):
            classic.maybe_invoke_join_callback(member, JoinResult(E.REBALANCE_IN_PROGRESS, member.member_id))
            classic.maybe_invoke_sync_callback(member, SyncResult(E.REBALANCE_IN_PROGRESS))
        records.extend(self.groups.tombstones(classic))
        members = []
        for m in classic.members.values():
            try:
                data = m.metadata(classic.protocol_name)
                sub, _ = ConsumerProtocolSubscription.decode(data, min(int.from_bytes(data[:2], "big"), 3), 2)
                assigned = self._decode_assignment(m.assignment)
            except Exception as e:
                _fail(E.GROUP_ID_NOT_FOUND, f"Cannot upgrade the classic group {classic.group_id}: "
                                            f"its embedded consumer protocol is malformed ({e}).")
            members.append(ConsumerGroupMember(
                m.member_id, member_epoch=classic.generation_id, previous_member_epoch=classic.generation_id,
                instance_id=m.group_instance_id, rack_id=getattr(sub, "rack_id", None) or None,
                rebalance_timeout_ms=m.rebalance_timeout_ms, client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=tuple(sorted(set(sub.topics))), assigned_partitions=assigned,
                classic_member_metadata=ClassicMemberMetadata(m.session_timeout_ms, tuple(
                    (n, bytes(d)) for n, d in m.supported_protocols))))
        self.groups.remove(classic.group_id)
        group = ConsumerGroup(classic.group_id)
        self.groups.put(group)
        for member in members:
            self._emit(group, records, member_metadata_record(group.group_id, member))
        self._emit(group, records, subscription_metadata_record(group.group_id, self._subscription_metadata(group)))
        self._emit(group, records, group_epoch_record(group.group_id, classic.generation_id))
        for member in members:
            self._emit(group, records, target_assignment_record(group.group_id, member.member_id,
                                                                member.assigned_partitions))
        self._emit(group, records, target_assignment_epoch_record(group.group_id, classic.generation_id))
        for member in members:
            self._emit(group, records, current_assignment_record(group.group_id, member))
            self._schedule_session_timeout(group.group_id, member.member_id,
                                           member.classic_member_metadata.session_timeout_ms)
        return group

    def _decode_assignment(self, data: bytes) -> dict:
        if not data:
            return {}
        a, _ = ConsumerProtocolAssignment.decode(data, min(int.from_bytes(data[:2], "big"), 3), 2)
        out = {}
        for tp in a.assigned_partitions:
            topic_id = self.topic_id(tp.topic)
            if topic_id is not None and tp.partitions:
                out[topic_id] = frozenset(tp.partitions)
        return out

    def _encode_assignment(self, member: ConsumerGroupMember) -> bytes:
        data = member.classic_member_metadata.supported_protocols[0][1]
        version = min(max(int.from_bytes(bytes(data[:2]), "big"), 0), 3) if len(data) >= 2 else 0
        topics = []
        for topic_id, parts in sorted(member.assigned_partitions.items()):
            name = self.topic_name(topic_id)
            if name is not None:
                topics.append(ConsumerProtocolAssignment.TopicPartition(topic=name, partitions=sorted(parts)))
        out = bytearray(version.to_bytes(2, "big"))
        ConsumerProtocolAssignment(assigned_partitions=topics).encode_into(out, version)
        return bytes(out)

    def _convert_to_classic_group(self, group: ConsumerGroup, leaving_member_id: str, records: list) -> None:
        """Downgrade: the classic members that remain form a classic group, which rebalances at once."""
        log.info("group %s: downgrading from consumer to classic", group.group_id)
        records.extend(self.groups.tombstones(group))
        classic = ClassicGroup(group.group_id, GroupState.STABLE, self.clock)
        classic.protocol_type = CONSUMER_PROTOCOL_TYPE
        classic.generation_id = group.group_epoch
        assignment = {}
        for member in group.members.values():
            if member.member_id == leaving_member_id:
                continue
            self._cancel_timers(group.group_id, member.member_id)
            c = member.classic_member_metadata
            cm = ClassicGroupMember(member.member_id, member.instance_id, member.client_id, member.client_host,
                                    member.rebalance_timeout_ms, c.session_timeout_ms, CONSUMER_PROTOCOL_TYPE,
                                    list(c.supported_protocols))
            cm.assignment = assignment[member.member_id] = self._encode_assignment(member)
            classic.add(cm)
        classic.protocol_name = classic.select_protocol()
        classic.subscribed_topics = classic.compute_subscribed_topics()
        self.groups.remove(group.group_id)
        self.groups.put(classic)
        records.append((group_metadata_key(classic.group_id),
                        group_metadata_value(classic_group_to_value(classic, assignment))))
        self.classic.on_group_converted(classic, f"downgrade of group {group.group_id} from consumer to classic")

    # ------------------------------------------------------------ classic members in a consumer group
    def classic_join(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                     require_known_member_id: bool, client_id: str, client_host: str, rebalance_timeout_ms: int,
                     session_timeout_ms: int, protocol_type: str, protocols: list, callback) -> None:
        group_id = group.group_id
        unknown = member_id == ""
        if unknown:
            member_id = f"{client_id}-{uuid.uuid4()}"
        records: list = []
        try:
            self._throw_if_full(group, member_id)
            if not group.supports_classic_protocols(protocol_type, {n for n, _ in protocols}):
                _fail(E.INCONSISTENT_GROUP_PROTOCOL)
            if unknown and instance_id is None and require_known_member_id:
                callback(JoinResult(E.MEMBER_ID_REQUIRED, member_id))
                return
            if instance_id is None:
                member = group.members.get(member_id)
                if member is None:
                    member = ConsumerGroupMember(member_id)
                    log.info("group %s: member %s joins with the classic protocol", group_id, member_id)
            elif unknown:
                member = self._static_member(group, member_id, 0, instance_id, [], records, use_classic=True)
            else:
                member = self._static_member(group, member_id, -1, instance_id, [], records, use_classic=True)
            data = bytes(protocols[0][1])
            sub, _ = ConsumerProtocolSubscription.decode(data, min(int.from_bytes(data[:2], "big"), 3), 2)
            owned = []
            for tp in getattr(sub, "owned_partitions", None) or ():
                topic_id = self.topic_id(tp.topic)
                if topic_id is not None:
                    owned.append((topic_id, list(tp.partitions)))
            updated = member.with_(
                instance_id=instance_id, rack_id=getattr(sub, "rack_id", None) or member.rack_id,
                rebalance_timeout_ms=rebalance_timeout_ms, subscribed_topic_names=tuple(sorted(set(sub.topics))),
                client_id=client_id, client_host=client_host,
                classic_member_metadata=ClassicMemberMetadata(session_timeout_ms, tuple(
                    (n, bytes(d)) for n, d in protocols)))
            self._update_member(group, member, updated, records, True)
            updated = self._maybe_reconcile(group, group.members[member_id], owned, records)
        except Exception as e:
            if isinstance(e, KafkaError):
                error = e.error_code
            else:
                log.exception("group %s: cannot read the subscription of %s", group_id, member_id)
                error = E.INCONSISTENT_GROUP_PROTOCOL
            if records:
                self._append(group_id, records, lambda error: None)
            callback(JoinResult(error, member_id))
            return
        result = JoinResult(E.NONE, member_id, updated.member_epoch, CONSUMER_PROTOCOL_TYPE, protocols[0][0], "")

        def stored(error: int) -> None:
            if error != E.NONE:
                callback(JoinResult(error, member_id))
                return
            self.timer.cancel(("join", group_id, member_id))
            self._schedule_session_timeout(group_id, member_id, session_timeout_ms)
            self.timer.schedule(("sync", group_id, member_id), rebalance_timeout_ms,
                                lambda: self._fence_later(group_id, member_id, "it did not send SyncGroup in time"))
            callback(result)

        self._append(group_id, records, stored)

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                _fail(E.UNKNOWN_MEMBER_ID)
        else:
            member = group.static_member(instance_id)
            if member is None:
                _fail(E.UNKNOWN_MEMBER_ID)
            if member.member_id != member_id:
                _fail(E.FENCED_INSTANCE_ID)
        if not member.use_classic_protocol:
            _fail(E.UNKNOWN_MEMBER_ID, f"Member {member_id} does not use the classic protocol.")
        return member

    def _rejoin_needed(self, group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
        return (member.member_epoch < group.group_epoch or member.state == MemberState.UNREVOKED_PARTITIONS
                or (member.state == MemberState.UNRELEASED_PARTITIONS
                    and not group.waiting_on_unreleased_partition(member)))

    def _arm_join_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        self.timer.schedule_if_absent(("join", group_id, member.member_id), member.rebalance_timeout_ms,
                                      lambda: self._fence_later(group_id, member.member_id,
                                                                "it did not rejoin in time"))

    def classic_sync(self, group: ConsumerGroup, generation_id: int, member_id: str, protocol_type: str | None,
                     protocol_name: str | None, instance_id: str | None) -> SyncResult:
        try:
            member = self._classic_member(group, member_id, instance_id)
            if generation_id != member.member_epoch:
                _fail(E.ILLEGAL_GENERATION)
            first = member.classic_member_metadata.supported_protocols[0][0]
            if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or \
                    (protocol_name is not None and protocol_name != first):
                _fail(E.INCONSISTENT_GROUP_PROTOCOL)
            if group.group_epoch > member.member_epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
                self._arm_join_timeout(group.group_id, member)
                _fail(E.REBALANCE_IN_PROGRESS)
        except KafkaError as e:
            return SyncResult(e.error_code)
        self.timer.cancel(("sync", group.group_id, member.member_id))
        self._schedule_session_timeout(group.group_id, member.member_id,
                                       member.classic_member_metadata.session_timeout_ms)
        return SyncResult(E.NONE, self._encode_assignment(member), CONSUMER_PROTOCOL_TYPE, first)

    def classic_heartbeat(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                          generation_id: int) -> int:
        try:
            member = self._classic_member(group, member_id, instance_id)
            if generation_id != member.member_epoch:
                _fail(E.ILLEGAL_GENERATION)
        except KafkaError as e:
            return e.error_code
        self._schedule_session_timeout(group.group_id, member.member_id,
                                       member.classic_member_metadata.session_timeout_ms)
        if self._rejoin_needed(group, member):
            self._arm_join_timeout(group.group_id, member)
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def classic_leave(self, group: ConsumerGroup, leaving: list) -> list:
        """`leaving` is (member id, instance id, reason); [(member id, instance id, error)] back."""
        out = []
        records: list = []
        for member_id, instance_id, _reason in leaving:
            if not isinstance(self.groups.get_group(group.group_id), ConsumerGroup):
                out.append((member_id, instance_id, E.UNKNOWN_MEMBER_ID))
                continue
            member = group.static_member(instance_id) if instance_id is not None else group.members.get(member_id)
            if member is None:
                out.append((member_id, instance_id, E.UNKNOWN_MEMBER_ID))
            elif member_id and member.member_id != member_id:
                out.append((member_id, instance_id, E.FENCED_INSTANCE_ID))
            else:
                log.info("group %s: member %s leaves (LeaveGroup)", group.group_id, member.member_id)
                self._fence_member(group, member, records)
                out.append((member_id, instance_id, E.NONE))
        self._append(group.group_id, records, lambda error: None)
        return out
