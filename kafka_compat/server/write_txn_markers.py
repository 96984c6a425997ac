"""WriteTxnMarkers: write a transaction's COMMIT or ABORT control batch to partitions this broker leads.

The transaction coordinator sends it to each leader of a decided transaction's
partitions; on the coordinator's own broker it calls `write_markers` directly,
the same code path. A marker is a transactional control batch with the
transaction's producer id and epoch, appended with acks=-1 as the coordinator's
write (origin COORDINATOR). A marker on a `__consumer_offsets` partition also
settles the producer's pending TxnOffsetCommit offsets there. v2 carries the
transaction's client TransactionVersion (2: the marker has the transaction's bumped
epoch, one above its data's).
"""
from __future__ import annotations

import asyncio

from kafka_compat.storage.validator import COORDINATOR

from ..protocol.errors import ErrorCode
from ..protocol.messages.write_txn_markers import WriteTxnMarkersResponse
from ..protocol.records import ControlRecordType, build_control_batch
from ..sentinels import GROUP_METADATA_TOPIC_NAME
from ..transaction.transaction_marker_channel_manager import TxnMarker
from .auth_helper import ALTER, CLUSTER_ACTION, NO_AUTHORIZER, AuthHelper
from .registry import handles

MARKER_TIMEOUT_MS = 30000       # Kafka waits request.timeout.ms for the markers' replication


class WriteTxnMarkersApi:
    def __init__(self, replica_manager, group_coordinator, clock, auth: AuthHelper = NO_AUTHORIZER):
        self.auth = auth
        self.replica_manager = replica_manager
        self.group_coordinator = group_coordinator
        self.clock = clock

    async def write_markers(self, markers: list[TxnMarker]) -> list[dict[tuple[str, int], int]]:
        """Write each marker to its partitions; per marker, {(topic, partition): error}."""
        return list(await asyncio.gather(*(self._write_one(m) for m in markers)))

    async def _write_one(self, marker: TxnMarker) -> dict[tuple[str, int], int]:
        errors: dict[tuple[str, int], int] = {}
        entries = []
        control = ControlRecordType.COMMIT if marker.committed else ControlRecordType.ABORT
        now = self.clock()
        for topic, index in marker.partitions:
            if self.replica_manager.get_partition(topic, index) is None:
                errors[(topic, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            entries.append((topic, index, bytearray(build_control_batch(
                control, producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
                coordinator_epoch=marker.coordinator_epoch, timestamp=now))))
        if entries:
            results = self.replica_manager.append_records(MARKER_TIMEOUT_MS, -1, entries, origin=COORDINATOR,
                                                          internal_topics_allowed=True)
            if isinstance(results, asyncio.Future):
                results = await results
            offsets_partitions = []
            for (topic, index, _), r in zip(entries, results):
                errors[(topic, index)] = r.error_code
                if topic == GROUP_METADATA_TOPIC_NAME and r.error_code == ErrorCode.NONE:
                    offsets_partitions.append(index)
            if offsets_partitions:
                self.group_coordinator.on_transaction_completed(marker.producer_id, offsets_partitions,
                                                                marker.committed)
        return errors

    @handles(27, 0, 2)
    async def handle_write_txn_markers(self, request):
        req = request.body
        v2 = request.api_version >= 2
        markers = [TxnMarker(m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch,
                             tuple((t.name, p) for t in m.topics for p in t.partition_indexes),
                             m.transaction_version if v2 else 0) for m in req.markers]
        if self.auth.authorize_cluster(request, ALTER) or self.auth.authorize_cluster(request, CLUSTER_ACTION):
            results = await self.write_markers(markers)
        else:
            results = [{tp: ErrorCode.CLUSTER_AUTHORIZATION_FAILED for tp in m.partitions} for m in markers]
        out = []
        for m, errors in zip(req.markers, results):
            topics = [WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(name=t.name, partitions=[
                WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(partition_index=p,
                                                                         error_code=errors[(t.name, p)])
                for p in t.partition_indexes]) for t in m.topics]
            out.append(WriteTxnMarkersResponse.WritableTxnMarkerResult(producer_id=m.producer_id, topics=topics))
        return WriteTxnMarkersResponse(markers=out)
