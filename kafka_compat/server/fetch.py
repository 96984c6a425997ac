"""Fetch: whole batches straight from the segment files, through ReplicaManager.fetch_messages.

The partition data's records are `FileRecords`: slices of segment files that
the connection sends with `os.sendfile`, so record bytes never pass through
Python. A fetch that finds fewer than MinBytes waits in the fetch purgatory
(DelayedFetch) until an append brings enough or MaxWaitMs passes. Followers
and consumers get incremental fetch sessions (fetch_session.py), followers first
when the cache is full. A throttled answer opens no session and keeps the one named.
From v16 a partition whose leader moved names the current leader and its address
(KIP-951, current_leader.py), in an incremental response too (an error is always sent).
"""
from __future__ import annotations

import asyncio

from kafka_compat.storage.unified_log import FetchIsolation

from ..protocol.convert import down_convert
from ..protocol.errors import ErrorCode
from ..protocol.messages.fetch import FetchRequest, FetchResponse
from .auth_helper import CLUSTER_ACTION, NO_AUTHORIZER, READ, TOPIC, AuthHelper
from .broker_topic_stats import BrokerTopicStats
from .client_quota_manager import QuotaManagers, principal_user
from .current_leader import CurrentLeaders
from .delayed_fetch import FetchParams, PartitionFetchInfo
from .fetch_session import FINAL_EPOCH, INITIAL_EPOCH, CachedPartition, FetchSession, FetchSessionCache, next_epoch
from .metadata import listener_of
from .metadata_cache import MetadataCache
from .registry import handles
from .replica_manager import ReplicaManager

READ_COMMITTED = 1
# Below this many bytes a response is cheaper to copy than to splice with sendfile.
SENDFILE_MIN_BYTES = 16384
PartitionData = FetchResponse.PartitionData
AbortedTransaction = FetchResponse.AbortedTransaction
DENIED = object()           # a topic the caller may not read
# KIP-951 (Fetch v16+): a partition answering one of these names its current leader (Kafka's handleFetchRequest)
LEADER_MOVED = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


class FileRecords:
    """Record bytes that stay in segment files; `len()` is what the response's size field says."""
    __slots__ = ("result",)

    def __init__(self, result):
        self.result = result

    def __len__(self) -> int:
        return self.result.size

    def slices(self):
        return self.result.slices


def _must_respond(cached: CachedPartition, r) -> bool:
    """CachedPartition.must_respond over a read's result, with the figures _partition_data would send."""
    if r.error_code and r.high_watermark < 0:
        return cached.must_respond(r.error_code, -1, -1, False, False)
    diverging = r.diverging_epoch is not None
    info = r.info
    return cached.must_respond(r.error_code, r.high_watermark, r.log_start_offset,
                               not diverging and info is not None and info.records.size > 0, diverging,
                               r.preferred_read_replica >= 0)


def isolation_of(replica_id: int, isolation_level: int) -> FetchIsolation:
    """Followers read to the log end, read_committed consumers to the LSO, others to the HW."""
    if replica_id >= 0:
        return FetchIsolation.LOG_END
    return FetchIsolation.TXN_COMMITTED if isolation_level == READ_COMMITTED else FetchIsolation.HIGH_WATERMARK


def replica_id_of(request) -> int:
    """The fetching replica's id (v15+ moved it into ReplicaState); negative for a consumer."""
    req = request.body
    if request.api_version >= 15 and req.replica_state is not None:
        return req.replica_state.replica_id
    return req.replica_id


class FetchApi:
    def __init__(self, replica_manager: ReplicaManager, metadata_cache: MetadataCache,
                 quotas: QuotaManagers | None = None, broker_topic_stats: BrokerTopicStats | None = None,
                 auth: AuthHelper = NO_AUTHORIZER, sessions: FetchSessionCache | None = None):
        self.replica_manager = replica_manager
        self.sessions = FetchSessionCache() if sessions is None else sessions
        self.metadata_cache = metadata_cache
        self.quotas = quotas or QuotaManagers()
        self.broker_topic_stats = broker_topic_stats or BrokerTopicStats()
        self.auth = auth

    @handles(1)
    def handle_fetch(self, request):
        """A follower needs CLUSTER_ACTION on the cluster, a consumer READ on each topic (checked once per
        topic); a refused topic's partitions answer TOPIC_AUTHORIZATION_FAILED and are not read."""
        req = request.body
        v = request.api_version
        replica_id = replica_id_of(request)
        max_bytes = req.max_bytes if v >= 3 else 0x7FFFFFFF
        if replica_id < 0 and self.quotas.fetch.enabled:
            # no more than the quota lets through in one window: a bigger answer would always be throttled
            window = self.quotas.fetch.max_value_in_quota_window(principal_user(request.connection),
                                                                 request.client_id or "")
            max_bytes = int(min(max_bytes, window))
        params = FetchParams(replica_id, req.max_wait_ms, req.min_bytes, max_bytes,
                             isolation_of(replica_id, req.isolation_level if v >= 4 else 0),
                             min_one_message_always=v < 3,
                             client_rack=(req.rack_id or "") if v >= 11 and replica_id < 0 else None)
        auth = self.auth
        follower_denied = replica_id >= 0 and not auth.authorize_cluster(request, CLUSTER_ACTION)
        topics, session, error = self._session(request, not follower_denied, privileged=replica_id >= 0)
        if error:
            return FetchResponse(throttle_time_ms=0, error_code=error, session_id=0, responses=[])
        names = []              # per topic: its name, None for an unknown topic id, DENIED if refused
        fetches = []
        for t in topics:
            name = t.topic
            if v >= 13:
                topic = self.metadata_cache.topic_by_id(t.topic_id)
                # a follower may fetch before UpdateMetadata brings the topic: its LeaderAndIsr named it
                name = topic.name if topic else self.replica_manager.topic_name(t.topic_id)
            if name is not None and (follower_denied or (replica_id < 0 and not auth.authorize(request, READ, TOPIC,
                                                                                                 name))):
                name = DENIED
            names.append(name)
            if name is None or name is DENIED:
                continue
            for p in t.partitions:
                fetches.append((name, p.partition, PartitionFetchInfo(
                    p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch if v >= 9 else -1,
                    p.last_fetched_epoch if v >= 12 else -1, p.log_start_offset if v >= 5 else -1)))
        results = self.replica_manager.fetch_messages(params, fetches)
        if isinstance(results, asyncio.Future):
            return self._respond_later(request, topics, names, results, session)
        return self._respond(request, topics, names, results, session)

    def _session(self, request, may_have_session: bool, privileged: bool):
        """Kafka's FetchManager.newContext: (the topics to read, the session or None, a top-level error).

        Epoch -1 is a full request without a session, 0 a full request that opens one (either closes the
        session it names); a later epoch is an incremental request of that session: its partitions update
        the session's, its forgotten ones leave it, and every partition of the session is read.
        """
        req = request.body
        if request.api_version < 7:
            return req.topics, None, ErrorCode.NONE
        epoch, session_id = req.session_epoch, req.session_id
        uses_ids = request.api_version >= 13
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id:
                self.sessions.remove(session_id)
            size = sum(len(t.partitions) for t in req.topics)
            session = self.sessions.create(uses_ids, privileged, size) \
                if epoch == INITIAL_EPOCH and may_have_session else None
            if session is not None:
                self._update(session, req)
            return req.topics, session, ErrorCode.NONE
        session = self.sessions.get(session_id)
        if session is None:
            return None, None, ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        if session.epoch != epoch:
            return None, None, ErrorCode.INVALID_FETCH_SESSION_EPOCH
        if session.uses_topic_ids != uses_ids:
            self.sessions.remove(session_id)
            return None, None, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
        self._update(session, req)
        for t in req.forgotten_topics_data:
            topic = t.topic_id if uses_ids else t.topic
            for index in t.partitions:
                session.partitions.pop((topic, index), None)
        session.epoch = next_epoch(epoch)
        topics: list = []
        last = None
        for (topic, index), cached in session.partitions.items():
            if topic != last:
                topics.append(FetchRequest.FetchTopic(topic=topic, topic_id=topic, partitions=[]) if uses_ids
                              else FetchRequest.FetchTopic(topic=topic, partitions=[]))
                last = topic
            topics[-1].partitions.append(cached.request)
        return topics, session, ErrorCode.NONE

    @staticmethod
    def _update(session: FetchSession, req) -> None:
        uses_ids = session.uses_topic_ids
        partitions = session.partitions
        for t in req.topics:
            topic = t.topic_id if uses_ids else t.topic
            for p in t.partitions:
                cached = partitions.get((topic, p.partition))
                if cached is None:
                    partitions[(topic, p.partition)] = CachedPartition(p)
                else:
                    cached.request = p

    async def _respond_later(self, request, topics, names, future, session):
        return self._respond(request, topics, names, await future, session)

    def _respond(self, request, topics, names, results, session: FetchSession | None = None) -> FetchResponse:
        """The response for ``topics`` (the request's, or an incremental session's): in an incremental
        response only the partitions Kafka's CachedPartition says must be there."""
        req = request.body
        v = request.api_version
        from_follower = replica_id_of(request) >= 0
        throttle = 0 if from_follower else self._throttle(request, results)
        request.throttle_time_ms = throttle
        if throttle:
            # KIP-219: a throttled fetch is answered at once, empty, and the connection muted. As Kafka's
            # getThrottledResponse: a full request gets no session, an incremental one keeps its own
            session_id = 0
            if session is not None:
                if req.session_epoch > INITIAL_EPOCH:
                    session_id = session.id
                else:
                    self.sessions.remove(session.id)
            return FetchResponse(throttle_time_ms=throttle, error_code=ErrorCode.NONE, session_id=session_id,
                                 responses=[])
        committed = req.isolation_level == READ_COMMITTED if v >= 4 else False
        out_topics = []
        i = 0
        incremental = session is not None and req.session_epoch > INITIAL_EPOCH
        cache = session.partitions if session is not None else None
        answered = []               # an incremental answer's partitions, which go to the end of the session
        leaders = None
        for t, name in zip(topics, names):
            parts = []
            topic_key = (t.topic_id if session.uses_topic_ids else t.topic) if session is not None else None
            for p in t.partitions:
                cached = cache.get((topic_key, p.partition)) if cache is not None else None
                if name is None or name is DENIED:
                    error = ErrorCode.UNKNOWN_TOPIC_ID if name is None else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    if cached is not None:
                        cached.must_respond(error, -1, -1, False, False)       # an error is always sent
                        if incremental:
                            answered.append((topic_key, p.partition))
                    pd = PartitionData(partition_index=p.partition, high_watermark=-1, last_stable_offset=-1,
                                       log_start_offset=-1, aborted_transactions=[] if committed else None,
                                       preferred_read_replica=-1, records=b"", error_code=error)
                else:
                    r = results[i]
                    i += 1
                    # decided before the partition's answer is built: an incremental answer leaves most out
                    if cached is not None:
                        if not _must_respond(cached, r):
                            if incremental:
                                continue
                        elif incremental:
                            answered.append((topic_key, p.partition))
                    pd = self._partition_data(v, name, p.partition, r, committed, from_follower)
                if pd.error_code and v >= 16 and pd.error_code in LEADER_MOVED:
                    if leaders is None:
                        leaders = CurrentLeaders(self.replica_manager, self.metadata_cache, listener_of(request),
                                                 FetchResponse.LeaderIdAndEpoch, FetchResponse.NodeEndpoint)
                    pd.current_leader = leaders.of(name, p.partition)
                parts.append(pd)
            if parts or not incremental:
                out_topics.append(FetchResponse.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id,
                                                                       partitions=parts))
        if answered:
            session.rotate(answered)
        return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                             session_id=session.id if session is not None else 0, responses=out_topics,
                             node_endpoints=leaders.endpoints() if leaders is not None else [])

    def _partition_data(self, v: int, name: str, index: int, r, committed: bool, from_follower: bool):
        pd = PartitionData(partition_index=index, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
                           aborted_transactions=[] if committed else None, preferred_read_replica=-1, records=b"",
                           error_code=r.error_code)
        if r.error_code:        # as Kafka's createLogReadResult(e): an error carries no offsets
            return pd
        pd.high_watermark = r.high_watermark
        pd.last_stable_offset = r.last_stable_offset
        pd.log_start_offset = r.log_start_offset
        pd.preferred_read_replica = r.preferred_read_replica
        if r.diverging_epoch is not None:
            pd.diverging_epoch = FetchResponse.EpochEndOffset(epoch=r.diverging_epoch[0],
                                                              end_offset=r.diverging_epoch[1])
            return pd
        info = r.info
        if info is None:
            return pd
        if committed and info.aborted_transactions:
            pd.aborted_transactions = [AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                                       for a in info.aborted_transactions]
        size = info.records.size
        if size:
            pd.records = self._records(v, info.records, size)
            self.broker_topic_stats.record_bytes_out(name, size, from_follower)
        return pd

    def _throttle(self, request, results) -> int:
        """Kafka's fetch quotas: the response's bytes against consumer_byte_rate and the handler time
        against request_percentage; when throttled the bytes are taken back (nothing is sent)."""
        quotas = self.quotas
        if not (quotas.fetch.enabled or quotas.request.enabled):
            return 0
        user, client_id = principal_user(request.connection), request.client_id or ""
        size = sum(r.info.records.size for r in results if r.info is not None)
        by_time = quotas.request_throttle_ms(request, user)
        by_bytes = quotas.fetch.record_and_get_throttle_ms(user, client_id, size)
        throttle = max(by_bytes, by_time)
        if throttle:
            quotas.fetch.unrecord(user, client_id, size)
            (quotas.fetch if by_bytes > by_time else quotas.request).record_throttle(user, client_id, throttle)
        return throttle

    @staticmethod
    def _records(version: int, records, size: int):
        if version < 4:
            # Fetch v0-v1 read magic 0, v2-v3 magic 1: convert what the log holds.
            return down_convert(records.read_bytes(), 0 if version < 2 else 1)
        if size < SENDFILE_MIN_BYTES or records.data is not None:      # small, or read from remote storage
            return records.read_bytes()
        return FileRecords(records)
