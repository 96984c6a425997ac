"""Idempotent producers: per partition, each producer id's epoch and its last five batches.

Kafka lets a producer keep five requests in flight, so a retried batch may
arrive after later ones were written. Remembering the sequence ranges of the
last five batches lets the broker recognise a retry (and answer with the
offsets the batch already has, writing nothing) and reject a gap
(OUT_OF_ORDER_SEQUENCE_NUMBER) or a fenced epoch (INVALID_PRODUCER_EPOCH).
The state is rebuilt from the batch headers in the log after a restart.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ..protocol.batch_header import ProducerFields
from ..protocol.errors import ErrorCode, KafkaError

NO_EPOCH = -1
INT32_MAX = 2**31 - 1
BATCHES_KEPT = 5


@dataclass
class BatchRecord:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerEntry:
    epoch: int = NO_EPOCH
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def _in_sequence(last: int, first: int) -> bool:
    return first == last + 1 or (first == 0 and last == INT32_MAX)


class ProducerStateManager:
    def __init__(self):
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, h: ProducerFields) -> BatchRecord | None:
        """Before an append: the earlier batch this one duplicates, or None; raises KafkaError."""
        entry = self.producers.get(h.producer_id)
        if entry is None:
            return None
        if h.producer_epoch < entry.epoch:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                f"epoch {h.producer_epoch} is older than the current {entry.epoch} of producer "
                                f"{h.producer_id}")
        if h.producer_epoch != entry.epoch:
            if h.base_sequence != 0 and entry.epoch != NO_EPOCH:
                raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                    f"a new epoch {h.producer_epoch} must start at sequence 0, not {h.base_sequence}")
            return None
        for b in entry.batches:
            if b.first_seq == h.base_sequence and b.last_seq == h.last_sequence:
                return b
        if entry.batches and not _in_sequence(entry.last_seq, h.base_sequence):
            raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                f"sequence {h.base_sequence} does not follow {entry.last_seq} for producer "
                                f"{h.producer_id}")
        return None

    def update(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
               first_offset: int, last_offset: int, timestamp: int) -> None:
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry()
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.batches.append(BatchRecord(first_seq, last_seq, first_offset, last_offset, timestamp))

    def rebuild(self, log) -> None:
        """Replay the producer fields of every batch in the log."""
        self.producers.clear()
        for info in log.batch_headers(log.log_start_offset):
            pid = info.producer_id
            if pid < 0:
                continue
            count = info.last_offset - info.base_offset + 1
            first = info.base_sequence
            self.update(pid, info.producer_epoch, first, (first + count - 1) % (INT32_MAX + 1),
                        info.base_offset, info.last_offset, info.max_timestamp)

    def last_stable_offset(self, high_watermark: int) -> int:
        """No transactions yet: everything below the high watermark is stable."""
        return high_watermark

    def describe(self) -> list[tuple[int, ProducerEntry]]:
        return list(self.producers.items())
