"""ReplicaManager: the partitions this broker hosts and the one path to their logs.

As Kafka's ReplicaManager: `append_records` for Produce and the coordinators'
own writes, `fetch_messages` for consumers and followers, `delete_records`,
`fetch_offset_for_timestamp` and `last_offset_for_leader_epoch` for the offset
APIs, and `apply_local_leadership` (the local controller of a single node),
`become_leader_or_follower` (LeaderAndIsr in a cluster) and `stop_replicas` for
whoever decides leadership.
Nothing else touches a UnifiedLog. acks=-1 produces wait in the produce
purgatory and long-poll fetches in the fetch purgatory; an append wakes both.
The high watermark of every partition is checkpointed to each log dir's
`replication-offset-checkpoint` off the event loop.

In a cluster, LeaderAndIsr arrives through `become_leader_or_follower` with Kafka's
checks (controller epoch, leader epoch, membership); partitions this broker
follows are handed to the ReplicaFetcherManager, whose fetchers append through
`append_to_follower` and truncate through `truncate_follower*`. The
isr-expiration task asks every led partition to shrink its ISR every
replica.lag.time.max.ms / 2. `fence_leadership` stops every partition from
acting as leader when the ZooKeeper session is in doubt.

A cluster member also gets a LogDirFailureChannel: an I/O error writing a log (append, roll,
truncation, the high watermark checkpoint) reports its log dir there, and `handle_log_dir_failure`
then takes every partition of that dir offline, as Kafka's handleLogDirFailure: its fetchers stop,
Produce and Fetch answer KAFKA_STORAGE_ERROR, and LeaderAndIsr answers KAFKA_STORAGE_ERROR for it,
which tells the controller to move its leadership away. A single node has no channel: it answers
KAFKA_STORAGE_ERROR per request and goes on once the disk has room again.

AlterReplicaLogDirs (`alter_replica_log_dirs`, Kafka's alterReplicaLogDirs) moves a replica to another
log dir of this broker: a future log is made there and the ReplicaAlterLogDirsManager's threads copy
into it while the partition serves; the swap runs on the event loop. A future log found at startup is
resumed as soon as its partition is hosted again (Kafka resumes it on the LeaderAndIsr).
"""
from __future__ import annotations

import asyncio
import logging
import os
from typing import Callable, NamedTuple

from kafka_compat.configdef import LONG_MAX
from kafka_compat.storage import checkpoint
from kafka_compat.storage.local_log import FUTURE_DIR_SUFFIX
from kafka_compat.storage.log_config import LogConfig
from kafka_compat.storage.log_manager import LogManager
from kafka_compat.storage.scheduler import Scheduler
from kafka_compat.storage.unified_log import FetchIsolation, high_watermark_moves
from kafka_compat.storage.validator import CLIENT

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.primitives import ZERO_UUID
from ..purgatory import DelayedOperationPurgatory
from ..sentinels import EPOCH_DURING_DELETE, INTERNAL_TOPICS, NO_EPOCH
from .alter_partition_listener import IsrChangeMeters
from .broker_topic_stats import BrokerTopicStats
from .delayed_delete_records import DelayedDeleteRecords
from .delayed_fetch import DelayedFetch, FetchParams, PartitionFetchInfo
from .delayed_produce import DelayedProduce, ProduceResult
from .log_dir_failure_channel import LogDirFailureChannel
from .metadata_cache import MetadataCache, PartitionLeadership
from .partition import LogReadResult, Partition
from .replica_alter_log_dirs import MAX_TAIL_BYTES, ReplicaAlterLogDirsManager
from .replica_fetcher import BrokerEndPoint, InitialFetchState, ReplicaFetcherManager

log = logging.getLogger(__name__)

# append errors whose bytes Kafka counts as rejected (BytesRejectedPerSec)
# the refusals Kafka answers with UNKNOWN_LOG_APPEND_INFO (no log start offset)
NO_LOG_START_OFFSET = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                 ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                                 ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR})
REJECTED = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE,
                      ErrorCode.INVALID_RECORD, ErrorCode.INVALID_TIMESTAMP})

__all__ = ["ReplicaManager", "FetchParams", "PartitionFetchInfo", "ProduceResult", "LogReadResult",
           "LeaderAndIsrResult", "FollowerOffsets"]


class LeaderAndIsrResult(NamedTuple):
    """What become_leader_or_follower did: the request's error, each partition's, and which partitions
    this broker now leads or follows (for the coordinators)."""

    error_code: int
    partition_errors: dict[tuple[str, int], int]
    leaders: list[Partition]
    followers: list[Partition]


class FollowerOffsets(NamedTuple):
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    latest_epoch: int | None


class ReplicaManager:
    #: the RemoteLogManager when tiered storage is on (remote.log.storage.system.enable): fetches below a local
    #: log start may be answered from remote storage
    remote_log_manager = None

    def __init__(self, broker_id: int, log_manager: LogManager, topic_config: Callable[[str], LogConfig], *,
                 hw_checkpoint_interval_ms: int = 5000, fetch_purge_interval: int = 1000,
                 produce_purge_interval: int = 1000, broker_topic_stats: BrokerTopicStats | None = None,
                 metadata_cache: MetadataCache | None = None,
                 alter_partition_manager=None, fetcher_manager_factory: Callable | None = None,
                 inter_broker_listener: str | None = None, replica_lag_time_max_ms: int = 30000,
                 rack_aware_reads: bool = False, log_dir_failure_channel: LogDirFailureChannel | None = None,
                 alter_log_dirs_threads: int | None = None, alter_log_dirs_rate: Callable[[], int] | None = None):
        """A single node needs only the first arguments (and the BrokerTopicStats its metrics read).
        A cluster member also gets the MetadataCache (leaders' addresses on ``inter_broker_listener``,
        which brokers are alive), the AlterPartitionManager its partitions propose ISR changes through,
        and ``fetcher_manager_factory(replica_manager)`` building its ReplicaFetcherManager;
        ``rack_aware_reads``: replica.selector.class is Kafka's RackAwareReplicaSelector (KIP-392);
        ``log_dir_failure_channel``: where write errors put a log dir offline (a cluster member's);
        ``alter_log_dirs_threads`` (num.replica.alter.log.dirs.threads, None: one per log dir) and
        ``alter_log_dirs_rate()`` (replica.alter.log.dirs.io.max.bytes.per.second) run the moves between
        log dirs."""
        self.broker_id = broker_id
        self.broker_topic_stats = broker_topic_stats or BrokerTopicStats()
        self.isr_change_meters = IsrChangeMeters()      # mark_shrink()/mark_expand() where the ISR changes
        self.log_manager = log_manager
        self.topic_config = topic_config
        self.hw_checkpoint_interval_ms = hw_checkpoint_interval_ms
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.controller_epoch = 0
        self._fetch_purge_interval = fetch_purge_interval
        self._produce_purge_interval = produce_purge_interval
        self.fetch_purgatory: DelayedOperationPurgatory | None = None
        self.produce_purgatory: DelayedOperationPurgatory | None = None
        self.delete_records_purgatory: DelayedOperationPurgatory | None = None
        self._hw_checkpoints: dict[tuple[str, int], int] = {}
        self._hw_written: dict[str, dict] = {}   # per log dir: the high watermarks last checkpointed
        self._hw_mark: int | None = None          # high_watermark_moves() at the last complete checkpoint
        self._scheduler = Scheduler("kafka-highwatermark-checkpoint")
        self.metadata_cache = metadata_cache
        self.alter_partition_manager = alter_partition_manager
        self.inter_broker_listener = inter_broker_listener
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.rack_aware_reads = rack_aware_reads and metadata_cache is not None
        self.fetcher_manager: ReplicaFetcherManager | None = (
            fetcher_manager_factory(self) if fetcher_manager_factory is not None else None)
        self._awaiting_leader: set[tuple[str, int]] = set()    # followers whose leader has no known address yet
        # in a controlled shutdown: a follower made now does not fetch (it would be proposed for the new leader's
        # ISR and hold its high watermark until the controller refused it)
        self.stopping = False
        self.fenced = False               # leadership suspended (ZooKeeper session in doubt or lost)
        self._isr_expiration: asyncio.TimerHandle | None = None
        self.log_dir_failure_channel = log_dir_failure_channel
        self.offline_partitions: set[tuple[str, int]] = set()   # Kafka's HostedPartition.Offline
        self.offline_log_dirs: list[str] = []
        self.alter_log_dirs_manager = ReplicaAlterLogDirsManager(
            alter_log_dirs_threads or len(log_manager.log_dirs), self._replace_current_with_future_log,
            alter_log_dirs_rate or (lambda: LONG_MAX), self._move_failed)

    # -- lifecycle ---------------------------------------------------------------------------
    def startup(self) -> None:
        """On the event loop: the purgatories, the high watermarks checkpointed last time, the checkpoint task."""
        loop = asyncio.get_running_loop()
        self.alter_log_dirs_manager.start(loop)
        self.fetch_purgatory = DelayedOperationPurgatory("Fetch", broker_id=self.broker_id, loop=loop,
                                                         purge_interval=self._fetch_purge_interval)
        self.produce_purgatory = DelayedOperationPurgatory("Produce", broker_id=self.broker_id, loop=loop,
                                                           purge_interval=self._produce_purge_interval)
        self.delete_records_purgatory = DelayedOperationPurgatory("DeleteRecords", broker_id=self.broker_id,
                                                                  loop=loop)
        lm = self.log_manager
        for directory in lm.log_dirs:
            for key, hw in checkpoint.read_offsets(
                    os.path.join(directory, checkpoint.REPLICATION_OFFSET_CHECKPOINT)).items():
                # a replica moved to another dir may still be named in the old dir's file: its dir's entry counts
                if lm.log_dir_of(*key) in (directory, None):
                    self._hw_checkpoints.setdefault(key, hw)
        self._scheduler.schedule("highwatermark-checkpoint", self.checkpoint_high_watermarks,
                                 self.hw_checkpoint_interval_ms, self.hw_checkpoint_interval_ms)
        if self.alter_partition_manager is not None:
            self._schedule_isr_expiration(loop)

    def _schedule_isr_expiration(self, loop) -> None:
        self._isr_expiration = loop.call_later(self.replica_lag_time_max_ms / 2000, self._isr_expiration_tick, loop)

    def _isr_expiration_tick(self, loop) -> None:
        """Kafka's isr-expiration task: every led partition drops followers that stopped keeping up."""
        for partition in list(self.partitions.values()):
            try:
                partition.maybe_shrink_isr()
            except Exception:
                log.exception("ISR expiration failed for %s", partition)
        self._schedule_isr_expiration(loop)

    async def shutdown_fetchers(self) -> None:
        if self.fetcher_manager is not None:
            await self.fetcher_manager.shutdown()

    def shutdown(self) -> None:
        """Stop the checkpoint task and write the high watermarks one last time (before the logs close)."""
        if self._isr_expiration is not None:
            self._isr_expiration.cancel()
        self.alter_log_dirs_manager.shutdown()     # a move under way resumes at the next start
        self._scheduler.shutdown()
        self.log_dir_failure_channel = None     # stopping: a dir that fails now is left to recovery at the next start
        self.checkpoint_high_watermarks()
        for purgatory in (self.fetch_purgatory, self.produce_purgatory):
            if purgatory is not None:
                purgatory.shutdown()

    def checkpoint_high_watermarks(self) -> None:
        """Kafka's checkpointHighWatermarks: every hosted partition's HW, per log dir (worker thread)."""
        mark = high_watermark_moves()
        if self._hw_mark is not None and mark == self._hw_mark + 1:
            self._hw_mark = mark   # no high watermark moved, no partition came or went: the files stand
            return
        by_dir: dict[str, dict[tuple[str, int], int]] = {d: {} for d in self.log_manager.log_dirs}
        for key, partition in list(self.partitions.items()):
            parent = os.path.dirname(partition.log_dir)
            if parent in by_dir:
                by_dir[parent][key] = partition.high_watermark
        written = True
        for directory, offsets in by_dir.items():
            if self._hw_written.get(directory) == offsets:
                continue   # unchanged: an idle broker with thousands of partitions writes nothing
            try:
                checkpoint.write_offsets(os.path.join(directory, checkpoint.REPLICATION_OFFSET_CHECKPOINT), offsets)
                self._hw_written[directory] = offsets
            except OSError as e:
                written = False
                log.error("cannot write the high watermark checkpoint in %s: %s", directory, e)
                self._dir_failed(directory, "writing the high watermark checkpoint", e)
        self._hw_mark = mark if written else None

    # -- partitions ------------------------------------------------------------------------------
    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def leadership_to_move(self) -> list[tuple[str, int]]:
        """Replicated partitions this broker still leads, as a partition or in its metadata: a controlled
        shutdown waits for the LeaderAndIsr and UpdateMetadata that move them away."""
        cache = self.metadata_cache
        out = []
        for key, partition in list(self.partitions.items()):
            if not partition.remote_replicas:
                continue
            state = cache.partition_state(*key) if cache is not None else None
            if partition.is_leader or (state is not None and state.leader == self.broker_id):
                out.append(key)
        return out

    def brokers_gone(self, broker_ids: set[int]) -> None:
        """Brokers left the live set (UpdateMetadata): a leader's high watermark stops waiting for those that
        were only eligible to join its ISR (caught up and alive), and acks=-1 produce held by them completes.
        Nothing else would move it: their fetches stopped, and a producer may be waiting for this answer."""
        for partition in list(self.partitions.values()):
            if partition.is_leader and not broker_ids.isdisjoint(partition.remote_replicas) \
                    and partition.maybe_increment_leader_hw():
                self._complete_delayed(partition.key)

    def topic_name(self, topic_id: bytes) -> str | None:
        """The name of a hosted topic with this id (LeaderAndIsr gave both)."""
        if topic_id == ZERO_UUID:
            return None
        for partition in self.partitions.values():
            if partition.topic_id == topic_id:
                return partition.topic
        return None

    def get_partition_or_error(self, topic: str, index: int) -> tuple[Partition | None, int]:
        """The hosted partition, or UNKNOWN_TOPIC_OR_PARTITION (share fetches ask this way)."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return partition, ErrorCode.NONE

    def _new_partition(self, topic: str, index: int, topic_id: bytes) -> Partition:
        """Host a partition: its log is created (or found, after a restart) and its high watermark
        starts from the checkpoint. A log that cannot be made (no descriptors, no disk) raises
        KafkaError (KAFKA_STORAGE_ERROR) and nothing is hosted."""
        # a log loaded at startup has its config: working it out again per partition costs seconds at 50,000
        log_ = self.log_manager.get_log(topic, index) or \
            self.log_manager.get_or_create_log(topic, index, self.topic_config(topic))
        hw = self._hw_checkpoints.pop((topic, index), None)
        if hw is not None:
            log_.update_high_watermark(hw)
        cache = self.metadata_cache
        partition = Partition(topic, index, topic_id, self.broker_id, log_,
                              on_high_watermark_moved=self._complete_delayed,
                              alter_partition_manager=self.alter_partition_manager,
                              replica_lag_time_max_ms=self.replica_lag_time_max_ms,
                              is_broker_alive=cache.is_alive if cache is not None else None,
                              isr_change_meters=self.isr_change_meters)
        self.partitions[(topic, index)] = partition
        high_watermark_moves()     # a draw of its own: the next checkpoint walks the partitions again
        future = self.log_manager.get_future_log(topic, index)
        if future is not None:     # a move that the last run did not finish goes on
            log.info("resuming the move of %s-%d to %s", topic, index, os.path.dirname(future.dir))
            partition.set_future_log(future)
            self.alter_log_dirs_manager.add(partition)
        return partition

    def apply_local_leadership(self, topic: str, topic_id: bytes, states: dict[int, PartitionLeadership],
                               messages: dict[int, str] | None = None) -> dict[int, int]:
        """The local controller's publication (a single node has no LeaderAndIsr): apply leadership for
        partitions of one topic.

        Returns {partition: error}; leaders start serving at once. An older leader epoch
        than the partition's is refused with STALE_CONTROLLER_EPOCH. A log that cannot be made
        (no descriptors, no disk) is KAFKA_STORAGE_ERROR for its partition, its message put in
        ``messages`` when given.
        """
        errors = {}
        for index, state in states.items():
            partition = self.partitions.get((topic, index))
            created = partition is None
            if partition is None:
                if self.broker_id not in state.replicas:
                    errors[index] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                try:
                    partition = self._new_partition(topic, index, topic_id)
                except KafkaError as e:
                    log.error("%s", e.message)
                    errors[index] = e.error_code
                    if messages is not None:
                        messages[index] = e.message
                    continue
            elif state.leader_epoch < partition.leader_epoch:
                errors[index] = ErrorCode.STALE_CONTROLLER_EPOCH
                continue
            try:
                if state.leader == self.broker_id:
                    partition.make_leader(state)
                else:
                    partition.make_follower(state)
            except OSError as e:
                # the leader-epoch checkpoint could not be written (no disk, no inodes): as a log that could
                # not be made, KAFKA_STORAGE_ERROR, and a partition made just now is not kept
                message = f"cannot create the log of {topic}-{index}: {e.strerror or e}"
                log.error("%s", message)
                errors[index] = ErrorCode.KAFKA_STORAGE_ERROR
                if messages is not None:
                    messages[index] = message
                if created:
                    self.partitions.pop((topic, index), None)
                    try:
                        self.log_manager.delete_log(topic, index)
                    except OSError as gone:
                        log.error("cannot remove the log of %s-%d: %s", topic, index, gone)
                continue
            errors[index] = ErrorCode.NONE
            self._complete_delayed(partition.key)
        return errors

    def become_leader_or_follower(self, controller_id: int, controller_epoch: int, topics) -> LeaderAndIsrResult:
        """LeaderAndIsr from the controller (Kafka's becomeLeaderOrFollower, by name too).

        ``topics`` holds (name, topic id, {partition: PartitionLeadership}). A request from an older
        controller epoch is refused whole (STALE_CONTROLLER_EPOCH). Per partition: a newer leader
        epoch is applied if this broker is a replica (else UNKNOWN_TOPIC_OR_PARTITION), an older one
        is STALE_CONTROLLER_EPOCH, the same one is too unless it only brings the topic id, or the
        partition was fenced (our session went: the controller re-sends the state it has).
        """
        if controller_epoch < self.controller_epoch:
            log.warning("ignoring LeaderAndIsr from controller %d: its epoch %d is older than %d", controller_id,
                        controller_epoch, self.controller_epoch)
            return LeaderAndIsrResult(ErrorCode.STALE_CONTROLLER_EPOCH,
                                      {(t, i): ErrorCode.STALE_CONTROLLER_EPOCH for t, _, states in topics
                                       for i in states}, [], [])
        self.controller_epoch = controller_epoch
        errors: dict[tuple[str, int], int] = {}
        to_lead: list[tuple[str, int, bytes, PartitionLeadership]] = []
        to_follow: list[tuple[str, int, bytes, PartitionLeadership]] = []
        for topic, topic_id, states in topics:
            for index, state in states.items():
                key = (topic, index)
                partition = self.partitions.get(key)
                current = partition.leader_epoch if partition is not None else -1
                if key in self.offline_partitions:
                    # its log dir failed: the controller marks this replica offline and elects elsewhere
                    errors[key] = ErrorCode.KAFKA_STORAGE_ERROR
                elif (partition is not None and topic_id != ZERO_UUID
                      and partition.topic_id not in (ZERO_UUID, topic_id)):
                    errors[key] = ErrorCode.INCONSISTENT_TOPIC_ID
                elif state.leader_epoch > current or (partition is not None and partition.fenced
                                                      and state.leader_epoch == current):
                    if self.broker_id not in state.replicas:
                        errors[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    else:
                        (to_lead if state.leader == self.broker_id else to_follow).append(
                            (topic, index, topic_id, state))
                elif state.leader_epoch < current:
                    errors[key] = ErrorCode.STALE_CONTROLLER_EPOCH
                elif partition is not None and topic_id != ZERO_UUID and partition.topic_id == ZERO_UUID:
                    partition.topic_id = topic_id
                    errors[key] = ErrorCode.NONE
                else:
                    errors[key] = ErrorCode.STALE_CONTROLLER_EPOCH
        leaders = self._make_leaders(to_lead, errors)
        followers = self._make_followers(to_follow, errors)
        return LeaderAndIsrResult(ErrorCode.NONE, errors, leaders, followers)

    def _hosted(self, topic: str, index: int, topic_id: bytes) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            partition = self._new_partition(topic, index, topic_id)
        elif partition.topic_id == ZERO_UUID:
            partition.topic_id = topic_id
        return partition

    def _make_leaders(self, entries, errors) -> list[Partition]:
        made = []
        if self.fetcher_manager is not None:
            self.fetcher_manager.remove_fetcher_for_partitions([(t, i) for t, i, _, _ in entries])
        for topic, index, topic_id, state in entries:
            key = (topic, index)
            self._awaiting_leader.discard(key)
            partition = None
            try:
                partition = self._hosted(topic, index, topic_id)
                if partition.make_leader(state):
                    made.append(partition)
                if self.fenced:
                    partition.fence()
                errors[key] = ErrorCode.NONE
            except (KafkaError, OSError) as e:
                log.error("cannot become leader of %s-%d: %s", topic, index, e)
                if isinstance(e, OSError) and partition is not None:
                    self._partition_dir_failed(partition, "starting a leader epoch", e)
                if partition is not None:
                    # half made (a full disk while starting the epoch): it must not act as leader, with no
                    # epoch start and no follower states; it answers NOT_LEADER_OR_FOLLOWER until told again
                    partition.fence()
                errors[key] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            self._complete_delayed(key)
        return made

    def _make_followers(self, entries, errors) -> list[Partition]:
        """Kafka's makeFollowers: the old fetchers stop, waiting operations are answered, and a
        fetcher starts from the log end offset (from the high watermark if the log has no epochs)."""
        changed = []
        for topic, index, topic_id, state in entries:
            key = (topic, index)
            partition = None
            try:
                partition = self._hosted(topic, index, topic_id)
                if partition.make_follower(state):
                    changed.append(partition)
                errors[key] = ErrorCode.NONE
            except (KafkaError, OSError) as e:
                log.error("cannot become follower of %s-%d: %s", topic, index, e)
                if isinstance(e, OSError) and partition is not None:
                    self._partition_dir_failed(partition, "becoming a follower", e)
                errors[key] = ErrorCode.KAFKA_STORAGE_ERROR
        if self.fetcher_manager is not None:
            self.fetcher_manager.remove_fetcher_for_partitions([p.key for p in changed])
        for partition in changed:
            self._complete_delayed(partition.key)
            self._awaiting_leader.add(partition.key)
        self.maybe_start_fetchers()
        return changed

    def maybe_start_fetchers(self) -> None:
        """Start fetching for followers whose leader's address is now known (after UpdateMetadata)."""
        if self.fetcher_manager is None or not self._awaiting_leader or self.stopping:
            return
        ready = {}
        for key in list(self._awaiting_leader):
            partition = self.partitions.get(key)
            if partition is None or partition.leader_id == self.broker_id or partition.leader_id < 0:
                self._awaiting_leader.discard(key)
                continue
            endpoint = self.leader_endpoint(partition.leader_id)
            if endpoint is None:
                continue
            self._awaiting_leader.discard(key)
            init = partition.log_end_offset if partition.latest_epoch is not None else partition.high_watermark
            ready[key] = InitialFetchState(endpoint, partition.topic_id, partition.leader_epoch, init)
        if ready:
            self.fetcher_manager.add_fetcher_for_partitions(ready)

    def leader_endpoint(self, broker_id: int) -> BrokerEndPoint | None:
        cache = self.metadata_cache
        if cache is None:
            return None
        e = cache.endpoint(broker_id, self.inter_broker_listener) if self.inter_broker_listener else None
        if e is None and self.inter_broker_listener is None:
            broker = cache.brokers.get(broker_id)
            e = broker.endpoints[0] if broker is not None and broker.endpoints else None
        return BrokerEndPoint(broker_id, e.host, e.port) if e is not None else None

    def stop_replicas(self, topic: str, indexes, delete: bool) -> None:
        """The local controller's topic deletion: stop hosting; with ``delete`` the logs go too."""
        self._stop_partitions([((topic, index), delete) for index in indexes])

    def apply_stop_replica(self, controller_id: int, controller_epoch: int, entries
                           ) -> tuple[int, dict[tuple[str, int], int]]:
        """StopReplica (Kafka's stopReplicas): ``entries`` of (topic, partition, leader epoch, delete).

        A partition hosted here is stopped when the request's epoch is -2 (topic deletion),
        -1 (no epoch) or not older than ours, else FENCED_LEADER_EPOCH. Its fetcher stops; with
        delete the partition and its log go (also a log left from before a restart).
        """
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH, {}
        self.controller_epoch = controller_epoch
        errors: dict[tuple[str, int], int] = {}
        stopping = []
        for topic, index, leader_epoch, delete in entries:
            key = (topic, index)
            partition = self.partitions.get(key)
            if key in self.offline_partitions:
                errors[key] = ErrorCode.KAFKA_STORAGE_ERROR
            elif partition is None or leader_epoch in (EPOCH_DURING_DELETE, NO_EPOCH) \
                    or leader_epoch >= partition.leader_epoch:
                stopping.append((key, delete))
                errors[key] = ErrorCode.NONE
            else:
                errors[key] = ErrorCode.FENCED_LEADER_EPOCH
        self._stop_partitions(stopping)
        return ErrorCode.NONE, errors

    def _stop_partitions(self, stopping) -> None:
        if self.fetcher_manager is not None:
            self.fetcher_manager.remove_fetcher_for_partitions([key for key, _ in stopping])
        self.alter_log_dirs_manager.remove([key for key, delete in stopping if delete])
        for key, delete in stopping:
            self._awaiting_leader.discard(key)
            if delete:
                if (partition := self.partitions.get(key)) is not None:
                    partition.remove_future_log()
                self.partitions.pop(key, None)
                self._hw_checkpoints.pop(key, None)
                high_watermark_moves()
                self.log_manager.delete_log(*key)
            self._complete_delayed(key)
        deleted = {key[0] for key, delete in stopping if delete}
        for topic in deleted - {t for t, _ in self.partitions}:   # its last partition here went: so do its metrics
            self.broker_topic_stats.remove_topic(topic)

    # -- the ZooKeeper session --------------------------------------------------------------------
    def fence_leadership(self) -> list[Partition]:
        """Stop acting as leader everywhere (our ZooKeeper session is in doubt or gone): produce and
        fetch get NOT_LEADER_OR_FOLLOWER, waiting operations are answered. Returns the partitions that
        were led. Partitions this broker follows keep fetching."""
        self.fenced = True
        stopped = [p for p in self.partitions.values() if p.fence()]
        for partition in self.partitions.values():
            self._complete_delayed(partition.key)
        return stopped

    def unfence_leadership(self, restore: bool) -> list[Partition]:
        """Leadership may resume. With ``restore`` (the same session came back, so no other broker
        was made leader) every partition leads again as before; otherwise (a new session) each stays
        fenced until a LeaderAndIsr names its leader again. Returns the partitions led again."""
        self.fenced = False
        if not restore:
            return []
        return [p for p in self.partitions.values() if p.fenced and p.unfence()]

    def topic_config_changed(self, topic: str) -> None:
        self.log_manager.update_config(topic, self.topic_config(topic))

    def not_hosted_error(self, topic: str, index: int) -> int:
        """Kafka's answer for a partition this broker does not host: KAFKA_STORAGE_ERROR when its log dir
        failed, NOT_LEADER_OR_FOLLOWER when the cluster's metadata has it (another broker leads it: the
        client refreshes its metadata and moves there), else UNKNOWN_TOPIC_OR_PARTITION."""
        if (topic, index) in self.offline_partitions:
            return ErrorCode.KAFKA_STORAGE_ERROR
        cache = self.metadata_cache
        if cache is not None and cache.partition_state(topic, index) is not None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def _complete_delayed(self, key) -> None:
        """Leadership changed or data moved: waiting operations on ``key`` re-check themselves."""
        if self.produce_purgatory is not None:
            self.produce_purgatory.check_and_complete(key)
            self.fetch_purgatory.check_and_complete(key)
            self.delete_records_purgatory.check_and_complete(key)

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
        stats = self.broker_topic_stats
        if partition is None:
            stats.all_topics.total_produce_requests += 1
            return ProduceResult(self.not_hosted_error(topic, index))
        try:
            info, hw_moved = partition.append_records_to_leader(records, origin, required_acks)
        except KafkaError as e:
            stats.record_failed_append(topic, len(records), e.error_code in REJECTED)
            # as Kafka's appendToLocalLog: every refusal but a few reports the partition's log start offset
            start = -1 if e.error_code in NO_LOG_START_OFFSET else partition.log_start_offset
            return ProduceResult(e.error_code, log_start_offset=start, record_errors=e.record_errors,
                                 error_message=str(e) or None)
        except OSError as e:     # a full or failing disk: nothing was acknowledged, the client retries
            log.error("cannot append to %s-%d: %s", topic, index, e)
            stats.record_failed_append(topic, len(records), False)
            self._partition_dir_failed(partition, f"appending to {topic}-{index}", e)
            return ProduceResult(ErrorCode.KAFKA_STORAGE_ERROR,
                                 error_message=f"cannot append to {topic}-{index}: {e.strerror or e}")
        stats.record_append(topic, len(records), 0 if info.duplicate else info.last_offset - info.first_offset + 1)
        key = partition.key
        if hw_moved:
            self.produce_purgatory.check_and_complete(key)
        self.fetch_purgatory.check_and_complete(key)
        return ProduceResult(ErrorCode.NONE, info.first_offset, info.log_append_time, info.log_start_offset,
                             required_offset=info.last_offset + 1)

    def has_ongoing_transaction(self, topic: str, index: int, producer_id: int, producer_epoch: int) -> bool:
        partition = self.partitions.get((topic, index))
        return partition is not None and partition.has_ongoing_transaction(producer_id, producer_epoch)

    # -- fetch -------------------------------------------------------------------------------------
    def fetch_messages(self, params: FetchParams, fetches: list):
        """Read each (topic, partition, PartitionFetchInfo); wait in the purgatory for MinBytes.

        Returns the LogReadResults in order, or a future of them. Kafka answers at once
        when the wait is 0, nothing was asked, MinBytes is there, or any partition has an
        error or a diverging epoch.
        """
        results = self.read_from_local_log(params, fetches)
        rlm = self.remote_log_manager
        if rlm is not None and params.replica_id < 0:
            # KIP-405: a consumer's offset below the local log start but in remote storage is read from there
            remote = [i for i, r in enumerate(results) if r.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
                      and r.log_start_offset <= fetches[i][2].fetch_offset
                      and rlm.holds(fetches[i][0], fetches[i][1], fetches[i][2].fetch_offset)]
            if remote:
                return asyncio.ensure_future(rlm.delayed_remote_fetch(params, fetches, results, remote))
        if params.max_wait_ms <= 0 or not fetches or params.min_bytes <= 0:
            return results
        total = 0
        for r in results:
            if r.error_code or r.diverging_epoch is not None or r.preferred_read_replica >= 0:
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
        stats = self.broker_topic_stats
        out = []
        for topic, index, info in fetches:
            partition = self.partitions.get((topic, index))
            if partition is None:
                stats.all_topics.total_fetch_requests += 1
                stats.all_topics.failed_fetch_requests += 1
                out.append(LogReadResult(self.not_hosted_error(topic, index), None, -1, -1, -1, -1))
                continue
            if params.client_rack and self.rack_aware_reads:
                preferred = partition.preferred_read_replica(params.client_rack, info.fetch_offset, self._rack_of)
                if preferred >= 0:      # KIP-392: nothing read here, the consumer goes to that replica
                    out.append(LogReadResult(ErrorCode.NONE, None, partition.high_watermark,
                                             partition.log_start_offset, partition.log_end_offset,
                                             partition.last_stable_offset, preferred_read_replica=preferred))
                    continue
            min_one = params.min_one_message_always or remaining == params.max_bytes
            result = partition.fetch_records(params.replica_id, info.fetch_offset,
                                             max(min(info.max_bytes, remaining), 0), isolation,
                                             info.current_leader_epoch, info.last_fetched_epoch, min_one,
                                             info.log_start_offset, params.fetch_only_from_leader)
            if result.info is not None:
                remaining -= result.info.records.size
            stats.record_fetch(topic, result.error_code != 0)
            out.append(result)
        return out

    def _rack_of(self, broker_id: int) -> str | None:
        """An alive broker's broker.rack (None: no rack, or not alive)."""
        broker = self.metadata_cache.brokers.get(broker_id)
        return broker.rack if broker is not None else None

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

    # -- the follower's side, for the replica fetcher ----------------------------------------------
    def follower_offsets(self, topic: str, index: int) -> FollowerOffsets | None:
        partition = self.partitions.get((topic, index))
        if partition is None:
            return None
        return FollowerOffsets(partition.log_start_offset, partition.log_end_offset, partition.high_watermark,
                               partition.latest_epoch)

    def follower_end_offset_for_epoch(self, topic: str, index: int, epoch: int):
        partition = self.partitions.get((topic, index))
        return partition.end_offset_for_epoch(epoch) if partition is not None else None

    def append_to_follower(self, topic: str, index: int, fetch_offset: int, records, leader_high_watermark: int,
                           leader_log_start_offset: int):
        """Append what a follower fetched (Kafka's processPartitionData); the LogAppendInfo, or None if
        nothing was appended. The fetch must start at our log end offset, else the state is corrupt."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if partition.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic}-{index} is led here")
        if fetch_offset != partition.log_end_offset:
            raise RuntimeError(f"offset mismatch for {topic}-{index}: fetched {fetch_offset}, "
                               f"log end offset {partition.log_end_offset}")
        size = len(records)
        try:
            info = partition.append_records_to_follower(records) if size else None
        except OSError as e:
            raise self._partition_dir_failed(partition, f"appending to follower {topic}-{index}", e) from None
        partition.update_follower_high_watermark(leader_high_watermark, leader_log_start_offset)
        if size:            # Kafka's processPartitionData: ReplicationBytesInPerSec counts what was appended
            self.broker_topic_stats.record_replication_bytes_in(size)
        return info

    def truncate_follower(self, topic: str, index: int, offset: int) -> None:
        partition = self.partitions.get((topic, index))
        # at or past our end too: the log then drops only leader epochs that start at its end (as Kafka's
        # truncateTo does), an epoch we led without writing; kept, the next fetch diverges again, forever
        try:
            truncated = partition is not None and partition.truncate_to(offset)
        except OSError as e:
            raise self._partition_dir_failed(partition, f"truncating {topic}-{index}", e) from None
        if truncated:
            self._complete_delayed(partition.key)

    def truncate_follower_fully(self, topic: str, index: int, offset: int) -> None:
        partition = self.partitions.get((topic, index))
        if partition is not None:
            try:
                partition.truncate_fully_and_start_at(offset)
            except OSError as e:
                raise self._partition_dir_failed(partition, f"truncating {topic}-{index}", e) from None
            self._complete_delayed(partition.key)

    def build_remote_log_aux_state(self, topic: str, index: int, next_offset: int, epochs: list[tuple[int, int]],
                                   snapshot: bytes) -> None:
        """The replica fetcher's OFFSET_MOVED_TO_TIERED_STORAGE: the follower's log starts over at ``next_offset``
        with a tiered segment's leader epochs and producer snapshot (Kafka's ReplicaFetcherTierStateMachine)."""
        partition = self.partitions.get((topic, index))
        if partition is not None:
            try:
                partition.build_remote_log_aux_state(next_offset, epochs, snapshot)
            except OSError as e:
                raise self._partition_dir_failed(partition, f"truncating {topic}-{index}", e) from None
            if self.remote_log_manager is not None:
                self.remote_log_manager.sync_partition(partition)
            self._complete_delayed(partition.key)

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

    def delete_records(self, timeout_ms: int, offsets: list):
        """DeleteRecords for each (topic, partition, offset): (error, low watermark) in order, or a future of
        them when a follower has yet to delete as far (Kafka's DelayedDeleteRecords)."""
        wanted, results = [], []
        for topic, index, offset in offsets:
            partition = self.partitions.get((topic, index))
            required = None
            if partition is None:
                results.append([self.not_hosted_error(topic, index), -1])
            else:
                try:
                    required = partition.delete_records_on_leader(offset)
                    results.append([ErrorCode.NONE, -1])
                except KafkaError as e:
                    results.append([e.error_code, -1])
            wanted.append((topic, index, required))
        op = DelayedDeleteRecords(timeout_ms, self, wanted, results)
        keys = [(topic, index) for topic, index, required in wanted if required is not None]
        if not keys:
            op.force_complete()
            return [tuple(r) for r in results]
        if self.delete_records_purgatory.try_complete_else_watch(op, keys):
            return [tuple(r) for r in results]
        op.future = asyncio.get_running_loop().create_future()
        return op.future

    # -- descriptions -------------------------------------------------------------------------------
    def describe_log_dirs(self) -> dict[str, list[tuple[str, int, int, int, bool]]]:
        """DescribeLogDirs (Kafka's describeLogDirs): {log dir: [(topic, partition, size, offset lag,
        is future)]}. A log's lag is how far its end is below the high watermark (0 on a leader); a
        future log's is how far it is behind the partition's log."""
        out: dict[str, list] = {d: [] for d in self.log_manager.log_dirs}
        for (topic, index), partition in list(self.partitions.items()):
            parent = os.path.dirname(partition.log_dir)
            if parent in out:
                out[parent].append((topic, index, partition.log_size,
                                    max(partition.high_watermark - partition.log_end_offset, 0), False))
            future = partition.future_log_dir
            if future in out:
                out[future].append((topic, index, partition.future_log_size,
                                    max(partition.log_end_offset - partition.future_log_end_offset, 0), True))
        return out

    @property
    def cordoned_log_dirs(self) -> frozenset[str]:
        return self.log_manager.cordoned_log_dirs

    # -- moving replicas between log dirs (AlterReplicaLogDirs) ----------------------------------
    def alter_replica_log_dirs(self, partition_dirs: dict[tuple[str, int], str]) -> dict[tuple[str, int], int]:
        """Kafka's alterReplicaLogDirs: {(topic, partition): destination dir} -> {(topic, partition): error}.

        Per partition: a topic whose future dir name would pass 255 bytes is INVALID_TOPIC_EXCEPTION, a dir
        not in log.dirs LOG_DIR_NOT_FOUND, an offline one (or any offline dir: no future log is made while
        one is) KAFKA_STORAGE_ERROR, a cordoned one INVALID_REPLICA_ASSIGNMENT. A move already going to
        another dir stops (its future log is deleted). The dir is remembered for a partition not hosted
        yet (created there when it comes), which answers REPLICA_NOT_AVAILABLE. A hosted partition not in
        that dir gets a future log there and the move starts."""
        return {key: self._alter_replica_log_dir(*key, destination)
                for key, destination in partition_dirs.items()}

    def _alter_replica_log_dir(self, topic: str, index: int, destination: str) -> int:
        lm = self.log_manager
        if len(f"{topic}-{index}.{'0' * 32}{FUTURE_DIR_SUFFIX}".encode()) > 255:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        try:
            if not lm.is_log_dir_online(destination):
                return ErrorCode.KAFKA_STORAGE_ERROR
        except KafkaError as e:
            return e.error_code
        if destination in lm.cordoned_log_dirs:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT
        key = (topic, index)
        if key in self.offline_partitions:
            return ErrorCode.KAFKA_STORAGE_ERROR
        partition = self.partitions.get(key)
        if partition is not None and partition.future_replica_dir_changed(destination):
            self._stop_move(partition)
        lm.maybe_update_preferred_log_dir(topic, index, destination)
        if partition is None:
            return ErrorCode.REPLICA_NOT_AVAILABLE
        if os.path.dirname(partition.log_dir) == destination or partition.future_log is not None:
            return ErrorCode.NONE
        if self.offline_log_dirs:
            return ErrorCode.KAFKA_STORAGE_ERROR
        try:
            future = lm.create_future_log(topic, index, self.topic_config(topic))
        except KafkaError as e:
            log.error("%s", e.message)
            return e.error_code
        log.info("moving %s-%d from %s to %s", topic, index, os.path.dirname(partition.log_dir), destination)
        partition.set_future_log(future)
        self.alter_log_dirs_manager.add(partition)
        return ErrorCode.NONE

    def _stop_move(self, partition: Partition) -> None:
        self.alter_log_dirs_manager.remove([partition.key])
        if partition.remove_future_log() is not None:
            self.log_manager.delete_future_log(partition.topic, partition.index)

    def _replace_current_with_future_log(self, partition: Partition) -> bool:
        """The mover's last step, on the event loop: the future log takes over (Partition's swap)."""
        if self.partitions.get(partition.key) is not partition:
            return False
        source = os.path.dirname(partition.log_dir)
        try:
            replaced = partition.maybe_replace_current_with_future_log(
                lambda: self.log_manager.replace_current_with_future_log(partition.topic, partition.index),
                MAX_TAIL_BYTES)
        except OSError as e:
            log.error("cannot replace %s-%d with its future log: %s", partition.topic, partition.index, e)
            raise self._partition_dir_failed(partition, f"moving {partition.topic}-{partition.index}", e) from None
        if replaced:
            log.info("moved %s-%d from %s to %s", partition.topic, partition.index, source,
                     os.path.dirname(partition.log_dir))
            high_watermark_moves()        # its high watermark belongs to another dir's checkpoint now
            self._complete_delayed(partition.key)
        return replaced

    def _move_failed(self, partition: Partition, error: BaseException) -> None:
        """A mover thread stopped on ``error`` (on the event loop): a disk error takes its dir offline in a
        cluster; the future log stays, and the next start resumes the move."""
        log.error("moving %s-%d to %s stopped: %s", partition.topic, partition.index, partition.future_log_dir,
                  error)
        if isinstance(error, OSError) and partition.future_log_dir is not None:
            self._dir_failed(partition.future_log_dir, f"moving {partition.topic}-{partition.index}", error)

    # -- failed log directories (Kafka's LogDirFailureChannel / handleLogDirFailure) --------------
    def _dir_failed(self, directory: str, what: str, error: OSError) -> None:
        channel = self.log_dir_failure_channel
        if channel is not None:
            channel.maybe_add_offline_log_dir(directory, f"error while {what} in dir {directory}", error)

    def _partition_dir_failed(self, partition: Partition, what: str, error: OSError) -> KafkaError:
        """Report the partition's log dir (a cluster member takes it offline); the error to answer with."""
        self._dir_failed(os.path.dirname(partition.log_dir), what, error)
        return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"error while {what}: {error.strerror or error}")

    def handle_log_dir_failure(self, directory: str) -> list[Partition]:
        """Stop serving everything in ``directory`` (on the event loop): its partitions go offline (their
        fetchers stop, waiting operations are answered, requests for them get KAFKA_STORAGE_ERROR) and
        the LogManager forgets its logs. Returns the partitions taken offline."""
        if directory in self.offline_log_dirs:
            return []
        log.warning("broker %d: stopping serving replicas in dir %s", self.broker_id, directory)
        self.offline_log_dirs.append(directory)
        keys = [k for k, p in self.partitions.items() if os.path.dirname(p.log_dir) == directory]
        moving = [p for p in self.partitions.values() if directory in (p.future_log_dir, os.path.dirname(p.log_dir))
                  and p.future_log is not None]
        self.alter_log_dirs_manager.remove([p.key for p in moving])
        for partition in moving:       # the LogManager forgets the future logs of the dir; the others stay on disk
            partition.remove_future_log()
        if self.fetcher_manager is not None:
            self.fetcher_manager.remove_fetcher_for_partitions(keys)
        removed = [self.partitions.pop(k) for k in keys]
        # logs loaded from the dir that no LeaderAndIsr has named yet are offline as well
        self.offline_partitions.update(keys, self.log_manager.handle_log_dir_failure(directory))
        for key in keys:
            self._awaiting_leader.discard(key)
            self._complete_delayed(key)
        self._hw_written.pop(directory, None)
        high_watermark_moves()
        log.warning("broker %d: stopped serving %d replicas in the failed log dir %s", self.broker_id, len(keys),
                    directory)
        return removed
