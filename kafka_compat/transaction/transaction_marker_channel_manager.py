"""TransactionMarkerChannelManager: gets a decided transaction's markers written, then completes it.

Kafka's TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler.
Once PrepareCommit/PrepareAbort is durable, a COMMIT or ABORT marker goes to every
partition of the transaction, grouped by the partition's current leader. Partitions
this broker leads are written through ``write_local`` (the WriteTxnMarkers code
path); partitions led elsewhere go through ``send_remote(broker_id, markers)``, a
WriteTxnMarkers request to that broker (a cluster supplies it; a single node leads
everything). Retriable results are retried after a back-off; when every partition
has its marker, CompleteCommit/CompleteAbort is written.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, NamedTuple

from ..protocol.errors import ErrorCode
from .transaction_metadata import TransactionMetadata, TxnTransitMetadata

log = logging.getLogger(__name__)
E = ErrorCode

RETRY_BACKOFF_S = 0.05
_RETRIABLE = frozenset({E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS,
                        E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT, E.KAFKA_STORAGE_ERROR,
                        E.COORDINATOR_LOAD_IN_PROGRESS, E.NETWORK_EXCEPTION, E.LEADER_NOT_AVAILABLE})
_OBSOLETE = frozenset({E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED})
_SKIPPED = frozenset({E.UNSUPPORTED_FOR_MESSAGE_FORMAT, E.UNSUPPORTED_VERSION})


class TxnMarker(NamedTuple):
    """One WriteTxnMarkers entry: a marker for some partitions of one producer's transaction."""
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: tuple        # ((topic, partition), ...)
    transaction_version: int = 0     # the client's (WriteTxnMarkers v2's TransactionVersion)


MarkerWriter = Callable[[list[TxnMarker]], Awaitable[list[dict[tuple[str, int], int]]]]


class TransactionMarkerChannelManager:
    def __init__(self, broker_id: int, metadata_cache, state_manager, write_local: MarkerWriter,
                 send_remote: Callable[[int, list[TxnMarker]], Awaitable[list[dict]]] | None = None):
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.state_manager = state_manager
        self.write_local = write_local
        self.send_remote = send_remote
        self._tasks: set[asyncio.Task] = set()

    def add_txn_markers_to_send(self, coordinator_epoch: int, committed: bool, md: TransactionMetadata,
                                transit: TxnTransitMetadata, partitions) -> None:
        """Markers for ``partitions``; then write ``transit`` (the Complete state already pending on ``md``).
        The markers carry the producer id and epoch of the decided (Prepare*) state: under transactions v2 the
        bumped epoch, while ``transit`` may already name the next producer id."""
        marker = TxnMarker(md.producer_id, md.producer_epoch, committed, coordinator_epoch, (),
                           md.client_transaction_version)
        task = asyncio.get_running_loop().create_task(
            self._send_then_complete(coordinator_epoch, marker, md, transit, set(partitions)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _leader_of(self, topic: str, index: int) -> int | None:
        state = self.metadata_cache.partition_state(topic, index)
        if state is None or state.leader < 0:
            return None
        return state.leader

    def _still_coordinating(self, md: TransactionMetadata, coordinator_epoch: int) -> bool:
        return self.state_manager.is_current(md.transactional_id, coordinator_epoch, md)

    async def _send_then_complete(self, coordinator_epoch: int, template: TxnMarker, md: TransactionMetadata,
                                  transit: TxnTransitMetadata, pending: set) -> None:
        try:
            while pending:
                if not self._still_coordinating(md, coordinator_epoch):
                    log.info("no longer the coordinator of %s: dropping its markers", md.transactional_id)
                    return
                by_leader: dict[int, list] = {}
                for tp in list(pending):
                    if self.metadata_cache.get_topic(tp[0]) is None:
                        pending.discard(tp)     # the topic was deleted: nothing left to mark
                        continue
                    leader = self._leader_of(*tp)
                    if leader is not None:
                        by_leader.setdefault(leader, []).append(tp)
                sends = []
                for leader, tps in by_leader.items():
                    marker = template._replace(partitions=tuple(tps))
                    if leader == self.broker_id:
                        sends.append(self.write_local([marker]))
                    elif self.send_remote is not None:
                        sends.append(self.send_remote(leader, [marker]))
                for results in await asyncio.gather(*sends):      # every leader at once
                    for tp, error in results[0].items():
                        if error == E.NONE or error in _SKIPPED:
                            pending.discard(tp)
                        elif error in _OBSOLETE:
                            log.info("marker for %s of %s is obsolete (%s): stop sending", tp, md.transactional_id,
                                     ErrorCode(error).name)
                            return
                        elif error not in _RETRIABLE:
                            log.error("marker for %s of %s failed with %s: giving up on that partition", tp,
                                      md.transactional_id, ErrorCode(error).name)
                            pending.discard(tp)
                if pending:
                    await asyncio.sleep(RETRY_BACKOFF_S)
            await self._complete(coordinator_epoch, md, transit)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("sending the markers of %s failed", md.transactional_id)

    async def _complete(self, coordinator_epoch: int, md: TransactionMetadata, transit: TxnTransitMetadata) -> None:
        """Write CompleteCommit/CompleteAbort, retrying while the log is not available (Kafka's tryAppendToLog)."""
        while True:
            if not self._still_coordinating(md, coordinator_epoch) or md.pending_state != transit.state:
                return
            # append_transaction_to_log clears the pending state on failure; keep it while we retry
            error = await self.state_manager.append_transaction_to_log(md.transactional_id, coordinator_epoch, md,
                                                                       transit)
            if error != E.COORDINATOR_NOT_AVAILABLE:
                return
            if self._still_coordinating(md, coordinator_epoch) and md.pending_state is None:
                md.pending_state = transit.state
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks.clear()
