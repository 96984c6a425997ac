"""CoordinatorRuntime: the group coordinator's log, the `__consumer_offsets` topic.

Every record the coordinator writes (offset commits, classic group metadata, a
consumer group's epoch, members and assignments) is appended to the partition
`partition_for(group_id)` of the compacted internal topic, keyed as Kafka keys
it, so that the log cleaner keeps only the latest value per key. The managers
answer from memory; a partition is read back only when this broker becomes its
leader (`on_election`), and forgotten when it stops leading it (`on_resignation`).
While a partition loads, its groups get COORDINATOR_LOAD_IN_PROGRESS.

A group is served here only while its partition is led here and loaded
(`is_group_local`; others get NOT_COORDINATOR). Leader epochs order elections
and resignations, so a late resignation does not unload a newer election's load.

The topic is created on first use (FindCoordinator, or the first write) with
`offsets.topic.num.partitions` partitions, `cleanup.policy=compact` and the
replication factor the composition root gives (offsets.topic.replication.factor
in a cluster, where the controller creates it asynchronously and creation fails
until that many brokers are alive).
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable

from kafka_compat.storage.validator import COORDINATOR

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.records import ControlRecordType, batches, build_batch, control_record_type
from ..sentinels import GROUP_METADATA_TOPIC_NAME
from .coordinator_records import partition_for

log = logging.getLogger(__name__)

Record = tuple[bytes, "bytes | None"]


def read_partition(replica_manager, index: int, load_buffer_size: int
                   ) -> tuple[list[Record], dict[int, list[Record]]]:
    """The live (key, value) records of one `__consumer_offsets` partition, in the order of their last write,
    and by producer id the records of transactions still open at its end.

    Runs in a worker thread; it only reads, through the ReplicaManager. A key written
    several times appears once, where it was last written, so replaying the list
    gives the state the whole log gives; tombstoned keys are left out. Transactional
    records count from their COMMIT marker on, as in Kafka; aborted ones never.
    """
    latest: dict[bytes, bytes | None] = {}
    pending: dict[int, list[Record]] = {}
    position, end = replica_manager.log_offsets(GROUP_METADATA_TOPIC_NAME, index)

    def put(key: bytes, value: bytes | None) -> None:
        latest.pop(key, None)
        latest[key] = value

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
                    committed = pending.pop(batch.producer_id, [])
                    if control_record_type(record.key) == ControlRecordType.COMMIT:
                        for key, value in committed:
                            put(key, value)
                    continue
                if record.key is None:
                    continue
                key = bytes(record.key)
                value = None if record.value is None else bytes(record.value)
                if txn:
                    pending.setdefault(batch.producer_id, []).append((key, value))
                else:
                    put(key, value)
            position = batch.next_offset if hasattr(batch, "next_offset") else batch.last_offset + 1
    return [(k, v) for k, v in latest.items() if v is not None], pending


class PartitionLoads:
    """Which partitions of a coordinator's topic this broker has loaded, is loading, and at which leader epoch
    it was last elected for each (Kafka's CoordinatorRuntime keeps this per partition context). A load runs
    in the background; a resignation older than the election it follows is ignored, and a load that a
    resignation cancelled, with a newer election already loading again, does not mark the partition loaded."""
    topic_name = ""

    def _init_loads(self) -> None:
        self.loading: set[int] = set()
        self.owned: set[int] = set()            # partitions led here and loaded: their keys are ours
        self.epochs: dict[int, int] = {}        # leader epoch of each partition's latest election here
        self._load_tasks: dict[int, asyncio.Task] = {}

    def _start_load(self, index: int, leader_epoch: int, load: Callable[[], Awaitable[None]]) -> asyncio.Task | None:
        """Mark `index` loading and run ``load()``; a partition already loaded or loading only takes a newer
        epoch (None)."""
        if leader_epoch > self.epochs.get(index, -1):
            self.epochs[index] = leader_epoch
        if index in self.loading or index in self.owned:
            return None
        self.loading.add(index)
        task = asyncio.get_running_loop().create_task(self._run_load(index, load))
        self._load_tasks[index] = task
        return task

    async def _run_load(self, index: int, load: Callable[[], Awaitable[None]]) -> None:
        try:
            await load()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed", self.topic_name, index)
        finally:
            # a resignation may have cancelled this load and a new election started another meanwhile
            if self._load_tasks.get(index) is asyncio.current_task():
                del self._load_tasks[index]
                if index in self.loading:
                    self.loading.discard(index)
                    self.owned.add(index)

    def _resign(self, index: int, leader_epoch: int) -> bool:
        """Forget `index` unless ``leader_epoch`` (-1 or -2: unknown) is older than its latest election."""
        if leader_epoch >= 0 and self.epochs.get(index, -1) > leader_epoch:
            return False
        self._forget(index)
        return True

    def _forget(self, index: int) -> None:
        self.owned.discard(index)
        self.loading.discard(index)
        task = self._load_tasks.pop(index, None)
        if task is not None and not task.done():
            task.cancel()

    async def wait_loaded(self) -> None:
        """Until every load started so far has finished."""
        while self._load_tasks:
            await asyncio.gather(*list(self._load_tasks.values()), return_exceptions=True)

    async def _stop_loads(self) -> None:
        tasks = list(self._load_tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._load_tasks.clear()


class CoordinatorRuntime(PartitionLoads):
    topic_name = GROUP_METADATA_TOPIC_NAME

    def __init__(self, config, replica_manager, metadata_cache, controller, offsets_replication_factor: int = 1):
        cfg = config
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.controller = controller            # creates the topic on first use
        self.commit_timeout_ms = cfg["offsets.commit.timeout.ms"]
        self.num_partitions = cfg["offsets.topic.num.partitions"]
        self.load_buffer_size = cfg["offsets.load.buffer.size"]
        self.compression = cfg["offsets.topic.compression.codec"]
        self.segment_bytes = cfg["offsets.topic.segment.bytes"]
        self.offsets_replication_factor = offsets_replication_factor
        self._init_loads()
        self._partition_of: dict[str, int] = {}
        self._creating: asyncio.Future | None = None

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
        except KafkaError as e:   # e.g. KAFKA_STORAGE_ERROR: the disk is full; the message says so
            log.error("cannot create %s: %s", GROUP_METADATA_TOPIC_NAME, e)
            return False
        except Exception:
            log.exception("cannot create %s", GROUP_METADATA_TOPIC_NAME)
            return False
        if inspect.isawaitable(created):       # a cluster (ZkAdminManager): the leaders arrive by LeaderAndIsr
            self._creating = asyncio.ensure_future(created)
            self._creating.add_done_callback(_creation_done)
            return False
        log.info("created %s with %d partitions", GROUP_METADATA_TOPIC_NAME, self.num_partitions)
        for index in range(self.num_partitions):      # a single node leads them all, empty: nothing to load
            partition = self.replica_manager.get_partition(GROUP_METADATA_TOPIC_NAME, index)
            if partition is not None and partition.is_leader:
                self.owned.add(index)
        return self.topic_exists()

    # ------------------------------------------------------------ writing
    def append(self, group_id: str, records: list[Record], callback: Callable[[int], None],
               producer: tuple[int, int] | None = None) -> None:
        """Append to the group's partition with acks=-1; ``callback(error)`` once that is settled.
        ``producer``: (producer id, epoch) of a transactional offset commit, written as its transactional batch."""
        if not records:
            callback(ErrorCode.NONE)
            return
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

    # ------------------------------------------------------------ loading and unloading
    def led_partitions(self) -> list[int]:
        """The `__consumer_offsets` partitions this broker leads (at startup: those to load)."""
        topic = self.metadata_cache.get_topic(GROUP_METADATA_TOPIC_NAME)
        if topic is None:
            return []
        self.num_partitions = topic.partitions
        self._partition_of.clear()
        led = []
        for i in range(topic.partitions):
            partition = self.replica_manager.get_partition(GROUP_METADATA_TOPIC_NAME, i)
            if partition is not None and partition.is_leader:
                led.append(i)
        return led

    def on_election(self, index: int, replay: Callable[[int, list[Record], dict[int, list[Record]]], None],
                    leader_epoch: int = -1) -> asyncio.Task | None:
        """This broker leads partition `index` now (at ``leader_epoch``; -1: unknown): mark it loading and
        replay it in the background, handing its records to ``replay(index, records, open transactions'
        records)`` on the loop. A partition already loaded or loading here only takes a newer epoch (as
        Kafka's runtime does; None)."""
        topic = self.metadata_cache.get_topic(GROUP_METADATA_TOPIC_NAME)
        if topic is not None and topic.partitions != self.num_partitions:
            self.num_partitions = topic.partitions
            self._partition_of.clear()
        return self._start_load(index, leader_epoch, lambda: self._load(index, replay))

    async def _load(self, index: int, replay) -> None:
        if self.replica_manager.get_partition(GROUP_METADATA_TOPIC_NAME, index) is None:
            return
        records, pending = await asyncio.to_thread(read_partition, self.replica_manager, index,
                                                   self.load_buffer_size)
        replay(index, records, pending)

    def on_resignation(self, index: int, leader_epoch: int = -1) -> bool:
        """This broker no longer leads partition `index` (the epoch that says so; -1 or -2: unknown, as
        StopReplica for a deletion): stop a load still running. False if the resignation is older than
        the election that loaded the partition here, and so ignored."""
        return self._resign(index, leader_epoch)

    async def shutdown(self) -> None:
        await self._stop_loads()
        self.loading.clear()
        self.owned.clear()


def _creation_done(future: asyncio.Future) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("cannot create %s: %s", GROUP_METADATA_TOPIC_NAME, future.exception())
