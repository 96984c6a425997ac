"""The share coordinator (KIP-932; Kafka's ShareCoordinatorService and its runtime): durable
share-partition state in `__share_group_state`, on a single node and in a cluster alike. What each request
does to a key's state, and the records, are the shard's (share_coordinator_shard.py).

The coordinator serves the keys of the `__share_group_state` partitions this broker leads: a partition
is replayed when this broker becomes its leader (`on_election`, from LeaderAndIsr in a cluster, at
start-up on a single node) and forgotten when it stops (`on_resignation`), leader epochs ordering the
two as in the group coordinator's runtime. Meanwhile its keys get COORDINATOR_LOAD_IN_PROGRESS, keys of
partitions led elsewhere NOT_COORDINATOR, everything COORDINATOR_NOT_AVAILABLE before start-up, and an
empty group id no results at all. Records are appended with acks=-1 and replayed into memory at once
(the log's order is the order of the calls); an answer waits for the append to be replicated, and an
append's error becomes what Kafka's CoordinatorOperationExceptionHelper makes of it.

The topic is created on first use (FindCoordinator with key type SHARE, or the first persister call) as
Kafka creates it: cleanup.policy=delete with retention.ms=-1 (KIP-932's choice, not compaction),
share.coordinator.state.topic.* for partitions, replication factor, segment size and min ISR. Not yet:
Kafka's pruning of records every later snapshot made redundant, and its cold-partition snapshots.
"""
from __future__ import annotations

import asyncio
import inspect
import logging

from kafka_compat.storage.validator import COORDINATOR

from ...clock import now_ms
from ...group.coordinator_runtime import PartitionLoads
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.delete_share_group_state import DeleteShareGroupStateResponse
from ...protocol.messages.initialize_share_group_state import InitializeShareGroupStateResponse
from ...protocol.messages.read_share_group_state import ReadShareGroupStateResponse
from ...protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryResponse
from ...protocol.messages.write_share_group_state import WriteShareGroupStateResponse
from ...protocol.records import batches, build_batch
from ...sentinels import SHARE_GROUP_STATE_TOPIC_NAME
from .share_coordinator_shard import ShareCoordinatorShard, parse_coordinator_key, partition_for

log = logging.getLogger(__name__)
E = ErrorCode
SHARE_GROUP_STATE_TOPIC = SHARE_GROUP_STATE_TOPIC_NAME
# what an append's error becomes for the caller (Kafka's CoordinatorOperationExceptionHelper)
_APPEND_ERRORS = {E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
                  E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
                  E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
                  E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
                  E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR, E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
                  E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR, E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR}


class ShareCoordinator(PartitionLoads):
    """The share coordinator of this broker: a shard over the `__share_group_state` partitions it leads,
    and the answers to the share-state RPCs (83-87), which the handlers and the persister both use."""
    topic_name = SHARE_GROUP_STATE_TOPIC_NAME

    def __init__(self, config, replica_manager, metadata_cache, controller, replication_factor: int = 1,
                 clock=now_ms):
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.controller = controller
        self.num_partitions = config["share.coordinator.state.topic.num.partitions"]
        self.replication_factor = replication_factor
        self.segment_bytes = config["share.coordinator.state.topic.segment.bytes"]
        self.min_isr = config["share.coordinator.state.topic.min.isr"]
        self.write_timeout_ms = config["share.coordinator.write.timeout.ms"]
        self.load_buffer_size = config["share.coordinator.load.buffer.size"]
        self.shard = ShareCoordinatorShard(config["share.coordinator.snapshot.update.records.per.snapshot"], clock)
        self.active = False
        self._init_loads()
        self._creating: asyncio.Future | None = None

    # ------------------------------------------------------------ the topic
    def topic_exists(self) -> bool:
        return self.metadata_cache.get_topic(SHARE_GROUP_STATE_TOPIC) is not None

    def ensure_topic(self) -> bool:
        """Create `__share_group_state` if it is missing; False while it is not there yet."""
        if self.topic_exists():
            return True
        if self._creating is not None and not self._creating.done():
            return False
        configs = {"cleanup.policy": "delete", "compression.type": "producer", "retention.ms": "-1",
                   "segment.bytes": str(self.segment_bytes), "min.insync.replicas": str(self.min_isr)}
        try:
            created = self.controller.create_topic(SHARE_GROUP_STATE_TOPIC, self.num_partitions,
                                                   self.replication_factor, configs)
        except KafkaError as e:
            log.error("cannot create %s: %s", SHARE_GROUP_STATE_TOPIC, e)
            return False
        except Exception:
            log.exception("cannot create %s", SHARE_GROUP_STATE_TOPIC)
            return False
        if inspect.isawaitable(created):       # a cluster: the leaders arrive by LeaderAndIsr
            self._creating = asyncio.ensure_future(created)
            self._creating.add_done_callback(_creation_done)
            return False
        log.info("created %s with %d partitions", SHARE_GROUP_STATE_TOPIC, self.num_partitions)
        for index in self.led_partitions():      # a single node leads them all, empty: nothing to load
            self.owned.add(index)
        return self.topic_exists()

    def partition_for(self, group_id: str, topic_id: bytes, partition: int) -> int:
        return partition_for(group_id, topic_id, partition, self.num_partitions)

    def find_coordinator(self, key: str) -> tuple[int, int]:
        """(error, broker id) of the share coordinator of a "group:topicId:partition" key."""
        group_id, topic_id, partition = parse_coordinator_key(key)
        if not self.active or not self.ensure_topic():
            return E.COORDINATOR_NOT_AVAILABLE, -1
        state = self.metadata_cache.partition_state(SHARE_GROUP_STATE_TOPIC,
                                                    self.partition_for(group_id, topic_id, partition))
        if state is None or state.leader < 0 or not self.metadata_cache.is_alive(state.leader):
            return E.COORDINATOR_NOT_AVAILABLE, -1
        return E.NONE, state.leader

    # ------------------------------------------------------------ loading and unloading
    def led_partitions(self) -> list[int]:
        topic = self.metadata_cache.get_topic(SHARE_GROUP_STATE_TOPIC)
        if topic is None:
            return []
        self.num_partitions = topic.partitions
        return [i for i in range(topic.partitions)
                if (p := self.replica_manager.get_partition(SHARE_GROUP_STATE_TOPIC, i)) is not None and p.is_leader]

    async def startup(self, elect_locally: bool) -> None:
        """``elect_locally``: a single node, which leads every partition of the topic: load them all now."""
        self.active = True
        if elect_locally:
            for index in self.led_partitions():
                self.on_election(index)
            await self.wait_loaded()

    def on_election(self, index: int, leader_epoch: int = -1) -> None:
        topic = self.metadata_cache.get_topic(SHARE_GROUP_STATE_TOPIC)
        if topic is not None:
            self.num_partitions = topic.partitions
        self._start_load(index, leader_epoch, lambda: self._load(index))

    def on_resignation(self, index: int, leader_epoch: int = -1) -> None:
        if self._resign(index, leader_epoch):
            self.shard.forget(lambda k: self.partition_for(*k) != index)
            log.info("unloaded %s-%d", SHARE_GROUP_STATE_TOPIC, index)

    def _read_partition(self, index: int) -> list:
        """Every (key, value) of one partition in log order (a worker thread; it only reads)."""
        out = []
        position, end = self.replica_manager.log_offsets(SHARE_GROUP_STATE_TOPIC, index)
        while position < end:
            data = self.replica_manager.read_local(SHARE_GROUP_STATE_TOPIC, index, position,
                                                   self.load_buffer_size).records.read_bytes()
            if not data:
                break
            for batch in batches(data):
                for record in batch.records():
                    if record.key is not None:
                        out.append((bytes(record.key), None if record.value is None else bytes(record.value)))
                position = batch.last_offset + 1
        return out

    async def _load(self, index: int) -> None:
        if self.replica_manager.get_partition(SHARE_GROUP_STATE_TOPIC, index) is None:
            return
        records = await asyncio.to_thread(self._read_partition, index)
        self.shard.forget(lambda k: self.partition_for(*k) != index)
        for key, value in records:
            self.shard.replay(key, value)
        log.info("loaded %s-%d (%d records)", SHARE_GROUP_STATE_TOPIC, index, len(records))

    async def shutdown(self) -> None:
        self.active = False
        await self._stop_loads()

    # ------------------------------------------------------------ serving a key
    def _not_served(self, k) -> int | None:
        """COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR, else None."""
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE
        index = self.partition_for(*k)
        if index in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if index not in self.owned and (self.topic_exists() or not self.ensure_topic() or index not in self.owned):
            return E.NOT_COORDINATOR
        return None

    def _unknown_partition(self, topic_id: bytes, partition: int) -> bool:
        topic = self.metadata_cache.topic_by_id(topic_id)
        return topic is None or partition >= topic.partitions

    async def _append(self, k, records: list) -> int:
        """Replay ``records`` of key ``k`` and append them with acks=-1; the error once replicated."""
        if not records:
            return E.NONE
        for key, value in records:
            self.shard.replay(key, value)
        index = self.partition_for(*k)
        results = self.replica_manager.append_records(
            self.write_timeout_ms, -1, [(SHARE_GROUP_STATE_TOPIC, index, bytearray(build_batch(records)))],
            origin=COORDINATOR, internal_topics_allowed=True)
        if isinstance(results, asyncio.Future):
            try:
                results = await results
            except Exception:
                return E.COORDINATOR_NOT_AVAILABLE
        error = results[0].error_code
        if error:
            log.warning("appending to %s-%d failed: %s", SHARE_GROUP_STATE_TOPIC, index, E(error).name)
        return _APPEND_ERRORS.get(error, error)

    async def _each(self, req, apply):
        """``apply(key, topic id, partition data)`` for every partition of the request (a coroutine or not)
        once it is served here; [(topic id, [(partition data, result)])]."""
        out: list = []
        if not req.group_id:        # Kafka answers an empty group id with no results at all
            return out
        for topic in req.topics:
            results = []
            for p in topic.partitions:
                k = (req.group_id, bytes(topic.topic_id), p.partition)
                error = self._not_served(k)
                if error is None and p.partition < 0:
                    error = E.INVALID_REQUEST
                if error is not None:
                    results.append((p, (error, None)))
                    continue
                result = apply(k, topic.topic_id, p)
                results.append((p, await result if inspect.isawaitable(result) else result))
            out.append((topic.topic_id, results))
        return out

    async def _write_op(self, k, records, error, message):
        if error == E.NONE:
            error = await self._append(k, records)
            message = None if error == E.NONE else E(error).message
        return error, message

    # ------------------------------------------------------------ the RPCs
    async def initialize_state(self, req) -> InitializeShareGroupStateResponse:
        R = InitializeShareGroupStateResponse

        def apply(k, topic_id, p):
            if self._unknown_partition(topic_id, p.partition):
                return E.UNKNOWN_TOPIC_OR_PARTITION, None
            return self._write_op(k, *self.shard.initialize_state(k, p.state_epoch, p.start_offset))
        return R(results=[R.InitializeStateResult(topic_id=tid, partitions=[
            R.PartitionResult(partition=p.partition, error_code=e, error_message=_message(e, m))
            for p, (e, m) in results]) for tid, results in await self._each(req, apply)])

    async def write_state(self, req, version: int = 1) -> WriteShareGroupStateResponse:
        R = WriteShareGroupStateResponse

        def apply(k, topic_id, p):
            records, error, message = self.shard.write_state(
                k, p.state_epoch, p.leader_epoch, p.start_offset, p.delivery_complete_count if version >= 1 else -1,
                [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches])
            if error == E.NONE and self._unknown_partition(topic_id, p.partition):
                return E.UNKNOWN_TOPIC_OR_PARTITION, None
            return self._write_op(k, records, error, message)
        return R(results=[R.WriteStateResult(topic_id=tid, partitions=[
            R.PartitionResult(partition=p.partition, error_code=e, error_message=_message(e, m))
            for p, (e, m) in results]) for tid, results in await self._each(req, apply)])

    async def read_state(self, req) -> ReadShareGroupStateResponse:
        R = ReadShareGroupStateResponse

        async def apply(k, topic_id, p):
            records, error, message, state = self.shard.read_state(k, p.leader_epoch)
            if error == E.NONE and self._unknown_partition(topic_id, p.partition):
                return E.UNKNOWN_TOPIC_OR_PARTITION, None
            error, message = await self._write_op(k, records, error, message)
            return (error, message) if error else (error, state)

        def result(p, e, m):
            state = m if e == E.NONE else None
            return R.PartitionResult(
                partition=p.partition, error_code=e, error_message=None if state else _message(e, m),
                state_epoch=state.state_epoch if state else 0, start_offset=state.start_offset if state else 0,
                state_batches=[] if not state else [R.StateBatch(first_offset=f, last_offset=last, delivery_state=s,
                                                                 delivery_count=c) for f, last, s, c in state.batches])
        return R(results=[R.ReadStateResult(topic_id=tid, partitions=[
            result(p, e, m) for p, (e, m) in results]) for tid, results in await self._each(req, apply)])

    async def read_state_summary(self, req, version: int = 1) -> ReadShareGroupStateSummaryResponse:
        R = ReadShareGroupStateSummaryResponse

        def apply(k, topic_id, p):
            if self._unknown_partition(topic_id, p.partition):
                return E.UNKNOWN_TOPIC_OR_PARTITION, None
            return E.NONE, self.shard.read_summary(k)

        def result(p, e, state):
            if e:
                return R.PartitionResult(partition=p.partition, error_code=e, error_message=E(e).message,
                                         state_epoch=0, leader_epoch=0, start_offset=0)
            if state is None:       # never initialized: Kafka's PartitionFactory defaults
                return R.PartitionResult(partition=p.partition, error_code=E.NONE, state_epoch=0, leader_epoch=-1,
                                         start_offset=-1, delivery_complete_count=-1)
            return R.PartitionResult(partition=p.partition, error_code=E.NONE, state_epoch=state.state_epoch,
                                     leader_epoch=state.leader_epoch, start_offset=state.start_offset,
                                     delivery_complete_count=state.delivery_complete_count)
        return R(results=[R.ReadStateSummaryResult(topic_id=tid, partitions=[
            result(p, e, s) for p, (e, s) in results]) for tid, results in await self._each(req, apply)])

    async def delete_state(self, req) -> DeleteShareGroupStateResponse:
        R = DeleteShareGroupStateResponse

        def apply(k, topic_id, p):
            if self._unknown_partition(topic_id, p.partition) and k not in self.shard.states:
                return E.UNKNOWN_TOPIC_OR_PARTITION, None
            return self._write_op(k, *self.shard.delete_state(k))
        return R(results=[R.DeleteStateResult(topic_id=tid, partitions=[
            R.PartitionResult(partition=p.partition, error_code=e, error_message=_message(e, m))
            for p, (e, m) in results]) for tid, results in await self._each(req, apply)])


def _message(error: int, message) -> str | None:
    if error == E.NONE:
        return None
    return message if isinstance(message, str) else E(error).message


def _creation_done(future: asyncio.Future) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("cannot create %s: %s", SHARE_GROUP_STATE_TOPIC, future.exception())


__all__ = ["SHARE_GROUP_STATE_TOPIC", "ShareCoordinator"]
