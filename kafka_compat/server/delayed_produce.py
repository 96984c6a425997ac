"""DelayedProduce: an acks=-1 produce waiting until its partitions' high watermarks pass its offsets.

Kafka answers acks=-1 only once every in-sync replica holds the batch, which on
the leader shows as the high watermark reaching the batch's last offset + 1. On
a single node the high watermark follows each append at once, so the operation
completes inside try_complete_else_watch; in a cluster it waits in the produce
purgatory, woken when a follower's fetch moves the high watermark.
"""
from __future__ import annotations

import asyncio

from ..protocol.errors import ErrorCode
from ..purgatory import DelayedOperation


class ProduceResult:
    """One partition's produce outcome, filled in as the append and then the acks progress."""

    __slots__ = ("error_code", "base_offset", "log_append_time", "log_start_offset", "record_errors",
                 "error_message", "required_offset", "acks_pending")

    def __init__(self, error_code: int = ErrorCode.NONE, base_offset: int = -1, log_append_time: int = -1,
                 log_start_offset: int = -1, record_errors=(), error_message: str | None = None,
                 required_offset: int = -1):
        self.error_code = error_code
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.log_start_offset = log_start_offset
        self.record_errors = record_errors
        self.error_message = error_message
        self.required_offset = required_offset      # last offset + 1: what the high watermark must reach
        self.acks_pending = False

    def __repr__(self) -> str:
        return (f"ProduceResult(error={self.error_code}, base_offset={self.base_offset}, "
                f"pending={self.acks_pending})")


class DelayedProduce(DelayedOperation):
    def __init__(self, delay_ms: int, replica_manager, entries: list, results: list[ProduceResult]):
        super().__init__(delay_ms)
        self.replica_manager = replica_manager
        self.entries = entries              # (topic, partition, records) in request order
        self.results = results
        self.future: asyncio.Future | None = None
        for result in results:
            result.acks_pending = result.error_code == ErrorCode.NONE

    def try_complete(self) -> bool:
        pending = False
        for (topic, index, _), result in zip(self.entries, self.results):
            if not result.acks_pending:
                continue
            partition = self.replica_manager.get_partition(topic, index)
            if partition is None:
                done, error = True, self.replica_manager.not_hosted_error(topic, index)
            else:
                done, error = partition.check_enough_replicas_reach_offset(result.required_offset)
            if done:
                result.acks_pending = False
                if error:
                    result.error_code = error
            else:
                pending = True
        return False if pending else self.force_complete()

    def on_complete(self) -> None:
        for result in self.results:
            if result.acks_pending:       # expired: these replicas did not catch up in time
                result.acks_pending = False
                result.error_code = ErrorCode.REQUEST_TIMED_OUT
        future, self.future = self.future, None
        self.entries = ()       # the records: a completed operation may linger in other partitions' watch lists
        if future is not None and not future.done():
            future.set_result(self.results)
