"""DelayedFetch: a fetch waiting for MinBytes, decided from offset metadata, never by reading the log.

Kafka's DelayedFetch compares, per partition, where the fetch started (segment
base offset and file position, from the first read) with where the readable end
now is (high watermark, last stable offset or log end, with theirs): bytes
between the two positions count towards MinBytes, and an end on another segment
(a roll, or a truncation) completes the fetch at once. Only completion reads.
"""
from __future__ import annotations

import asyncio
from typing import NamedTuple

from kafka_compat.storage.unified_log import FetchIsolation

from ..protocol.errors import ErrorCode
from ..purgatory import DelayedOperation


class FetchParams(NamedTuple):
    """A fetch request's parameters that are not per partition."""

    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation: FetchIsolation
    min_one_message_always: bool = False      # Fetch v0-2: every partition may return one whole batch
    replica_epoch: int = -1
    client_rack: str | None = None            # a Fetch v11+ consumer's rack ("" for none); None before v11

    @property
    def from_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def fetch_only_from_leader(self) -> bool:
        """KIP-392: a consumer with client metadata (Fetch v11+) may read from a follower; others may not."""
        return self.replica_id >= 0 or self.client_rack is None


class PartitionFetchInfo(NamedTuple):
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1                 # a follower's own log start offset


class DelayedFetch(DelayedOperation):
    def __init__(self, delay_ms: int, replica_manager, params: FetchParams, fetches: list, start_metadata: list):
        super().__init__(delay_ms)
        self.replica_manager = replica_manager
        self.params = params
        self.fetches = fetches                  # (topic, partition, PartitionFetchInfo)
        self.start_metadata = start_metadata    # LogOffsetMetadata where each read started
        self.future: asyncio.Future | None = None

    def try_complete(self) -> bool:
        rm = self.replica_manager
        params = self.params
        isolation = params.isolation
        accumulated = 0
        for (topic, index, info), start in zip(self.fetches, self.start_metadata):
            partition = rm.get_partition(topic, index)
            if partition is None:
                return self.force_complete()        # deleted or moved: answer with the error now
            if partition.leader_error(info.current_leader_epoch, require_leader=params.replica_id != -2
                                      and params.fetch_only_from_leader) != ErrorCode.NONE:
                return self.force_complete()
            # the readable end as a plain offset first: on most checks it has not moved for most partitions
            # (a follower's session names every partition it follows), and that needs no position
            end_offset = (partition.log_end_offset if isolation == FetchIsolation.LOG_END
                          else partition.high_watermark if isolation == FetchIsolation.HIGH_WATERMARK
                          else partition.last_stable_offset)
            if end_offset == start.message_offset:
                continue
            snapshot = partition.fetch_offset_snapshot()
            end = (snapshot.log_end_offset if isolation == FetchIsolation.LOG_END
                   else snapshot.high_watermark if isolation == FetchIsolation.HIGH_WATERMARK
                   else snapshot.last_stable_offset)
            if end.message_offset == start.message_offset:
                continue
            if start.message_offset_only or end.message_offset_only:
                return self.force_complete()
            if end.on_older_segment(start) or start.on_older_segment(end):
                return self.force_complete()        # truncated below us, or a segment rolled
            if start.message_offset < end.message_offset:
                accumulated += min(end.position_diff(start), info.max_bytes)
        if accumulated >= params.min_bytes:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        future, fetches = self.future, self.fetches
        # a completed fetch lingers in the watch lists of its other partitions until the purge (a follower's
        # session names every partition it follows, most of them idle): holding its request and its read
        # results there fills the collector's oldest generation, whose full passes then stall the loop
        self.future = None
        self.fetches = self.start_metadata = ()
        if future is None or future.done():
            return
        try:
            future.set_result(self.replica_manager.read_from_local_log(self.params, fetches))
        except Exception as e:      # surfaced by the awaiting handler
            future.set_exception(e)
