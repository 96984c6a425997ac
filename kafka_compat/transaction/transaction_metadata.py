"""TransactionMetadata: one transactional id's state, and the transitions it may take.

As Kafka's TransactionMetadata: a transition is first *prepared* (the wanted next
state, a TxnTransitMetadata, is remembered as ``pending_state``), then written to
`__transaction_state`, and only once that write is durable *completed* into the
in-memory fields. While a transition is pending every other request for the id is
answered CONCURRENT_TRANSACTIONS, so two writers never race on one id.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from ..sentinels import NO_PRODUCER_EPOCH

SHORT_MAX = 32767


class TransactionState(IntEnum):
    """The state ids stored in the log (TransactionStatus)."""
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """The name DescribeTransactions and ListTransactions report."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)


S = TransactionState
_NAMES = {S.EMPTY: "Empty", S.ONGOING: "Ongoing", S.PREPARE_COMMIT: "PrepareCommit", S.PREPARE_ABORT: "PrepareAbort",
          S.COMPLETE_COMMIT: "CompleteCommit", S.COMPLETE_ABORT: "CompleteAbort", S.DEAD: "Dead",
          S.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}
_BY_NAME = {v: k for k, v in _NAMES.items()}
VALID_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}
EXPIRABLE = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch spare so that the coordinator can always fence once more."""
    return epoch >= SHORT_MAX - 1


@dataclass(frozen=True)
class TxnTransitMetadata:
    """The state a transition leads to: what is written to the log, then applied."""
    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset
    txn_start_timestamp: int
    txn_last_update_timestamp: int


class IllegalTransition(Exception):
    """A transition the state machine does not allow (a coordinator bug, never a client's doing)."""


class TransactionMetadata:
    __slots__ = ("transactional_id", "producer_id", "previous_producer_id", "producer_epoch", "last_producer_epoch",
                 "txn_timeout_ms", "state", "partitions", "txn_start_timestamp", "txn_last_update_timestamp",
                 "pending_state", "has_failed_epoch_fence")

    def __init__(self, transactional_id: str, producer_id: int, previous_producer_id: int, producer_epoch: int,
                 last_producer_epoch: int, txn_timeout_ms: int, state: TransactionState, partitions=(),
                 txn_start_timestamp: int = -1, txn_last_update_timestamp: int = -1):
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.previous_producer_id = previous_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.partitions: set[tuple[str, int]] = set(partitions)
        self.txn_start_timestamp = txn_start_timestamp
        self.txn_last_update_timestamp = txn_last_update_timestamp
        self.pending_state: TransactionState | None = None
        self.has_failed_epoch_fence = False

    def __repr__(self) -> str:
        return (f"TransactionMetadata({self.transactional_id!r}, pid={self.producer_id}, epoch={self.producer_epoch}, "
                f"{self.state.state_name}, pending={self.pending_state}, partitions={sorted(self.partitions)})")

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    # ------------------------------------------------------------ preparing
    def _prepare(self, state: TransactionState, producer_id: int, producer_epoch: int, last_epoch: int,
                 timeout_ms: int, partitions, start: int, now: int, previous_producer_id: int | None = None
                 ) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransition(f"{self}: a transition to {self.pending_state.state_name} is pending")
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(f"{self}: cannot go from {self.state.state_name} to {state.state_name}")
        self.pending_state = state
        return TxnTransitMetadata(producer_id, self.previous_producer_id if previous_producer_id is None
                                  else previous_producer_id, producer_epoch, last_epoch, timeout_ms, state,
                                  frozenset(partitions), start, now)

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Ongoing -> PrepareEpochFence with epoch+1: never written, it becomes PrepareAbort at once."""
        if self.producer_epoch == SHORT_MAX:
            raise IllegalTransition(f"{self}: cannot fence, the epoch is already {SHORT_MAX}")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(S.PREPARE_EPOCH_FENCE, self.producer_id, bumped, self.last_producer_epoch,
                             self.txn_timeout_ms, self.partitions, self.txn_start_timestamp,
                             self.txn_last_update_timestamp)

    def prepare_increment_producer_epoch(self, timeout_ms: int, expected_epoch: int | None, now: int
                                         ) -> TxnTransitMetadata | None:
        """InitProducerId on a finished transaction: the next epoch, or None when the caller is fenced."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransition(f"{self}: epoch exhausted, a new producer id is needed")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch     # a retry of the last bump
        else:
            return None
        return self._prepare(S.EMPTY, self.producer_id, epoch, last, timeout_ms, (), -1, now)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        if self.has_pending_or_bad_state_for_rotation():
            raise IllegalTransition(f"{self}: cannot rotate the producer id")
        return self._prepare(S.EMPTY, new_producer_id, 0, self.producer_epoch if record_last_epoch
                             else NO_PRODUCER_EPOCH, timeout_ms, (), -1, now, previous_producer_id=self.producer_id)

    def has_pending_or_bad_state_for_rotation(self) -> bool:
        return self.pending_state is not None or self.state not in EXPIRABLE

    def prepare_add_partitions(self, added, now: int) -> TxnTransitMetadata:
        start = now if self.state in EXPIRABLE else self.txn_start_timestamp
        return self._prepare(S.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, self.partitions | set(added), start, now)

    def prepare_abort_or_commit(self, state: TransactionState, now: int) -> TxnTransitMetadata:
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, self.partitions, self.txn_start_timestamp, now)

    def prepare_complete(self, now: int) -> TxnTransitMetadata:
        state = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, (), self.txn_start_timestamp, now)

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare(S.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, (), self.txn_start_timestamp, self.txn_last_update_timestamp)

    # ------------------------------------------------------------ completing
    def complete_transition(self, transit: TxnTransitMetadata) -> None:
        """The transit is durable: make it the state (Kafka's completeTransitionTo, with its sanity checks)."""
        if self.pending_state != transit.state:
            raise IllegalTransition(f"{self}: completing {transit.state.state_name} but "
                                    f"{self.pending_state} is pending")
        if transit.state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) \
                and (transit.producer_id != self.producer_id or transit.producer_epoch != self.producer_epoch):
            self.pending_state = None
            raise IllegalTransition(f"{self}: {transit} changes the producer id or epoch")
        self.producer_id = transit.producer_id
        self.previous_producer_id = transit.previous_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None
        self.has_failed_epoch_fence = False

    def clear_pending(self) -> None:
        self.pending_state = None
