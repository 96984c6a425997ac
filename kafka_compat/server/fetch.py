"""Fetch: whole batches straight from the segment files, or a wait in the purgatory.

The partition data's records are `FileRecords`: slices of segment files that
the connection sends with `os.sendfile`, so record bytes never pass through
Python. A fetch that finds fewer than MinBytes waits (DelayedFetch) until an
append brings enough or MaxWaitMs passes. Fetch sessions are declined
(SessionId 0), which Kafka's protocol allows: clients then send full requests.
"""
from __future__ import annotations

import asyncio
import os

from kafka_compat.storage.fetch_data_info import FetchIsolation

from ..protocol.convert import down_convert
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.fetch import FetchResponse
from ..purgatory import DelayedOperation
from .registry import handles

READ_COMMITTED = 1
# Below this many bytes a response is cheaper to copy than to splice with sendfile.
SENDFILE_MIN_BYTES = 16384


class FileRecords:
    """Record bytes that stay in segment files; `len()` is what the response's size field says."""
    __slots__ = ("result",)

    def __init__(self, result):
        self.result = result

    def __len__(self) -> int:
        return self.result.size

    def slices(self):
        return self.result.slices


def leader_epoch_error(partition, current_leader_epoch: int) -> int:
    if current_leader_epoch < 0 or current_leader_epoch == partition.leader_epoch:
        return ErrorCode.NONE
    if current_leader_epoch > partition.leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.FENCED_LEADER_EPOCH


class FetchPlan:
    """One fetch request resolved against the partitions: what to read for whom."""

    def __init__(self, broker, request):
        self.broker = broker
        self.request = request
        self.req = request.body
        self.version = request.api_version
        self.topics = []                      # (request topic, name or None)
        for t in self.req.topics:
            if self.version >= 13:
                topic = broker.topics.by_id.get(t.topic_id)
                self.topics.append((t, topic.name if topic else None))
            else:
                self.topics.append((t, t.topic))

    def keys(self):
        return [(name, p.partition) for t, name in self.topics if name for p in t.partitions]

    def bytes_available(self) -> int:
        """What a read would return now, for DelayedFetch's MinBytes test."""
        total = 0
        committed = self.req.isolation_level == READ_COMMITTED
        for t, name in self.topics:
            if name is None:
                continue
            for p in t.partitions:
                partition = self.broker.replicas.get(name, p.partition)
                if partition is None:
                    return 1 << 30              # the partition went away: answer now
                bound = partition.last_stable_offset if committed else partition.high_watermark
                if p.fetch_offset < partition.log.log_start_offset or p.fetch_offset > partition.log.log_end_offset:
                    return 1 << 30              # an error to report: answer now
                if bound > p.fetch_offset:
                    isolation = FetchIsolation.TXN_COMMITTED if committed else FetchIsolation.HIGH_WATERMARK
                    try:
                        total += partition.log.read(p.fetch_offset, p.partition_max_bytes, isolation,
                                                    True).records.size
                    except KafkaError:
                        return 1 << 30
        return total

    def respond(self) -> FetchResponse:
        req = self.req
        v = self.version
        committed = req.isolation_level == READ_COMMITTED
        remaining = req.max_bytes if v >= 3 else 0x7FFFFFFF
        out_topics = []
        for t, name in self.topics:
            parts = []
            for p in t.partitions:
                pd = FetchResponse.PartitionData(partition_index=p.partition, high_watermark=-1,
                                                 last_stable_offset=-1, log_start_offset=-1,
                                                 aborted_transactions=[] if committed else None,
                                                 preferred_read_replica=-1, records=b"")
                parts.append(pd)
                if name is None:
                    pd.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                    continue
                partition, code = self.broker.replicas.lookup(name, p.partition)
                if partition is None:
                    pd.error_code = code
                    continue
                code = leader_epoch_error(partition, p.current_leader_epoch) if v >= 9 else 0
                log = partition.log
                hw = partition.high_watermark
                pd.high_watermark = hw
                pd.last_stable_offset = partition.last_stable_offset
                pd.log_start_offset = log.log_start_offset
                if code:
                    pd.error_code = code
                    continue
                isolation = FetchIsolation.TXN_COMMITTED if committed else FetchIsolation.HIGH_WATERMARK
                limit = min(p.partition_max_bytes, remaining)
                try:
                    result = log.read(p.fetch_offset, max(limit, 0), isolation,
                                      remaining == req.max_bytes or v < 3).records
                except KafkaError as e:
                    pd.error_code = e.error_code
                    continue
                size = result.size
                if not size:
                    continue
                remaining -= size
                pd.records = self.records(result, size)
            out_topics.append(FetchResponse.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id,
                                                                   partitions=parts))
        return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0,
                             responses=out_topics)

    def records(self, result, size: int):
        if self.version < 4:
            # Fetch v0-v1 read magic 0, v2-v3 magic 1: convert what the log holds.
            return down_convert(result.read_bytes(), 0 if self.version < 2 else 1)
        if size < SENDFILE_MIN_BYTES:
            return b"".join(os.pread(s.fd, s.length, s.position) for s in result.slices)
        return FileRecords(result)


class DelayedFetch(DelayedOperation):
    def __init__(self, plan: FetchPlan, delay_ms: int, future: asyncio.Future):
        super().__init__(delay_ms)
        self.plan = plan
        self.future = future

    def try_complete(self) -> bool:
        if self.plan.bytes_available() >= self.plan.req.min_bytes:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        if not self.future.done():
            try:
                self.future.set_result(self.plan.respond())
            except Exception as e:     # surfaced by the awaiting handler
                self.future.set_exception(e)

    def on_expiration(self) -> None:
        pass


@handles(1)
def handle_fetch(broker, request):
    plan = FetchPlan(broker, request)
    req = plan.req
    if req.max_wait_ms <= 0 or req.min_bytes <= 0 or not plan.keys() or \
            plan.bytes_available() >= req.min_bytes:
        return plan.respond()
    return _wait(broker, plan)


async def _wait(broker, plan: FetchPlan):
    future = asyncio.get_running_loop().create_future()
    op = DelayedFetch(plan, plan.req.max_wait_ms, future)
    broker.replicas.fetch_purgatory.try_complete_else_watch(op, plan.keys())
    return await future
