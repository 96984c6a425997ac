"""The topic-based remote log metadata manager (Kafka's TopicBasedRemoteLogMetadataManager).

What is in remote storage is written to `__remote_log_metadata` as Kafka writes it, so that the state survives
restarts and every broker reading the topic knows it:
- the value is Kafka's AbstractApiMessageSerde frame: unsigned varints frame version (1), api key (0
  RemoteLogSegmentMetadataRecord, 1 RemoteLogSegmentMetadataUpdateRecord, 2 RemotePartitionDeleteMetadataRecord)
  and version, then the flexible body; the key is null;
- a partition's records go to the metadata partition ``murmur2("<topic id>:<topic>-<partition>") % partitions``
  (RemoteLogMetadataTopicPartitioner), so they stay in order.
The topic is made on start (``rlmm.config.remote.log.metadata.topic.*``: partitions, replication factor,
retention), then read from its start; each record written is applied once it is appended.

In a cluster every broker consumes every metadata partition from its leader up to the high watermark, as
Kafka's ConsumerTask does, and a record is applied when it is read back, on every broker alike. A write goes to
the metadata partition's leader with acks=all (locally when that is this broker) and returns once this broker
has read it back (``remote.log.metadata.consume.wait.ms``): what it then decides rests on what everyone can see.
"""
from __future__ import annotations

import asyncio
import inspect
import logging

from kafka_compat.storage.remote_storage_manager import (
    COPY_SEGMENT_FINISHED,
    DELETE_PARTITION_FINISHED,
    DELETE_SEGMENT_FINISHED,
    DELETE_SEGMENT_STARTED,
    RemoteLogSegmentMetadata,
    uuid_string,
)
from kafka_compat.storage.validator import COORDINATOR

from ..clock import now_ms
from ..protocol.errors import ErrorCode
from ..protocol.messages.remote_log_metadata import (
    RemoteLogSegmentMetadataRecord,
    RemoteLogSegmentMetadataUpdateRecord,
    RemotePartitionDeleteMetadataRecord,
)
from ..protocol.primitives import read_uvarint, write_uvarint
from ..protocol.records import batches, build_batch
from .remote_log_config import REMOTE_LOG_METADATA_TOPIC

log = logging.getLogger(__name__)

FRAME_VERSION = 1
SEGMENT, UPDATE, PARTITION_DELETE = 0, 1, 2
RECORD_VERSION = 1
APPEND_TIMEOUT_MS = 30000
PRODUCE, FETCH = 0, 1
PRODUCE_VERSION, FETCH_VERSION = 9, 12     # topics by name
_TYPES = {SEGMENT: RemoteLogSegmentMetadataRecord, UPDATE: RemoteLogSegmentMetadataUpdateRecord,
          PARTITION_DELETE: RemotePartitionDeleteMetadataRecord}


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (seed 0x9747b28c), as a signed 32-bit int."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def metadata_partition(topic_id: bytes, topic: str, partition: int, partitions: int) -> int:
    return (murmur2(f"{uuid_string(topic_id)}:{topic}-{partition}".encode()) & 0x7FFFFFFF) % partitions


def serialize(api_key: int, message) -> bytes:
    b = bytearray()
    for n in (FRAME_VERSION, api_key, RECORD_VERSION):
        write_uvarint(b, n)
    message.encode_into(b, RECORD_VERSION)
    return bytes(b)


def deserialize(buf) -> tuple[int, object]:
    frame, p = read_uvarint(buf, 0)
    if frame != FRAME_VERSION:
        raise ValueError(f"unknown frame version {frame} in {REMOTE_LOG_METADATA_TOPIC}")
    api_key, p = read_uvarint(buf, p)
    version, p = read_uvarint(buf, p)
    cls = _TYPES.get(api_key)
    if cls is None:
        raise ValueError(f"unknown remote log metadata record type {api_key}")
    return api_key, cls.decode(buf, version, p)[0]


_STATES = {0: "COPY_SEGMENT_STARTED", 1: "COPY_SEGMENT_FINISHED", 2: "DELETE_SEGMENT_STARTED",
           3: "DELETE_SEGMENT_FINISHED"}
_PARTITION_STATES = {0: "DELETE_PARTITION_MARKED", 1: "DELETE_PARTITION_STARTED", 2: "DELETE_PARTITION_FINISHED"}


def describe(value) -> str:
    """One metadata record as text (`kafka-compat dump-log --remote-log-metadata-decoder`)."""
    try:
        api_key, r = deserialize(bytes(value))
    except Exception as exc:
        return f"<not a remote log metadata record: {exc}>"
    if api_key == PARTITION_DELETE:
        tip = r.topic_id_partition
        return (f"RemotePartitionDeleteMetadata{{topicIdPartition={uuid_string(bytes(tip.id))}:{tip.name}-"
                f"{tip.partition}, state={_PARTITION_STATES.get(r.remote_partition_delete_state)}, "
                f"eventTimestampMs={r.event_timestamp_ms}, brokerId={r.broker_id}}}")
    sid = r.remote_log_segment_id
    tip = sid.topic_id_partition
    head = (f"remoteLogSegmentId=RemoteLogSegmentId{{topicIdPartition={uuid_string(bytes(tip.id))}:{tip.name}-"
            f"{tip.partition}, id={uuid_string(bytes(sid.id))}}}")
    if api_key == UPDATE:
        return (f"RemoteLogSegmentMetadataUpdate{{{head}, state={_STATES.get(r.remote_log_segment_state)}, "
                f"eventTimestampMs={r.event_timestamp_ms}, brokerId={r.broker_id}}}")
    epochs = {e.leader_epoch: e.offset for e in r.segment_leader_epochs}
    return (f"RemoteLogSegmentMetadata{{{head}, startOffset={r.start_offset}, endOffset={r.end_offset}, "
            f"brokerId={r.broker_id}, maxTimestampMs={r.max_timestamp_ms}, eventTimestampMs={r.event_timestamp_ms}, "
            f"segmentLeaderEpochs={epochs}, segmentSizeInBytes={r.segment_size_in_bytes}, "
            f"state={_STATES.get(r.remote_log_segment_state)}}}")


def segment_record(m: RemoteLogSegmentMetadata) -> bytes:
    R = RemoteLogSegmentMetadataRecord
    return serialize(SEGMENT, R(
        remote_log_segment_id=R.RemoteLogSegmentIdEntry(
            topic_id_partition=R.TopicIdPartitionEntry(name=m.topic, id=m.topic_id, partition=m.partition),
            id=m.segment_id),
        start_offset=m.start_offset, end_offset=m.end_offset, broker_id=m.broker_id,
        max_timestamp_ms=m.max_timestamp_ms, event_timestamp_ms=m.event_timestamp_ms,
        segment_leader_epochs=[R.SegmentLeaderEpochEntry(leader_epoch=e, offset=o)
                               for e, o in sorted(m.segment_leader_epochs.items())],
        segment_size_in_bytes=m.segment_size, remote_log_segment_state=m.state,
        txn_index_empty=m.txn_index_empty, broker_leader_epoch=m.broker_leader_epoch))


def update_record(m: RemoteLogSegmentMetadata, state: int, broker_id: int) -> bytes:
    U = RemoteLogSegmentMetadataUpdateRecord
    return serialize(UPDATE, U(
        remote_log_segment_id=U.RemoteLogSegmentIdEntry(
            topic_id_partition=U.TopicIdPartitionEntry(name=m.topic, id=m.topic_id, partition=m.partition),
            id=m.segment_id),
        broker_id=broker_id, event_timestamp_ms=now_ms(), remote_log_segment_state=state,
        broker_leader_epoch=m.broker_leader_epoch, end_offset=m.end_offset))


class TopicBasedRemoteLogMetadataManager:
    """Segments of every tiered partition by (topic, partition), from the metadata topic."""

    def __init__(self, rlmm_config: dict, broker_id: int, replica_manager, metadata_cache, controller,
                 cluster: bool = False, send=None, on_change=None):
        """``send(broker id, api key, version, body)``: a request to another broker (a cluster's writes and reads
        of metadata partitions led elsewhere); ``on_change(keys)``: the (topic, partition)s whose remote segments
        changed, told after each read in a cluster."""
        self.num_partitions = rlmm_config["remote.log.metadata.topic.num.partitions"]
        self.replication_factor = rlmm_config["remote.log.metadata.topic.replication.factor"]
        self.retention_ms = rlmm_config["remote.log.metadata.topic.retention.ms"]
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.controller = controller
        self.cluster = cluster
        # (topic, partition) -> segment id -> metadata (every state; readers take COPY_SEGMENT_FINISHED ones)
        self.segments: dict[tuple[str, int], dict[bytes, RemoteLogSegmentMetadata]] = {}
        self.consume_wait_s = rlmm_config["remote.log.metadata.consume.wait.ms"] / 1000
        self.send = send
        self.on_change = on_change
        # a cluster's consumer: the next offset to read of each metadata partition, and the partitions the last
        # read found at their leader's high watermark
        self.positions: dict[int, int] = {}
        self.caught_up: set[int] = set()
        self.ready = False
        self._poll_lock = asyncio.Lock()
        self._consumer: asyncio.Task | None = None
        self._changed: set[tuple[str, int]] = set()
        self._create_failed = False

    # -- the topic ----------------------------------------------------------------------
    async def ensure_topic(self) -> bool:
        topic = self.metadata_cache.get_topic(REMOTE_LOG_METADATA_TOPIC)
        if topic is not None:
            if not topic.partitions:        # known by name, its partitions not yet
                return False
            self.num_partitions = topic.partitions
            return True
        rf = self.replication_factor
        if not self.cluster:
            rf = min(rf, max(1, len(self.metadata_cache.alive_brokers())))
        configs = {"cleanup.policy": "delete", "retention.ms": str(self.retention_ms),
                   "retention.bytes": "-1", "remote.storage.enable": "false"}
        try:
            created = self.controller.create_topic(REMOTE_LOG_METADATA_TOPIC, self.num_partitions, rf, configs)
            if inspect.isawaitable(created):
                await created
        except Exception as exc:
            # a cluster's brokers start one by one: until there are enough of them, say so once
            log.log(logging.DEBUG if self._create_failed else logging.WARNING, "cannot create %s yet: %s",
                    REMOTE_LOG_METADATA_TOPIC, exc)
            self._create_failed = True
            return False
        log.info("created %s with %d partitions", REMOTE_LOG_METADATA_TOPIC, self.num_partitions)
        return True

    async def start(self) -> None:
        if self.cluster:        # the topic needs enough brokers, which may start after us: made in the background
            self._consumer = asyncio.create_task(self._consume(), name="remote-log-metadata-consumer")
            return
        while not await self.ensure_topic():
            await asyncio.sleep(1)
        await asyncio.to_thread(self._load)

    async def close(self) -> None:
        if self._consumer is not None:
            self._consumer.cancel()
            try:
                await self._consumer
            except (asyncio.CancelledError, Exception):
                pass

    # -- a cluster's consumer -------------------------------------------------------------------
    async def _consume(self) -> None:
        while True:
            try:
                if not self.ready and await self.ensure_topic():
                    await self.poll()
                    self.ready = len(self.caught_up) == self.num_partitions
                    if self.ready:
                        log.info("read %s to its end: %d tiered partitions", REMOTE_LOG_METADATA_TOPIC,
                                 len(self.segments))
                elif self.ready:
                    await self.poll()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("reading %s failed", REMOTE_LOG_METADATA_TOPIC)
            await asyncio.sleep(0.2)

    async def poll(self) -> set[int]:
        """Read every metadata partition from its leader to its high watermark; the partitions read to it."""
        async with self._poll_lock:
            by_leader: dict[int, list[int]] = {}
            caught_up = set()
            for index in range(self.num_partitions):
                state = self.metadata_cache.partition_state(REMOTE_LOG_METADATA_TOPIC, index)
                if state is None or state.leader < 0:
                    continue
                local = self.replica_manager.partitions.get((REMOTE_LOG_METADATA_TOPIC, index))
                if state.leader == self.broker_id and local is not None and local.is_leader:
                    if self._read_local(index, local):
                        caught_up.add(index)
                else:
                    by_leader.setdefault(state.leader, []).append(index)
            for leader, indexes in by_leader.items():
                caught_up |= await self._fetch_remote(leader, indexes)
            self.caught_up = caught_up
            if self._changed and self.on_change is not None:
                changed, self._changed = self._changed, set()
                self.on_change(changed)
            return caught_up

    def _apply_batches(self, index: int, data) -> None:
        for batch in batches(data):
            self.positions[index] = batch.last_offset + 1
            if getattr(batch, "is_control", False):
                continue
            for record in batch.records():
                if record.value is not None:
                    self._apply_bytes(record.value)

    def _read_local(self, index: int, partition) -> bool:
        """What this broker leads of a metadata partition, to its high watermark."""
        from kafka_compat.storage.fetch_data_info import FetchIsolation
        for _ in range(64):
            position = max(self.positions.get(index, 0), partition.log_start_offset)
            if position >= partition.high_watermark:
                return True
            data = self.replica_manager.read_local(REMOTE_LOG_METADATA_TOPIC, index, position, 1 << 20,
                                                   FetchIsolation.HIGH_WATERMARK).records.read_bytes()
            if not data:
                return False
            self._apply_batches(index, data)
        return False

    async def _fetch_remote(self, leader: int, indexes: list[int]) -> set[int]:
        """Fetch as a consumer from another broker until its high watermark (a few rounds at most)."""
        if self.send is None:
            return set()
        from ..protocol.messages.fetch import FetchRequest
        done: set[int] = set()          # answered with an error, or read to the high watermark
        reached: set[int] = set()       # read to the high watermark
        for _ in range(16):
            wanted = [i for i in indexes if i not in done]
            if not wanted:
                break
            request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=8 << 20, isolation_level=0,
                                   session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                                       topic=REMOTE_LOG_METADATA_TOPIC, partitions=[FetchRequest.FetchPartition(
                                           partition=i, fetch_offset=self.positions.get(i, 0),
                                           partition_max_bytes=1 << 20) for i in wanted])])
            try:
                response = await self.send(leader, FETCH, FETCH_VERSION, request)
            except Exception as exc:
                log.debug("fetching %s from broker %d: %s", REMOTE_LOG_METADATA_TOPIC, leader, exc)
                break
            progress = False
            for topic in response.responses:
                for pd in topic.partitions:
                    i = pd.partition_index
                    if pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and pd.log_start_offset > \
                            self.positions.get(i, 0):
                        self.positions[i] = pd.log_start_offset     # retention took the oldest records
                        progress = True
                        continue
                    if pd.error_code:
                        done.add(i)
                        continue
                    before = self.positions.get(i, 0)
                    if pd.records:
                        self._apply_batches(i, pd.records)
                    if self.positions.get(i, 0) >= pd.high_watermark:
                        done.add(i)
                        reached.add(i)
                    progress = progress or self.positions.get(i, 0) > before
            if not progress:
                break
        return reached

    def _load(self) -> None:
        """Read every metadata partition held here from its start (worker thread: reads only)."""
        rm = self.replica_manager
        records = 0
        for index in range(self.num_partitions):
            try:
                position, end = rm.log_offsets(REMOTE_LOG_METADATA_TOPIC, index)
            except Exception:
                continue
            while position < end:
                data = rm.read_local(REMOTE_LOG_METADATA_TOPIC, index, position, 1 << 20).records.read_bytes()
                if not data:
                    break
                for batch in batches(data):
                    position = batch.last_offset + 1
                    if getattr(batch, "is_control", False):
                        continue
                    for record in batch.records():
                        if record.value is not None:
                            self._apply_bytes(record.value)
                            records += 1
        if records:
            log.info("loaded %d remote log metadata records: %d tiered partitions", records, len(self.segments))

    # -- records --------------------------------------------------------------------------
    def _apply_bytes(self, value) -> None:
        try:
            api_key, record = deserialize(bytes(value))
        except Exception as exc:
            log.error("skipping a remote log metadata record that does not decode: %s", exc)
            return
        if api_key == SEGMENT:
            sid = record.remote_log_segment_id
            tip = sid.topic_id_partition
            m = RemoteLogSegmentMetadata(
                tip.name, bytes(tip.id), tip.partition, bytes(sid.id), record.start_offset, record.end_offset,
                record.max_timestamp_ms, record.broker_id, record.event_timestamp_ms,
                {e.leader_epoch: e.offset for e in record.segment_leader_epochs}, record.segment_size_in_bytes,
                record.remote_log_segment_state, record.txn_index_empty, record.broker_leader_epoch)
            self.segments.setdefault((tip.name, tip.partition), {})[m.segment_id] = m
            self._changed.add((tip.name, tip.partition))
        elif api_key == UPDATE:
            sid = record.remote_log_segment_id
            tip = sid.topic_id_partition
            segments = self.segments.get((tip.name, tip.partition), {})
            m = segments.get(bytes(sid.id))
            if m is None:
                return
            self._changed.add((tip.name, tip.partition))
            if record.remote_log_segment_state == DELETE_SEGMENT_FINISHED:
                del segments[m.segment_id]
            else:
                m.state = record.remote_log_segment_state
        else:
            tip = record.topic_id_partition
            if record.remote_partition_delete_state == DELETE_PARTITION_FINISHED:
                self.segments.pop((tip.name, tip.partition), None)
                self._changed.add((tip.name, tip.partition))

    async def _publish(self, m: RemoteLogSegmentMetadata, value: bytes) -> None:
        index = metadata_partition(m.topic_id, m.topic, m.partition, self.num_partitions)
        if self.cluster:
            await self._publish_to_leader(index, value)
            return
        batch = bytearray(build_batch([(None, value, (), now_ms())]))
        results = self.replica_manager.append_records(
            APPEND_TIMEOUT_MS, -1, [(REMOTE_LOG_METADATA_TOPIC, index, batch)], origin=COORDINATOR,
            internal_topics_allowed=True)
        if isinstance(results, asyncio.Future):
            results = await results
        error = results[0].error_code
        if error:
            raise RuntimeError(f"writing to {REMOTE_LOG_METADATA_TOPIC}-{index}: {ErrorCode(error).name}")
        self._apply_bytes(value)

    async def _publish_to_leader(self, index: int, value: bytes) -> None:
        """A cluster's write: to the metadata partition's leader with acks=all, retried while the partition has
        no leader or moves; then read back here. Raises RuntimeError when it cannot be written in time."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + APPEND_TIMEOUT_MS / 1000
        batch = bytes(build_batch([(None, value, (), now_ms())]))
        while True:
            state = self.metadata_cache.partition_state(REMOTE_LOG_METADATA_TOPIC, index)
            leader = state.leader if state is not None else -1
            error, offset, message = ErrorCode.LEADER_NOT_AVAILABLE, -1, None
            try:
                if leader == self.broker_id:
                    results = self.replica_manager.append_records(
                        APPEND_TIMEOUT_MS, -1, [(REMOTE_LOG_METADATA_TOPIC, index, bytearray(batch))],
                        origin=COORDINATOR, internal_topics_allowed=True)
                    if isinstance(results, asyncio.Future):
                        results = await results
                    error, offset = results[0].error_code, results[0].base_offset
                elif leader >= 0 and self.send is not None:
                    from ..protocol.messages.produce import ProduceRequest
                    P = ProduceRequest
                    response = await self.send(leader, PRODUCE, PRODUCE_VERSION, P(
                        acks=-1, timeout_ms=APPEND_TIMEOUT_MS, topic_data=[P.TopicProduceData(
                            name=REMOTE_LOG_METADATA_TOPIC, partition_data=[P.PartitionProduceData(
                                index=index, records=batch)])]))
                    part = response.responses[0].partition_responses[0]
                    error, offset = part.error_code, part.base_offset
            except asyncio.CancelledError:
                raise
            except Exception as exc:        # the leader went away mid-request: ask again, maybe elsewhere
                error, message = ErrorCode.NETWORK_EXCEPTION, str(exc)
            if error == ErrorCode.NONE:
                break
            if loop.time() > deadline:
                raise RuntimeError(f"writing to {REMOTE_LOG_METADATA_TOPIC}-{index}: {ErrorCode(error).name}"
                                   + (f" ({message})" if message else ""))
            await asyncio.sleep(0.2)
        deadline = loop.time() + self.consume_wait_s
        while self.positions.get(index, 0) <= offset:
            if loop.time() > deadline:
                raise RuntimeError(f"{REMOTE_LOG_METADATA_TOPIC}-{index}: offset {offset} was written but not "
                                   f"read back within remote.log.metadata.consume.wait.ms")
            await self.poll()
            if self.positions.get(index, 0) <= offset:
                await asyncio.sleep(0.05)

    async def add_segment(self, m: RemoteLogSegmentMetadata) -> None:
        await self._publish(m, segment_record(m))

    async def update_segment(self, m: RemoteLogSegmentMetadata, state: int) -> None:
        await self._publish(m, update_record(m, state, self.broker_id))

    async def update_partition(self, m: RemoteLogSegmentMetadata, state: int) -> None:
        """A RemotePartitionDeleteMetadataRecord for ``m``'s partition (DELETE_PARTITION_* states)."""
        P = RemotePartitionDeleteMetadataRecord
        await self._publish(m, serialize(PARTITION_DELETE, P(
            topic_id_partition=P.TopicIdPartitionEntry(name=m.topic, id=m.topic_id, partition=m.partition),
            broker_id=self.broker_id, event_timestamp_ms=now_ms(), remote_partition_delete_state=state,
            broker_leader_epoch=m.broker_leader_epoch, end_offset=m.end_offset)))

    # -- questions --------------------------------------------------------------------------
    def copied_segments(self, topic: str, partition: int) -> list[RemoteLogSegmentMetadata]:
        """The partition's segments wholly in remote storage, by start offset."""
        return sorted((m for m in self.segments.get((topic, partition), {}).values()
                       if m.state == COPY_SEGMENT_FINISHED), key=lambda m: m.start_offset)

    def unfinished_segments(self, topic: str, partition: int) -> list[RemoteLogSegmentMetadata]:
        """Copies that started and never finished, and deletions that never finished (a broker died)."""
        return [m for m in self.segments.get((topic, partition), {}).values()
                if m.state not in (COPY_SEGMENT_FINISHED,)]

    def segment_for(self, topic: str, partition: int, offset: int) -> RemoteLogSegmentMetadata | None:
        for m in self.copied_segments(topic, partition):
            if m.start_offset <= offset <= m.end_offset:
                return m
        return None

    def partition_for(self, partition) -> int:
        """The metadata partition a (hosted) partition's records go to."""
        return metadata_partition(partition.topic_id, partition.topic, partition.index, self.num_partitions)

    def highest_offset(self, topic: str, partition: int) -> int:
        copied = self.copied_segments(topic, partition)
        return copied[-1].end_offset if copied else -1


__all__ = ["TopicBasedRemoteLogMetadataManager", "murmur2", "metadata_partition", "serialize", "deserialize",
           "DELETE_SEGMENT_STARTED"]
