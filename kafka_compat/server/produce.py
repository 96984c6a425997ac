"""Produce: per-version format rules, then ReplicaManager.append_records.

The records arrive as a memoryview into the request frame; the partition's log
validates them and assigns offsets in place, then writes them with one call.
Nothing here looks at individual records.
"""
from __future__ import annotations

import asyncio
import inspect
import struct

from ..protocol.batch_header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    MAGIC_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORDS_COUNT_OFFSET,
    TRANSACTIONAL_FLAG_MASK,
)
from ..protocol.compression import ZSTD
from ..protocol.errors import ErrorCode
from ..protocol.messages.produce import ProduceResponse
from .auth_helper import NO_AUTHORIZER, TOPIC, TRANSACTIONAL_ID, WRITE, AuthHelper
from .client_quota_manager import QuotaManagers, principal_user
from .current_leader import CurrentLeaders
from .delayed_produce import ProduceResult
from .metadata import listener_of
from .metadata_cache import MetadataCache
from .registry import CloseConnection, handles
from .replica_manager import ReplicaManager

_PRODUCER = struct.Struct(">qh")            # ProducerId, ProducerEpoch
# What a coordinator's verification answer becomes for the producer (Kafka's AddPartitionsToTxnManager)
_VERIFY_ERRORS = {ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
                  ErrorCode.CONCURRENT_TRANSACTIONS: ErrorCode.NOT_ENOUGH_REPLICAS,
                  ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.NOT_ENOUGH_REPLICAS,
                  ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.NOT_ENOUGH_REPLICAS,
                  ErrorCode.NOT_COORDINATOR: ErrorCode.NOT_ENOUGH_REPLICAS}
PartitionProduceResponse = ProduceResponse.PartitionProduceResponse
BatchIndexAndErrorMessage = ProduceResponse.BatchIndexAndErrorMessage
LeaderIdAndEpoch = ProduceResponse.LeaderIdAndEpoch
NodeEndpoint = ProduceResponse.NodeEndpoint
ADMIN_CLIENT_ID = "__admin_client"       # Kafka lets only its admin tools write internal topics
# from v12 a transactional produce adds its partitions (Kafka's produceRequestVersionToTransactionSupportedOperation)
FIRST_ADD_PARTITION_VERSION = 12


def format_error(records, version: int) -> int:
    """Kafka's per-version format rules: v3+ carries only magic 2, zstd needs v7+.

    Fewer bytes than a batch header up to its magic are no batch at all (INVALID_RECORD); a
    magic beyond 2 is corrupt, as Kafka's batch iterator finds before the version rule."""
    if records is None or len(records) <= MAGIC_OFFSET:
        return ErrorCode.INVALID_RECORD
    magic = records[MAGIC_OFFSET]
    if magic > 2:                       # a byte: a negative magic reads as 128..255
        return ErrorCode.CORRUPT_MESSAGE
    if version >= 3 and magic != 2:
        return ErrorCode.INVALID_RECORD
    if magic == 2 and version < 7 and len(records) > ATTRIBUTES_OFFSET + 1 \
            and records[ATTRIBUTES_OFFSET + 1] & COMPRESSION_CODEC_MASK == ZSTD:
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    return ErrorCode.NONE


def _response(index: int, r: ProduceResult) -> PartitionProduceResponse:
    if r.error_code and r.base_offset < 0:
        out = PartitionProduceResponse(index=index, error_code=r.error_code, base_offset=-1, log_append_time_ms=-1,
                                       log_start_offset=r.log_start_offset, error_message=r.error_message)
        if r.record_errors:
            out.record_errors = [BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                                 for i, m in r.record_errors]
        return out
    return PartitionProduceResponse(index=index, error_code=r.error_code, base_offset=r.base_offset,
                                    log_append_time_ms=r.log_append_time, log_start_offset=r.log_start_offset)


class ProduceApi:
    def __init__(self, replica_manager: ReplicaManager, metadata_cache: MetadataCache,
                 quotas: QuotaManagers | None = None, auth: AuthHelper = NO_AUTHORIZER, verify_partitions=None,
                 verification_enabled: bool = True):
        """``verify_partitions(transactional id, producer id, epoch, partitions, add) -> {partition: error}``: the
        transaction coordinator's KIP-890 check, or with ``add`` (Produce v12+, transactions v2) its implicit add
        of the partitions; ``verification_enabled`` False (transaction.partition.verification.enable) skips the
        check for older versions, the add is always made."""
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.quotas = quotas or QuotaManagers()
        self.auth = auth
        self.verify_partitions = verify_partitions
        self.verification_enabled = verification_enabled

    @handles(0)
    def handle_produce(self, request):
        """WRITE on each topic is checked once per topic (TOPIC_AUTHORIZATION_FAILED on its partitions)."""
        req = request.body
        v = request.api_version
        auth = self.auth
        if req.transactional_id is not None and not auth.authorize(request, WRITE, TRANSACTIONAL_ID,
                                                                   req.transactional_id):
            error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED     # checked before anything else
        elif req.acks not in (0, 1, -1):
            error = ErrorCode.INVALID_REQUIRED_ACKS
        else:
            error = ErrorCode.NONE
        slots = []          # per request partition: a ready answer, or the index of its entry
        entries = []
        for t in req.topic_data:
            name = t.name
            if v >= 13:
                topic = self.metadata_cache.topic_by_id(t.topic_id)
                name = topic.name if topic else None
            denied = name is not None and not auth.authorize(request, WRITE, TOPIC, name)
            for p in t.partition_data:
                if error:
                    code = error
                elif name is None:
                    code = ErrorCode.UNKNOWN_TOPIC_ID
                elif denied:
                    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                else:
                    code = format_error(p.records, v)
                if code:
                    slots.append(ProduceResult(code))
                else:
                    slots.append(len(entries))
                    entries.append((name, p.index, p.records))
        if entries and req.transactional_id is not None and self.verify_partitions is not None \
                and (v >= FIRST_ADD_PARTITION_VERSION or self.verification_enabled):
            wanted, answers = self._verify(req.transactional_id, entries, v >= FIRST_ADD_PARTITION_VERSION)
            if inspect.isawaitable(answers):        # the coordinator is on another broker
                return self._append_after_verifying(request, slots, entries, wanted, answers)
            slots, entries = self._drop_unverified(v, slots, entries, wanted, answers)
        return self._append(request, slots, entries)

    async def _append_after_verifying(self, request, slots, entries, wanted, answers):
        slots, entries = self._drop_unverified(request.api_version, slots, entries, wanted, await answers)
        response = self._append(request, slots, entries)
        return await response if inspect.isawaitable(response) else response

    def _append(self, request, slots, entries):
        req = request.body
        results = []
        if entries:
            results = self.replica_manager.append_records(
                req.timeout_ms, req.acks, entries, internal_topics_allowed=request.client_id == ADMIN_CLIENT_ID)
        if isinstance(results, asyncio.Future):
            # appended: only the replicas' acks are awaited, so the connection may append the produce requests
            # behind this one meanwhile (not under a quota, whose throttle mutes the connection after each answer)
            quotas = self.quotas
            request.waits_only = not (quotas.produce.enabled or quotas.request.enabled)
            return self._respond_later(request, slots, results)
        return self._respond(request, slots, results)

    def _verify(self, txn_id: str, entries: list, add: bool):
        """KIP-890 part 1: a producer's first transactional batch on a partition is written only if the
        coordinator has the partition in the producer's ongoing transaction; a late or stray write (a
        zombie's, or one after an abort) is refused instead of opening a transaction nobody will end.
        Part 2 (``add``: Produce v12+, a transactions-v2 client): the coordinator adds the partition instead,
        so the client sends no AddPartitionsToTxn (Kafka's ADD_PARTITION supported operation).
        Returns ({partition: entry index} to check, the coordinator's answers or an awaitable of them)."""
        rm = self.replica_manager
        wanted: dict[tuple[str, int], int] = {}
        producer = None
        for i, (name, index, records) in enumerate(entries):
            if len(records) <= RECORDS_COUNT_OFFSET or not records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_FLAG_MASK:
                continue
            pid, epoch = _PRODUCER.unpack_from(records, PRODUCER_ID_OFFSET)
            producer = producer or (pid, epoch)
            if not rm.has_ongoing_transaction(name, index, pid, epoch):
                wanted[(name, index)] = i
        if not wanted:
            return wanted, {}
        return wanted, self.verify_partitions(txn_id, producer[0], producer[1], list(wanted), add)

    @staticmethod
    def _drop_unverified(version: int, slots: list, entries: list, wanted: dict, answers: dict
                         ) -> tuple[list, list]:
        """The entries whose partitions the coordinator refused become their answers (not appended)."""
        failed: dict[int, ProduceResult] = {}
        for tp, i in wanted.items():
            error = answers.get(tp, ErrorCode.NONE)
            if error == ErrorCode.TRANSACTION_ABORTABLE:
                failed[i] = ProduceResult(ErrorCode.TRANSACTION_ABORTABLE if version >= 11
                                          else ErrorCode.INVALID_TXN_STATE,
                                          error_message="Partition was not added to the transaction")
            elif error:
                failed[i] = ProduceResult(_VERIFY_ERRORS.get(error, error))
        if not failed:
            return slots, entries
        remap, kept = {}, []
        for i, entry in enumerate(entries):
            if i in failed:
                remap[i] = failed[i]
            else:
                remap[i] = len(kept)
                kept.append(entry)
        return [remap[s] if type(s) is int else s for s in slots], kept

    async def _respond_later(self, request, slots, future):
        return self._respond(request, slots, await future)

    def _respond(self, request, slots, results):
        req = request.body
        v = request.api_version
        responses = []
        failed = False
        leaders = None
        i = 0
        for t in req.topic_data:
            parts = []
            for p in t.partition_data:
                slot = slots[i]
                i += 1
                r = results[slot] if type(slot) is int else slot
                failed = failed or r.error_code != 0
                part = _response(p.index, r)
                if r.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and v >= 10:
                    if leaders is None:
                        leaders = CurrentLeaders(self.replica_manager, self.metadata_cache, listener_of(request),
                                                 LeaderIdAndEpoch, NodeEndpoint)
                    part.current_leader = leaders.of(self._topic_name(request, t), p.index)
                parts.append(part)
            responses.append(ProduceResponse.TopicProduceResponse(name=t.name, topic_id=t.topic_id,
                                                                  partition_responses=parts))
        throttle = self._throttle(request, req.acks)
        if req.acks == 0:
            if failed:
                raise CloseConnection()     # Kafka's way to make an acks=0 producer refresh metadata
            return None
        return ProduceResponse(responses=responses, throttle_time_ms=throttle,
                               node_endpoints=leaders.endpoints() if leaders is not None else [])

    def _topic_name(self, request, t) -> str | None:
        """The produced topic's name (v13+ names it by id; None when the id is unknown)."""
        if request.api_version < 13:
            return t.name
        topic = self.metadata_cache.topic_by_id(t.topic_id)
        return topic.name if topic is not None else None

    def _throttle(self, request, acks: int) -> int:
        """Charge the request to the producer's byte-rate quota and (unless acks=0) its request quota;
        the larger throttle applies, and the connection is muted for it after the response."""
        quotas = self.quotas
        throttle = 0
        if quotas.produce.enabled or quotas.request.enabled:
            user, client_id = principal_user(request.connection), request.client_id or ""
            by_bytes = quotas.produce.record_and_get_throttle_ms(user, client_id, request.size)
            by_time = 0 if acks == 0 else quotas.request_throttle_ms(request, user)
            throttle = max(by_bytes, by_time)
            if throttle:
                (quotas.produce if by_bytes > by_time else quotas.request).record_throttle(user, client_id, throttle)
        request.throttle_time_ms = throttle
        return throttle
