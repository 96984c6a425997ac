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

``send(broker id, api key, api version, body)`` is the composition root's
NetworkClient call; it raises ConnectionError / TimeoutError / InvalidResponse.
"""
from __future__ import annotations

import logging
from typing import Awaitable, Callable

from ..protocol.errors import ErrorCode
from ..protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from ..protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from ..sentinels import TRANSACTION_STATE_TOPIC_NAME
from ..transaction import TxnMarker

log = logging.getLogger(__name__)
E = ErrorCode

WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION = 27, 1
ADD_PARTITIONS_TO_TXN, VERIFY_VERSION = 24, 4

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
            coordinator_epoch=m.coordinator_epoch,
            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in _by_topic(m.partitions).items()]) for m in markers])
        try:
            response = await self.send(broker_id, WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, request)
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

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions):
        """{(topic, partition): error} for ``partitions``, or an awaitable of it when the coordinator is remote."""
        coordinator = self.txn_coordinator
        if self.send is None:
            return coordinator.handle_verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
        state_manager = coordinator.state_manager
        if state_manager.topic_exists():
            state_manager.ensure_topic()        # the topic exists: this only takes its partition count
        index = state_manager.partition_for(transactional_id)
        if index in state_manager.owned or index in state_manager.loading:
            return coordinator.handle_verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
        state = self.metadata_cache.partition_state(TRANSACTION_STATE_TOPIC_NAME, index)
        if state is None or state.leader < 0 or state.leader == self.broker_id:
            return {tp: E.NOT_ENOUGH_REPLICAS for tp in partitions}     # no coordinator to ask yet
        return self._ask(state.leader, transactional_id, producer_id, producer_epoch, list(partitions))

    async def _ask(self, broker_id: int, transactional_id: str, producer_id: int, producer_epoch: int,
                   partitions: list) -> dict[tuple[str, int], int]:
        Txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
        Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        request = AddPartitionsToTxnRequest(transactions=[Txn(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=True, topics=[Topic(name=t, partitions=ps) for t, ps in _by_topic(partitions).items()])])
        answers = {tp: E.NOT_ENOUGH_REPLICAS for tp in partitions}
        try:
            response = await self.send(broker_id, ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, request)
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
