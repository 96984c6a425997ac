"""Produce and InitProducerId.

The records arrive as a memoryview into the request frame; storage validates
them and assigns offsets in place, then writes them with one call. Nothing
here looks at individual records.
"""
from __future__ import annotations

import os
import threading

from ..protocol.compression import ZSTD
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.init_producer_id import InitProducerIdResponse
from ..protocol.messages.produce import ProduceResponse
from ..protocol.batch_header import ATTRIBUTES_OFFSET, COMPRESSION_CODEC_MASK, MAGIC_OFFSET
from .registry import CloseConnection, handles

PartitionProduceResponse = ProduceResponse.PartitionProduceResponse


def _legacy_ok(records, version: int) -> int:
    """Kafka's per-version format rules: v3+ carries only magic 2, zstd needs v7+."""
    if records is None or len(records) <= MAGIC_OFFSET:
        return ErrorCode.INVALID_RECORD if records is None else ErrorCode.CORRUPT_MESSAGE
    magic = records[MAGIC_OFFSET]
    if version >= 3 and magic != 2:
        return ErrorCode.INVALID_RECORD
    if magic == 2 and version < 7 and len(records) > ATTRIBUTES_OFFSET + 1 \
            and records[ATTRIBUTES_OFFSET + 1] & COMPRESSION_CODEC_MASK == ZSTD:
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    return ErrorCode.NONE


def append_partition(broker, topic: str, index: int, records, version: int) -> PartitionProduceResponse:
    """Append one partition's records; its response is built once, with its final fields."""
    partition, code = broker.replicas.lookup(topic, index)
    if partition is None:
        return _failed(index, code)
    code = _legacy_ok(records, version)
    if code:
        return _failed(index, code)
    try:
        result = partition.log.append_as_leader(records, partition.leader_epoch)
    except KafkaError as e:
        out = _failed(index, e.error_code, str(e) or None)
        out.record_errors = [ProduceResponse.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                             for i, m in e.record_errors]
        return out
    if not result.duplicate:            # a retry is answered with the offsets its batch already has
        broker.replicas.appended(partition)
    return PartitionProduceResponse(index=index, base_offset=result.first_offset,
                                    log_append_time_ms=result.log_append_time, log_start_offset=result.log_start_offset)


def _failed(index: int, code: int, message: str | None = None) -> PartitionProduceResponse:
    return PartitionProduceResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                                    log_start_offset=-1, error_message=message)


@handles(0)
def handle_produce(broker, request):
    req = request.body
    v = request.api_version
    if req.transactional_id is not None:
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif req.acks not in (0, 1, -1):
        error = ErrorCode.INVALID_REQUIRED_ACKS
    else:
        error = ErrorCode.NONE
    responses = []
    failed = False
    for t in req.topic_data:
        name = t.name
        if v >= 13:
            topic = broker.topics.by_id.get(t.topic_id)
            name = topic.name if topic else None
        parts = []
        for p in t.partition_data:
            if error:
                r = _failed(p.index, error)
            elif name is None:
                r = _failed(p.index, ErrorCode.UNKNOWN_TOPIC_ID)
            else:
                r = append_partition(broker, name, p.index, p.records, v)
            failed = failed or r.error_code != 0
            parts.append(r)
        responses.append(ProduceResponse.TopicProduceResponse(name=t.name, topic_id=t.topic_id,
                                                              partition_responses=parts))
    if req.acks == 0:
        if failed:
            raise CloseConnection()     # Kafka's way to make an acks=0 producer refresh metadata
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)


class ProducerIdManager:
    """Hands out producer ids; the next free id is persisted so ids are never reused."""

    BLOCK = 1000

    def __init__(self, directory: str):
        self.path = os.path.join(directory, "kafka-compat-producer-id")
        self.lock = threading.Lock()
        try:
            with open(self.path) as f:
                self.reserved = int(f.read().strip() or 0)
        except FileNotFoundError:
            self.reserved = 0
        self.next = self.reserved

    def allocate(self) -> int:
        with self.lock:
            if self.next >= self.reserved:
                self.reserved = self.next + self.BLOCK
                tmp = self.path + ".tmp"
                with open(tmp, "w") as f:
                    f.write(str(self.reserved))
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.path)
            pid = self.next
            self.next += 1
            return pid


@handles(22, 0, 5)
def handle_init_producer_id(broker, request):
    req = request.body
    resp = InitProducerIdResponse(throttle_time_ms=0, producer_id=-1, producer_epoch=-1)
    if req.transactional_id is not None:
        # Transactions are not implemented: we are nobody's transaction coordinator.
        resp.error_code = ErrorCode.NOT_COORDINATOR
        return resp
    manager = getattr(broker, "producer_ids", None)
    if manager is None:
        manager = broker.producer_ids = ProducerIdManager(broker.log_dirs[0])
    if request.api_version >= 3 and req.producer_id >= 0 and req.producer_epoch >= 0:
        # KIP-360: an idempotent producer bumps its epoch; at the top it needs a new id.
        if req.producer_epoch < 32766:
            resp.producer_id, resp.producer_epoch = req.producer_id, req.producer_epoch + 1
            return resp
    resp.producer_id, resp.producer_epoch = manager.allocate(), 0
    return resp
