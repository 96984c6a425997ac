"""DelayedDeleteRecords: a DeleteRecords answer waits until every live replica has deleted as far.

The leader moves its own log start at once; followers learn the new start from their next fetch
and move theirs. Kafka answers only when each partition's low watermark (the smallest log start
among live replicas) has reached the requested offset, or with REQUEST_TIMED_OUT at the request's
timeout, so a client never reads back a low watermark that a follower has not reached yet.
"""
from __future__ import annotations

import asyncio

from ..protocol.errors import ErrorCode
from ..purgatory import DelayedOperation


class DelayedDeleteRecords(DelayedOperation):
    def __init__(self, delay_ms: int, replica_manager, wanted: list, results: list):
        """``wanted``: (topic, partition, required low watermark or None when already answered) per result;
        ``results``: [error, low watermark] per partition, filled in as the replicas catch up."""
        super().__init__(delay_ms)
        self.replica_manager = replica_manager
        self.wanted = wanted
        self.results = results
        self.future: asyncio.Future | None = None

    def try_complete(self) -> bool:
        pending = False
        for i, (topic, index, required) in enumerate(self.wanted):
            if required is None:
                continue
            partition = self.replica_manager.get_partition(topic, index)
            if partition is None or not partition.is_leader:
                self.results[i] = [ErrorCode.NOT_LEADER_OR_FOLLOWER, -1]
            else:
                low = partition.low_watermark()
                if low < required:
                    pending = True
                    continue
                self.results[i] = [ErrorCode.NONE, low]
            self.wanted[i] = (topic, index, None)
        return False if pending else self.force_complete()

    def on_complete(self) -> None:
        for i, (_, _, required) in enumerate(self.wanted):
            if required is not None:        # expired: a replica did not delete as far in time
                self.results[i] = [ErrorCode.REQUEST_TIMED_OUT, -1]
        future, self.future = self.future, None
        if future is not None and not future.done():
            future.set_result([tuple(r) for r in self.results])
