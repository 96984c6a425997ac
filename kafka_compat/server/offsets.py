"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords: questions about a partition's offsets."""
from __future__ import annotations

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.delete_records import DeleteRecordsResponse
from ..protocol.messages.list_offsets import ListOffsetsResponse
from ..protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochResponse
from .fetch import READ_COMMITTED, leader_epoch_error
from .registry import handles

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
EARLIEST_PENDING_UPLOAD = -6


def _list_one(broker, name: str, p, version: int, committed: bool):
    out = ListOffsetsResponse.ListOffsetsPartitionResponse(partition_index=p.partition_index,
                                                           timestamp=-1, offset=-1, leader_epoch=-1)
    partition, code = broker.replicas.lookup(name, p.partition_index)
    if partition is None:
        out.error_code = code
        return out
    code = leader_epoch_error(partition, p.current_leader_epoch) if version >= 4 else 0
    if code:
        out.error_code = code
        return out
    log = partition.log
    ts = p.timestamp
    if ts == LATEST:
        offset = partition.last_stable_offset if committed else partition.high_watermark
        found = (-1, offset, partition.leader_epoch)
    elif ts in (EARLIEST, EARLIEST_LOCAL):
        found = (-1, log.log_start_offset, partition.leader_epoch)
    elif ts in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        found = (-1, -1, -1)
    else:
        hit = log.fetch_offset_by_timestamp(ts)
        found = (hit.timestamp, hit.offset, hit.leader_epoch if hit.leader_epoch is not None else -1) \
            if hit is not None else (-1, -1, -1)
    out.timestamp, out.offset, out.leader_epoch = found
    if version == 0:
        # v0 answers with a list of segment base offsets; the first is what clients use.
        out.old_style_offsets = [found[1]] if found[1] >= 0 and p.max_num_offsets > 0 else []
    return out


@handles(2)
def handle_list_offsets(broker, request):
    req = request.body
    v = request.api_version
    committed = v >= 2 and req.isolation_level == READ_COMMITTED
    topics = []
    for t in req.topics:
        parts = [_list_one(broker, t.name, p, v, committed) for p in t.partitions]
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


@handles(23)
def handle_offset_for_leader_epoch(broker, request):
    """Every batch here carries leader epoch 0: a single node never changes leaders."""
    topics = []
    for t in request.body.topics:
        parts = []
        for p in t.partitions:
            r = OffsetForLeaderEpochResponse.EpochEndOffset(partition=p.partition, leader_epoch=-1, end_offset=-1)
            partition, code = broker.replicas.lookup(t.topic, p.partition)
            if partition is None:
                r.error_code = code
            elif (code := leader_epoch_error(partition, p.current_leader_epoch)):
                r.error_code = code
            elif p.leader_epoch <= partition.leader_epoch:
                r.leader_epoch, r.end_offset = partition.leader_epoch, partition.log.log_end_offset
            parts.append(r)
        topics.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


@handles(21)
def handle_delete_records(broker, request):
    topics = []
    for t in request.body.topics:
        parts = []
        for p in t.partitions:
            r = DeleteRecordsResponse.DeleteRecordsPartitionResult(partition_index=p.partition_index,
                                                                   low_watermark=-1)
            partition, code = broker.replicas.lookup(t.name, p.partition_index)
            if partition is None:
                r.error_code = code
            else:
                offset = partition.high_watermark if p.offset == -1 else p.offset
                try:
                    if offset < 0:
                        r.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                    else:
                        partition.log.maybe_increment_log_start_offset(offset)
                        r.low_watermark = partition.log.log_start_offset
                except KafkaError as e:
                    r.error_code = e.error_code
            parts.append(r)
        topics.append(DeleteRecordsResponse.DeleteRecordsTopicResult(name=t.name, partitions=parts))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
