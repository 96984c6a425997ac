"""The share coordinator (KIP-932; Kafka's ShareCoordinatorService and ShareCoordinatorShard): durable
share-partition state in `__share_group_state`, on a single node and in a cluster alike.

Each share partition's state (start offset, state epoch, leader epoch, and the state and delivery count of
its in-flight records as batches) is kept under the key (group, topic id, partition) on the partition
`abs(hash("group:topicId:partition")) % share.coordinator.state.topic.num.partitions` (Java's
String.hashCode), in Kafka's records: ShareSnapshot (key type 0) and ShareUpdate (key type 1), each a
version-prefixed key and value. InitializeShareGroupState writes a snapshot; WriteShareGroupState an
update, and a snapshot instead once `share.coordinator.snapshot.update.records.per.snapshot` updates
followed the last one; ReadShareGroupState with a newer leader epoch records that epoch. A write whose
leader epoch is older than the one recorded is FENCED_LEADER_EPOCH, one whose state epoch is older
FENCED_STATE_EPOCH; reading or writing a share partition never initialized is INVALID_REQUEST.

The coordinator serves the keys of the `__share_group_state` partitions this broker leads: a partition
is replayed when this broker becomes its leader (`on_election`, from LeaderAndIsr in a cluster, at
start-up on a single node) and forgotten when it stops (`on_resignation`), leader epochs ordering the
two as in the group coordinator's runtime. Meanwhile its keys get COORDINATOR_LOAD_IN_PROGRESS, and keys
of partitions led elsewhere NOT_COORDINATOR. Records are appended with acks=-1 and replayed into memory
at once (the log's order is the order of the calls); an answer waits for the append to be replicated.

The topic is created on first use (FindCoordinator with key type SHARE, or the first persister call) as
Kafka creates it: cleanup.policy=delete with retention.ms=-1 (KIP-932's choice, not compaction),
share.coordinator.state.topic.* for partitions, replication factor, segment size and min ISR.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import inspect
import logging
import struct
from typing import NamedTuple

from kafka_compat.storage.validator import COORDINATOR

from ...clock import now_ms
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.delete_share_group_state import DeleteShareGroupStateResponse
from ...protocol.messages.initialize_share_group_state import InitializeShareGroupStateResponse
from ...protocol.messages.read_share_group_state import ReadShareGroupStateResponse
from ...protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryResponse
from ...protocol.messages.share_coordinator import (
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareUpdateKey,
    ShareUpdateValue,
)
from ...protocol.messages.write_share_group_state import WriteShareGroupStateResponse
from ...protocol.records import batches, build_batch
from ...sentinels import SHARE_GROUP_STATE_TOPIC_NAME

log = logging.getLogger(__name__)
E = ErrorCode
SHARE_GROUP_STATE_TOPIC = SHARE_GROUP_STATE_TOPIC_NAME
SNAPSHOT, UPDATE = 0, 1             # the record types: the key's version prefix
_VERSION = struct.Struct(">h")
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
# what an append's error becomes for the caller (Kafka's CoordinatorOperationExceptionHelper)
_APPEND_ERRORS = {E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
                  E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
                  E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
                  E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
                  E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR, E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
                  E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR, E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR}


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def uuid_string(topic_id: bytes) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id).rstrip(b"=").decode()


def coordinator_key(group_id: str, topic_id: bytes, partition: int) -> str:
    """SharePartitionKey.asCoordinatorKey: FindCoordinator's key for the share coordinator."""
    return f"{group_id}:{uuid_string(topic_id)}:{partition}"


def parse_coordinator_key(key: str) -> tuple[str, bytes, int]:
    """SharePartitionKey.getInstance(key): (group, topic id, partition); ValueError as Kafka's validate."""
    if not key:
        raise ValueError("Share partition key cannot be empty")
    tokens = key.split(":")
    if len(tokens) != 3:
        raise ValueError(f"Invalid key format: expected - groupId:topicId:partition, found -  {key}")
    if not tokens[0].strip():
        raise ValueError("GroupId must be alphanumeric string")
    try:
        if len(tokens[1]) > 24:
            raise ValueError
        topic_id = base64.urlsafe_b64decode(tokens[1] + "=" * (-len(tokens[1]) % 4))
        if len(topic_id) != 16:
            raise ValueError
    except (ValueError, binascii.Error):
        raise ValueError(f"Invalid topic ID: {tokens[1]}") from None
    try:
        partition = int(tokens[2])
        if not -(1 << 31) <= partition < 1 << 31 or not tokens[2].lstrip("+-").isdigit():
            raise ValueError
    except ValueError:
        raise ValueError(f"Invalid partition: {tokens[2]}") from None
    return tokens[0].strip(), topic_id, partition


def partition_for(group_id: str, topic_id: bytes, partition: int, num_partitions: int) -> int:
    h = java_string_hash(coordinator_key(group_id, topic_id, partition))
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


class PersistedState(NamedTuple):
    start_offset: int
    state_epoch: int
    batches: list           # [(first offset, last offset, delivery state, delivery count)]


class ShareGroupOffset(NamedTuple):
    """A share partition's state as the coordinator holds it (Kafka's ShareGroupOffset)."""
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    batches: list
    create_timestamp: int = 0
    write_timestamp: int = 0


def _prefixed(version: int, message, message_version: int = 0) -> bytes:
    b = bytearray(_VERSION.pack(version))
    message.encode_into(b, message_version)
    return bytes(b)


def _state_batches(cls, batches_):
    return [cls(first_offset=f, last_offset=last, delivery_state=s, delivery_count=c) for f, last, s, c in batches_]


def snapshot_record(group_id: str, topic_id: bytes, partition: int, state, leader_epoch: int = -1,
                    now: int = 0, delivery_complete: int = -1) -> tuple[bytes, bytes]:
    """A ShareSnapshot record of ``state`` (a ShareGroupOffset, or a PersistedState with the epochs given)."""
    if not isinstance(state, ShareGroupOffset):
        state = ShareGroupOffset(0, state.state_epoch, leader_epoch, state.start_offset, delivery_complete,
                                 state.batches, now, now)
    key = _prefixed(SNAPSHOT, ShareSnapshotKey(group_id=group_id, topic_id=topic_id, partition=partition))
    value = _prefixed(0, ShareSnapshotValue(
        snapshot_epoch=state.snapshot_epoch, state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
        start_offset=state.start_offset, delivery_complete_count=state.delivery_complete_count,
        create_timestamp=state.create_timestamp, write_timestamp=state.write_timestamp,
        state_batches=_state_batches(ShareSnapshotValue.StateBatch, state.batches)))
    return key, value


def update_record(group_id: str, topic_id: bytes, partition: int, snapshot_epoch: int, leader_epoch: int,
                  start_offset: int, delivery_complete: int, batches_: list) -> tuple[bytes, bytes]:
    key = _prefixed(UPDATE, ShareUpdateKey(group_id=group_id, topic_id=topic_id, partition=partition))
    value = _prefixed(0, ShareUpdateValue(
        snapshot_epoch=snapshot_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
        delivery_complete_count=delivery_complete,
        state_batches=_state_batches(ShareUpdateValue.StateBatch, batches_)))
    return key, value


def tombstone_record(group_id: str, topic_id: bytes, partition: int) -> tuple[bytes, None]:
    return _prefixed(SNAPSHOT, ShareSnapshotKey(group_id=group_id, topic_id=topic_id, partition=partition)), None


def read_record(key: bytes, value: bytes | None):
    """((group, topic id, partition), record type, decoded value or None) of a `__share_group_state` record."""
    kind = _VERSION.unpack_from(key, 0)[0]
    if kind not in (SNAPSHOT, UPDATE):
        return None
    k = (ShareSnapshotKey if kind == SNAPSHOT else ShareUpdateKey).decode(key, 0, 2)[0]
    decoded = None
    if value is not None:
        version = _VERSION.unpack_from(value, 0)[0]
        decoded = (ShareSnapshotValue if kind == SNAPSHOT else ShareUpdateValue).decode(value, version, 2)[0]
    return (k.group_id, bytes(k.topic_id), k.partition), kind, decoded


def combine_state_batches(old: list, new: list, start_offset: int) -> list:
    """``new``'s batches written over ``old``'s, nothing below ``start_offset`` (-1: no bound), neighbours of
    one state and delivery count merged (Kafka's PersisterStateBatchCombiner)."""
    out = []
    for f, last, s, c in old:
        pieces = [(f, last)]
        for uf, ul, _, _ in new:
            pieces = [p for lo, hi in pieces for p in ((lo, min(hi, uf - 1)), (max(lo, ul + 1), hi)) if p[0] <= p[1]]
        out.extend((lo, hi, s, c) for lo, hi in pieces)
    merged: list = []
    for f, last, s, c in sorted(out + [tuple(b) for b in new]):
        f = max(f, start_offset)
        if f > last:
            continue
        if merged and merged[-1][1] + 1 >= f and merged[-1][2:] == (s, c):
            merged[-1] = (merged[-1][0], max(merged[-1][1], last), s, c)
        else:
            merged.append((f, last, s, c))
    return merged


def _batches_of(value) -> list:
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in value.state_batches]


class ShareCoordinatorShard:
    """The state of the keys of the `__share_group_state` partitions loaded here, and what each request
    does to it: ``(records to append, error, message)`` per request, sans I/O (Kafka's ShareCoordinatorShard)."""

    def __init__(self, updates_per_snapshot: int = 500, clock=now_ms):
        self.updates_per_snapshot = updates_per_snapshot
        self.clock = clock
        self.states: dict[tuple[str, bytes, int], ShareGroupOffset] = {}
        self.leader_epochs: dict[tuple[str, bytes, int], int] = {}
        self.state_epochs: dict[tuple[str, bytes, int], int] = {}
        self.update_counts: dict[tuple[str, bytes, int], int] = {}

    # ------------------------------------------------------------ replay
    def replay(self, key: bytes, value: bytes | None) -> None:
        read = read_record(key, value)
        if read is None:
            return
        k, kind, v = read
        if kind == SNAPSHOT:
            if v is None:
                for d in (self.states, self.leader_epochs, self.state_epochs, self.update_counts):
                    d.pop(k, None)
                return
            self._raise(self.leader_epochs, k, v.leader_epoch)
            self._raise(self.state_epochs, k, v.state_epoch)
            self.states[k] = ShareGroupOffset(v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset,
                                              v.delivery_complete_count, _batches_of(v), v.create_timestamp,
                                              v.write_timestamp)
            if self.update_counts.get(k, 0) >= self.updates_per_snapshot:
                self.update_counts[k] = 0
            return
        if v is None:
            return
        self._raise(self.leader_epochs, k, v.leader_epoch)
        old = self.states.get(k)
        self.update_counts[k] = 0 if k not in self.update_counts else self.update_counts[k] + 1
        if old is None:
            self.states[k] = ShareGroupOffset(v.snapshot_epoch, 0, v.leader_epoch, v.start_offset,
                                              v.delivery_complete_count, _batches_of(v))
            return
        start = old.start_offset if v.start_offset == -1 else v.start_offset
        self.states[k] = old._replace(
            start_offset=start, delivery_complete_count=v.delivery_complete_count,
            leader_epoch=old.leader_epoch if v.leader_epoch == -1 else v.leader_epoch,
            batches=combine_state_batches(old.batches, _batches_of(v), start))

    @staticmethod
    def _raise(epochs: dict, k, epoch: int) -> None:
        if epochs.get(k, epoch) <= epoch:
            epochs[k] = epoch

    def forget(self, keep) -> None:
        """Drop every key ``keep(key)`` refuses (a partition unloaded)."""
        for k in [k for k in self.states if not keep(k)]:
            for d in (self.states, self.leader_epochs, self.state_epochs, self.update_counts):
                d.pop(k, None)

    # ------------------------------------------------------------ the requests, one key each
    def _state_record(self, k, start_offset: int, leader_epoch: int, delivery_complete: int, batches_: list,
                      update_leader_epoch: bool):
        """A ShareUpdate, or a ShareSnapshot once enough updates followed the last one
        (Kafka's generateShareStateRecord)."""
        current = self.states[k]
        epoch = leader_epoch if update_leader_epoch and leader_epoch != -1 else current.leader_epoch
        group_id, topic_id, partition = k
        if self.update_counts.get(k, 0) >= self.updates_per_snapshot:
            start = current.start_offset if start_offset == -1 else start_offset
            now = self.clock()
            return snapshot_record(group_id, topic_id, partition, ShareGroupOffset(
                current.snapshot_epoch + 1, current.state_epoch, epoch, start, delivery_complete,
                combine_state_batches(current.batches, batches_, start), now, now))
        return update_record(group_id, topic_id, partition, current.snapshot_epoch, epoch, start_offset,
                             delivery_complete, combine_state_batches([], batches_, start_offset))

    def write_state(self, k, state_epoch: int, leader_epoch: int, start_offset: int, delivery_complete: int,
                    batches_: list):
        if k not in self.states:
            return [], E.INVALID_REQUEST, WRITE_UNINITIALIZED
        if leader_epoch != -1 and self.leader_epochs.get(k, leader_epoch) > leader_epoch:
            return [], E.FENCED_LEADER_EPOCH, None
        if state_epoch != -1 and self.state_epochs.get(k, state_epoch) > state_epoch:
            return [], E.FENCED_STATE_EPOCH, None
        return [self._state_record(k, start_offset, leader_epoch, delivery_complete, batches_, False)], E.NONE, None

    def read_state(self, k, leader_epoch: int):
        """([records], error, message, ShareGroupOffset | None): a newer leader epoch is recorded."""
        if k not in self.states:
            return [], E.INVALID_REQUEST, READ_UNINITIALIZED, None
        if self.leader_epochs.get(k, leader_epoch) > leader_epoch:
            return [], E.FENCED_LEADER_EPOCH, None, None
        state = self.states[k]
        if leader_epoch == -1 or self.leader_epochs.get(k) == leader_epoch:
            return [], E.NONE, None, state
        return [self._state_record(k, state.start_offset, leader_epoch, state.delivery_complete_count, [],
                                   True)], E.NONE, None, state

    def initialize_state(self, k, state_epoch: int, start_offset: int):
        if state_epoch != -1 and self.state_epochs.get(k, state_epoch) > state_epoch:
            return [], E.FENCED_STATE_EPOCH, E.FENCED_STATE_EPOCH.message
        old = self.states.get(k)
        now = self.clock()
        group_id, topic_id, partition = k
        return [snapshot_record(group_id, topic_id, partition, ShareGroupOffset(
            0 if old is None else old.snapshot_epoch + 1, state_epoch, -1, start_offset, -1, [], now, now))], \
            E.NONE, None

    def delete_state(self, k):
        if k not in self.states:
            return [], E.NONE, None
        return [tombstone_record(*k)], E.NONE, None

    def read_summary(self, k) -> ShareGroupOffset | None:
        return self.states.get(k)


class ShareCoordinator:
    """The share coordinator of this broker: a shard over the `__share_group_state` partitions it leads,
    and the answers to the share-state RPCs (83-87), which the handlers and the persister both use."""

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
        self.loading: set[int] = set()
        self.owned: set[int] = set()
        self.epochs: dict[int, int] = {}
        self._load_tasks: dict[int, asyncio.Task] = {}
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
        if leader_epoch > self.epochs.get(index, -1):
            self.epochs[index] = leader_epoch
        if index in self.loading or index in self.owned:
            return
        topic = self.metadata_cache.get_topic(SHARE_GROUP_STATE_TOPIC)
        if topic is not None:
            self.num_partitions = topic.partitions
        self.loading.add(index)
        self._load_tasks[index] = asyncio.get_running_loop().create_task(self._load(index))

    def on_resignation(self, index: int, leader_epoch: int = -1) -> None:
        if leader_epoch >= 0 and self.epochs.get(index, -1) > leader_epoch:
            return
        self.owned.discard(index)
        self.loading.discard(index)
        task = self._load_tasks.pop(index, None)
        if task is not None and not task.done():
            task.cancel()
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
        try:
            if self.replica_manager.get_partition(SHARE_GROUP_STATE_TOPIC, index) is None:
                return
            records = await asyncio.to_thread(self._read_partition, index)
            self.shard.forget(lambda k: self.partition_for(*k) != index)
            for key, value in records:
                self.shard.replay(key, value)
            log.info("loaded %s-%d (%d records)", SHARE_GROUP_STATE_TOPIC, index, len(records))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed", SHARE_GROUP_STATE_TOPIC, index)
        finally:
            if self._load_tasks.get(index) is asyncio.current_task():
                del self._load_tasks[index]
                if index in self.loading:
                    self.loading.discard(index)
                    self.owned.add(index)

    async def wait_loaded(self) -> None:
        while self._load_tasks:
            await asyncio.gather(*list(self._load_tasks.values()), return_exceptions=True)

    async def shutdown(self) -> None:
        self.active = False
        tasks = list(self._load_tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._load_tasks.clear()

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


__all__ = ["SHARE_GROUP_STATE_TOPIC", "PersistedState", "ShareCoordinator", "ShareCoordinatorShard",
           "ShareGroupOffset", "combine_state_batches", "coordinator_key", "java_string_hash",
           "parse_coordinator_key", "partition_for", "read_record", "snapshot_record", "update_record"]
