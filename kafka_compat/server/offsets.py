"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords: questions about a partition's offsets.

Each goes to ReplicaManager, which asks the partition: its leader and epoch checks
apply, latest means the last offset the reader may fetch, and an epoch's end comes
from the leader-epoch cache.
"""
from __future__ import annotations

import asyncio

from kafka_compat.storage.local_log import LATEST_TIMESTAMP
from kafka_compat.storage.unified_log import FetchIsolation

from ..protocol.errors import ErrorCode
from ..protocol.messages.delete_records import DeleteRecordsResponse
from ..protocol.messages.list_offsets import ListOffsetsResponse
from ..protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochResponse
from ..sentinels import CONSUMER_REPLICA_ID, DEBUGGING_REPLICA_ID
from .auth_helper import CLUSTER_ACTION, DELETE, DESCRIBE, NO_AUTHORIZER, TOPIC, AuthHelper
from .fetch import READ_COMMITTED
from .registry import handles
from .replica_manager import ReplicaManager

EARLIEST_PENDING_UPLOAD = -6        # KIP-1023; like latest-tiered, nothing is tiered here
# The first version that may ask for each sentinel; an older one is answered UNSUPPORTED_VERSION,
# as Kafka answers it: max timestamp (KIP-734), earliest local (KIP-405), latest tiered (KIP-1005),
# earliest pending upload (KIP-1023).
SENTINEL_SINCE = {-3: 7, -4: 8, -5: 9, EARLIEST_PENDING_UPLOAD: 11}


class OffsetsApi:
    def __init__(self, replica_manager: ReplicaManager, auth: AuthHelper = NO_AUTHORIZER):
        self.replica_manager = replica_manager
        self.auth = auth

    @handles(2)
    def handle_list_offsets(self, request):
        req = request.body
        v = request.api_version
        if v >= 2 and req.isolation_level == READ_COMMITTED:
            isolation = FetchIsolation.TXN_COMMITTED
        elif req.replica_id == CONSUMER_REPLICA_ID:
            isolation = FetchIsolation.HIGH_WATERMARK
        else:
            isolation = FetchIsolation.LOG_END       # a follower or a debugging tool reads to the log end
        from_leader = req.replica_id != DEBUGGING_REPLICA_ID
        topics = []
        for t in req.topics:
            if not self.auth.authorize(request, DESCRIBE, TOPIC, t.name):
                parts = [ListOffsetsResponse.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, timestamp=-1,
                    offset=-1, leader_epoch=-1, old_style_offsets=[]) for p in t.partitions]
            else:
                parts = [self._list_one(t.name, p, v, isolation, from_leader) for p in t.partitions]
            topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=t.name, partitions=parts))
        return ListOffsetsResponse(throttle_time_ms=0, topics=topics)

    def _list_one(self, name: str, p, version: int, isolation: FetchIsolation, from_leader: bool):
        out = ListOffsetsResponse.ListOffsetsPartitionResponse(partition_index=p.partition_index,
                                                               timestamp=-1, offset=-1, leader_epoch=-1)
        if version < SENTINEL_SINCE.get(p.timestamp, 0):
            out.error_code = ErrorCode.UNSUPPORTED_VERSION
            return out
        pending = p.timestamp == EARLIEST_PENDING_UPLOAD      # (KIP-1023: not answered yet, -1)
        error, found = self.replica_manager.fetch_offset_for_timestamp(
            name, p.partition_index, LATEST_TIMESTAMP if pending else p.timestamp, isolation,
            p.current_leader_epoch if version >= 4 else -1, from_leader)
        if pending:
            found = None        # the partition's checks apply, the answer is -1
        if error:
            out.error_code = error
            return out
        if found is not None:
            out.timestamp, out.offset = found.timestamp, found.offset
            out.leader_epoch = found.leader_epoch if found.leader_epoch is not None else -1
        if version == 0:
            # v0 answers with a list of segment base offsets; the first is what clients use.
            out.old_style_offsets = [out.offset] if out.offset >= 0 and p.max_num_offsets > 0 else []
        return out

    @handles(23)
    def handle_offset_for_leader_epoch(self, request):
        req = request.body
        v = request.api_version
        # a follower (v3+ ReplicaId >= 0) may ask; so may a consumer, of the leader only
        from_leader = not (v >= 3 and req.replica_id == DEBUGGING_REPLICA_ID)
        # CLUSTER_ACTION on the cluster (a follower), else DESCRIBE on each topic
        cluster = self.auth.authorize_cluster(request, CLUSTER_ACTION)
        topics = []
        for t in req.topics:
            parts = []
            denied = not cluster and not self.auth.authorize(request, DESCRIBE, TOPIC, t.topic)
            for p in t.partitions:
                if denied:
                    parts.append(OffsetForLeaderEpochResponse.EpochEndOffset(
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, partition=p.partition, leader_epoch=-1,
                        end_offset=-1))
                    continue
                error, epoch, end = self.replica_manager.last_offset_for_leader_epoch(
                    t.topic, p.partition, p.current_leader_epoch if v >= 2 else -1, p.leader_epoch, from_leader)
                parts.append(OffsetForLeaderEpochResponse.EpochEndOffset(
                    error_code=error, partition=p.partition, leader_epoch=epoch, end_offset=end))
            topics.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
        return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)

    @handles(21)
    def handle_delete_records(self, request):
        body = request.body
        allowed = self.auth.filter_authorized(request, DELETE, TOPIC, (t.name for t in body.topics))
        wanted = [(t.name, p.partition_index, p.offset) for t in body.topics if t.name in allowed
                  for p in t.partitions]
        results = self.replica_manager.delete_records(body.timeout_ms, wanted)
        if isinstance(results, asyncio.Future):
            return self._delete_records_later(body, allowed, results)
        return self._delete_records_response(body, allowed, results)

    async def _delete_records_later(self, body, allowed, results):
        return self._delete_records_response(body, allowed, await results)

    @staticmethod
    def _delete_records_response(body, allowed, results):
        results = iter(results)
        topics = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                error, low = next(results) if t.name in allowed else (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)
                parts.append(DeleteRecordsResponse.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index, low_watermark=low, error_code=error))
            topics.append(DeleteRecordsResponse.DeleteRecordsTopicResult(name=t.name, partitions=parts))
        return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
