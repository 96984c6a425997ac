"""The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) with Kafka's rules.

Everything runs on the broker's event loop, so there are no locks. A JoinGroup
or SyncGroup that must wait is parked as a callback on its member; the
handlers turn that into an awaitable. Rebalance, sync and session timeouts are
delayed operations in two purgatories, which expire on the timing wheel.

The GroupCoordinator validates the group id and coordinator state first and
routes a classic request to the consumer-group protocol instead when the group
is a consumer group (KIP-848 groups take classic members too).
"""
from __future__ import annotations

import logging

from ...protocol.errors import ErrorCode
from ...purgatory import DelayedOperationPurgatory
from .classic_group import ClassicGroup, GroupState, JoinResult, SyncResult
from .classic_group_member import ClassicGroupMember
from .delayed import (
    DelayedHeartbeat,
    DelayedJoin,
    DelayedSync,
    InitialDelayedJoin,
    join_key,
    member_key,
    sync_key,
)

log = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

E = ErrorCode
EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                                              GroupState.COMPLETING_REBALANCE, GroupState.STABLE,
                                              GroupState.DEAD)


class ClassicGroupProtocol:
    def __init__(self, config, broker_id: int, groups, validate_group_status):
        """`groups` is the GroupMetadataManager; `validate_group_status(group_id, api)` the coordinator's check."""
        cfg = config
        self.broker_id = broker_id
        self.groups = groups
        self.validate_group_status = validate_group_status
        self.min_session_timeout_ms = cfg["group.min.session.timeout.ms"]
        self.max_session_timeout_ms = cfg["group.max.session.timeout.ms"]
        self.initial_rebalance_delay_ms = cfg["group.initial.rebalance.delay.ms"]
        self.max_group_size = cfg["group.max.size"]
        self.heartbeat_purgatory: DelayedOperationPurgatory | None = None
        self.rebalance_purgatory: DelayedOperationPurgatory | None = None

    def startup(self) -> None:
        self.heartbeat_purgatory = DelayedOperationPurgatory("Heartbeat", broker_id=self.broker_id)
        self.rebalance_purgatory = DelayedOperationPurgatory("Rebalance", broker_id=self.broker_id)

    def shutdown(self) -> None:
        for purgatory in (self.heartbeat_purgatory, self.rebalance_purgatory):
            if purgatory is not None:
                purgatory.shutdown()

    # ------------------------------------------------------------ JoinGroup
    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        if group.state in (EMPTY, DEAD):
            return True
        if group.is_(PREPARING):
            return ((group.has(member_id) and group.get(member_id).is_awaiting_join)
                    or group.num_awaiting < self.max_group_size)
        return group.has(member_id) or group.size < self.max_group_size

    def handle_join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                          require_known_member_id: bool, support_skip_assignment: bool, client_id: str,
                          client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                          protocol_type: str, protocols: list[tuple[str, bytes]], callback,
                          reason: str | None = None) -> None:
        error = self.validate_group_status(group_id, "JoinGroup")
        if error is not None:
            callback(JoinResult(error, member_id))
            return
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            callback(JoinResult(E.INVALID_SESSION_TIMEOUT, member_id))
            return
        is_unknown = member_id == ""
        group = self.groups.get_or_maybe_create_classic_group(group_id, is_unknown)
        if group is None:
            callback(JoinResult(E.UNKNOWN_MEMBER_ID, member_id))
            return
        reason = reason or "not provided"
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            callback(JoinResult(E.GROUP_MAX_SIZE_REACHED, ""))
        elif is_unknown:
            self._new_member_join(group, group_instance_id, require_known_member_id, support_skip_assignment,
                                  client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                                  protocol_type, protocols, callback, reason)
        else:
            self._current_member_join(group, member_id, group_instance_id, client_id, client_host,
                                      rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
                                      callback, reason)
        if group.is_(PREPARING):
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))

    def _new_member_join(self, group, instance_id, require_known_member_id, support_skip_assignment, client_id,
                         client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
                         callback, reason) -> None:
        if group.is_(DEAD):
            callback(JoinResult(E.COORDINATOR_NOT_AVAILABLE, ""))
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            callback(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, ""))
            return
        new_member_id = group.generate_member_id(client_id, instance_id)
        if instance_id is not None:
            old_member_id = group.current_static_member_id(instance_id)
            if old_member_id is not None:
                log.info("static member %s of group %s rejoins in %s: %s replaces %s", instance_id,
                         group.group_id, group.state, new_member_id, old_member_id)
                self._update_static_member_and_rebalance(group, old_member_id, new_member_id, instance_id,
                                                         protocols, rebalance_timeout_ms, session_timeout_ms,
                                                         callback, reason, support_skip_assignment)
            else:
                self._add_member_and_rebalance(group, rebalance_timeout_ms, session_timeout_ms, new_member_id,
                                               instance_id, client_id, client_host, protocol_type, protocols,
                                               callback, reason)
        elif require_known_member_id:
            # KIP-394: hand out the id first, so a member that times out and retries is not a ghost.
            group.add_pending_member(new_member_id)
            self._add_pending_member_expiration(group, new_member_id, session_timeout_ms)
            callback(JoinResult(E.MEMBER_ID_REQUIRED, new_member_id))
        else:
            self._add_member_and_rebalance(group, rebalance_timeout_ms, session_timeout_ms, new_member_id, None,
                                           client_id, client_host, protocol_type, protocols, callback, reason)

    @staticmethod
    def _validate_current_member(group: ClassicGroup, member_id: str, instance_id: str | None) -> int | None:
        return group.validate_member(member_id, instance_id)

    def _current_member_join(self, group, member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                             session_timeout_ms, protocol_type, protocols, callback, reason) -> None:
        if group.is_(DEAD):
            callback(JoinResult(E.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            callback(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if group.is_pending_member(member_id):
            if instance_id is not None:
                callback(JoinResult(E.UNKNOWN_MEMBER_ID, member_id))  # a pending member is never static
                return
            self._add_member_and_rebalance(group, rebalance_timeout_ms, session_timeout_ms, member_id, None,
                                           client_id, client_host, protocol_type, protocols, callback, reason)
            return
        error = self._validate_current_member(group, member_id, instance_id)
        if error is not None:
            callback(JoinResult(error, member_id))
            return
        member = group.get(member_id) if group.state not in (EMPTY, DEAD) else None
        if group.is_(PREPARING):
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                              callback, f"member {member_id} joins during PreparingRebalance")
        elif group.is_(COMPLETING):
            if member.matches(protocols):
                # It probably missed the JoinGroup answer: send the current generation again.
                callback(self._join_result_for(group, member_id, include_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, callback,
                                                  f"member {member_id} changed its metadata")
        elif group.is_(STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # A leader rejoins to force a rebalance (e.g. its topics' metadata changed).
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, callback,
                                                  f"member {member_id} rejoins a stable group")
            else:
                callback(self._join_result_for(group, member_id, include_members=False))
        else:
            log.warning("member %s rejoins group %s in unexpected state %s", member_id, group.group_id,
                        group.state)
            callback(JoinResult(E.UNKNOWN_MEMBER_ID, member_id))

    @staticmethod
    def _join_result_for(group: ClassicGroup, member_id: str, include_members: bool,
                         leader_id: str | None = None, skip_assignment: bool = False) -> JoinResult:
        return JoinResult(E.NONE, member_id, group.generation_id, group.protocol_type, group.protocol_name,
                          group.leader_id if leader_id is None else leader_id, skip_assignment,
                          group.current_member_metadata() if include_members else [])

    def _add_member_and_rebalance(self, group, rebalance_timeout_ms, session_timeout_ms, member_id, instance_id,
                                  client_id, client_host, protocol_type, protocols, callback, reason) -> None:
        member = ClassicGroupMember(member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                                session_timeout_ms, protocol_type, list(protocols))
        member.is_new = True
        if group.is_(PREPARING) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        # A new member cannot heartbeat yet; bound its wait so a vanished client does not linger.
        self._complete_and_schedule_next_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding member {member_id} ({reason})")

    def _update_static_member_and_rebalance(self, group, old_member_id, new_member_id, instance_id, protocols,
                                            rebalance_timeout_ms, session_timeout_ms, callback, reason,
                                            support_skip_assignment) -> None:
        current_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self._complete_and_schedule_next_heartbeat_expiration(group, member)
        old_protocols = member.supported_protocols
        old_rebalance, old_session = member.rebalance_timeout_ms, member.session_timeout_ms
        group.update_member(member, list(protocols), rebalance_timeout_ms, session_timeout_ms, callback)
        if group.is_(STABLE):
            if group.protocol_name == group.select_protocol():
                # KIP-345: the same instance is back; it keeps its assignment without a rebalance.
                assignment = {mid: m.assignment for mid, m in group.members.items()}
                self.groups.store_classic_group(group, assignment, lambda error: self._static_member_stored(
                    group, member, instance_id, old_member_id, new_member_id, old_protocols, old_rebalance,
                    old_session, current_leader, support_skip_assignment, callback, error))
            else:
                self._maybe_prepare_rebalance(group, f"static member {instance_id} changed the group protocol")
        elif group.is_(COMPLETING):
            # The leader may already be assigning for the old member id: start over.
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance")

    def _static_member_stored(self, group, member, instance_id, old_member_id, new_member_id, old_protocols,
                              old_rebalance, old_session, current_leader, support_skip_assignment, callback,
                              error) -> None:
        if error != E.NONE:
            log.warning("group %s: cannot persist static member %s: %s", group.group_id, instance_id, error)
            group.update_member(member, old_protocols, old_rebalance, old_session, None)
            old = group.replace_static_member(instance_id, new_member_id, old_member_id)
            self._complete_and_schedule_next_heartbeat_expiration(group, old)
            callback(JoinResult(error, "", group.generation_id, group.protocol_type, group.protocol_name,
                                current_leader or ""))
        elif support_skip_assignment:
            # JoinGroup v9: the leader learns it leads, but must not run the assignor now.
            is_leader = group.is_leader(new_member_id)
            group.maybe_invoke_join_callback(member, self._join_result_for(
                group, new_member_id, include_members=is_leader, skip_assignment=is_leader))
        else:
            # Older members: answer with the old leader id, so no member thinks it must assign.
            group.maybe_invoke_join_callback(member, self._join_result_for(
                group, new_member_id, include_members=False, leader_id=current_leader or ""))

    def _update_member_and_rebalance(self, group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                     callback, reason) -> None:
        group.update_member(member, list(protocols), rebalance_timeout_ms, session_timeout_ms, callback)
        self._maybe_prepare_rebalance(group, reason)

    def _maybe_prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_(COMPLETING):
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        if group.is_(EMPTY):
            delay = self.initial_rebalance_delay_ms
            delayed = InitialDelayedJoin(self, self.rebalance_purgatory, group, delay, delay,
                                         max(group.rebalance_timeout_ms() - delay, 0))
        else:
            delayed = DelayedJoin(self, group, group.rebalance_timeout_ms())
        log.info("preparing to rebalance group %s in state %s with old generation %d (reason: %s)",
                 group.group_id, group.state, group.generation_id, reason)
        group.transition_to(PREPARING)
        self.rebalance_purgatory.try_complete_else_watch(delayed, [join_key(group.group_id)])

    def _remove_member_and_update_group(self, group: ClassicGroup, member: ClassicGroupMember, reason: str) -> None:
        # A new member may still wait for its JoinGroup: answer it so a live client rejoins.
        group.maybe_invoke_join_callback(member, JoinResult(E.UNKNOWN_MEMBER_ID, ""))
        group.remove(member.member_id)
        if group.state in (STABLE, COMPLETING):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(PREPARING):
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))

    def _remove_pending_member_and_update_group(self, group: ClassicGroup, member_id: str) -> None:
        group.remove(member_id)
        if group.is_(PREPARING):
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))

    # -- DelayedJoin callbacks
    def try_complete_join(self, group: ClassicGroup, force_complete) -> bool:
        return force_complete() if group.has_all_members_joined() else False

    def on_complete_join(self, group: ClassicGroup) -> None:
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                log.info("group %s removes member %s, which did not rejoin", group.group_id, member.member_id)
                group.remove(member.member_id)
                self._remove_heartbeat_for_leaving_member(group, member.member_id)
        if group.is_(DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait again until session timeouts remove the silent members.
            log.error("group %s cannot complete its rebalance: no member rejoined", group.group_id)
            self.rebalance_purgatory.try_complete_else_watch(
                DelayedJoin(self, group, group.rebalance_timeout_ms()), [join_key(group.group_id)])
            return
        group.init_next_generation()
        if group.is_(EMPTY):
            log.info("group %s with generation %d is now empty", group.group_id, group.generation_id)
            def stored(error):
                if error != E.NONE:
                    log.warning("group %s: cannot write its empty metadata: %s", group.group_id, error)
            self.groups.store_classic_group(group, {}, stored)
            return
        log.info("stabilized group %s generation %d (%s) with %d members", group.group_id, group.generation_id,
                 group.protocol_name, group.size)
        for member in list(group.members.values()):
            group.maybe_invoke_join_callback(member, self._join_result_for(
                group, member.member_id, include_members=group.is_leader(member.member_id)))
            self._complete_and_schedule_next_heartbeat_expiration(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self.rebalance_purgatory.try_complete_else_watch(
            DelayedSync(self, group, group.generation_id, group.rebalance_timeout_ms()), [sync_key(group.group_id)])

    # -- DelayedSync callbacks
    def try_complete_pending_sync(self, group: ClassicGroup, generation_id: int, force_complete) -> bool:
        if generation_id != group.generation_id or group.state in (DEAD, EMPTY, PREPARING):
            return force_complete()
        return force_complete() if not group.pending_sync_members else False

    def on_expire_pending_sync(self, group: ClassicGroup, generation_id: int) -> None:
        if generation_id != group.generation_id or group.state not in (COMPLETING, STABLE):
            return
        if group.pending_sync_members:
            missing = list(group.pending_sync_members)
            for member_id in missing:
                group.remove(member_id)
                self._remove_heartbeat_for_leaving_member(group, member_id)
            log.info("group %s removes members that did not sync: %s", group.group_id, missing)
            self._prepare_rebalance(group, f"members {missing} did not send SyncGroup in time")

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        self.rebalance_purgatory.check_and_complete(sync_key(group.group_id))

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self.rebalance_purgatory.check_and_complete(sync_key(group.group_id))

    # ------------------------------------------------------------ SyncGroup
    def handle_sync_group(self, group_id: str, generation_id: int, member_id: str, protocol_type: str | None,
                          protocol_name: str | None, instance_id: str | None, assignments: dict[str, bytes],
                          callback) -> None:
        error = self.validate_group_status(group_id, "SyncGroup")
        if error == E.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance state was lost with the old coordinator: the member must rejoin.
            callback(SyncResult(E.REBALANCE_IN_PROGRESS))
            return
        if error is not None:
            callback(SyncResult(error))
            return
        group = self.groups.classic_group(group_id)
        if group is None:
            callback(SyncResult(E.UNKNOWN_MEMBER_ID))
            return
        if group.is_(DEAD):
            callback(SyncResult(E.COORDINATOR_NOT_AVAILABLE))
            return
        error = self._validate_current_member(group, member_id, instance_id)
        if error is None:
            if generation_id != group.generation_id:
                error = E.ILLEGAL_GENERATION
            elif ((protocol_type is not None and protocol_type != group.protocol_type)
                  or (protocol_name is not None and protocol_name != group.protocol_name)):
                error = E.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            callback(SyncResult(error))
        elif group.is_(EMPTY):
            callback(SyncResult(E.UNKNOWN_MEMBER_ID))
        elif group.is_(PREPARING):
            callback(SyncResult(E.REBALANCE_IN_PROGRESS))
        elif group.is_(COMPLETING):
            group.get(member_id).awaiting_sync = callback
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                self._complete_rebalance(group, generation_id, member_id, assignments)
        else:  # Stable: hand back the assignment of this generation
            self._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            callback(SyncResult(E.NONE, member.assignment, group.protocol_type, group.protocol_name))
            self._complete_and_schedule_next_heartbeat_expiration(group, member)

    def _complete_rebalance(self, group: ClassicGroup, generation_id: int, leader_id: str,
                            assignments: dict[str, bytes]) -> None:
        assignment = {mid: assignments.get(mid, b"") for mid in group.members}
        missing = [mid for mid in group.members if mid not in assignments]
        if missing:
            log.warning("group %s generation %d: empty assignment for %s", group.group_id, generation_id, missing)
        log.info("assignment received from leader %s for group %s generation %d", leader_id, group.group_id,
                 generation_id)
        self.groups.store_classic_group(group, assignment,
                                 lambda error: self._assignment_stored(group, generation_id, assignment, error))

    def _assignment_stored(self, group: ClassicGroup, generation_id: int, assignment: dict[str, bytes],
                           error: int) -> None:
        if not (group.is_(COMPLETING) and group.generation_id == generation_id):
            return
        if error != E.NONE:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(group, f"error {error} storing the group assignment")
        else:
            for member in group.members.values():
                member.assignment = assignment[member.member_id]
            self._propagate_assignment(group, E.NONE)
            group.transition_to(STABLE)

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: ClassicGroup, error: int) -> None:
        ok = error == E.NONE
        for member in list(group.members.values()):
            result = SyncResult(error, member.assignment, group.protocol_type if ok else None,
                                group.protocol_name if ok else None)
            if group.maybe_invoke_sync_callback(member, result):
                # A session may have expired while we waited for the leader: start it afresh.
                self._complete_and_schedule_next_heartbeat_expiration(group, member)

    # ------------------------------------------------------------ Heartbeat and sessions
    def handle_heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> int:
        error = self.validate_group_status(group_id, "Heartbeat")
        if error == E.COORDINATOR_LOAD_IN_PROGRESS:
            return E.NONE       # the group is loading: answer blindly, as Kafka does
        if error is not None:
            return error
        group = self.groups.classic_group(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, member_id, instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if group.is_(EMPTY):
            return E.UNKNOWN_MEMBER_ID
        self._complete_and_schedule_next_heartbeat_expiration(group, group.get(member_id))
        return E.REBALANCE_IN_PROGRESS if group.is_(PREPARING) else E.NONE

    def _complete_and_schedule_next_heartbeat_expiration(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        self._complete_and_schedule_next_expiration(group, member, member.session_timeout_ms)

    def _complete_and_schedule_next_expiration(self, group: ClassicGroup, member: ClassicGroupMember,
                                               timeout_ms: int) -> None:
        key = member_key(group.group_id, member.member_id)
        member.heartbeat_satisfied = True
        self.heartbeat_purgatory.check_and_complete(key)
        member.heartbeat_satisfied = False
        self.heartbeat_purgatory.try_complete_else_watch(
            DelayedHeartbeat(self, group, member.member_id, False, timeout_ms), [key])

    def _add_pending_member_expiration(self, group: ClassicGroup, member_id: str, timeout_ms: int) -> None:
        self.heartbeat_purgatory.try_complete_else_watch(
            DelayedHeartbeat(self, group, member_id, True, timeout_ms), [member_key(group.group_id, member_id)])

    def _remove_heartbeat_for_leaving_member(self, group: ClassicGroup, member_id: str) -> None:
        self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, member_id))

    def try_complete_heartbeat(self, group: ClassicGroup, member_id: str, is_pending: bool, force_complete) -> bool:
        if group.is_(DEAD):
            return force_complete()
        if is_pending:
            return force_complete() if group.has(member_id) else False
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return force_complete()
        return False

    def on_expire_heartbeat(self, group: ClassicGroup, member_id: str, is_pending: bool) -> None:
        if group.is_(DEAD):
            return
        if is_pending:
            log.info("pending member %s of group %s expired", member_id, group.group_id)
            self._remove_pending_member_and_update_group(group, member_id)
            return
        member = group.members.get(member_id)
        if member is not None and not member.has_satisfied_heartbeat():
            log.info("member %s of group %s failed (session timeout), removing it", member_id, group.group_id)
            self._remove_member_and_update_group(group, member, f"member {member_id} session expired")

    # ------------------------------------------------------------ LeaveGroup
    def handle_leave_group(self, group_id: str, leaving: list[tuple[str, str | None, str | None]]
                           ) -> tuple[int, list[tuple[str, str | None, int]]]:
        """`leaving` is (member_id, group_instance_id, reason) per member; returns the top-level
        error and (member_id, group_instance_id, error) per member."""
        error = self.validate_group_status(group_id, "LeaveGroup")
        if error is not None:
            return error, []
        group = self.groups.classic_group(group_id)
        if group is None:
            return E.NONE, [(m, i, E.UNKNOWN_MEMBER_ID) for m, i, _ in leaving]
        if group.is_(DEAD):
            return E.COORDINATOR_NOT_AVAILABLE, []
        out = []
        for member_id, instance_id, reason in leaving:
            if member_id == "":
                # The admin API removes static members by instance id alone.
                current = group.current_static_member_id(instance_id) if instance_id is not None else None
                if current is None:
                    out.append((member_id, instance_id, E.UNKNOWN_MEMBER_ID))
                    continue
                self._remove_current_member(group, current, reason)
                out.append((member_id, instance_id, E.NONE))
            elif group.is_pending_member(member_id):
                self._remove_pending_member_and_update_group(group, member_id)
                self.heartbeat_purgatory.check_and_complete(member_key(group_id, member_id))
                out.append((member_id, instance_id, E.NONE))
            else:
                error = self._validate_current_member(group, member_id, instance_id)
                if error is None:
                    self._remove_current_member(group, member_id, reason)
                out.append((member_id, instance_id, error or E.NONE))
        return E.NONE, out

    def _remove_current_member(self, group: ClassicGroup, member_id: str, reason: str | None) -> None:
        member = group.get(member_id)
        log.info("member %s leaves group %s (reason: %s)", member_id, group.group_id, reason or "not provided")
        self._remove_member_and_update_group(group, member, f"member {member_id} left")
        self._remove_heartbeat_for_leaving_member(group, member_id)

    # ------------------------------------------------------------ offsets, conversions
    def on_offset_commit(self, group: ClassicGroup, member_id: str) -> None:
        """A commit proves the member alive, like a heartbeat."""
        if group.state in (STABLE, PREPARING) and group.has(member_id):
            self._complete_and_schedule_next_heartbeat_expiration(group, group.get(member_id))

    def on_group_converted(self, group: ClassicGroup, reason: str) -> None:
        """A consumer group turned classic (its last new-protocol member left): its members get sessions
        here and the group rebalances with the classic protocol."""
        for member in list(group.members.values()):
            self._complete_and_schedule_next_heartbeat_expiration(group, member)
        self._prepare_rebalance(group, reason)

    # ------------------------------------------------------------ loading
    def on_group_loaded(self, group: ClassicGroup) -> None:
        log.info("loaded group %s generation %d (%s)", group.group_id, group.generation_id, group.state)
        if group.size > self.max_group_size:
            self._prepare_rebalance(group, "freshly loaded group is over capacity")
        for member in list(group.members.values()):
            self._complete_and_schedule_next_heartbeat_expiration(group, member)

    def on_group_unloaded(self, group: ClassicGroup) -> None:
        previous = group.state
        group.transition_to(DEAD)
        if previous is PREPARING:
            for member in list(group.members.values()):
                group.maybe_invoke_join_callback(member, JoinResult(E.NOT_COORDINATOR, member.member_id))
        elif previous in (STABLE, COMPLETING):
            for member in list(group.members.values()):
                group.maybe_invoke_sync_callback(member, SyncResult(E.NOT_COORDINATOR))
