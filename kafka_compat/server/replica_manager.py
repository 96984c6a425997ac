"""ReplicaManager: the partitions this broker hosts and the one path to their logs.

As Kafka's ReplicaManager: `append_records` for Produce and the coordinators'
own writes, `fetch_messages` for consumers and followers, `delete_records`,
`fetch_offset_for_timestamp` and `last_offset_for_leader_epoch` for the offset
APIs, and `become_leader_or_follower` / `stop_replicas` for whoever decides
leadership (the local controller of a single node, LeaderAndIsr in a cluster).
Nothing else touches a UnifiedLog. acks=-1 produces wait in the produce
purgatory and long-poll fetches in the fetch purgatory; an append wakes both.
The high watermark of every partition is checkpointed to each log dir's
`replication-offset-checkpoint` off the event loop.
"""
from __future__ import annotations

import asyncio
import logging
import os
from typing import Callable

from kafka_compat.storage import checkpoint
from kafka_compat.storage.log_config import LogConfig
from kafka_compat.storage.log_manager import LogManager
from kafka_compat.storage.scheduler import Scheduler
from kafka_compat.storage.unified_log import FetchIsolation
from kafka_compat.storage.validator import CLIENT

from ..protocol.errors import ErrorCode, KafkaError
from ..purgatory import DelayedOperationPurgatory
from .delayed_fetch import DelayedFetch, FetchParams, PartitionFetchInfo
from .delayed_produce import DelayedProduce, ProduceResult
from .metadata_cache import INTERNAL_TOPICS, PartitionState
from .partition import LogReadResult, Partition

log = logging.getLogger(__name__)

__all__ = ["ReplicaManager", "FetchParams", "PartitionFetchInfo", "ProduceResult", "LogReadResult"]


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager, topic_config: Callable[[str], LogConfig], *,
                 hw_checkpoint_interval_ms: int = 5000, fetch_purge_interval: int = 1000,
                 produce_purge_interval: int = 1000):
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.topic_config = topic_config
        self.hw_checkpoint_interval_ms = hw_checkpoint_interval_ms
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.controller_epoch = 0
        self._fetch_purge_interval = fetch_purge_interval
        self._produce_purge_interval = produce_purge_interval
        self.fetch_purgatory: DelayedOperationPurgatory | None = None
        self.produce_purgatory: DelayedOperationPurgatory | None = None
        self._hw_checkpoints: dict[tuple[str, int], int] = {}
        self._scheduler = Scheduler("kafka-highwatermark-checkpoint")

    # -- lifecycle ---------------------------------------------------------------------------
    def startup(self) -> None:
        """On the event loop: the purgatories, the high watermarks checkpointed last time, the checkpoint task."""
        loop = asyncio.get_running_loop()
        self.fetch_purgatory = DelayedOperationPurgatory("Fetch", broker_id=self.broker_id, loop=loop,
                                                         purge_interval=self._fetch_purge_interval)
        self.produce_purgatory = DelayedOperationPurgatory("Produce", broker_id=self.broker_id, loop=loop,
                                                           purge_interval=self._produce_purge_interval)
        for directory in self.log_manager.log_dirs:
            self._hw_checkpoints.update(
                checkpoint.read_offsets(os.path.join(directory, checkpoint.REPLICATION_OFFSET_CHECKPOINT)))
        self._scheduler.schedule("highwatermark-checkpoint", self.checkpoint_high_watermarks,
                                 self.hw_checkpoint_interval_ms, self.hw_checkpoint_interval_ms)

    def shutdown(self) -> None:
        """Stop the checkpoint task and write the high watermarks one last time (before the logs close)."""
        self._scheduler.shutdown()
        self.checkpoint_high_watermarks()
        for purgatory in (self.fetch_purgatory, self.produce_purgatory):
            if purgatory is not None:
                purgatory.shutdown()

    def checkpoint_high_watermarks(self) -> None:
        """Kafka's checkpointHighWatermarks: every hosted partition's HW, per log dir (worker thread)."""
        by_dir: dict[str, dict[tuple[str, int], int]] = {d: {} for d in self.log_manager.log_dirs}
        for key, partition in list(self.partitions.items()):
            parent = os.path.dirname(partition.log_dir)
            if parent in by_dir:
                by_dir[parent][key] = partition.high_watermark
        for directory, offsets in by_dir.items():
            try:
                checkpoint.write_offsets(os.path.join(directory, checkpoint.REPLICATION_OFFSET_CHECKPOINT), offsets)
            except OSError as e:
                log.error("cannot write the high watermark checkpoint in %s: %s", directory, e)

    # -- partitions ------------------------------------------------------------------------------
    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def get_partition_or_error(self, topic: str, index: int) -> tuple[Partition | None, int]:
        partition = self.partitions.get((topic, index))
        if partition is None:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return partition, ErrorCode.NONE

    def become_leader_or_follower(self, topic: str, topic_id: bytes, states: dict[int, PartitionState]
                                  ) -> dict[int, int]:
        """Apply leadership for partitions of one topic (LeaderAndIsr); per-partition errors.

        Logs are created (or found, after a restart) here; a log's high watermark starts
        from the checkpoint. Returns {partition: error}; leaders start serving at once.
        """
        errors = {}
        for index, state in states.items():
            partition = self.partitions.get((topic, index))
            if partition is None:
                if self.broker_id not in state.replicas:
                    errors[index] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                log_ = self.log_manager.get_or_create_log(topic, index, self.topic_config(topic))
                hw = self._hw_checkpoints.pop((topic, index), None)
                if hw is not None:
                    log_.update_high_watermark(hw)
                partition = Partition(topic, index, topic_id, self.broker_id, log_,
                                      on_high_watermark_moved=self._complete_delayed)
                self.partitions[(topic, index)] = partition
            elif state.leader_epoch < partition.leader_epoch:
                errors[index] = ErrorCode.STALE_CONTROLLER_EPOCH
                continue
            if state.leader == self.broker_id:
                partition.make_leader(state)
            else:
                partition.make_follower(state)
            errors[index] = ErrorCode.NONE
            self._complete_delayed(partition.key)
        return errors

    def stop_replicas(self, topic: str, indexes, delete: bool) -> None:
        """StopReplica: stop hosting; with ``delete`` the logs go too (topic deletion)."""
        for index in indexes:
            partition = self.partitions.pop((topic, index), None)
            if partition is None:
                continue
            if delete:
                self.log_manager.delete_log(topic, index)
            self._complete_delayed(partition.key)

    def topic_config_changed(self, topic: str) -> None:
        self.log_manager.update_config(topic, self.topic_config(topic))

    def _complete_delayed(self, key) -> None:
        """Leadership changed or data moved: waiting operations on ``key`` re-check themselves."""
        if self.produce_purgatory is not None:
            self.produce_purgatory.check_and_complete(key)
            self.fetch_purgatory.check_and_complete(key)

    # -- produce -----------------------------------------------------------------------------------
    def append_records(self, timeout_ms: int, required_acks: int, entries: list, *, origin: str = CLIENT,
                       internal_topics_allowed: bool = False):
        """Append each (topic, partition, records) of ``entries`` as leader.

        Returns the ProduceResults in entry order, or (acks=-1 whose replicas have not all
        caught up) a future of them. acks must already be -1, 0 or 1.
        """
        results = [self._append_to_leader(topic, index, records, origin, required_acks, internal_topics_allowed)
                   for topic, index, records in entries]
        if required_acks != -1:
            return results
        op = DelayedProduce(timeout_ms, self, entries, results)
        if self.produce_purgatory.try_complete_else_watch(
                op, [(topic, index) for topic, index, _ in entries]):
            return results
        op.future = asyncio.get_running_loop().create_future()
        return op.future

    def _append_to_leader(self, topic: str, index: int, records, origin: str, required_acks: int,
                          internal_topics_allowed: bool) -> ProduceResult:
        if topic in INTERNAL_TOPICS and not internal_topics_allowed:
            return ProduceResult(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                 error_message=f"Cannot append to internal topic {topic}")
        partition = self.partitions.get((topic, index))
        if partition is None:
            return ProduceResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        try:
            info, hw_moved = partition.append_records_to_leader(records, origin, required_acks)
        except KafkaError as e:
            return ProduceResult(e.error_code, record_errors=e.record_errors, error_message=str(e) or None)
        key = partition.key
        if hw_moved:
            self.produce_purgatory.check_and_complete(key)
        self.fetch_purgatory.check_and_complete(key)
        return ProduceResult(ErrorCode.NONE, info.first_offset, info.log_append_time, info.log_start_offset,
                             required_offset=info.last_offset + 1)

    def has_ongoing_transaction(self, topic: str, index: int, producer_id: int) -> bool:
        partition = self.partitions.get((topic, index))
        return partition is not None and partition.has_ongoing_transaction(producer_id)

    # -- fetch -------------------------------------------------------------------------------------
    def fetch_messages(self, params: FetchParams, fetches: list):
        """Read each (topic, partition, PartitionFetchInfo); wait in the purgatory for MinBytes.

        Returns the LogReadResults in order, or a future of them. Kafka answers at once
        when the wait is 0, nothing was asked, MinBytes is there, or any partition has an
        error or a diverging epoch.
        """
        results = self.read_from_local_log(params, fetches)
        if params.max_wait_ms <= 0 or not fetches or params.min_bytes <= 0:
            return results
        total = 0
        for r in results:
            if r.error_code or r.diverging_epoch is not None:
                return results
            total += r.info.records.size
        if total >= params.min_bytes:
            return results
        op = DelayedFetch(params.max_wait_ms, self, params, fetches,
                          [r.info.fetch_offset_metadata for r in results])
        if self.fetch_purgatory.try_complete_else_watch(op, [(t, p) for t, p, _ in fetches]):
            return self.read_from_local_log(params, fetches)
        op.future = asyncio.get_running_loop().create_future()
        return op.future

    def read_from_local_log(self, params: FetchParams, fetches: list) -> list[LogReadResult]:
        """One read per partition, the response's byte budget shared in request order."""
        remaining = params.max_bytes
        isolation = params.isolation
        out = []
        for topic, index, info in fetches:
            partition = self.partitions.get((topic, index))
            if partition is None:
                out.append(LogReadResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, -1, -1, -1, -1))
                continue
            min_one = params.min_one_message_always or remaining == params.max_bytes
            result = partition.fetch_records(params.replica_id, info.fetch_offset,
                                             max(min(info.max_bytes, remaining), 0), isolation,
                                             info.current_leader_epoch, info.last_fetched_epoch, min_one,
                                             info.log_start_offset)
            if result.info is not None:
                remaining -= result.info.records.size
            out.append(result)
        return out

    # -- reads for coordinators (loading __consumer_offsets, __transaction_state) ---------------
    def read_local(self, topic: str, index: int, offset: int, max_bytes: int,
                   isolation: FetchIsolation = FetchIsolation.LOG_END):
        """Whatever this broker holds of a partition, leader or not (safe from a worker thread)."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return partition.log.read(offset, max_bytes, isolation, True)

    def log_offsets(self, topic: str, index: int) -> tuple[int, int]:
        """(log start offset, log end offset) of a hosted partition."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return partition.log_start_offset, partition.log_end_offset

    # -- offsets ------------------------------------------------------------------------------------
    def fetch_offset_for_timestamp(self, topic: str, index: int, timestamp: int, isolation: FetchIsolation,
                                   current_leader_epoch: int = -1, fetch_only_from_leader: bool = True):
        partition = self.partitions.get((topic, index))
        if partition is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        return partition.fetch_offset_for_timestamp(timestamp, isolation, current_leader_epoch,
                                                    fetch_only_from_leader)

    def last_offset_for_leader_epoch(self, topic: str, index: int, current_leader_epoch: int, leader_epoch: int,
                                     fetch_only_from_leader: bool = True):
        partition = self.partitions.get((topic, index))
        if partition is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
        return partition.last_offset_for_leader_epoch(current_leader_epoch, leader_epoch, fetch_only_from_leader)

    def delete_records(self, offsets: list) -> list[tuple[int, int]]:
        """DeleteRecords for each (topic, partition, offset): (error, low watermark) in order."""
        out = []
        for topic, index, offset in offsets:
            partition = self.partitions.get((topic, index))
            if partition is None:
                out.append((ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1))
                continue
            try:
                out.append((ErrorCode.NONE, partition.delete_records_on_leader(offset)))
            except KafkaError as e:
                out.append((e.error_code, -1))
        return out

    # -- descriptions -------------------------------------------------------------------------------
    def log_dir_sizes(self) -> dict[str, dict[tuple[str, int], int]]:
        """DescribeLogDirs: {log dir: {(topic, partition): size in bytes}}."""
        out: dict[str, dict[tuple[str, int], int]] = {d: {} for d in self.log_manager.log_dirs}
        for key, partition in list(self.partitions.items()):
            parent = os.path.dirname(partition.log_dir)
            if parent in out:
                out[parent][key] = partition.log_size
        return out
