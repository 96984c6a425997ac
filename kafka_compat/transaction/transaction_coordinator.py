"""TransactionCoordinator: the transactional APIs' logic (Kafka's TransactionCoordinator, transactions v1 and v2).

InitProducerId with a transactional id, AddPartitionsToTxn (the client's adds and
KIP-890's verify-only checks), AddOffsetsToTxn (an add of the group's offsets
partition), EndTxn, and the admin views. Each answer is computed from the id's
TransactionMetadata, the transition is written by the TransactionStateManager
before it counts, and a decided transaction is handed to the
TransactionMarkerChannelManager. Timed-out transactions are fenced and aborted
by a periodic task, idle ids expire.

Transactions v2 (KIP-890 part 2) are chosen per request, as Kafka does: EndTxn v5
ends a transaction with an epoch bump (and a new producer id when the epoch runs
out) and answers the new id and epoch; partitions added by Produce v12+ and
TxnOffsetCommit v5 (AddPartitionsToTxn v5 without VerifyOnly, between brokers) make
the transaction a v2 one. A transaction a v1 client runs stays under v1 rules, so a
change of the finalized transaction.version never breaks one in flight. The
coordinator's own aborts (timeouts, fencing by InitProducerId) use v1's rules: the
fence bumps the epoch once.

Two-phase commit (KIP-939) is refused unless `transaction.two.phase.commit.enable`
is on; a 2PC transaction's timeout is Integer.MAX_VALUE (the sweeper leaves it
alone), and InitProducerId with KeepPreparedTxn keeps an ongoing one open for the
new producer to commit or abort, answering the transaction's own id and epoch too.

Leadership of `__transaction_state` partitions arrives as on_become_leader /
on_resign; a single node calls them for every partition it leads.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable, NamedTuple

from ..clock import now_ms
from ..group.coordinator_records import partition_for as group_partition_for
from ..protocol.errors import ErrorCode
from ..sentinels import GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME
from .transaction_marker_channel_manager import MarkerWriter, TransactionMarkerChannelManager
from .transaction_metadata import (
    INT_MAX,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    SHORT_MAX,
    TV_0,
    TV_2,
    IllegalTransition,
    TransactionMetadata,
    TransactionState,
    is_epoch_exhausted,
    supports_epoch_bump,
)
from .transaction_state_manager import CoordinatorEpochAndTxnMetadata, TransactionStateManager

log = logging.getLogger(__name__)
E = ErrorCode
S = TransactionState


class InitProducerIdResult:
    """The answer; ``ongoing_*`` is the kept transaction's id and epoch (KeepPreparedTxn), -1 without one."""
    __slots__ = ("error", "producer_id", "producer_epoch", "ongoing_producer_id", "ongoing_producer_epoch")

    def __init__(self, error: int, producer_id: int = -1, producer_epoch: int = -1,
                 ongoing_producer_id: int = NO_PRODUCER_ID, ongoing_producer_epoch: int = NO_PRODUCER_EPOCH):
        self.error, self.producer_id, self.producer_epoch = error, producer_id, producer_epoch
        self.ongoing_producer_id, self.ongoing_producer_epoch = ongoing_producer_id, ongoing_producer_epoch


class EndTxnResult(NamedTuple):
    """EndTxn's answer; v5 carries the producer id and epoch the client goes on with (-1 otherwise)."""
    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class TransactionCoordinator:
    def __init__(self, config, broker_id: int, replica_manager, metadata_cache, controller, producer_ids,
                 write_markers: MarkerWriter, *, clock: Callable[[], int] = now_ms, send_remote=None,
                 elect_locally: bool = True, transaction_version: Callable[[], int] = lambda: 0):
        """``elect_locally``: a single node coordinates every partition it leads as soon as the topic exists;
        otherwise (a cluster) LeaderAndIsr says which partitions to load (on_become_leader / on_resign) and
        ``send_remote(broker id, markers)`` carries markers to partitions led by other brokers."""
        self.config = config
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.producer_ids = producer_ids
        self.clock = clock
        self.elect_locally = elect_locally
        self.state_manager = TransactionStateManager(config, broker_id, replica_manager, metadata_cache, controller,
                                                     clock, cluster=not elect_locally,
                                                     transaction_version=transaction_version)
        self.marker_manager = TransactionMarkerChannelManager(broker_id, metadata_cache, self.state_manager,
                                                              write_markers, send_remote)
        self.offsets_partitions = config["offsets.topic.num.partitions"]
        self.abort_interval_ms = config["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
        self.expire_interval_ms = config["transaction.remove.expired.transaction.cleanup.interval.ms"]
        self.two_phase_commit_enabled = config["transaction.two.phase.commit.enable"]
        self.active = False
        self._tasks: set[asyncio.Task] = set()
        self._timers: list[asyncio.Task] = []

    # ------------------------------------------------------------ lifecycle
    async def startup(self) -> None:
        self.active = True
        if self.elect_locally:
            self._elect_local_partitions()
        loop = asyncio.get_running_loop()
        self._timers = [loop.create_task(self._every(self.abort_interval_ms, self.abort_timed_out_transactions)),
                        loop.create_task(self._every(self.expire_interval_ms,
                                                     self.state_manager.remove_expired_transactional_ids))]

    async def shutdown(self) -> None:
        self.active = False
        for task in self._timers + list(self._tasks):
            task.cancel()
        for task in self._timers + list(self._tasks):
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        await self.marker_manager.shutdown()
        await self.state_manager.shutdown()

    async def _every(self, interval_ms: int, action) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await action()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("transaction coordinator task %s failed", getattr(action, "__name__", action))

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _elect_local_partitions(self) -> None:
        """Single node: become the coordinator of every `__transaction_state` partition led here."""
        topic = self.metadata_cache.get_topic(TRANSACTION_STATE_TOPIC_NAME)
        if topic is None:
            return
        self.state_manager.num_partitions = topic.partitions
        for index in range(topic.partitions):
            state = self.metadata_cache.partition_state(TRANSACTION_STATE_TOPIC_NAME, index)
            if state is not None and state.leader == self.broker_id and index not in self.state_manager.owned \
                    and index not in self.state_manager.loading:
                self.on_become_leader(index, state.leader_epoch)

    def on_become_leader(self, partition: int, coordinator_epoch: int) -> None:
        """This broker now leads ``partition`` of `__transaction_state` (at leader epoch ``coordinator_epoch``):
        load it, then finish what it left decided. An election already loaded here is not loaded again."""
        if not self.active or not self.state_manager.should_load(partition, coordinator_epoch):
            return
        self.state_manager.loading[partition] = coordinator_epoch     # answers LOAD_IN_PROGRESS at once
        self._spawn(self._load(partition, coordinator_epoch))

    async def _load(self, partition: int, coordinator_epoch: int) -> None:
        try:
            undecided = await self.state_manager.load_transactions_for_partition(partition, coordinator_epoch)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed", TRANSACTION_STATE_TOPIC_NAME, partition)
            return
        for entry in undecided or ():
            md = entry.metadata
            committed = md.state == S.PREPARE_COMMIT
            partitions = set(md.partitions)
            transit = md.prepare_complete(self.clock())
            self.marker_manager.add_txn_markers_to_send(entry.coordinator_epoch, committed, md, transit, partitions)

    def on_resign(self, partition: int, leader_epoch: int = -1) -> None:
        """Another broker leads ``partition`` now (at ``leader_epoch``; -1: unknown): forget its ids (their
        marker sends stop by themselves, the new coordinator sends them again)."""
        if self.state_manager.remove_transactions_for_partition(partition, leader_epoch):
            log.info("resigned as transaction coordinator of %s-%d", TRANSACTION_STATE_TOPIC_NAME, partition)

    def find_coordinator(self, transactional_id: str) -> tuple[int, int]:
        """(error, broker id) of the coordinator of ``transactional_id``: the leader of its partition."""
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE, -1
        created = not self.state_manager.topic_exists()
        if not self.state_manager.ensure_topic():
            return E.COORDINATOR_NOT_AVAILABLE, -1
        if created and self.elect_locally:
            self._elect_local_partitions()
        state = self.metadata_cache.partition_state(TRANSACTION_STATE_TOPIC_NAME,
                                                    self.state_manager.partition_for(transactional_id))
        if state is None or state.leader < 0 or not self.metadata_cache.is_alive(state.leader):
            return E.COORDINATOR_NOT_AVAILABLE, -1
        return E.NONE, state.leader

    def _state(self, transactional_id: str) -> tuple[int, CoordinatorEpochAndTxnMetadata | None]:
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE, None
        return self.state_manager.get_transaction_state(transactional_id)

    def _producer_state(self, transactional_id: str, producer_id: int
                        ) -> tuple[int, CoordinatorEpochAndTxnMetadata | None]:
        """The id's state when ``producer_id`` is its producer, else INVALID_PRODUCER_ID_MAPPING (or why not)."""
        error, entry = self._state(transactional_id)
        if not error and (entry is None or entry.metadata.producer_id != producer_id):
            error = E.INVALID_PRODUCER_ID_MAPPING
        return error, entry

    # ------------------------------------------------------------ InitProducerId
    async def handle_init_producer_id(self, transactional_id: str, timeout_ms: int,
                                      expected: tuple[int, int] | None, enable_2pc: bool = False,
                                      keep_prepared: bool = False) -> InitProducerIdResult:
        """``expected``: the (producer id, epoch) a v3+ client says it has, or None for a fresh start.
        ``enable_2pc`` / ``keep_prepared``: InitProducerId v6's Enable2Pc and KeepPreparedTxn."""
        if transactional_id == "":
            return InitProducerIdResult(E.INVALID_REQUEST)
        if enable_2pc and not self.two_phase_commit_enabled:
            return InitProducerIdResult(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)    # as Kafka answers it
        if keep_prepared and not enable_2pc:
            return InitProducerIdResult(E.INVALID_REQUEST)       # only a 2PC producer can take a transaction over
        if not enable_2pc and (timeout_ms <= 0 or timeout_ms > self.state_manager.max_timeout_ms):
            return InitProducerIdResult(E.INVALID_TRANSACTION_TIMEOUT)
        if enable_2pc:
            timeout_ms = INT_MAX        # a 2PC transaction waits for its external coordinator, however long
        if self.active and not self.state_manager.topic_exists():
            self.find_coordinator(transactional_id)
        error, entry = self._state(transactional_id)
        if error:
            return InitProducerIdResult(error)
        if entry is None:
            md = TransactionMetadata(transactional_id, self.producer_ids.generate(), -1, NO_PRODUCER_EPOCH,
                                     NO_PRODUCER_EPOCH, timeout_ms, S.EMPTY, (), -1, self.clock())
            error, entry = self.state_manager.put_transaction_state_if_not_exists(md)
            if error:
                return InitProducerIdResult(error)
        coordinator_epoch, md = entry
        if md.pending_state is not None:
            return InitProducerIdResult(E.CONCURRENT_TRANSACTIONS)
        if expected is not None and not self._is_valid_producer_id(md, expected):
            return InitProducerIdResult(E.PRODUCER_FENCED)
        now = self.clock()
        if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return InitProducerIdResult(E.CONCURRENT_TRANSACTIONS)
        if md.state == S.ONGOING and keep_prepared:
            return await self._keep_prepared(transactional_id, coordinator_epoch, md, now)
        if md.state == S.ONGOING:
            # Fence the current producer and abort its transaction; the client retries and then gets epoch+2.
            transit = md.prepare_fence_producer_epoch()
            error = await self._end_transaction(transactional_id, transit.producer_id, transit.producer_epoch,
                                                False, from_client=False)
            if md.pending_state == S.PREPARE_EPOCH_FENCE:
                md.clear_pending()
            return InitProducerIdResult(E.CONCURRENT_TRANSACTIONS if error == E.NONE else error)
        if md.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            return InitProducerIdResult(E.CONCURRENT_TRANSACTIONS)
        if md.is_producer_epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
            transit = md.prepare_producer_id_rotation(self.producer_ids.generate(), timeout_ms, now,
                                                      expected is not None)
        else:
            transit = md.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1], now)
            if transit is None:
                return InitProducerIdResult(E.PRODUCER_FENCED)
        error = await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, md, transit)
        if error:
            return InitProducerIdResult(error)
        return InitProducerIdResult(E.NONE, transit.producer_id, transit.producer_epoch)

    async def _keep_prepared(self, transactional_id: str, coordinator_epoch: int, md: TransactionMetadata,
                             now: int) -> InitProducerIdResult:
        """KeepPreparedTxn: the ongoing transaction stays; the caller gets the next epoch of the id (a new id once
        the epochs run out), which fences every producer before it, and the transaction's id and epoch."""
        pid, epoch = (md.next_producer_id, md.next_producer_epoch) if md.kept_by_next_producer \
            else (md.producer_id, md.producer_epoch)
        if is_epoch_exhausted(epoch + 1):
            pid, epoch = self.producer_ids.generate(), 0
        else:
            epoch += 1
        transit = md.prepare_keep_prepared(pid, epoch, now)
        error = await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, md, transit)
        if error:
            return InitProducerIdResult(error)
        return InitProducerIdResult(E.NONE, pid, epoch, transit.producer_id, transit.producer_epoch)

    @staticmethod
    def _is_valid_producer_id(md: TransactionMetadata, expected: tuple[int, int]) -> bool:
        pid, epoch = expected
        return (md.producer_epoch == NO_PRODUCER_EPOCH or pid == md.producer_id
                or (pid == md.previous_producer_id and is_epoch_exhausted(epoch)))

    # ------------------------------------------------------------ AddPartitionsToTxn / AddOffsetsToTxn
    async def handle_add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                    partitions, client_tv: int = TV_0) -> int:
        """Add ``partitions`` ((topic, index) pairs) to the ongoing transaction; one error for all of them.
        ``client_tv`` 2: an implicit add of transactions v2 (the transaction becomes a v2 one)."""
        if not transactional_id:
            return E.INVALID_REQUEST
        error, entry = self._producer_state(transactional_id, producer_id)
        if error:
            return error
        coordinator_epoch, md = entry
        partitions = set(partitions)
        if md.kept_by_next_producer:
            # the producer that kept it may only end it; its predecessors are fenced
            return E.INVALID_TXN_STATE if md.is_next_producer(producer_id, producer_epoch) else E.PRODUCER_FENCED
        if md.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED
        if md.pending_state is not None or md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return E.CONCURRENT_TRANSACTIONS
        if md.state == S.ONGOING and partitions <= md.partitions and md.client_transaction_version >= client_tv:
            return E.NONE
        try:
            transit = md.prepare_add_partitions(partitions, self.clock(), client_tv)
        except IllegalTransition as e:
            log.warning("%s", e)
            return E.INVALID_TXN_STATE
        return await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, md, transit)

    async def handle_add_partitions_v2(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                       partitions) -> dict[tuple[str, int], int]:
        """Transactions v2: the partition leader adds what the producer writes (Produce v12+, TxnOffsetCommit
        v5), with Kafka's errors for the producer (TRANSACTION_ABORTABLE when the transaction cannot take it)."""
        partitions = list(partitions)
        error = await self.handle_add_partitions(transactional_id, producer_id, producer_epoch, partitions,
                                                 client_tv=TV_2)
        return dict.fromkeys(partitions, E.TRANSACTION_ABORTABLE if error == E.INVALID_TXN_STATE else error)

    def handle_verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                 partitions) -> dict[tuple[str, int], int]:
        """KIP-890 verification (AddPartitionsToTxn v4+ VerifyOnly): is each partition in the transaction?"""
        def all_(code):
            return {tp: code for tp in partitions}
        error, entry = self._state(transactional_id)
        if error:
            return all_(error)
        if entry is None or entry.metadata.producer_id != producer_id:
            return all_(E.INVALID_PRODUCER_ID_MAPPING)
        md = entry.metadata
        if md.producer_epoch != producer_epoch or md.kept_by_next_producer:
            return all_(E.PRODUCER_FENCED)      # a kept transaction takes no more writes from its old producer
        if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return all_(E.CONCURRENT_TRANSACTIONS)
        return {tp: E.NONE if md.state == S.ONGOING and tp in md.partitions else E.TRANSACTION_ABORTABLE
                for tp in partitions}

    def offsets_partition_for(self, group_id: str) -> tuple[str, int]:
        topic = self.metadata_cache.get_topic(GROUP_METADATA_TOPIC_NAME)
        count = topic.partitions if topic is not None else self.offsets_partitions
        return GROUP_METADATA_TOPIC_NAME, group_partition_for(group_id, count)

    async def handle_add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                 group_id: str) -> int:
        """AddOffsetsToTxn: v1 clients only (a v2 one commits with TxnOffsetCommit v5, which adds the group)."""
        return await self.handle_add_partitions(transactional_id, producer_id, producer_epoch,
                                                [self.offsets_partition_for(group_id)])

    # ------------------------------------------------------------ EndTxn
    async def handle_end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                     committed: bool, client_tv: int = TV_0) -> EndTxnResult:
        """``client_tv`` 2 for EndTxn v5 (Kafka's TV_2 for a version above 4)."""
        if not transactional_id:
            return EndTxnResult(E.INVALID_REQUEST)
        error, entry = self._state(transactional_id)
        if not error and entry is not None and entry.metadata.kept_by_next_producer:
            return await self._end_kept_transaction(transactional_id, producer_id, producer_epoch, committed,
                                                    client_tv, entry)
        if supports_epoch_bump(client_tv):
            return await self._end_transaction_v2(transactional_id, producer_id, producer_epoch, committed,
                                                  client_tv)
        return EndTxnResult(await self._end_transaction(transactional_id, producer_id, producer_epoch, committed,
                                                        from_client=True))

    async def _end_transaction_v2(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                  committed: bool, client_tv: int) -> EndTxnResult:
        """Kafka's endTransaction above transaction version 1: the epoch is bumped at every end, a retry is
        recognised by the bumped epoch (or the rotated id), and an abort with nothing added is allowed."""
        error, entry = self._state(transactional_id)
        if error:
            return EndTxnResult(error)
        if entry is None:
            return EndTxnResult(E.INVALID_PRODUCER_ID_MAPPING)
        coordinator_epoch, md = entry
        state = md.state
        retry_on_overflow = (md.previous_producer_id == producer_id and producer_epoch == SHORT_MAX - 1
                             and md.producer_epoch == 0)
        # a retry of a kept transaction's end (see _end_kept_transaction): the id moves to this identity's next epoch
        retry_on_keep = md.next_producer_epoch != NO_PRODUCER_EPOCH and md.next_producer_id == producer_id \
            and md.next_producer_epoch == producer_epoch + 1
        retry_on_bump = md.producer_epoch == producer_epoch + 1 or retry_on_keep
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid_epoch = retry_on_bump
        elif state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            valid_epoch = retry_on_bump or retry_on_overflow or producer_epoch == md.producer_epoch
        else:
            valid_epoch = producer_epoch == md.producer_epoch
        is_retry = retry_on_bump or retry_on_overflow
        if md.producer_id != producer_id and not retry_on_overflow and not retry_on_keep:
            return EndTxnResult(E.INVALID_PRODUCER_ID_MAPPING)
        if not valid_epoch:
            return EndTxnResult(E.PRODUCER_FENCED)
        if md.pending_state is not None:
            return EndTxnResult(E.CONCURRENT_TRANSACTIONS)
        abort_nothing = False       # an abort of a transaction with no partition added
        if state == S.ONGOING:
            pass
        elif state == S.COMPLETE_COMMIT:
            if committed or is_retry:
                return EndTxnResult(E.NONE, md.producer_id, md.producer_epoch) if committed and is_retry \
                    else self._invalid_v2(md, committed)
            abort_nothing = True
        elif state == S.COMPLETE_ABORT:
            if committed:
                return self._invalid_v2(md, committed)
            if is_retry:
                return EndTxnResult(E.NONE, md.producer_id, md.producer_epoch)
            abort_nothing = True
        elif state == S.PREPARE_COMMIT:
            return EndTxnResult(E.CONCURRENT_TRANSACTIONS) if committed else self._invalid_v2(md, committed)
        elif state == S.PREPARE_ABORT:
            return self._invalid_v2(md, committed) if committed else EndTxnResult(E.CONCURRENT_TRANSACTIONS)
        elif state == S.EMPTY and not committed:
            abort_nothing = True
        else:
            return self._invalid_v2(md, committed)
        next_producer_id = self.producer_ids.generate() if md.is_producer_epoch_exhausted else NO_PRODUCER_ID
        transit = md.prepare_abort_or_commit(S.PREPARE_COMMIT if committed else S.PREPARE_ABORT, self.clock(),
                                             client_tv, next_producer_id)
        error = await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, md, transit)
        if error:
            return EndTxnResult(error)
        if md.pending_state is not None or md.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return EndTxnResult(E.CONCURRENT_TRANSACTIONS)
        if abort_nothing:
            log.debug("TransactionalId %s: abort with no partition added", transactional_id)
        answer = EndTxnResult(E.NONE, md.next_producer_id, 0) if md.next_producer_id != NO_PRODUCER_ID \
            else EndTxnResult(E.NONE, md.producer_id, md.producer_epoch)
        partitions = set(md.partitions)
        complete = md.prepare_complete(self.clock())
        self.marker_manager.add_txn_markers_to_send(coordinator_epoch, committed, md, complete, partitions)
        return answer

    async def _end_kept_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                    committed: bool, client_tv: int, entry: CoordinatorEpochAndTxnMetadata
                                    ) -> EndTxnResult:
        """The producer that kept a transaction (KeepPreparedTxn) commits or aborts it with its own identity. The
        markers carry the transaction's id (at the next epoch under transactions v2); the id then moves to the
        producer's identity, one epoch on under v2 as every v2 end does."""
        coordinator_epoch, md = entry
        if not md.is_next_producer(producer_id, producer_epoch):
            known = producer_id in (md.producer_id, md.next_producer_id)
            return EndTxnResult(E.PRODUCER_FENCED if known else E.INVALID_PRODUCER_ID_MAPPING)
        if md.pending_state is not None:
            return EndTxnResult(E.CONCURRENT_TRANSACTIONS)
        next_pid, next_epoch = producer_id, producer_epoch
        if supports_epoch_bump(client_tv):
            if is_epoch_exhausted(producer_epoch):
                next_pid, next_epoch = self.producer_ids.generate(), 0
            else:
                next_epoch += 1
        transit = md.prepare_abort_or_commit(S.PREPARE_COMMIT if committed else S.PREPARE_ABORT, self.clock(),
                                             client_tv, next_pid, next_epoch)
        error = await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, md, transit)
        if error:
            return EndTxnResult(error)
        if md.pending_state is not None or md.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return EndTxnResult(E.CONCURRENT_TRANSACTIONS)
        partitions = set(md.partitions)
        complete = md.prepare_complete(self.clock())
        self.marker_manager.add_txn_markers_to_send(coordinator_epoch, committed, md, complete, partitions)
        return EndTxnResult(E.NONE, next_pid, next_epoch)

    @classmethod
    def _invalid_v2(cls, md: TransactionMetadata, committed: bool) -> EndTxnResult:
        return EndTxnResult(cls._invalid(md, committed))

    async def _end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                               from_client: bool) -> int:
        error, entry = self._producer_state(transactional_id, producer_id)
        if error:
            return error
        coordinator_epoch, md = entry
        is_epoch_fence = False
        if (from_client and producer_epoch != md.producer_epoch) or producer_epoch < md.producer_epoch:
            return E.PRODUCER_FENCED
        if md.pending_state is not None and md.pending_state != S.PREPARE_EPOCH_FENCE:
            return E.CONCURRENT_TRANSACTIONS
        state = md.state
        if state == S.ONGOING:
            next_state = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
            old_epoch, old_last = md.producer_epoch, md.last_producer_epoch
            if next_state == S.PREPARE_ABORT and md.pending_state == S.PREPARE_EPOCH_FENCE:
                # the fence's bumped epoch becomes the transaction's: the abort is written with it
                is_epoch_fence = True
                md.pending_state = None
                md.producer_epoch = producer_epoch
                md.last_producer_epoch = NO_PRODUCER_EPOCH
            elif md.pending_state is not None:
                return E.CONCURRENT_TRANSACTIONS
            # v1 clients and the coordinator's own aborts: no epoch bump here (Kafka's endTransactionWithTV1)
            transit = md.prepare_abort_or_commit(next_state, self.clock(), TV_0)
        elif state == S.COMPLETE_COMMIT:
            return E.NONE if committed else self._invalid(md, committed)
        elif state == S.COMPLETE_ABORT:
            return self._invalid(md, committed) if committed else E.NONE
        elif state == S.PREPARE_COMMIT:
            return E.CONCURRENT_TRANSACTIONS if committed else self._invalid(md, committed)
        elif state == S.PREPARE_ABORT:
            return self._invalid(md, committed) if committed else E.CONCURRENT_TRANSACTIONS
        else:
            return self._invalid(md, committed)
        error = await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, md, transit)
        if error:
            if is_epoch_fence and self.state_manager.is_current(transactional_id, coordinator_epoch, md):
                md.producer_epoch, md.last_producer_epoch = old_epoch, old_last
                md.has_failed_epoch_fence = True
            return error
        # Durable: the client is answered now, the markers follow.
        if md.pending_state is not None or md.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return E.CONCURRENT_TRANSACTIONS
        partitions = set(md.partitions)
        complete = md.prepare_complete(self.clock())
        self.marker_manager.add_txn_markers_to_send(coordinator_epoch, committed, md, complete, partitions)
        return E.NONE

    @staticmethod
    def _invalid(md: TransactionMetadata, committed: bool) -> int:
        log.info("TransactionalId %s: EndTxn(%s) in state %s", md.transactional_id,
                 "commit" if committed else "abort", md.state.state_name)
        return E.INVALID_TXN_STATE

    # ------------------------------------------------------------ timeouts
    async def abort_timed_out_transactions(self) -> int:
        """Fence (epoch+1) and abort every Ongoing transaction past its timeout."""
        aborted = 0
        for txn_id, producer_id, epoch in self.state_manager.timed_out_transactions():
            error, entry = self._state(txn_id)
            if error or entry is None:
                continue
            md = entry.metadata
            if md.producer_id != producer_id or md.producer_epoch != epoch or md.pending_state is not None:
                continue
            try:
                transit = md.prepare_fence_producer_epoch()
            except IllegalTransition as e:
                log.warning("cannot abort timed-out %s: %s", txn_id, e)
                continue
            log.info("aborting transaction %s of producer %d: it timed out after %d ms", txn_id, producer_id,
                     md.txn_timeout_ms)
            error = await self._end_transaction(txn_id, producer_id, transit.producer_epoch, False,
                                                from_client=False)
            if error == E.NONE:
                aborted += 1
            elif md.pending_state == S.PREPARE_EPOCH_FENCE:
                md.clear_pending()
        return aborted

    # ------------------------------------------------------------ admin
    def handle_describe(self, transactional_id: str) -> tuple[int, TransactionMetadata | None]:
        error, entry = self._state(transactional_id)
        if error:
            return error, None
        if entry is None or entry.metadata.state == S.DEAD:
            return E.TRANSACTIONAL_ID_NOT_FOUND, None
        return E.NONE, entry.metadata

    def handle_list(self, states: list[str], producer_ids: list[int], duration_ms: int
                    ) -> tuple[int, list[str], list[TransactionMetadata]]:
        """(error, unknown state filters, matching ids)."""
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE, [], []
        if self.state_manager.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS, [], []
        wanted, unknown = set(), []
        for name in states:
            state = TransactionState.from_name(name)
            if state is None:
                unknown.append(name)
            else:
                wanted.add(state)
        if unknown and not wanted:
            return E.NONE, unknown, []
        now = self.clock()
        out = []
        for md in self.state_manager.all_transactions():
            if md.state == S.DEAD:
                continue
            if wanted and md.state not in wanted:
                continue
            if producer_ids and md.producer_id not in producer_ids:
                continue
            if duration_ms >= 0 and now - md.txn_start_timestamp <= duration_ms:
                continue
            out.append(md)
        return E.NONE, unknown, out
