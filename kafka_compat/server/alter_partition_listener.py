"""IsrChangeMeters: how often this broker shrank or expanded an ISR (Kafka's AlterPartitionListener meters).

ReplicaManager owns one; whoever changes a leader's ISR (the replica manager's
ISR-shrink task when a follower falls behind replica.lag.time.max.ms, and the
follower-fetch path when one catches up) calls `mark_shrink()` /
`mark_expand()` once per change, and `mark_failed()` when the controller
refuses an AlterPartition/ISR update. They appear as
kafka_server_replicamanager_isrshrinks_total / _isrexpands_total /
_failedisrupdates_total.
"""
from __future__ import annotations


class IsrChangeMeters:
    __slots__ = ("shrinks", "expands", "failed")

    def __init__(self) -> None:
        self.shrinks = 0
        self.expands = 0
        self.failed = 0

    def mark_shrink(self) -> None:
        self.shrinks += 1

    def mark_expand(self) -> None:
        self.expands += 1

    def mark_failed(self) -> None:
        self.failed += 1
