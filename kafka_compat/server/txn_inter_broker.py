"""The transaction requests one broker sends another in a cluster.

Two of Kafka's pieces, on the inter-broker listener:

- `TxnMarkerSender`: the transaction coordinator's WriteTxnMarkers to the leader of
  a transaction's partitions on another broker (the sending half of Kafka's
  TransactionMarkerChannelManager; the grouping and retrying stay in
  kafka_compat.transaction). A request that cannot be answered (the broker is down,
  the connection dropped) counts as NETWORK_EXCEPTION for each of its partitions, so
  the coordinator retries them, routed to whoever leads them by then.
- `AddPartitionsToTxnManager`: a partition leader's KIP-890 check of a
  transactional produce with the transaction's coordinator, wherever it lives
  (AddPartitionsToTxn v4+ with VerifyOnly). A coordinator that is here answers at
  once; one elsewhere is asked over the network; one that cannot be asked, moved or
  is loading becomes NOT_ENOUGH_REPLICAS for the producer (retriable), as in Kafka.
  Under transactions v2 (Produce v12+, TxnOffsetCommit v5) the same call *adds*
  the partitions (AddPartitionsToTxn v5 without VerifyOnly), and a coordinator
  still finishing the previous transaction (CONCURRENT_TRANSACTIONS) is asked
  again a few times first, as Kafka's add.partitions.to.txn.retry.backoff.* do.

``send(broker id, api key, api version, body)`` is the composition root's
NetworkClient call; it raises ConnectionError / TimeoutError / InvalidResponse.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Awaitable, Callable

from ..protocol.errors import ErrorCode
from ..protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from ..protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from ..sentinels import TRANSACTION_STATE_TOPIC_NAME
from ..transaction import TxnMarker

log = logging.getLogger(__name__)
E = ErrorCode

# v2 only for transactions v2's markers: transaction.version 2 can be finalized only once every broker
# supports it, so a broker not upgraded yet (WriteTxnMarkers v0-1) is never sent v2
WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, WRITE_TXN_MARKERS_V2 = 27, 1, 2
ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, ADD_VERSION = 24, 4, 5

# Kafka's add.partitions.to.txn.retry.backoff.ms and .max.ms defaults
ADD_RETRY_BACKOFF_S, ADD_RETRY_MAX_S = 0.02, 0.1

Send = Callable[[int, int, int, object], Awaitable[object]]


def _by_topic(partitions) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, index in partitions:
        out.setdefault(topic, []).append(index)
    return out


class TxnMarkerSender:
    def __init__(self, send: Send):
        self.send = send

    async def __call__(self, broker_id: int, markers: list[TxnMarker]) -> list[dict[tuple[str, int], int]]:
        """Per marker, {(topic, partition): error} as the broker answered, or NETWORK_EXCEPTION."""
        request = WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=m.producer_id, producer_epoch=m.producer_epoch, transaction_result=m.committed,
            coordinator_epoch=m.coordinator_epoch, transaction_version=m.transaction_version,
            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in _by_topic(m.partitions).items()]) for m in markers])
        try:
            version = WRITE_TXN_MARKERS_V2 if any(m.transaction_version >= 2 for m in markers) \
                else WRITE_TXN_MARKERS_VERSION
            response = await self.send(broker_id, WRITE_TXN_MARKERS, version, request)
        except Exception as e:       # down, disconnected, timed out, unreadable: all retried
            log.info("WriteTxnMarkers to broker %d failed: %s", broker_id, e or type(e).__name__)
            return [{tp: E.NETWORK_EXCEPTION for tp in m.partitions} for m in markers]
        out = []
        for m, answer in zip(markers, list(response.markers) + [None] * len(markers)):
            errors = {tp: E.NETWORK_EXCEPTION for tp in m.partitions}   # anything left unanswered: retried
            if answer is not None and answer.producer_id == m.producer_id:
                for t in answer.topics:
                    for p in t.partitions:
                        if (t.name, p.partition_index) in errors:
                            errors[(t.name, p.partition_index)] = p.error_code
            out.append(errors)
        return out


class AddPartitionsToTxnManager:
    def __init__(self, broker_id: int, txn_coordinator, metadata_cache, send: Send | None):
        """``send`` None: a single node, where the coordinator is always this broker."""
        self.broker_id = broker_id
        self.txn_coordinator = txn_coordinator
        self.metadata_cache = metadata_cache
        self.send = send

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions, add: bool = False):
        """{(topic, partition): error} for ``partitions``, or an awaitable of it when the coordinator is remote
        (or, with ``add``, always: transactions v2 add the partitions, which writes the coordinator's log)."""
        if add:
            return self._add_with_retries(transactional_id, producer_id, producer_epoch, list(partitions))
        return self._verify_once(transactional_id, producer_id, producer_epoch, partitions, False)

    async def _add_with_retries(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                partitions: list) -> dict[tuple[str, int], int]:
        waited = 0.0
        while True:
            answers = self._verify_once(transactional_id, producer_id, producer_epoch, partitions, True)
            answers = await answers if inspect.isawaitable(answers) else answers
            if E.CONCURRENT_TRANSACTIONS not in answers.values() or waited >= ADD_RETRY_MAX_S:
                return answers
            await asyncio.sleep(ADD_RETRY_BACKOFF_S)
            waited += ADD_RETRY_BACKOFF_S

    def _verify_once(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions, add: bool):
        coordinator = self.txn_coordinator
        if add and (self.send is None or self._coordinated_here(transactional_id)):
            return coordinator.handle_add_partitions_v2(transactional_id, producer_id, producer_epoch, partitions)
        if self.send is None:
            return coordinator.handle_verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
        if self._coordinated_here(transactional_id):
            return coordinator.handle_verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
        state = self.metadata_cache.partition_state(TRANSACTION_STATE_TOPIC_NAME,
                                                    coordinator.state_manager.partition_for(transactional_id))
        if state is None or state.leader < 0 or state.leader == self.broker_id:
            return {tp: E.NOT_ENOUGH_REPLICAS for tp in partitions}     # no coordinator to ask yet
        return self._ask(state.leader, transactional_id, producer_id, producer_epoch, list(partitions), add)

    def _coordinated_here(self, transactional_id: str) -> bool:
        state_manager = self.txn_coordinator.state_manager
        if state_manager.topic_exists():
            state_manager.ensure_topic()        # the topic exists: this only takes its partition count
        index = state_manager.partition_for(transactional_id)
        return index in state_manager.owned or index in state_manager.loading

    async def _ask(self, broker_id: int, transactional_id: str, producer_id: int, producer_epoch: int,
                   partitions: list, add: bool = False) -> dict[tuple[str, int], int]:
        Txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
        Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        request = AddPartitionsToTxnRequest(transactions=[Txn(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=not add, topics=[Topic(name=t, partitions=ps) for t, ps in _by_topic(partitions).items()])])
        answers = {tp: E.NOT_ENOUGH_REPLICAS for tp in partitions}
        try:
            response = await self.send(broker_id, ADD_PARTITIONS_TO_TXN, ADD_VERSION if add else VERIFY_VERSION,
                                       request)
        except Exception as e:
            log.info("verifying %s with broker %d failed: %s", transactional_id, broker_id, e or type(e).__name__)
            return answers
        if response.error_code:
            log.info("verifying %s with broker %d: %s", transactional_id, broker_id,
                     ErrorCode(response.error_code).name)
            return answers
        for result in response.results_by_transaction:
            for t in result.topic_results:
                for p in t.results_by_partition:
                    if (t.name, p.partition_index) in answers:
                        answers[(t.name, p.partition_index)] = p.partition_error_code
        return answers
