"""TransactionStateManager: the transactional ids this broker coordinates, and `__transaction_state`.

Kafka's TransactionStateManager. Ids live in the partition
`partition_for(transactional.id)` of the compacted internal topic; this broker
coordinates the ids of the partitions it leads, each with a coordinator epoch
(the partition's leader epoch). Taking over a partition replays it (meanwhile its
ids get COORDINATOR_LOAD_IN_PROGRESS); an id whose partition is not ours gets
NOT_COORDINATOR. Every transition is appended with acks=-1 before it takes effect.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Callable, NamedTuple

from kafka_compat.storage.validator import COORDINATOR

from ..clock import now_ms
from ..protocol.errors import ErrorCode
from ..protocol.records import batches, build_batch
from ..sentinels import TRANSACTION_STATE_TOPIC_NAME
from .transaction_log import (
    key_to_bytes,
    partition_for,
    read_key,
    read_value,
    value_to_bytes,
)
from .transaction_metadata import EXPIRABLE, TransactionMetadata, TransactionState, TxnTransitMetadata

log = logging.getLogger(__name__)
E = ErrorCode

# Kafka's mapping of append failures to what a transactional client should see.
_APPEND_ERRORS = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
}


APPEND_TIMEOUT_MS = 30000      # Kafka waits request.timeout.ms (default 30 s) for a state write


class CoordinatorEpochAndTxnMetadata(NamedTuple):
    coordinator_epoch: int
    metadata: TransactionMetadata


class TxnMetadataCacheEntry:
    """One owned partition: its coordinator epoch and its ids."""
    __slots__ = ("coordinator_epoch", "metadata_per_transactional_id")

    def __init__(self, coordinator_epoch: int):
        self.coordinator_epoch = coordinator_epoch
        self.metadata_per_transactional_id: dict[str, TransactionMetadata] = {}


def read_transaction_partition(replica_manager, index: int, load_buffer_size: int) -> dict[str, TransactionMetadata]:
    """Replay one partition (worker thread, reads only): the latest value per id, tombstones dropped."""
    found: dict[str, TransactionMetadata] = {}
    position, end = replica_manager.log_offsets(TRANSACTION_STATE_TOPIC_NAME, index)
    while position < end:
        data = replica_manager.read_local(TRANSACTION_STATE_TOPIC_NAME, index, position,
                                          load_buffer_size).records.read_bytes()
        if not data:
            break
        for batch in batches(data):
            position = batch.next_offset if hasattr(batch, "next_offset") else batch.last_offset + 1
            if getattr(batch, "is_control", False):
                continue
            for record in batch.records():
                if record.key is None:
                    continue
                txn_id = read_key(record.key)
                if txn_id is None:
                    continue
                if record.value is None:
                    found.pop(txn_id, None)
                else:
                    found[txn_id] = read_value(txn_id, record.value)
    return found


class TransactionStateManager:
    def __init__(self, config, broker_id: int, replica_manager, metadata_cache, controller,
                 clock: Callable[[], int] = now_ms, cluster: bool = False,
                 transaction_version: Callable[[], int] = lambda: 0):
        """``cluster``: the topic gets its full replication factor or is not created (Kafka refuses it
        until that many brokers are alive); a single node makes it with what it has.
        ``transaction_version()``: the finalized transaction.version, which picks the value version written."""
        cfg = config
        self.transaction_version = transaction_version
        self.cluster = cluster
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.controller = controller
        self.clock = clock
        self.num_partitions = cfg["transaction.state.log.num.partitions"]
        self.replication_factor = cfg["transaction.state.log.replication.factor"]
        self.min_isr = cfg["transaction.state.log.min.isr"]
        self.segment_bytes = cfg["transaction.state.log.segment.bytes"]
        self.load_buffer_size = cfg["transaction.state.log.load.buffer.size"]
        self.max_timeout_ms = cfg["transaction.max.timeout.ms"]
        self.id_expiration_ms = cfg["transactional.id.expiration.ms"]
        self.request_timeout_ms = APPEND_TIMEOUT_MS
        self.owned: dict[int, TxnMetadataCacheEntry] = {}
        self.loading: dict[int, int] = {}       # partition -> coordinator epoch being loaded
        self._load_tasks: dict[int, asyncio.Task] = {}
        self._creating: asyncio.Future | None = None
        # Ids are cached per topic size: __transaction_state's partition count is fixed once created.
        self._partition_of: dict[str, int] = {}

    # ------------------------------------------------------------ partitions
    def partition_for(self, transactional_id: str) -> int:
        p = self._partition_of.get(transactional_id)
        if p is None:
            p = self._partition_of[transactional_id] = partition_for(transactional_id, self.num_partitions)
        return p

    def topic_exists(self) -> bool:
        return self.metadata_cache.get_topic(TRANSACTION_STATE_TOPIC_NAME) is not None

    def ensure_topic(self) -> bool:
        """Create `__transaction_state` on first need, with Kafka's forced configs; False while it is not
        there (it cannot be created now, or a cluster's controller is still creating it)."""
        topic = self.metadata_cache.get_topic(TRANSACTION_STATE_TOPIC_NAME)
        if topic is not None:
            if topic.partitions != self.num_partitions:
                self.num_partitions = topic.partitions
                self._partition_of.clear()
            return True
        if self._creating is not None and not self._creating.done():
            return False
        rf = self.replication_factor
        if not self.cluster:
            rf = min(rf, max(1, len(self.metadata_cache.alive_brokers())))
        configs = {"cleanup.policy": "compact", "compression.type": "uncompressed",
                   "unclean.leader.election.enable": "false", "segment.bytes": str(self.segment_bytes),
                   "min.insync.replicas": str(min(self.min_isr, rf))}
        try:
            created = self.controller.create_topic(TRANSACTION_STATE_TOPIC_NAME, self.num_partitions, rf, configs)
        except Exception:
            log.exception("cannot create %s", TRANSACTION_STATE_TOPIC_NAME)
            return False
        if inspect.isawaitable(created):    # a cluster: the leaders arrive by LeaderAndIsr, loads follow them
            self._creating = asyncio.ensure_future(created)
            self._creating.add_done_callback(_creation_done)
            return False
        log.info("created %s with %d partitions", TRANSACTION_STATE_TOPIC_NAME, self.num_partitions)
        self._partition_of.clear()
        return True

    def is_loading(self, transactional_id: str) -> bool:
        return self.partition_for(transactional_id) in self.loading

    # ------------------------------------------------------------ cache
    def get_transaction_state(self, transactional_id: str
                              ) -> tuple[int, CoordinatorEpochAndTxnMetadata | None]:
        """(error, entry or None): NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS, else the id's state if known."""
        partition = self.partition_for(transactional_id)
        if partition in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS, None
        entry = self.owned.get(partition)
        if entry is None:
            return E.NOT_COORDINATOR, None
        md = entry.metadata_per_transactional_id.get(transactional_id)
        return E.NONE, None if md is None else CoordinatorEpochAndTxnMetadata(entry.coordinator_epoch, md)

    def put_transaction_state_if_not_exists(self, md: TransactionMetadata
                                            ) -> tuple[int, CoordinatorEpochAndTxnMetadata | None]:
        error, found = self.get_transaction_state(md.transactional_id)
        if error or found is not None:
            return error, found
        entry = self.owned[self.partition_for(md.transactional_id)]
        entry.metadata_per_transactional_id[md.transactional_id] = md
        return E.NONE, CoordinatorEpochAndTxnMetadata(entry.coordinator_epoch, md)

    def is_current(self, transactional_id: str, coordinator_epoch: int, md: TransactionMetadata) -> bool:
        """Is ``md`` still what this broker holds for the id, at the same coordinator epoch?"""
        entry = self.owned.get(self.partition_for(transactional_id))
        return (entry is not None and entry.coordinator_epoch == coordinator_epoch
                and entry.metadata_per_transactional_id.get(transactional_id) is md)

    def all_transactions(self):
        for entry in list(self.owned.values()):
            yield from list(entry.metadata_per_transactional_id.values())

    # ------------------------------------------------------------ writing
    async def append_transaction_to_log(self, transactional_id: str, coordinator_epoch: int,
                                        md: TransactionMetadata, transit: TxnTransitMetadata) -> int:
        """Write ``transit`` (acks=-1); on success make it the id's state. Returns the client's error."""
        partition = self.partition_for(transactional_id)
        try:
            value = None if transit.state == TransactionState.DEAD \
                else value_to_bytes(transit, self.transaction_version())
            batch = bytearray(build_batch([(key_to_bytes(transactional_id), value, (), self.clock())]))
            results = self.replica_manager.append_records(
                self.request_timeout_ms, -1, [(TRANSACTION_STATE_TOPIC_NAME, partition, batch)], origin=COORDINATOR,
                internal_topics_allowed=True)
            if isinstance(results, asyncio.Future):
                results = await results
            error = results[0].error_code
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("appending the state of %s failed", transactional_id)
            error = E.UNKNOWN_SERVER_ERROR
        error = _APPEND_ERRORS.get(error, error)
        if error == E.NONE and not self.is_current(transactional_id, coordinator_epoch, md):
            error = E.NOT_COORDINATOR           # we lost the partition (or moved epoch) meanwhile
        if error == E.NONE:
            md.complete_transition(transit)
            if transit.state == TransactionState.DEAD:
                self.owned[partition].metadata_per_transactional_id.pop(transactional_id, None)
        else:
            log.info("writing %s for %s to %s-%d failed: %s", transit.state.state_name, transactional_id,
                     TRANSACTION_STATE_TOPIC_NAME, partition, ErrorCode(error).name)
            if self.is_current(transactional_id, coordinator_epoch, md) and md.pending_state == transit.state:
                md.clear_pending()
        return error

    # ------------------------------------------------------------ leadership
    def should_load(self, partition: int, coordinator_epoch: int) -> bool:
        """A partition already loaded or loading here at this epoch or a newer one is not loaded again."""
        held = self.loading.get(partition)
        if held is None and partition in self.owned:
            held = self.owned[partition].coordinator_epoch
        return held is None or coordinator_epoch < 0 or coordinator_epoch > held

    async def load_transactions_for_partition(self, partition: int, coordinator_epoch: int
                                              ) -> list[CoordinatorEpochAndTxnMetadata] | None:
        """Replay a partition we now lead; returns its transactions in PrepareCommit/PrepareAbort
        (their markers must be sent again), or None when leadership moved on meanwhile."""
        self.loading[partition] = coordinator_epoch
        self.owned.pop(partition, None)
        try:
            found = await asyncio.to_thread(read_transaction_partition, self.replica_manager, partition,
                                            self.load_buffer_size)
        except Exception:
            if self.loading.get(partition) == coordinator_epoch:
                del self.loading[partition]
            raise
        if self.loading.get(partition) != coordinator_epoch:
            return None
        del self.loading[partition]
        entry = self.owned[partition] = TxnMetadataCacheEntry(coordinator_epoch)
        entry.metadata_per_transactional_id.update(found)
        if found:
            log.info("loaded %d transactional ids from %s-%d", len(found), TRANSACTION_STATE_TOPIC_NAME, partition)
        return [CoordinatorEpochAndTxnMetadata(coordinator_epoch, md) for md in found.values()
                if md.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)]

    def remove_transactions_for_partition(self, partition: int, leader_epoch: int = -1) -> bool:
        """Forget a partition another broker leads now; False (kept) when ``leader_epoch`` is older than
        the election that loaded it here (a late resignation)."""
        held = self.loading.get(partition)
        if held is None and partition in self.owned:
            held = self.owned[partition].coordinator_epoch
        if leader_epoch >= 0 and held is not None and held > leader_epoch:
            return False
        self.loading.pop(partition, None)
        self.owned.pop(partition, None)
        return True

    # ------------------------------------------------------------ timeouts
    def timed_out_transactions(self) -> list[tuple[str, int, int]]:
        """(id, producer id, epoch) of Ongoing transactions past their timeout, nothing pending; a two-phase-commit
        transaction has no timeout (its external coordinator decides it)."""
        now = self.clock()
        return [(md.transactional_id, md.producer_id, md.producer_epoch) for md in self.all_transactions()
                if md.state == TransactionState.ONGOING and md.pending_state is None and not md.is_two_phase_commit
                and md.txn_start_timestamp + md.txn_timeout_ms < now]

    async def remove_expired_transactional_ids(self) -> int:
        """Tombstone ids idle past transactional.id.expiration.ms (finished or empty ones only)."""
        now = self.clock()
        removed = 0
        for partition, entry in list(self.owned.items()):
            for md in list(entry.metadata_per_transactional_id.values()):
                if (md.state in EXPIRABLE and md.pending_state is None
                        and md.txn_last_update_timestamp + self.id_expiration_ms <= now):
                    error = await self.append_transaction_to_log(md.transactional_id, entry.coordinator_epoch, md,
                                                                 md.prepare_dead())
                    if error == E.NONE:
                        removed += 1
        if removed:
            log.info("removed %d expired transactional ids", removed)
        return removed

    async def shutdown(self) -> None:
        self.owned.clear()
        self.loading.clear()


def _creation_done(future: asyncio.Future) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("cannot create %s: %s", TRANSACTION_STATE_TOPIC_NAME, future.exception())
