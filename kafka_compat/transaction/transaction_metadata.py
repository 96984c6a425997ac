"""TransactionMetadata: one transactional id's state, and the transitions it may take.

As Kafka's TransactionMetadata: a transition is first *prepared* (the wanted next
state, a TxnTransitMetadata, is remembered as ``pending_state``), then written to
`__transaction_state`, and only once that write is durable *completed* into the
in-memory fields. While a transition is pending every other request for the id is
answered CONCURRENT_TRANSACTIONS, so two writers never race on one id.

Each transition also records the client's transaction version (Kafka's
ClientTransactionVersion): a transaction a transactions-v2 client runs (EndTxn v5,
partitions added by Produce v12+ / TxnOffsetCommit v5) gets an epoch bump when it
ends, and a new producer id (``next_producer_id``) when that bump reaches the last
epoch; one run by a v1 client keeps its epoch, whatever the finalized feature says.

A two-phase-commit transaction (KIP-939: InitProducerId with Enable2Pc) has the
timeout Integer.MAX_VALUE, so it is never aborted for its age. InitProducerId with
KeepPreparedTxn keeps such a transaction open and gives the new producer its own
identity, ``next_producer_id`` / ``next_producer_epoch`` (Kafka's NextProducerId and
NextProducerEpoch), while the transaction keeps the id and epoch its records carry;
the new producer then commits or aborts it with that identity.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from ..sentinels import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

SHORT_MAX = 32767
INT_MAX = 2147483647        # the timeout of a two-phase-commit transaction (Kafka's isDistributedTwoPhaseCommitTxn)
# client transaction versions as Kafka records them: TV_0 for a transactions-v1 client (EndTxn below v5, its own
# AddPartitionsToTxn), TV_2 for a v2 one
TV_0, TV_2 = 0, 2


def supports_epoch_bump(client_transaction_version: int) -> bool:
    return client_transaction_version >= TV_2


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
# transactions v2 may abort with no partition added: PrepareAbort from a finished state too
TV2_EMPTY_ABORT_FROM = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
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
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0
    next_producer_epoch: int = NO_PRODUCER_EPOCH


class IllegalTransition(Exception):
    """A transition the state machine does not allow (a coordinator bug, never a client's doing)."""


class TransactionMetadata:
    __slots__ = ("transactional_id", "producer_id", "previous_producer_id", "producer_epoch", "last_producer_epoch",
                 "txn_timeout_ms", "state", "partitions", "txn_start_timestamp", "txn_last_update_timestamp",
                 "pending_state", "has_failed_epoch_fence", "next_producer_id", "client_transaction_version",
                 "next_producer_epoch")

    def __init__(self, transactional_id: str, producer_id: int, previous_producer_id: int, producer_epoch: int,
                 last_producer_epoch: int, txn_timeout_ms: int, state: TransactionState, partitions=(),
                 txn_start_timestamp: int = -1, txn_last_update_timestamp: int = -1,
                 next_producer_id: int = NO_PRODUCER_ID, client_transaction_version: int = 0,
                 next_producer_epoch: int = NO_PRODUCER_EPOCH):
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
        self.next_producer_id = next_producer_id
        self.client_transaction_version = client_transaction_version
        self.next_producer_epoch = next_producer_epoch

    def __repr__(self) -> str:
        return (f"TransactionMetadata({self.transactional_id!r}, pid={self.producer_id}, epoch={self.producer_epoch}, "
                f"{self.state.state_name}, pending={self.pending_state}, partitions={sorted(self.partitions)}, "
                f"tv={self.client_transaction_version})")

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def is_two_phase_commit(self) -> bool:
        return self.txn_timeout_ms == INT_MAX

    @property
    def kept_by_next_producer(self) -> bool:
        """An ongoing transaction kept by InitProducerId(KeepPreparedTxn): the producer's identity is the next one."""
        return self.state == S.ONGOING and self.next_producer_epoch != NO_PRODUCER_EPOCH

    def is_next_producer(self, producer_id: int, producer_epoch: int) -> bool:
        return self.kept_by_next_producer and (producer_id, producer_epoch) == (self.next_producer_id,
                                                                                self.next_producer_epoch)

    # ------------------------------------------------------------ preparing
    def _prepare(self, state: TransactionState, producer_id: int, producer_epoch: int, last_epoch: int,
                 timeout_ms: int, partitions, start: int, now: int, previous_producer_id: int | None = None,
                 next_producer_id: int = NO_PRODUCER_ID, client_tv: int | None = None,
                 next_producer_epoch: int = NO_PRODUCER_EPOCH) -> TxnTransitMetadata:
        tv = self.client_transaction_version if client_tv is None else client_tv
        if self.pending_state is not None:
            raise IllegalTransition(f"{self}: a transition to {self.pending_state.state_name} is pending")
        if self.state not in VALID_PREVIOUS[state] and not (
                state == S.PREPARE_ABORT and supports_epoch_bump(tv) and self.state in TV2_EMPTY_ABORT_FROM):
            raise IllegalTransition(f"{self}: cannot go from {self.state.state_name} to {state.state_name}")
        self.pending_state = state
        return TxnTransitMetadata(producer_id, self.previous_producer_id if previous_producer_id is None
                                  else previous_producer_id, producer_epoch, last_epoch, timeout_ms, state,
                                  frozenset(partitions), start, now, next_producer_id, tv, next_producer_epoch)

    def prepare_no_transit(self) -> TxnTransitMetadata:
        """The current state as a transit (writing it again, e.g. to rewrite the log)."""
        return TxnTransitMetadata(self.producer_id, self.previous_producer_id, self.producer_epoch,
                                  self.last_producer_epoch, self.txn_timeout_ms, self.state,
                                  frozenset(self.partitions), self.txn_start_timestamp, self.txn_last_update_timestamp,
                                  self.next_producer_id, self.client_transaction_version, self.next_producer_epoch)

    def prepare_keep_prepared(self, next_producer_id: int, next_producer_epoch: int, now: int) -> TxnTransitMetadata:
        """InitProducerId(KeepPreparedTxn) on an ongoing transaction: it stays as it is, the producer that asked
        gets the next identity (which fences the one before)."""
        return self._prepare(S.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, self.partitions, self.txn_start_timestamp, now,
                             next_producer_id=next_producer_id, next_producer_epoch=next_producer_epoch)

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Ongoing -> PrepareEpochFence with epoch+1: never written, it becomes PrepareAbort at once."""
        if self.producer_epoch == SHORT_MAX:
            raise IllegalTransition(f"{self}: cannot fence, the epoch is already {SHORT_MAX}")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        if self.kept_by_next_producer and self.next_producer_id == self.producer_id:
            bumped = max(bumped, self.next_producer_epoch + 1)      # past every epoch handed out for the id
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

    def prepare_add_partitions(self, added, now: int, client_tv: int | None = None) -> TxnTransitMetadata:
        """``client_tv``: the transaction version of the client adding (a new transaction takes it on)."""
        start = now if self.state in EXPIRABLE else self.txn_start_timestamp
        return self._prepare(S.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, self.partitions | set(added), start, now, client_tv=client_tv)

    def prepare_abort_or_commit(self, state: TransactionState, now: int, client_tv: int | None = None,
                                next_producer_id: int = NO_PRODUCER_ID,
                                next_producer_epoch: int = NO_PRODUCER_EPOCH) -> TxnTransitMetadata:
        """Transactions v2 bump the epoch here (lastEpoch = the old one); ``next_producer_id`` is the id the
        transaction completes with when the bump reaches the last epoch. A v2 abort with nothing added (from
        Empty or a finished state) starts and ends at ``now``. A kept transaction's end names the identity its
        producer goes on with in ``next_producer_id`` / ``next_producer_epoch``."""
        tv = self.client_transaction_version if client_tv is None else client_tv
        if supports_epoch_bump(tv):
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        else:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        start = now if self.state in TV2_EMPTY_ABORT_FROM else self.txn_start_timestamp
        return self._prepare(state, self.producer_id, epoch, last, self.txn_timeout_ms, self.partitions, start, now,
                             next_producer_id=next_producer_id, client_tv=tv, next_producer_epoch=next_producer_epoch)

    def prepare_complete(self, now: int) -> TxnTransitMetadata:
        """Complete*: with a next producer id (the epoch ran out, or a kept transaction's producer) the id moves
        to it, at the next epoch (0 when none is named)."""
        state = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        kept = self.next_producer_epoch != NO_PRODUCER_EPOCH
        if (supports_epoch_bump(self.client_transaction_version) or kept) and self.next_producer_id != NO_PRODUCER_ID:
            return self._prepare(state, self.next_producer_id, max(self.next_producer_epoch, 0),
                                 self.last_producer_epoch, self.txn_timeout_ms, (), self.txn_start_timestamp, now,
                                 previous_producer_id=self.producer_id)
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
                and not self._valid_producer_epoch(transit):
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
        self.next_producer_id = transit.next_producer_id
        self.client_transaction_version = transit.client_transaction_version
        self.next_producer_epoch = transit.next_producer_epoch
        self.pending_state = None
        self.has_failed_epoch_fence = False

    def _valid_producer_epoch(self, transit: TxnTransitMetadata) -> bool:
        """Kafka's validProducerEpoch: v2's Prepare* is the epoch + 1 of the same id, and a Complete* at epoch 0
        the rotation to the next id; everything else keeps the id and epoch. A kept transaction completes with
        its producer's identity."""
        if transit.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and self.next_producer_epoch != NO_PRODUCER_EPOCH:
            return (transit.producer_id, transit.producer_epoch) == (self.next_producer_id, self.next_producer_epoch)
        if supports_epoch_bump(transit.client_transaction_version):
            if transit.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and transit.producer_epoch == 0 \
                    and transit.producer_id != self.producer_id:
                return transit.last_producer_epoch == self.last_producer_epoch \
                    and transit.previous_producer_id == self.producer_id
            if transit.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                return transit.last_producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id
        return transit.producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id

    def clear_pending(self) -> None:
        self.pending_state = None
