"""GroupMetadataManager: the group cache and its backing store, the `__consumer_offsets` topic.

Every committed offset and every completed rebalance is appended to the
partition `partition_for(group_id)` of the compacted internal topic, keyed as
Kafka keys it, so that the log cleaner keeps only the latest value per key. The
coordinator answers from the in-memory cache. A partition of the topic is read
when this broker becomes its leader (`on_election`; at startup for those it
already leads); a group whose partition is still loading gets
COORDINATOR_LOAD_IN_PROGRESS, and one whose partition is led elsewhere
NOT_COORDINATOR. When leadership moves away (`on_resignation`) its groups and
offsets leave the cache.

The topic is created on first use (FindCoordinator, or the first write) with
`offsets.topic.num.partitions` partitions, `cleanup.policy=compact` and the
replication factor the composition root gives (offsets.topic.replication.factor
in a cluster, where creation fails until that many brokers are alive).
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Callable

from kafka_compat.storage.validator import COORDINATOR

from ..protocol.errors import ErrorCode
from ..protocol.messages.consumer_offsets import GroupMetadataValue
from ..protocol.records import ControlRecordType, batches, build_batch, control_record_type
from .coordinator_records import (
    GROUP_METADATA_TOPIC_NAME,
    GroupKey,
    OffsetAndMetadata,
    OffsetKey,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
    partition_for,
    read_group_value,
    read_key,
    read_offset_value,
)
from .group import ClassicGroup, GroupState, now_ms
from .member import MemberMetadata

log = logging.getLogger(__name__)

# How append failures reach clients (Kafka's GroupMetadataManager conversions).
_STORE_GROUP_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.REBALANCE_IN_PROGRESS,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
}
_STORE_OFFSET_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


def group_to_value(group: ClassicGroup, assignment: dict[str, bytes]) -> GroupMetadataValue:
    protocol = group.protocol_name
    members = [GroupMetadataValue.MemberMetadata(
        member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
        client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
        subscription=m.metadata(protocol), assignment=assignment[m.member_id]) for m in group.members.values()]
    return GroupMetadataValue(protocol_type=group.protocol_type or "", generation=group.generation_id,
                              protocol=protocol, leader=group.leader_id,
                              current_state_timestamp=group.state_timestamp if group.state_timestamp is not None
                              else -1, members=members)


def group_from_value(group_id: str, version: int, v: GroupMetadataValue) -> ClassicGroup:
    """A group as it was at its last stored rebalance: Stable with its members, or Empty."""
    group = ClassicGroup(group_id, GroupState.STABLE if v.members else GroupState.EMPTY)
    group.protocol_type = v.protocol_type or None
    group.generation_id = v.generation
    group.protocol_name = v.protocol
    group.leader_id = v.leader
    group.state_timestamp = v.current_state_timestamp if v.current_state_timestamp >= 0 else None
    for m in v.members:
        member = MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                m.session_timeout if version == 0 else m.rebalance_timeout, m.session_timeout,
                                group.protocol_type or "", [(v.protocol, bytes(m.subscription))])
        member.assignment = bytes(m.assignment)
        group.add(member)
    group.subscribed_topics = group.compute_subscribed_topics()
    return group


def read_offsets_partition(replica_manager, index: int, load_buffer_size: int):
    """Replay one `__consumer_offsets` partition: the latest offset per key and value per group.

    Runs in a worker thread; it only reads, through the ReplicaManager. Transactional
    offset commits count once their COMMIT marker is seen, as in Kafka.
    """
    offsets: dict[OffsetKey, OffsetAndMetadata] = {}
    groups: dict[str, tuple[int, GroupMetadataValue] | None] = {}
    pending: dict[int, dict[OffsetKey, OffsetAndMetadata | None]] = {}
    position, end = replica_manager.log_offsets(GROUP_METADATA_TOPIC_NAME, index)
    while position < end:
        data = replica_manager.read_local(GROUP_METADATA_TOPIC_NAME, index, position,
                                          load_buffer_size).records.read_bytes()
        if not data:
            break
        for batch in batches(data):
            control = getattr(batch, "is_control", False)
            txn = getattr(batch, "is_transactional", False)
            for record in batch.records():
                if control:
                    kind = control_record_type(record.key)
                    committed = pending.pop(batch.producer_id, {})
                    if kind == ControlRecordType.COMMIT:
                        for k, o in committed.items():
                            if o is None:
                                offsets.pop(k, None)
                            else:
                                offsets[k] = o
                    continue
                if record.key is None:
                    continue
                key = read_key(record.key)
                if isinstance(key, OffsetKey):
                    value = None if record.value is None else read_offset_value(record.value)
                    if txn:
                        pending.setdefault(batch.producer_id, {})[key] = value
                    elif value is None:
                        offsets.pop(key, None)
                    else:
                        offsets[key] = value
                elif isinstance(key, GroupKey):
                    groups[key.group] = None if record.value is None else read_group_value(record.value)
            position = batch.next_offset if hasattr(batch, "next_offset") else batch.last_offset + 1
    return offsets, groups, pending


class GroupMetadataManager:
    def __init__(self, config, replica_manager, metadata_cache, controller, clock: Callable[[], int] = now_ms,
                 offsets_replication_factor: int = 1):
        cfg = config
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.controller = controller            # creates the topic on first use
        self.commit_timeout_ms = cfg["offsets.commit.timeout.ms"]
        self.clock = clock
        self.groups: dict[str, ClassicGroup] = {}
        self.loading: set[int] = set()
        self.owned: set[int] = set()            # partitions led here and loaded: their groups are ours
        self._load_tasks: dict[int, asyncio.Task] = {}
        self._creating: asyncio.Future | None = None
        self.offsets_replication_factor = offsets_replication_factor
        self.num_partitions = cfg["offsets.topic.num.partitions"]
        self.metadata_max_bytes = cfg["offset.metadata.max.bytes"]
        self.load_buffer_size = cfg["offsets.load.buffer.size"]
        self.compression = cfg["offsets.topic.compression.codec"]
        self.segment_bytes = cfg["offsets.topic.segment.bytes"]
        self.retention_ms = cfg["offsets.retention.minutes"] * 60 * 1000
        self._partition_of: dict[str, int] = {}
        self.open_txn_groups: dict[int, set[str]] = {}     # producer id -> groups with its pending offsets
        self.load_task: asyncio.Task | None = None

    # ------------------------------------------------------------ partitions
    def partition_for(self, group_id: str) -> int:
        p = self._partition_of.get(group_id)
        if p is None:
            p = self._partition_of[group_id] = partition_for(group_id, self.num_partitions)
        return p

    def is_group_loading(self, group_id: str) -> bool:
        return bool(self.loading) and self.partition_for(group_id) in self.loading

    def is_group_local(self, group_id: str) -> bool:
        """Kafka's isGroupLocal: the group's partition is led here and loaded."""
        return self.partition_for(group_id) in self.owned

    @property
    def is_loading(self) -> bool:
        return bool(self.loading)

    def topic_exists(self) -> bool:
        return self.metadata_cache.get_topic(GROUP_METADATA_TOPIC_NAME) is not None

    def ensure_topic(self) -> bool:
        """Create `__consumer_offsets` if it is missing (Kafka does on FindCoordinator); False if it is not
        there yet (it cannot be created now, or a cluster's controller is still creating it)."""
        if self.topic_exists():
            return True
        if self._creating is not None and not self._creating.done():
            return False
        configs = {"cleanup.policy": "compact", "compression.type": "producer",
                   "segment.bytes": str(self.segment_bytes)}
        try:
            created = self.controller.create_topic(GROUP_METADATA_TOPIC_NAME, self.num_partitions,
                                                   self.offsets_replication_factor, configs)
        except Exception as e:
            log.warning("cannot create %s: %s", GROUP_METADATA_TOPIC_NAME, e)
            return False
        if inspect.isawaitable(created):       # a cluster: the leaders arrive later, by LeaderAndIsr
            self._creating = asyncio.ensure_future(created)
            self._creating.add_done_callback(_creation_done)
            return False
        log.info("created %s with %d partitions", GROUP_METADATA_TOPIC_NAME, self.num_partitions)
        for index in range(self.num_partitions):      # a single node leads them all, empty: nothing to load
            partition = self.replica_manager.get_partition(GROUP_METADATA_TOPIC_NAME, index)
            if partition is not None and partition.is_leader:
                self.owned.add(index)
        return self.topic_exists()

    # ------------------------------------------------------------ cache
    def get_group(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def add_group(self, group: ClassicGroup) -> ClassicGroup:
        return self.groups.setdefault(group.group_id, group)

    def get_or_create_group(self, group_id: str, create: bool) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        if group is None and create:
            group = self.add_group(ClassicGroup(group_id))
        return group

    def group_not_exists(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is None or group.is_(GroupState.DEAD)

    # ------------------------------------------------------------ writing
    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]], callback,
                producer: tuple[int, int] | None = None) -> None:
        """Append to the group's partition with acks=-1; ``callback(error)`` once that is settled.
        ``producer``: (producer id, epoch) of a transactional offset commit."""
        if not self.ensure_topic():
            callback(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return
        if producer is None:
            batch = bytearray(build_batch(records, compression=self.compression))
        else:
            batch = bytearray(build_batch(records, compression=self.compression, producer_id=producer[0],
                                          producer_epoch=producer[1], base_sequence=0, is_transactional=True))
        index = self.partition_for(group_id)
        results = self.replica_manager.append_records(
            self.commit_timeout_ms, -1, [(GROUP_METADATA_TOPIC_NAME, index, batch)], origin=COORDINATOR,
            internal_topics_allowed=True)

        def settled(results) -> None:
            error = results[0].error_code
            if error:
                log.warning("appending to %s-%d failed: %s", GROUP_METADATA_TOPIC_NAME, index,
                            results[0].error_message or ErrorCode(error).name)
            callback(error)

        if isinstance(results, asyncio.Future):
            results.add_done_callback(lambda f: settled(f.result()) if not f.cancelled() and not f.exception()
                                      else callback(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        else:
            settled(results)

    def store_group(self, group: ClassicGroup, assignment: dict[str, bytes], callback) -> None:
        """Append the group's metadata with this assignment; ``callback(error a member should see)``."""
        value = group_metadata_value(group_to_value(group, assignment))
        self._append(group.group_id, [(group_metadata_key(group.group_id), value)],
                     lambda error: callback(_STORE_GROUP_ERRORS.get(error, error)))

    def _offset_records(self, group: ClassicGroup, offsets: dict[tuple[str, int], OffsetAndMetadata]):
        """(offsets to write, {partition: OFFSET_METADATA_TOO_LARGE} for the rest, their records)."""
        limit = self.metadata_max_bytes
        ok = {tp: o for tp, o in offsets.items() if o.metadata is None or len(o.metadata) <= limit}
        errors = {tp: ErrorCode.OFFSET_METADATA_TOO_LARGE for tp in offsets if tp not in ok}
        records = [(offset_commit_key(group.group_id, t, p), offset_commit_value(o)) for (t, p), o in ok.items()]
        return ok, errors, records

    def store_offsets(self, group: ClassicGroup, offsets: dict[tuple[str, int], OffsetAndMetadata],
                      callback) -> None:
        """Append the commits (one batch, so they land atomically), cache them once durable, then
        ``callback({(topic, partition): error})``."""
        ok, errors, records = self._offset_records(group, offsets)
        if not ok:
            callback(errors)
            return

        def stored(error: int) -> None:
            error = _STORE_OFFSET_ERRORS.get(error, error)
            if error == ErrorCode.NONE and not group.is_(GroupState.DEAD):
                group.offsets.update(ok)
            errors.update((tp, error) for tp in ok)
            callback(errors)

        self._append(group.group_id, records, stored)

    def store_txn_offsets(self, group: ClassicGroup, producer_id: int, producer_epoch: int,
                          offsets: dict[tuple[str, int], OffsetAndMetadata], callback) -> None:
        """TxnOffsetCommit: append the offsets as the producer's transactional batch; they stay pending
        (UNSTABLE_OFFSET_COMMIT to require_stable readers) until the transaction's marker."""
        ok, errors, records = self._offset_records(group, offsets)
        if not ok:
            callback(errors)
            return
        group.prepare_txn_offset_commit(producer_id, ok)
        self.open_txn_groups.setdefault(producer_id, set()).add(group.group_id)

        def stored(error: int) -> None:
            error = _STORE_OFFSET_ERRORS.get(error, error)
            if error != ErrorCode.NONE:
                group.fail_pending_txn_offset_commit(producer_id, ok)
            errors.update((tp, error) for tp in ok)
            callback(errors)

        self._append(group.group_id, records, stored, (producer_id, producer_epoch))

    def complete_txn(self, producer_id: int, offsets_partitions, committed: bool) -> None:
        """A marker reached these `__consumer_offsets` partitions: settle the producer's pending offsets there."""
        group_ids = self.open_txn_groups.get(producer_id)
        if not group_ids:
            return
        partitions = set(offsets_partitions)
        for group_id in list(group_ids):
            if self.partition_for(group_id) not in partitions:
                continue
            group_ids.discard(group_id)
            group = self.groups.get(group_id)
            if group is not None:
                group.complete_pending_txn_offset_commit(producer_id, committed)
        if not group_ids:
            del self.open_txn_groups[producer_id]

    def cleanup_group_metadata(self, groups, selector) -> int:
        """Remove offsets chosen by `selector(group)`; an empty group left without offsets dies.

        Tombstones go to the log so that compaction drops the keys; the group's own
        tombstone is written only if it ever stored metadata (generation > 0).
        """
        removed_total = 0
        for group in list(groups):
            group_id = group.group_id
            if self.is_group_loading(group_id):
                continue
            removed = selector(group)
            if group.is_(GroupState.EMPTY) and not group.offsets and not group.pending_txn_offsets:
                group.transition_to(GroupState.DEAD)
            tombstones = [(offset_commit_key(group_id, t, p), None) for (t, p) in removed]
            if group.is_(GroupState.DEAD) and self.groups.get(group_id) is group:
                del self.groups[group_id]
                if group.generation_id > 0:
                    tombstones.append((group_metadata_key(group_id), None))
            if tombstones and self.topic_exists():
                # As Kafka, not waiting for success: a lost tombstone is written again next round.
                self._append(group_id, tombstones, lambda error: None)
            removed_total += len(removed)
        return removed_total

    def expire_offsets(self) -> int:
        """The `offsets.retention.check.interval.ms` task."""
        now = self.clock()
        removed = self.cleanup_group_metadata(
            list(self.groups.values()), lambda g: g.remove_expired_offsets(now, self.retention_ms))
        if removed:
            log.info("removed %d expired offsets", removed)
        return removed

    # ------------------------------------------------------------ loading
    def schedule_load(self, on_group_loaded) -> None:
        """At startup: load every partition this broker already leads, in the background."""
        topic = self.metadata_cache.get_topic(GROUP_METADATA_TOPIC_NAME)
        if topic is None:
            return
        self.num_partitions = topic.partitions
        self._partition_of.clear()
        for i in range(topic.partitions):
            partition = self.replica_manager.get_partition(GROUP_METADATA_TOPIC_NAME, i)
            if partition is not None and partition.is_leader:
                self.on_election(i, on_group_loaded)

    def on_election(self, index: int, on_group_loaded) -> None:
        """This broker now leads offsets partition ``index``: replay it, then its groups are ours."""
        if index in self.loading:
            return
        topic = self.metadata_cache.get_topic(GROUP_METADATA_TOPIC_NAME)
        if topic is not None and topic.partitions != self.num_partitions:
            self.num_partitions = topic.partitions
            self._partition_of.clear()
        self.loading.add(index)
        task = asyncio.get_running_loop().create_task(self._load_one(index, on_group_loaded))
        self._load_tasks[index] = task

    async def _load_one(self, index: int, on_group_loaded) -> None:
        try:
            await self.load_partition(index, on_group_loaded)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed", GROUP_METADATA_TOPIC_NAME, index)
        finally:
            if self._load_tasks.get(index) is asyncio.current_task():
                del self._load_tasks[index]
                if index in self.loading:
                    self.loading.discard(index)
                    self.owned.add(index)

    async def wait_loaded(self) -> None:
        """Until every load scheduled so far has finished (tests, tools)."""
        while self._load_tasks:
            await asyncio.gather(*list(self._load_tasks.values()), return_exceptions=True)

    def on_resignation(self, index: int, on_group_unloaded) -> int:
        """Leadership of offsets partition ``index`` moved away: forget its groups and offsets (the new
        leader loads them). Returns how many groups were unloaded."""
        self.owned.discard(index)
        self.loading.discard(index)
        task = self._load_tasks.pop(index, None)
        if task is not None:
            task.cancel()
        gone = [g for g in self.groups.values() if self.partition_for(g.group_id) == index]
        for group in gone:
            del self.groups[group.group_id]
            on_group_unloaded(group)
        if gone:
            log.info("unloaded %d groups of %s-%d", len(gone), GROUP_METADATA_TOPIC_NAME, index)
        return len(gone)

    async def load_partition(self, index: int, on_group_loaded) -> None:
        if self.replica_manager.get_partition(GROUP_METADATA_TOPIC_NAME, index) is None:
            return
        offsets, groups, pending = await asyncio.to_thread(read_offsets_partition, self.replica_manager, index,
                                                           self.load_buffer_size)
        by_group: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
        for key, o in offsets.items():
            by_group.setdefault(key.group, {})[(key.topic, key.partition)] = o
        loaded = []
        for group_id, value in groups.items():
            if value is not None:
                loaded.append(group_from_value(group_id, *value))
        # transactions still open at the end of the log: their offsets wait for the marker
        pending_by_group: dict[str, dict[int, dict[tuple[str, int], OffsetAndMetadata]]] = {}
        for producer_id, keyed in pending.items():
            for key, o in keyed.items():
                if o is not None:
                    pending_by_group.setdefault(key.group, {}).setdefault(producer_id, {})[(key.topic,
                                                                                            key.partition)] = o
        for group_id in (by_group.keys() | pending_by_group.keys()) - {g.group_id for g in loaded}:
            loaded.append(ClassicGroup(group_id))
        for group in loaded:
            group.offsets = by_group.get(group.group_id, {})
            group.pending_txn_offsets = pending_by_group.get(group.group_id, {})
            for producer_id in group.pending_txn_offsets:
                self.open_txn_groups.setdefault(producer_id, set()).add(group.group_id)
            current = self.add_group(group)
            if current is group:
                on_group_loaded(group)
        if loaded:
            log.info("loaded %d groups from %s-%d", len(loaded), GROUP_METADATA_TOPIC_NAME, index)

    async def shutdown(self) -> None:
        tasks = list(self._load_tasks.values())
        self._load_tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _creation_done(future: asyncio.Future) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("cannot create %s: %s", GROUP_METADATA_TOPIC_NAME, future.exception())
