"""Group APIs: the classic membership protocol, offsets and group admin, for both kinds of group.

Thin on purpose: each handler turns its request (whatever the version) into a
call on `broker.group_coordinator` and the result into the response that
version carries. A JoinGroup or SyncGroup that must wait for the rest of the
group is awaited here; the connection answers its later requests afterwards,
as Kafka does.
"""
from __future__ import annotations

import asyncio
import inspect

from ..group import OffsetAndMetadata
from ..protocol.errors import ErrorCode
from ..protocol.messages.delete_groups import DeleteGroupsResponse
from ..protocol.messages.describe_groups import DescribeGroupsResponse
from ..protocol.messages.heartbeat import HeartbeatResponse
from ..protocol.messages.join_group import JoinGroupResponse
from ..protocol.messages.leave_group import LeaveGroupResponse
from ..protocol.messages.list_groups import ListGroupsResponse
from ..protocol.messages.offset_commit import OffsetCommitResponse
from ..protocol.messages.offset_delete import OffsetDeleteResponse
from ..protocol.messages.offset_fetch import OffsetFetchResponse
from ..protocol.messages.sync_group import SyncGroupResponse
from ..protocol.messages.txn_offset_commit import TxnOffsetCommitResponse
from ..protocol.primitives import ZERO_UUID
from ..sentinels import GROUP_METADATA_TOPIC_NAME
from .auth_helper import (
    AUTHORIZED_OPS_NOT_REQUESTED,
    DELETE,
    DESCRIBE,
    GROUP,
    NO_AUTHORIZER,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    AuthHelper,
)
from .registry import handles

E = ErrorCode


def _client_host(request) -> str:
    """Kafka shows a member's address as Java's InetAddress.toString: "/127.0.0.1"."""
    peer = getattr(request.connection, "peer", None)
    return f"/{peer[0]}" if peer else ""


async def _parked(start) -> object:
    """Run `start(callback)` and wait until the coordinator calls the callback."""
    fut = asyncio.get_running_loop().create_future()

    def done(result):
        if not fut.done():
            fut.set_result(result)

    start(done)
    return await fut




class GroupsApi:
    def __init__(self, group_coordinator, metadata_cache, auth: AuthHelper = NO_AUTHORIZER, verify_partitions=None,
                 verification_enabled: bool = True):
        """``verify_partitions``, ``verification_enabled``: as ProduceApi's (KIP-890; TxnOffsetCommit v5 adds the
        group's offsets partition to the transaction, older versions are only checked when enabled)."""
        self.group_coordinator = group_coordinator
        self.metadata_cache = metadata_cache
        self.auth = auth
        self.verify_partitions = verify_partitions
        self.verification_enabled = verification_enabled

    # ---------------------------------------------------------------- membership
    @handles(11)
    async def handle_join_group(self, request):
        req = request.body
        v = request.api_version
        if not self.auth.authorize(request, READ, GROUP, req.group_id):
            return JoinGroupResponse(throttle_time_ms=0, error_code=E.GROUP_AUTHORIZATION_FAILED, generation_id=-1,
                                     protocol_type=None, protocol_name=None if v >= 7 else "", leader="",
                                     member_id=req.member_id, members=[])
        rebalance_timeout = req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms
        protocols = [(p.name, p.metadata) for p in req.protocols]
        result = await _parked(lambda done: self.group_coordinator.handle_join_group(
            req.group_id, req.member_id, req.group_instance_id, v >= 4, v >= 9, request.client_id or "",
            _client_host(request), rebalance_timeout, req.session_timeout_ms, req.protocol_type, protocols, done,
            req.reason))
        protocol_name = result.protocol_name
        if protocol_name is None and v < 7:
            protocol_name = ""
        members = [JoinGroupResponse.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=md)
                   for m, i, md in result.members]
        return JoinGroupResponse(throttle_time_ms=0, error_code=result.error, generation_id=result.generation_id,
                                 protocol_type=result.protocol_type, protocol_name=protocol_name,
                                 leader=result.leader_id or "", skip_assignment=result.skip_assignment,
                                 member_id=result.member_id, members=members)

    @handles(14)
    async def handle_sync_group(self, request):
        req = request.body
        if not self.auth.authorize(request, READ, GROUP, req.group_id):
            return SyncGroupResponse(throttle_time_ms=0, error_code=E.GROUP_AUTHORIZATION_FAILED, assignment=b"")
        if request.api_version >= 5 and (req.protocol_type is None or req.protocol_name is None):
            return SyncGroupResponse(throttle_time_ms=0, error_code=E.INCONSISTENT_GROUP_PROTOCOL)
        assignments = {a.member_id: a.assignment for a in req.assignments}
        result = await _parked(lambda done: self.group_coordinator.handle_sync_group(
            req.group_id, req.generation_id, req.member_id, req.protocol_type, req.protocol_name,
            req.group_instance_id, assignments, done))
        return SyncGroupResponse(throttle_time_ms=0, error_code=result.error, protocol_type=result.protocol_type,
                                 protocol_name=result.protocol_name, assignment=result.assignment)

    @handles(12)
    def handle_heartbeat(self, request):
        req = request.body
        if not self.auth.authorize(request, READ, GROUP, req.group_id):
            return HeartbeatResponse(throttle_time_ms=0, error_code=E.GROUP_AUTHORIZATION_FAILED)
        error = self.group_coordinator.handle_heartbeat(req.group_id, req.member_id, req.group_instance_id,
                                                          req.generation_id)
        return HeartbeatResponse(throttle_time_ms=0, error_code=error)

    @handles(13)
    def handle_leave_group(self, request):
        req = request.body
        v = request.api_version
        if not self.auth.authorize(request, READ, GROUP, req.group_id):
            return LeaveGroupResponse(throttle_time_ms=0, error_code=E.GROUP_AUTHORIZATION_FAILED)
        if v >= 3:
            leaving = [(m.member_id, m.group_instance_id, m.reason) for m in req.members]
        else:
            leaving = [(req.member_id, None, None)]
        error, members = self.group_coordinator.handle_leave_group(req.group_id, leaving)
        if v < 3:
            # One member, no per-member errors: its error goes to the top level.
            if error == E.NONE and members:
                error = members[0][2]
            return LeaveGroupResponse(throttle_time_ms=0, error_code=error)
        return LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=[
            LeaveGroupResponse.MemberResponse(member_id=m, group_instance_id=i, error_code=code)
            for m, i, code in members])


    # ---------------------------------------------------------------- offsets
    def _topic_name(self, name: str, topic_id: bytes, version: int, ids_from: int):
        """(name, error) of a request topic given by name, or by id from version `ids_from`."""
        if version >= ids_from:
            topic = self.metadata_cache.by_id.get(topic_id)
            return (topic.name, E.NONE) if topic else (None, E.UNKNOWN_TOPIC_ID)
        topic = self.metadata_cache.get(name)
        return (name, E.NONE) if topic else (name, E.UNKNOWN_TOPIC_OR_PARTITION)

    @handles(8)
    def handle_offset_commit(self, request):
        req = request.body
        v = request.api_version
        coordinator = self.group_coordinator
        now = coordinator.clock()
        # OffsetCommit v2-4 may set a retention time; it becomes the offset's expire timestamp.
        expire = now + req.retention_time_ms if 2 <= v <= 4 and req.retention_time_ms != -1 else -1
        offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        errors: dict[tuple[str, int], int] = {}
        slots = []      # (request topic, name or None, partition index) in request order
        group_denied = not self.auth.authorize(request, READ, GROUP, req.group_id)
        for t in req.topics:
            name, error = self._topic_name(t.name, t.topic_id, v, 10)
            if group_denied:
                error = E.GROUP_AUTHORIZATION_FAILED
            elif name is not None and not self.auth.authorize(request, READ, TOPIC, name):
                error = E.TOPIC_AUTHORIZATION_FAILED        # whether or not the topic exists
            topic = self.metadata_cache.get(name) if name and not error else None
            for p in t.partitions:
                slots.append((t, name, p.partition_index))
                if error or not 0 <= p.partition_index < topic.partitions:
                    errors[(name, p.partition_index)] = error or E.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                commit_ts = p.commit_timestamp if v == 1 and p.commit_timestamp != -1 else now
                offsets[(name, p.partition_index)] = OffsetAndMetadata(
                    p.committed_offset, p.committed_leader_epoch, p.committed_metadata or "", commit_ts, expire)
        if offsets:
            return self._commit_later(request, slots, errors, offsets)
        return self._commit_response(slots, errors)

    async def _commit_later(self, request, slots, errors, offsets):
        req = request.body
        errors.update(await _parked(lambda done: self.group_coordinator.handle_commit_offsets(
            req.group_id, req.member_id, req.group_instance_id, req.generation_id_or_member_epoch, offsets,
            request.api_version, done)))
        return self._commit_response(slots, errors)

    @staticmethod
    def _commit_response(slots, errors) -> OffsetCommitResponse:
        topics, by_topic = [], {}
        for t, name, index in slots:
            out = by_topic.get(id(t))
            if out is None:
                out = by_topic[id(t)] = OffsetCommitResponse.OffsetCommitResponseTopic(
                    name=t.name, topic_id=t.topic_id, partitions=[])
                topics.append(out)
            out.partitions.append(OffsetCommitResponse.OffsetCommitResponsePartition(
                partition_index=index, error_code=errors[(name, index)]))
        return OffsetCommitResponse(throttle_time_ms=0, topics=topics)

    @handles(28, 0, 6)      # v5: transactions v2, the group is added implicitly; v6: topic ids (KIP-1319)
    def handle_txn_offset_commit(self, request):
        """WRITE on the transactional id and READ on the group fail the whole request; READ on each topic
        fails its partitions. From v6 topics are named by id, and an unknown id is UNKNOWN_TOPIC_ID."""
        req = request.body
        v = request.api_version
        now = self.group_coordinator.clock()
        offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        errors: dict[tuple, int] = {}       # by _txn_key
        keys: dict[tuple[str, int], tuple] = {}       # (name, partition) -> its _txn_key
        auth = self.auth
        if not auth.authorize(request, WRITE, TRANSACTIONAL_ID, req.transactional_id):
            denied = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not auth.authorize(request, READ, GROUP, req.group_id):
            denied = E.GROUP_AUTHORIZATION_FAILED
        else:
            denied = E.NONE
        names = [self._topic_name(t.name, t.topic_id, v, 6) for t in req.topics]
        readable = auth.filter_authorized(request, READ, TOPIC, (n for n, error in names if n is not None))
        for t, (name, unknown) in zip(req.topics, names):
            topic = self.metadata_cache.get(name) if name is not None else None
            for p in t.partitions:
                key = _txn_key(t, p, v)
                if denied or (name is not None and name not in readable):
                    errors[key] = denied or E.TOPIC_AUTHORIZATION_FAILED
                    continue
                if topic is None or not 0 <= p.partition_index < topic.partitions:
                    errors[key] = E.UNKNOWN_TOPIC_ID if unknown == E.UNKNOWN_TOPIC_ID else E.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                offsets[(name, p.partition_index)] = OffsetAndMetadata(
                    p.committed_offset, p.committed_leader_epoch, p.committed_metadata or "", now)
                keys[(name, p.partition_index)] = key
        if not offsets:
            return self._txn_commit_response(request, errors)
        verified = None
        add = request.api_version >= 5
        if self.verify_partitions is not None and (add or self.verification_enabled):
            offsets_partition = (GROUP_METADATA_TOPIC_NAME, self.group_coordinator.partition_for(req.group_id))
            verified = self.verify_partitions(req.transactional_id, req.producer_id, req.producer_epoch,
                                              [offsets_partition], add)
            if not inspect.isawaitable(verified):
                error = self._verify_error(request.api_version, verified[offsets_partition])
                if error:
                    errors.update(dict.fromkeys(keys.values(), error))
                    return self._txn_commit_response(request, errors)
                verified = None
        return self._txn_commit_later(request, errors, offsets, keys, verified)

    @staticmethod
    def _verify_error(version: int, error: int) -> int:
        """KIP-890 part 1 for offsets: the group's offsets partition must be in the transaction (AddOffsetsToTxn).
        A client before v4 knows INVALID_TXN_STATE where later ones are told TRANSACTION_ABORTABLE."""
        if error == E.TRANSACTION_ABORTABLE:
            return E.TRANSACTION_ABORTABLE if version >= 4 else E.INVALID_TXN_STATE
        if error == E.PRODUCER_FENCED:
            return E.INVALID_PRODUCER_EPOCH
        return E.COORDINATOR_NOT_AVAILABLE if error == E.NOT_ENOUGH_REPLICAS else error

    async def _txn_commit_later(self, request, errors, offsets, keys, verified=None):
        req = request.body
        if verified is not None:        # the transaction coordinator is on another broker
            error = self._verify_error(request.api_version, next(iter((await verified).values())))
            if error:
                errors.update(dict.fromkeys(keys.values(), error))
                return self._txn_commit_response(request, errors)
        stored = await _parked(lambda done: self.group_coordinator.handle_txn_commit_offsets(
            req.group_id, req.producer_id, req.producer_epoch, req.member_id, req.group_instance_id,
            req.generation_id_or_member_epoch, offsets, done, request.api_version))
        errors.update((keys[tp], error) for tp, error in stored.items())
        return self._txn_commit_response(request, errors)

    @staticmethod
    def _txn_commit_response(request, errors) -> TxnOffsetCommitResponse:
        v = request.api_version
        old = v < 2
        topics = []
        for t in request.body.topics:
            parts = []
            for p in t.partitions:
                error = errors[_txn_key(t, p, v)]
                if old and error == E.COORDINATOR_LOAD_IN_PROGRESS:
                    error = E.COORDINATOR_NOT_AVAILABLE     # not known to clients before v2
                parts.append(TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
                    partition_index=p.partition_index, error_code=error))
            topics.append(TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id,
                                                                                partitions=parts))
        return TxnOffsetCommitResponse(throttle_time_ms=0, topics=topics)

    def _fetch_group(self, request, group_id: str, topics, require_stable: bool, v: int,
                     member_id: str | None = None, member_epoch: int = -1):
        """One group's OffsetFetch answer: (error, [(name, topic_id, [(partition, offset-or-None, error)])]).

        DESCRIBE on the group, then on each topic: a named topic the caller may not describe answers
        TOPIC_AUTHORIZATION_FAILED, one found by asking for all of the group's offsets is left out.
        From v9 a consumer-group member names itself: its epoch is checked (STALE_MEMBER_EPOCH)."""
        coordinator = self.group_coordinator
        auth = self.auth
        if not auth.authorize(request, DESCRIBE, GROUP, group_id):
            return E.GROUP_AUTHORIZATION_FAILED, []
        if topics is None:
            error, found = coordinator.handle_fetch_offsets(group_id, None, require_stable, member_id, member_epoch)
            unstable = coordinator.unstable_partitions(group_id, [(t, p) for t, p, _ in found]) \
                if require_stable and not error else ()
            by_name: dict[str, list] = {}
            for t, p, o in found:
                by_name.setdefault(t, []).append((p, None, E.UNSTABLE_OFFSET_COMMIT) if (t, p) in unstable
                                                 else (p, o, E.NONE))
            out = []
            for name, parts in by_name.items():
                if not auth.authorize(request, DESCRIBE, TOPIC, name):
                    continue
                topic_id = ZERO_UUID
                if v >= 10:
                    topic = self.metadata_cache.get(name)
                    if topic is None:
                        continue        # a deleted topic has no id to show
                    topic_id = topic.topic_id
                out.append((name, topic_id, parts))
            return error, out
        wanted, resolved = [], []
        for t in topics:
            name, terr = self._topic_name(getattr(t, "name", ""), getattr(t, "topic_id", ZERO_UUID), v, 10)
            if name is not None and not auth.authorize(request, DESCRIBE, TOPIC, name):
                terr = E.TOPIC_AUTHORIZATION_FAILED
            resolved.append((t, name, terr))
            if not terr:
                wanted.extend((name, p) for p in t.partition_indexes)
        error, found = coordinator.handle_fetch_offsets(group_id, wanted, require_stable, member_id, member_epoch)
        committed = {(t, p): o for t, p, o in found}
        unstable = coordinator.unstable_partitions(group_id, wanted) if require_stable and not error else ()
        out = []
        for t, name, terr in resolved:
            parts = [(p, None, E.UNSTABLE_OFFSET_COMMIT) if (name, p) in unstable
                     else (p, None if terr else committed.get((name, p)), terr) for p in t.partition_indexes]
            out.append((name, getattr(t, "topic_id", ZERO_UUID), parts))
        return error, out

    @handles(9)
    def handle_offset_fetch(self, request):
        req = request.body
        v = request.api_version
        if v >= 8:
            groups = []
            for g in req.groups:
                error, topics = self._fetch_group(request, g.group_id, g.topics, req.require_stable, v,
                                                  g.member_id if v >= 9 else None, g.member_epoch if v >= 9 else -1)
                groups.append(OffsetFetchResponse.OffsetFetchResponseGroup(
                    group_id=g.group_id, error_code=error, topics=[] if error else [
                        OffsetFetchResponse.OffsetFetchResponseTopics(name=name, topic_id=tid, partitions=[
                            _partition(OffsetFetchResponse.OffsetFetchResponsePartitions, p, o, perr)
                            for p, o, perr in parts]) for name, tid, parts in topics]))
            return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
        # v0-1 have no null topic list (and so no "all partitions").
        error, topics = self._fetch_group(request, req.group_id, req.topics if v >= 2 or req.topics else [],
                                     v >= 7 and req.require_stable, v)
        if error and v < 2:
            # No top-level error before v2: every requested partition carries it.
            topics = [(t.name, ZERO_UUID, [(p, None, error) for p in t.partition_indexes]) for t in req.topics]
        elif error:
            topics = []
        return OffsetFetchResponse(throttle_time_ms=0, error_code=error, topics=[
            OffsetFetchResponse.OffsetFetchResponseTopic(name=name, partitions=[
                _partition(OffsetFetchResponse.OffsetFetchResponsePartition, p, o, perr) for p, o, perr in parts])
            for name, _tid, parts in topics])


        # Metadata is "" rather than null when nothing is committed: sarama cannot read a null there.

    @handles(47)
    def handle_offset_delete(self, request):
        req = request.body
        if not self.auth.authorize(request, DELETE, GROUP, req.group_id):
            return OffsetDeleteResponse(error_code=E.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[])
        errors: dict[tuple[str, int], int] = {}
        wanted = []
        readable = self.auth.filter_authorized(request, READ, TOPIC, (t.name for t in req.topics))
        for t in req.topics:
            topic = self.metadata_cache.get(t.name)
            for p in t.partitions:
                if t.name not in readable:
                    errors[(t.name, p.partition_index)] = E.TOPIC_AUTHORIZATION_FAILED
                elif topic is None or not 0 <= p.partition_index < topic.partitions:
                    errors[(t.name, p.partition_index)] = E.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    wanted.append((t.name, p.partition_index))
        error, deleted = self.group_coordinator.handle_delete_offsets(req.group_id, wanted)
        if error:
            return OffsetDeleteResponse(error_code=error, throttle_time_ms=0, topics=[])
        errors.update(deleted)
        return OffsetDeleteResponse(error_code=E.NONE, throttle_time_ms=0, topics=[
            OffsetDeleteResponse.OffsetDeleteResponseTopic(name=t.name, partitions=[
                OffsetDeleteResponse.OffsetDeleteResponsePartition(
                    partition_index=p.partition_index, error_code=errors.get((t.name, p.partition_index), E.NONE))
                for p in t.partitions]) for t in req.topics])


    # ---------------------------------------------------------------- admin
    @handles(16)
    def handle_list_groups(self, request):
        """DESCRIBE on the cluster lists every group; otherwise the groups the caller may describe."""
        req = request.body
        error, groups = self.group_coordinator.handle_list_groups(req.states_filter, req.types_filter)
        if not self.auth.authorize_cluster(request, DESCRIBE):
            allowed = self.auth.filter_authorized(request, DESCRIBE, GROUP, (g[0] for g in groups))
            groups = [g for g in groups if g[0] in allowed]
        return ListGroupsResponse(throttle_time_ms=0, error_code=error, groups=[
            ListGroupsResponse.ListedGroup(group_id=g, protocol_type=pt, group_state=state, group_type=gtype)
            for g, pt, state, gtype in groups])

    @handles(15)
    def handle_describe_groups(self, request):
        req = request.body
        v = request.api_version
        out = []
        for group_id in req.groups:
            if not self.auth.authorize(request, DESCRIBE, GROUP, group_id):
                out.append(DescribeGroupsResponse.DescribedGroup(
                    error_code=E.GROUP_AUTHORIZATION_FAILED, group_id=group_id, group_state="",
                    error_message=E.GROUP_AUTHORIZATION_FAILED.message if v >= 6 else None))
                continue
            error, summary = self.group_coordinator.handle_describe_group(group_id)
            if summary is None:
                # Kafka answers "Dead" for an unknown group, and GROUP_ID_NOT_FOUND from v6; with the
                # operations the caller has on it, when asked
                ops = self.auth.authorized_operations(request, GROUP, group_id) \
                    if req.include_authorized_operations and v >= 3 else AUTHORIZED_OPS_NOT_REQUESTED
                if v >= 6:
                    out.append(DescribeGroupsResponse.DescribedGroup(
                        error_code=E.GROUP_ID_NOT_FOUND,
                        error_message=self.group_coordinator.not_found_message(group_id),
                        group_id=group_id, group_state="Dead", authorized_operations=ops))
                else:
                    out.append(DescribeGroupsResponse.DescribedGroup(group_id=group_id, group_state="Dead",
                                                                     authorized_operations=ops))
                continue
            ops = self.auth.authorized_operations(request, GROUP, group_id) \
                if req.include_authorized_operations and v >= 3 and not error else AUTHORIZED_OPS_NOT_REQUESTED
            out.append(DescribeGroupsResponse.DescribedGroup(
                error_code=error, error_message=None if not error or v < 6 else E(error).message,
                group_id=group_id, group_state=summary.state, protocol_type=summary.protocol_type,
                protocol_data=summary.protocol, authorized_operations=ops, members=[
                    DescribeGroupsResponse.DescribedGroupMember(
                        member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                        client_host=m.client_host, member_metadata=m.metadata, member_assignment=m.assignment)
                    for m in summary.members]))
        return DescribeGroupsResponse(throttle_time_ms=0, groups=out)

    @handles(42)
    def handle_delete_groups(self, request):
        names = list(dict.fromkeys(request.body.groups_names))
        allowed = self.auth.filter_authorized(request, DELETE, GROUP, names)
        errors = self.group_coordinator.handle_delete_groups([g for g in names if g in allowed])
        errors.update((g, E.GROUP_AUTHORIZATION_FAILED) for g in names if g not in allowed)
        return DeleteGroupsResponse(throttle_time_ms=0, results=[
            DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=errors[g],
                                                      error_message=_delete_group_message(errors[g]))
            for g in names])


# A coordinator that cannot act fails its whole shard, and Kafka's GroupCoordinatorService then gives each
# group of it the exception's message (DeleteGroups v3's ErrorMessage); a group's own error carries none.
_SHARD_ERRORS = frozenset({E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS})


def _delete_group_message(error: int) -> str | None:
    return E(error).message if error in _SHARD_ERRORS else None


def _txn_key(t, p, version: int) -> tuple:
    """A TxnOffsetCommit partition's key among the errors: by topic id from v6 (the name is not sent)."""
    return (t.topic_id if version >= 6 else t.name, p.partition_index)


def _partition(cls, index: int, o: OffsetAndMetadata | None, error: int):
    if o is None:
        return cls(partition_index=index, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                   error_code=error)
    return cls(partition_index=index, committed_offset=o.offset, committed_leader_epoch=o.leader_epoch,
               metadata=o.metadata or "", error_code=error)
