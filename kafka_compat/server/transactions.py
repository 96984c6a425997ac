"""Transaction APIs of the coordinator: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions,
ListTransactions.

Thin: each request becomes a call on the TransactionCoordinator and its one
error becomes the response that version carries. EndTxn v5 is transactions v2
(KIP-890 part 2): the transaction ends with an epoch bump and the response carries
the producer id and epoch to go on with. AddPartitionsToTxn v5 without VerifyOnly
is a partition leader adding a v2 producer's partitions; ListTransactions v2 filters
by a transactional-id pattern (a Java regular expression, matched whole).
"""
from __future__ import annotations

import asyncio
import re

from ..protocol.errors import ErrorCode
from ..protocol.messages.add_offsets_to_txn import AddOffsetsToTxnResponse
from ..protocol.messages.add_partitions_to_txn import AddPartitionsToTxnResponse
from ..protocol.messages.describe_transactions import DescribeTransactionsResponse
from ..protocol.messages.end_txn import EndTxnResponse
from ..protocol.messages.list_transactions import ListTransactionsResponse
from ..sentinels import INTERNAL_TOPICS
from ..transaction.transaction_metadata import TV_0, TV_2
from .auth_helper import (
    CLUSTER_ACTION,
    DESCRIBE,
    GROUP,
    NO_AUTHORIZER,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    AuthHelper,
)
from .metadata_cache import MetadataCache
from .registry import handles

E = ErrorCode
Result = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult


def fenced_for(version: int, since: int, error: int) -> int:
    """PRODUCER_FENCED is INVALID_PRODUCER_EPOCH to clients older than the version that added it."""
    return E.INVALID_PRODUCER_EPOCH if error == E.PRODUCER_FENCED and version < since else error


def _topic_results(topics, errors: dict[tuple[str, int], int]) -> list:
    return [Result(name=t.name, results_by_partition=[
        PartitionResult(partition_index=p, partition_error_code=errors[(t.name, p)]) for p in t.partitions])
        for t in topics]


class TransactionsApi:
    def __init__(self, txn_coordinator, metadata_cache: MetadataCache, auth: AuthHelper = NO_AUTHORIZER):
        self.txn_coordinator = txn_coordinator
        self.metadata_cache = metadata_cache
        self.auth = auth

    def _unknown(self, topics) -> set[tuple[str, int]]:
        unknown = set()
        for t in topics:
            topic = self.metadata_cache.get(t.name)
            for p in t.partitions:
                if topic is None or not 0 <= p < topic.partitions:
                    unknown.add((t.name, p))
        return unknown

    async def _add(self, txn_id: str, producer_id: int, producer_epoch: int, topics, version: int,
                   request=None, client_tv: int = TV_0) -> dict[tuple[str, int], int]:
        """``request`` (client versions): WRITE on the transactional id, then on each topic, is checked."""
        wanted = [(t.name, p) for t in topics for p in t.partitions]
        if request is not None and not self.auth.authorize(request, WRITE, TRANSACTIONAL_ID, txn_id):
            return {tp: E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in wanted}
        writable = INTERNAL_TOPICS | (self.auth.filter_authorized(request, WRITE, TOPIC, (t.name for t in topics))
                                      if request is not None else {t.name for t in topics})
        unknown = self._unknown(topics)
        if unknown or any(t.name not in writable for t in topics):
            # nothing is added when any partition is bad: the rest were not attempted
            return {tp: E.TOPIC_AUTHORIZATION_FAILED if tp[0] not in writable
                    else E.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else E.OPERATION_NOT_ATTEMPTED for tp in wanted}
        if client_tv >= TV_2:
            return await self.txn_coordinator.handle_add_partitions_v2(txn_id, producer_id, producer_epoch, wanted)
        error = await self.txn_coordinator.handle_add_partitions(txn_id, producer_id, producer_epoch, wanted)
        error = fenced_for(version, 2, error)
        return {tp: error for tp in wanted}

    @handles(24, 0, 5)
    async def handle_add_partitions_to_txn(self, request):
        req = request.body
        v = request.api_version
        if v < 4:
            errors = await self._add(req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                                     req.v3_and_below_producer_epoch, req.v3_and_below_topics, v, request)
            return AddPartitionsToTxnResponse(throttle_time_ms=0,
                                              results_by_topic_v3_and_below=_topic_results(req.v3_and_below_topics,
                                                                                           errors))
        # v4+: brokers asking on behalf of producers (KIP-890), several transactions per request
        if not self.auth.authorize_cluster(request, CLUSTER_ACTION):
            return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=E.CLUSTER_AUTHORIZATION_FAILED,
                                              results_by_transaction=[])
        coordinator = self.txn_coordinator

        async def one(t):
            if t.verify_only:
                errors = coordinator.handle_verify_partitions(t.transactional_id, t.producer_id, t.producer_epoch,
                                                              [(x.name, p) for x in t.topics for p in x.partitions])
            else:
                # v5: a leader adding a transactions-v2 producer's partitions (Kafka's TV_2 above version 4)
                errors = await self._add(t.transactional_id, t.producer_id, t.producer_epoch, t.topics, v,
                                         client_tv=TV_2 if v >= 5 else TV_0)
            return AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
                transactional_id=t.transactional_id, topic_results=_topic_results(t.topics, errors))

        results = await asyncio.gather(*(one(t) for t in req.transactions))
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=E.NONE, results_by_transaction=list(results))

    @handles(25, 0, 4)
    async def handle_add_offsets_to_txn(self, request):
        req = request.body
        if not self.auth.authorize(request, WRITE, TRANSACTIONAL_ID, req.transactional_id):
            return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not self.auth.authorize(request, READ, GROUP, req.group_id):
            return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=E.GROUP_AUTHORIZATION_FAILED)
        error = await self.txn_coordinator.handle_add_offsets(req.transactional_id, req.producer_id,
                                                              req.producer_epoch, req.group_id)
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=fenced_for(request.api_version, 2, error))

    @handles(26, 0, 5)
    async def handle_end_txn(self, request):
        req = request.body
        if not self.auth.authorize(request, WRITE, TRANSACTIONAL_ID, req.transactional_id):
            return EndTxnResponse(throttle_time_ms=0, error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        v = request.api_version
        result = await self.txn_coordinator.handle_end_transaction(req.transactional_id, req.producer_id,
                                                                   req.producer_epoch, req.committed,
                                                                   TV_2 if v >= 5 else TV_0)
        return EndTxnResponse(throttle_time_ms=0, error_code=fenced_for(v, 2, result.error),
                              producer_id=result.producer_id, producer_epoch=result.producer_epoch)

    @handles(65)
    def handle_describe_transactions(self, request):
        out = []
        for txn_id in request.body.transactional_ids:
            if not self.auth.authorize(request, DESCRIBE, TRANSACTIONAL_ID, txn_id):
                error, md = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
            else:
                error, md = self.txn_coordinator.handle_describe(txn_id)
            if error:
                # as Kafka: an error entry carries the error and the id, every other field its zero default
                out.append(DescribeTransactionsResponse.TransactionState(
                    error_code=error, transactional_id=txn_id, transaction_state="", transaction_timeout_ms=0,
                    transaction_start_time_ms=0, producer_id=0, producer_epoch=0, topics=[]))
                continue
            by_topic: dict[str, list[int]] = {}
            visible = self.auth.filter_authorized(request, DESCRIBE, TOPIC, {t for t, _ in md.partitions})
            for topic, p in sorted(md.partitions):
                if topic in visible:        # topics the caller may not describe are left out
                    by_topic.setdefault(topic, []).append(p)
            out.append(DescribeTransactionsResponse.TransactionState(
                error_code=E.NONE, transactional_id=txn_id, transaction_state=md.state.state_name,
                transaction_timeout_ms=md.txn_timeout_ms, transaction_start_time_ms=md.txn_start_timestamp,
                producer_id=md.producer_id, producer_epoch=md.producer_epoch,
                topics=[DescribeTransactionsResponse.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]))
        return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=out)

    @handles(66, 0, 2)
    def handle_list_transactions(self, request):
        req = request.body
        duration = req.duration_filter if request.api_version >= 1 else -1
        pattern = req.transactional_id_pattern if request.api_version >= 2 else None
        matcher = None
        if pattern:       # null or empty: no filter, as Kafka
            try:
                matcher = re.compile(pattern).fullmatch
            except re.error:
                return ListTransactionsResponse(throttle_time_ms=0, error_code=E.INVALID_REGULAR_EXPRESSION,
                                                unknown_state_filters=[], transaction_states=[])
        error, unknown, found = self.txn_coordinator.handle_list(list(req.state_filters),
                                                                 list(req.producer_id_filters), duration)
        if matcher is not None:
            found = [md for md in found if matcher(md.transactional_id)]
        allowed = self.auth.filter_authorized(request, DESCRIBE, TRANSACTIONAL_ID,
                                              (md.transactional_id for md in found))
        found = [md for md in found if md.transactional_id in allowed]
        return ListTransactionsResponse(throttle_time_ms=0, error_code=error, unknown_state_filters=unknown,
                                        transaction_states=[ListTransactionsResponse.TransactionState(
                                            transactional_id=md.transactional_id, producer_id=md.producer_id,
                                            transaction_state=md.state.state_name) for md in found])
