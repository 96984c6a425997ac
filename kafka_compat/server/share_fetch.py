"""ShareFetch (78) and ShareAcknowledge (79): share group consumption (KIP-932), thin over
SharePartitionManager and the ShareSessionCache, in Kafka's order (KafkaApis.handleShareFetchRequest):
share groups enabled, READ on the group, a member id the client made up, the share session's
context (epoch 0 opens, -1 closes, others must be the session's), the acknowledgements the
request carries, then (unless the session closes) the fetch. Records go out as the consumers'
Fetch sends them: file slices with sendfile, small reads copied.

A full answer names every partition of the session; an incremental one only those with
records, an error, or acknowledgements to answer. Version 1 (Kafka 4.1+) only: v0 was the
early access; v2 (KIP-1222's renew acknowledgements and record-limit acquisition) is not served.
"""
from __future__ import annotations

import asyncio

from kafka_compat.storage.fetch_data_info import COPY_BELOW_BYTES

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.share_acknowledge import ShareAcknowledgeResponse
from ..protocol.messages.share_fetch import ShareFetchResponse
from .auth_helper import GROUP, NO_AUTHORIZER, READ, TOPIC, AuthHelper
from .fetch import FileRecords
from .registry import handles
from .share.share_partition_manager import SharePartitionManager
from .share.share_session_cache import ShareSessionCache
from .share_groups import always, member_id_valid

E = ErrorCode


class ShareFetchApi:
    def __init__(self, manager: SharePartitionManager, sessions: ShareSessionCache, metadata_cache, broker_id: int,
                 auth: AuthHelper = NO_AUTHORIZER, enabled=always):
        self.manager = manager
        self.sessions = sessions
        self.metadata_cache = metadata_cache
        self.broker_id = broker_id
        self.auth = auth
        self.enabled = enabled

    # ------------------------------------------------------------ shared steps
    def _top_level_error(self, request) -> int | None:
        req = request.body
        if not self.enabled():
            return E.UNSUPPORTED_VERSION
        if not self.auth.authorize(request, READ, GROUP, req.group_id):
            return E.GROUP_AUTHORIZATION_FAILED
        if not req.group_id or not member_id_valid(req.member_id):
            return E.INVALID_REQUEST
        return None

    def _names(self, request, topic_ids) -> dict:
        """{topic id: name}, None for an unknown id, False for a topic the caller may not read."""
        out = {}
        for topic_id in topic_ids:
            if topic_id in out:
                continue
            topic = self.metadata_cache.topic_by_id(topic_id)
            out[topic_id] = None if topic is None else (
                topic.name if self.auth.authorize(request, READ, TOPIC, topic.name) else False)
        return out

    def _acknowledge(self, group_id: str, member_id: str, topics, names: dict):
        """{(topic id, index): error} for the acknowledgements in ``topics``, or a coroutine of it when their
        state is still being written (an acknowledgement is answered once it is kept)."""
        acks, errors = {}, {}
        for t in topics:
            for p in t.partitions:
                if not p.acknowledgement_batches:
                    continue
                name = names.get(t.topic_id)
                if not name:
                    errors[(t.topic_id, p.partition_index)] = \
                        E.UNKNOWN_TOPIC_ID if name is None else E.TOPIC_AUTHORIZATION_FAILED
                    continue
                acks[(t.topic_id, p.partition_index)] = [
                    (b.first_offset, b.last_offset, tuple(b.acknowledge_types)) for b in p.acknowledgement_batches]
        if acks:
            by_name = {(names[tid], index): (tid, index) for tid, index in acks}
            results = self.manager.acknowledge(group_id, member_id, {
                name_key: acks[key] for name_key, key in by_name.items()})
            errors.update({by_name[k]: error for k, error in results.items()})
            kept = [(group_id, *k) for k, error in results.items() if error == E.NONE]
            if self.manager.has_pending_writes(kept):
                return self._persisted(errors, kept, by_name)
        return errors

    async def _persisted(self, errors: dict, kept: list, by_name: dict) -> dict:
        for (_, name, index), error in (await self.manager.persisted(kept)).items():
            errors[by_name[(name, index)]] = error
        return errors

    def on_disconnect(self, connection) -> None:
        """A client connection is gone: the share sessions it opened close, releasing what they held."""
        if not self.sessions.sessions:
            return
        for session in self.sessions.on_disconnect(id(connection)):
            self._release(session)

    def _close_session(self, session) -> None:
        self.sessions.remove(session.group_id, session.member_id)
        self._release(session)

    def _release(self, session) -> None:
        names = self._names_unchecked(tid for tid, _ in session.partitions)
        self.manager.release_session(session.group_id, session.member_id,
                                     [(names[tid], i) for tid, i in session.partitions if names.get(tid)])

    def _names_unchecked(self, topic_ids) -> dict:
        out = {}
        for tid in topic_ids:
            topic = self.metadata_cache.topic_by_id(tid)
            out[tid] = topic.name if topic is not None else None
        return out

    def _leader(self, cls, name, index):
        partition = self.manager.replica_manager.get_partition(name, index) if name else None
        if partition is None or partition.leader_id < 0:
            return cls(leader_id=-1, leader_epoch=-1)
        return cls(leader_id=partition.leader_id, leader_epoch=partition.leader_epoch)

    # ------------------------------------------------------------ ShareFetch
    @handles(78, 1, 1)
    def handle_share_fetch(self, request):
        req = request.body
        error = self._top_level_error(request)
        if error is not None:
            return _fetch_error(error)
        named = [(t.topic_id, p.partition_index) for t in req.topics for p in t.partitions]
        forgotten = [(f.topic_id, i) for f in req.forgotten_topics_data for i in f.partitions]
        has_acks = any(p.acknowledgement_batches for t in req.topics for p in t.partitions)
        try:
            ctx, _replaced = self.sessions.new_context(req.group_id, req.member_id, req.share_session_epoch, named,
                                                       forgotten, has_acks, id(request.connection))
        except KafkaError as e:
            return _fetch_error(e.error_code, str(e))
        names = self._names(request, [t.topic_id for t in req.topics] + [tid for tid, _ in ctx.partitions])
        ack_errors = self._acknowledge(req.group_id, req.member_id, req.topics, names) if has_acks else {}
        if asyncio.iscoroutine(ack_errors):
            return self._fetch_when_kept(req, ctx, names, ack_errors)
        return self._fetch_after_acks(req, ctx, names, ack_errors, has_acks)

    async def _fetch_when_kept(self, req, ctx, names, ack_errors):
        response = self._fetch_after_acks(req, ctx, names, await ack_errors, True)
        return await response if asyncio.iscoroutine(response) else response

    def _fetch_after_acks(self, req, ctx, names, ack_errors: dict, has_acks: bool):
        lock_ms = self.manager.lock_duration_ms(req.group_id)
        if ctx.final:
            self._close_session(ctx.session)
            return self._fetch_response(lock_ms, list(ack_errors), names, {}, ack_errors)
        wanted = [(names[tid], i) for tid, i in ctx.partitions if names.get(tid)]
        results = self.manager.fetch(req.group_id, req.member_id, wanted, req.max_wait_ms, req.min_bytes,
                                     req.max_bytes, req.max_records) if wanted else {}
        keys = ctx.partitions if ctx.full else None
        if isinstance(results, asyncio.Future):
            return self._later(lock_ms, keys, names, results, ack_errors)
        if req.max_wait_ms > 0 and not has_acks and not any(r.acquired or r.error_code for r in results.values()):
            # nothing acquirable (the record-lock limit, or records others hold): answer after MaxWaitMs, not
            # at once, so that a member does not spin
            return self._idle(lock_ms, keys, names, req.max_wait_ms)
        return self._fetch_response(lock_ms, keys, names, results, ack_errors)

    async def _later(self, lock_ms, keys, names, future, ack_errors):
        return self._fetch_response(lock_ms, keys, names, await future, ack_errors)

    async def _idle(self, lock_ms, keys, names, max_wait_ms):
        """Nothing to fetch: answer after MaxWaitMs, as Kafka's idle share fetch timer does."""
        await asyncio.sleep(max_wait_ms / 1000)
        return self._fetch_response(lock_ms, keys, names, {}, {})

    def _fetch_response(self, lock_ms: int, keys, names: dict, results: dict, ack_errors: dict):
        """``keys``: every (topic id, index) to name (a full answer), or None for an incremental one."""
        PartitionData = ShareFetchResponse.PartitionData
        if keys is None:
            keys = [(tid, i) for tid, i in _session_order(names, results)] + \
                [k for k in ack_errors if k not in results]
            keys = list(dict.fromkeys(keys))
        by_topic: dict = {}
        for tid, index in keys:
            name = names.get(tid)
            r = results.get((name, index)) if name else None
            pd = PartitionData(partition_index=index, error_code=E.NONE, acknowledge_error_code=E.NONE,
                               current_leader=self._leader(ShareFetchResponse.LeaderIdAndEpoch, name, index),
                               records=b"", acquired_records=[])
            if name is None:
                pd.error_code = E.UNKNOWN_TOPIC_ID
            elif name is False:
                pd.error_code = E.TOPIC_AUTHORIZATION_FAILED
            elif r is not None:
                pd.error_code, pd.error_message = r.error_code, r.error_message
                if r.acquired:
                    size = r.records.size
                    pd.records = r.records.read_bytes() if size < COPY_BELOW_BYTES else FileRecords(r.records)
                    pd.acquired_records = [ShareFetchResponse.AcquiredRecords(
                        first_offset=a.first_offset, last_offset=a.last_offset, delivery_count=a.delivery_count)
                        for a in r.acquired]
            if (tid, index) in ack_errors:
                pd.acknowledge_error_code = ack_errors[(tid, index)]
            by_topic.setdefault(tid, []).append(pd)
        return ShareFetchResponse(
            throttle_time_ms=0, error_code=E.NONE, error_message=None, acquisition_lock_timeout_ms=lock_ms,
            responses=[ShareFetchResponse.ShareFetchableTopicResponse(topic_id=tid, partitions=parts)
                       for tid, parts in by_topic.items()], node_endpoints=[])

    # ------------------------------------------------------------ ShareAcknowledge
    @handles(79, 1, 1)
    def handle_share_acknowledge(self, request):
        req = request.body
        error = self._top_level_error(request)
        if error is not None:
            return _ack_error(error)
        try:
            ctx = self.sessions.acknowledge_context(req.group_id, req.member_id, req.share_session_epoch)
        except KafkaError as e:
            return _ack_error(e.error_code, str(e))
        names = self._names(request, [t.topic_id for t in req.topics])
        errors = self._acknowledge(req.group_id, req.member_id, req.topics, names)
        if ctx.final:
            self._close_session(ctx.session)
        if asyncio.iscoroutine(errors):
            return self._acknowledge_when_kept(req, names, errors)
        return self._acknowledge_response(req, names, errors)

    async def _acknowledge_when_kept(self, req, names, errors):
        return self._acknowledge_response(req, names, await errors)

    def _acknowledge_response(self, req, names, errors: dict):
        by_topic: dict = {}
        for t in req.topics:
            for p in t.partitions:
                error = errors.get((t.topic_id, p.partition_index), E.NONE)
                by_topic.setdefault(t.topic_id, []).append(ShareAcknowledgeResponse.PartitionData(
                    partition_index=p.partition_index, error_code=error, error_message=None,
                    current_leader=self._leader(ShareAcknowledgeResponse.LeaderIdAndEpoch, names.get(t.topic_id),
                                                p.partition_index)))
        return ShareAcknowledgeResponse(
            throttle_time_ms=0, error_code=E.NONE, error_message=None,
            acquisition_lock_timeout_ms=self.manager.lock_duration_ms(req.group_id),
            responses=[ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse(topic_id=tid, partitions=parts)
                       for tid, parts in by_topic.items()], node_endpoints=[])


def _session_order(names: dict, results: dict):
    """An incremental answer's partitions: those whose result carries records or an error."""
    ids = {name: tid for tid, name in names.items() if name}
    for (name, index), r in results.items():
        if r.acquired or r.error_code:
            yield ids[name], index


def _fetch_error(code: int, message: str | None = None):
    return ShareFetchResponse(throttle_time_ms=0, error_code=code, error_message=message or E(code).message,
                              acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])


def _ack_error(code: int, message: str | None = None):
    return ShareAcknowledgeResponse(throttle_time_ms=0, error_code=code, error_message=message or E(code).message,
                                    acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])
