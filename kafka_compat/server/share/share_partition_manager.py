"""SharePartitionManager (KIP-932): the share partitions this leader holds, and what ShareFetch and
ShareAcknowledge do with them.

One SharePartition per (group, topic, partition), made at the group's first fetch of it, its start
offset from the group's `share.auto.offset.reset` (latest, earliest, by_duration:<ISO-8601>) asked of
ReplicaManager as ListOffsets asks it. A fetch reads through ReplicaManager.fetch_messages, the
consumers' own path (file slices sent with sendfile; a fetch finding nothing waits in the fetch
purgatory for MinBytes or MaxWaitMs), starting at each partition's next fetch offset; the batches
read are then acquired for the member (whole batches, up to MaxRecords across the request) and the
read is cut after the last acquired batch. Batch headers are walked, records never.

Acquisition locks run out on a timer per share partition, armed at its earliest lock expiry. With a
persister (share/persister.py: the share coordinator, in-process or over the inter-broker listener) a
share partition's state is read at its first fetch under this leader epoch (a share partition never
initialized there is initialized at its `share.auto.offset.reset` start), and written after every change
it must keep (acknowledgements, releases, expired locks, offset resets), one write at a time per share
partition, each carrying the whole state. An acknowledgement is answered once its write is done
(`persisted`). Leadership that moved away and back reads the state again: another leader may have
changed it meanwhile.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable, NamedTuple

from kafka_compat.storage.fetch_data_info import FetchIsolation

from ...clock import now_ms
from ...group.group_config import GroupConfig
from ...protocol.errors import ErrorCode
from ...sentinels import CONSUMER_REPLICA_ID
from ..delayed_fetch import FetchParams, PartitionFetchInfo
from .share_coordinator_shard import PersistedState
from .share_fetch_utils import aborted_batches, read_batch_spans, truncate_read
from .share_partition import AckBatch, AcquiredRecords, SharePartition

log = logging.getLogger(__name__)
E = ErrorCode
LATEST_TIMESTAMP, EARLIEST_TIMESTAMP = -1, -2
WRITE, INITIALIZE, DELETE = 0, 1, 2         # what a share partition's next write does


class SharePartitionResult(NamedTuple):
    error_code: int
    records: object             # a FetchResult (possibly empty), or None on error
    acquired: list              # AcquiredRecords
    error_message: str | None = None


class SharePartitionManager:
    def __init__(self, replica_manager, group_config: Callable[[str], GroupConfig], clock=now_ms, persister=None):
        """``group_config(group id)``: the group's share.* configs (GroupConfigManager.group_config);
        ``persister``: the ShareCoordinator keeping share partitions' state (None: in memory only)."""
        self.replica_manager = replica_manager
        self.group_config = group_config
        self.clock = clock
        self.persister = persister
        self.partitions: dict[tuple[str, str, int], SharePartition] = {}
        self.topic_ids: dict[tuple[str, str, int], bytes] = {}
        self.state_epochs: dict[tuple[str, str, int], int] = {}
        self._timers: dict[tuple[str, str, int], tuple[int, asyncio.TimerHandle]] = {}
        self._loads: dict[tuple[str, str, int], asyncio.Task] = {}
        self._writers: dict[tuple[str, str, int], _StateWriter] = {}

    def shutdown(self) -> None:
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()

    def lock_duration_ms(self, group_id: str) -> int:
        return int(self.group_config(group_id)["share.record.lock.duration.ms"])

    # ------------------------------------------------------------ share partitions
    def _isolation(self, cfg: dict) -> FetchIsolation:
        return FetchIsolation.TXN_COMMITTED if cfg["share.isolation.level"] == "read_committed" \
            else FetchIsolation.HIGH_WATERMARK

    def _start_offset(self, topic: str, index: int, cfg: dict) -> tuple[int, int]:
        """(error, start offset) from share.auto.offset.reset."""
        reset, duration_ms = cfg.auto_offset_reset()
        timestamp = EARLIEST_TIMESTAMP if reset == "earliest" else LATEST_TIMESTAMP
        if reset == "by_duration":
            timestamp = self.clock() - duration_ms
        error, found = self.replica_manager.fetch_offset_for_timestamp(topic, index, timestamp,
                                                                       self._isolation(cfg))
        if error:
            return error, -1
        if found is None:       # nothing at or after that time: the latest offset
            error, found = self.replica_manager.fetch_offset_for_timestamp(topic, index, LATEST_TIMESTAMP,
                                                                           self._isolation(cfg))
            if error:
                return error, -1
        return E.NONE, found.offset

    def _needs_load(self, key) -> bool:
        """Whether the share partition's state must be read from the persister first: a leader reads it once
        (an ISR change bumps the leader epoch in ZooKeeper mode, and keeps the state here); leadership lost
        forgets it (`on_leadership_lost`), so that leading again reads what another leader wrote meanwhile."""
        return self.persister is not None and key not in self.partitions

    def on_leadership_lost(self, topic: str, index: int) -> None:
        """This broker no longer leads the partition: its share partitions go (their locks with them)."""
        keys = [k for k in self.partitions if k[1] == topic and k[2] == index]
        for key in keys:
            self._forget(key)
        if keys:
            log.info("share partitions of %s-%d forgotten: leadership moved", topic, index)

    async def _load(self, key, partition, cfg) -> int:
        """Read the share partition's state from the persister (initializing it when it has none)."""
        group_id, topic, index = key
        topic_id, leader_epoch = partition.topic_id, partition.leader_epoch
        error, kept = await self.persister.read(group_id, topic_id, index, leader_epoch)
        if error:
            return _persister_error(error)
        if kept is not None and kept.start_offset >= 0:
            sp = SharePartition.from_state(kept.start_offset, kept.batches)
            log.info("share partition %s %s-%d resumes at %d", group_id, topic, index, sp.start_offset)
            epoch = kept.state_epoch
        else:
            error, start = self._start_offset(topic, index, cfg)
            if error:
                return error
            epoch = kept.state_epoch if kept is not None else 0
            error = await self.persister.initialize(group_id, topic_id, index, epoch, start)
            if error:
                return _persister_error(error)
            sp = SharePartition(start)
            log.info("share partition %s %s-%d starts at %d", group_id, topic, index, start)
        if not partition.is_leader or partition.leader_epoch != leader_epoch:     # leadership moved meanwhile
            return E.NOT_LEADER_OR_FOLLOWER
        self._forget(key)
        self.partitions[key], self.topic_ids[key], self.state_epochs[key] = sp, topic_id, epoch
        return E.NONE

    def _loading(self, key, partition, cfg) -> asyncio.Task:
        task = self._loads.get(key)
        if task is None or task.done():
            task = self._loads[key] = asyncio.get_running_loop().create_task(self._load(key, partition, cfg))
            task.add_done_callback(lambda t, key=key: self._loads.pop(key, None) if self._loads.get(key) is t
                                   else None)
        return task

    def _share_partition(self, group_id: str, topic: str, index: int, cfg: dict) -> tuple[int, SharePartition | None]:
        key = (group_id, topic, index)
        sp = self.partitions.get(key)
        if sp is None:
            partition = self.replica_manager.get_partition(topic, index)
            error, start = self._start_offset(topic, index, cfg)
            if error:
                return error, None
            sp = SharePartition(start)
            log.info("share partition %s %s-%d starts at %d", group_id, topic, index, start)
            self.partitions[key] = sp
            self.topic_ids[key] = partition.topic_id if partition is not None else bytes(16)
        sp.record_lock_duration_ms = int(cfg["share.record.lock.duration.ms"])
        sp.delivery_count_limit = int(cfg["share.delivery.count.limit"])
        sp.max_record_locks = int(cfg["share.partition.max.record.locks"])
        return E.NONE, sp

    # ------------------------------------------------------------ fetching
    def fetch(self, group_id: str, member_id: str, wanted: list, max_wait_ms: int, min_bytes: int, max_bytes: int,
              max_records: int):
        """``wanted``: [(topic name, index)]. Returns {(topic, index): SharePartitionResult}, or a future of it."""
        cfg = self.group_config(group_id)
        loads = {}
        for topic, index in wanted:
            partition = self.replica_manager.get_partition(topic, index)
            if partition is not None and partition.is_leader and self._needs_load((group_id, topic, index)):
                loads[(topic, index)] = self._loading((group_id, topic, index), partition, cfg)
        if loads:
            return asyncio.ensure_future(self._fetch_loaded(group_id, member_id, wanted, loads, max_wait_ms, min_bytes,
                                                            max_bytes, max_records))
        return self._fetch(group_id, member_id, wanted, max_wait_ms, min_bytes, max_bytes, max_records, {})

    async def _fetch_loaded(self, group_id, member_id, wanted, loads, max_wait_ms, min_bytes, max_bytes, max_records):
        """The fetch once the share partitions' states are read; those that could not be answer the error."""
        out = {}
        for k, task in loads.items():
            error = await task
            if error:
                out[k] = SharePartitionResult(error, None, [])
        rest = [k for k in wanted if k not in out]
        result = self._fetch(group_id, member_id, rest, max_wait_ms, min_bytes, max_bytes, max_records, out) \
            if rest else out
        return await result if isinstance(result, asyncio.Future) else result

    def _fetch(self, group_id: str, member_id: str, wanted: list, max_wait_ms: int, min_bytes: int, max_bytes: int,
               max_records: int, out: dict):
        cfg = self.group_config(group_id)
        now = self.clock()
        fetches = []
        per_partition = max(max_bytes // max(len(wanted), 1), 1)
        for topic, index in wanted:
            partition, error = self.replica_manager.get_partition_or_error(topic, index)
            if not error and partition is not None and not partition.is_leader:
                error = E.NOT_LEADER_OR_FOLLOWER
            if error:
                out[(topic, index)] = SharePartitionResult(error, None, [])
                continue
            if self._needs_load((group_id, topic, index)):     # leadership moved meanwhile
                out[(topic, index)] = SharePartitionResult(E.NOT_LEADER_OR_FOLLOWER, None, [])
                continue
            error, sp = self._share_partition(group_id, topic, index, cfg)
            if error:
                out[(topic, index)] = SharePartitionResult(error, None, [])
                continue
            sp.update_log_start_offset(partition.log_start_offset)
            if sp.expire_locks(now):
                self._arm(group_id, topic, index)
                self._persist((group_id, topic, index))
            if sp.can_acquire():
                fetches.append((topic, index, PartitionFetchInfo(sp.next_fetch_offset(), per_partition)))
        params = FetchParams(CONSUMER_REPLICA_ID, max_wait_ms, min_bytes, max_bytes, self._isolation(cfg))
        results = self.replica_manager.fetch_messages(params, fetches) if fetches else []
        if isinstance(results, asyncio.Future):
            answer = asyncio.get_running_loop().create_future()

            def done(f):
                if not answer.done():
                    answer.set_result(self._acquire(group_id, member_id, fetches, f.result(), max_records, out))
            results.add_done_callback(done)
            return answer
        return self._acquire(group_id, member_id, fetches, results, max_records, out)

    def _acquire(self, group_id, member_id, fetches, results, max_records: int, out: dict) -> dict:
        now = self.clock()
        remaining = max_records if max_records > 0 else 0x7FFFFFFF
        for (topic, index, _info), r in zip(fetches, results):
            if r.error_code or r.info is None:
                out[(topic, index)] = SharePartitionResult(r.error_code or E.NONE, None, [], r.error_message)
                continue
            sp = self.partitions.get((group_id, topic, index))
            records = r.info.records
            acquired: list[AcquiredRecords] = []
            if sp is not None and remaining > 0 and records.size:
                spans = read_batch_spans(records)
                acquired = sp.acquire(member_id, [(h.base_offset, h.last_offset) for h, _, _ in spans], remaining,
                                      now)
                if acquired and r.info.aborted_transactions:
                    # read_committed: an aborted transaction's records are archived, never delivered
                    aborted = aborted_batches(records, spans, r.info.aborted_transactions)
                    if aborted:
                        acquired = sp.archive_acquired(member_id, aborted, acquired)
                if acquired:
                    remaining -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
                    top = acquired[-1].last_offset
                    cut = next((end for h, end, _ in spans if h.last_offset >= top), records.size)
                    records = truncate_read(records, cut)
                    self._arm(group_id, topic, index)
            if not acquired:
                records = truncate_read(records, 0)
            out[(topic, index)] = SharePartitionResult(E.NONE, records, acquired)
        return out

    # ------------------------------------------------------------ acknowledging and releasing
    def acknowledge(self, group_id: str, member_id: str, acks: dict) -> dict:
        """``acks``: {(topic, index): [AckBatch]}. Returns {(topic, index): error code}."""
        out = {}
        for (topic, index), batches in acks.items():
            sp = self.partitions.get((group_id, topic, index))
            partition = self.replica_manager.get_partition(topic, index)
            if sp is not None and (partition is None or not partition.is_leader):
                out[(topic, index)] = E.NOT_LEADER_OR_FOLLOWER
                continue
            if sp is None:
                out[(topic, index)] = E.UNKNOWN_TOPIC_OR_PARTITION
                continue
            out[(topic, index)] = error = sp.acknowledge(member_id, [AckBatch(*b) for b in batches])
            if error == E.NONE:
                self._persist((group_id, topic, index))
        return out

    def release_session(self, group_id: str, member_id: str, partitions) -> int:
        """The member's share session closed: every record it holds in these partitions goes back."""
        released = 0
        for topic, index in partitions:
            sp = self.partitions.get((group_id, topic, index))
            if sp is not None and sp.release_member(member_id):
                released += 1
                self._persist((group_id, topic, index))
        return released

    def _persist(self, key, delete: bool = False, initialize: bool = False) -> None:
        """Hand the share partition's state to the share coordinator (its deletion with ``delete``, a new state
        epoch with ``initialize``)."""
        if self.persister is None or self.topic_ids.get(key) is None:
            return
        writer = self._writers.get(key)
        if writer is None:
            writer = self._writers[key] = _StateWriter(self, key, self.topic_ids[key])
        writer.request(DELETE if delete else INITIALIZE if initialize else WRITE)

    def _current_state(self, key):
        """(state, leader epoch, delivery-complete count) to write now; None once the share partition is gone."""
        sp = self.partitions.get(key)
        if sp is None:
            return None
        partition = self.replica_manager.get_partition(key[1], key[2])
        return (PersistedState(sp.start_offset, self.state_epochs.get(key, 0), sp.persisted_batches()),
                partition.leader_epoch if partition is not None else -1, sp.delivery_complete_count())

    async def persisted(self, keys) -> dict:
        """Wait for the writes asked so far of these share partitions; {key: error} of those that failed."""
        out = {}
        for key in keys:
            writer = self._writers.get(key)
            if writer is not None:
                error = await writer.done()
                if error:
                    out[key] = _persister_error(error)
        return out

    def has_pending_writes(self, keys) -> bool:
        return any(key in self._writers and self._writers[key].busy for key in keys)

    def _forget(self, key) -> None:
        self.partitions.pop(key, None)
        self.topic_ids.pop(key, None)
        self.state_epochs.pop(key, None)
        entry = self._timers.pop(key, None)
        if entry is not None:
            entry[1].cancel()

    def _drop(self, keys, delete_state: bool = False) -> None:
        for key in keys:
            if delete_state:
                self._persist(key, delete=True)
            self._forget(key)

    def on_topic_deleted(self, topic: str, partitions: int | None = None) -> None:
        self._drop([k for k in self.partitions if k[1] == topic], delete_state=True)

    def on_group_deleted(self, group_id: str) -> None:
        """DeleteGroups removed a share group: its share partitions' state goes with it."""
        self._drop([k for k in self.partitions if k[0] == group_id], delete_state=True)

    # ------------------------------------------------------------ offsets (Describe/Alter/DeleteShareGroupOffsets)
    def alter_start_offset(self, group_id: str, topic: str, index: int, offset: int) -> None:
        """AlterShareGroupOffsets (the group is empty): the share partition starts again at ``offset``."""
        key = (group_id, topic, index)
        old = self.partitions.get(key)
        epoch = self.state_epochs.get(key, 0) + 1       # a new state epoch fences writes of the old one
        self._drop([key] if old is not None else [])
        sp = self.partitions[key] = SharePartition(offset)
        partition = self.replica_manager.get_partition(topic, index)
        self.topic_ids[key] = partition.topic_id if partition is not None else bytes(16)
        self.state_epochs[key] = epoch
        if old is not None:
            sp.record_lock_duration_ms, sp.delivery_count_limit, sp.max_record_locks = \
                old.record_lock_duration_ms, old.delivery_count_limit, old.max_record_locks
        self._persist(key, initialize=True)

    def delete_offsets(self, group_id: str, topic: str) -> bool:
        """DeleteShareGroupOffsets: forget the group's share partitions of ``topic``; whether it had any."""
        keys = [k for k in self.partitions if k[0] == group_id and k[1] == topic]
        self._drop(keys, delete_state=True)
        return bool(keys)

    def group_topics(self, group_id: str) -> set[str]:
        return {topic for g, topic, _ in self.partitions if g == group_id}

    def offsets_summary(self, group_id: str, topic: str, index: int) -> tuple[int, int, int]:
        """(start offset, leader epoch, lag) of a share partition, (-1, -1, -1) when the group has none there.
        The lag counts the records from the start offset to the high watermark whose delivery is not over."""
        sp = self.partitions.get((group_id, topic, index))
        if sp is None:
            return -1, -1, -1
        partition = self.replica_manager.get_partition(topic, index)
        if partition is None:
            return sp.start_offset, -1, -1
        lag = max(partition.high_watermark - sp.start_offset - sp.delivery_complete_count(), 0)
        return sp.start_offset, partition.leader_epoch, lag

    # ------------------------------------------------------------ acquisition-lock timers
    def _arm(self, group_id: str, topic: str, index: int) -> None:
        key = (group_id, topic, index)
        sp = self.partitions.get(key)
        expiry = sp.earliest_lock_expiry() if sp is not None else None
        current = self._timers.get(key)
        if expiry is None or (current is not None and current[0] <= expiry):
            return
        if current is not None:
            current[1].cancel()
        delay = max(expiry - self.clock(), 0) / 1000
        self._timers[key] = (expiry, asyncio.get_running_loop().call_later(delay, self._expire, key))

    def _expire(self, key) -> None:
        self._timers.pop(key, None)
        sp = self.partitions.get(key)
        if sp is None:
            return
        released = sp.expire_locks(self.clock())
        if released:
            log.debug("share partition %s %s-%d: %d records' locks expired", *key, released)
            self._persist(key)
        self._arm(*key)


def _persister_error(error: int) -> int:
    """What a share partition answers for a persister's error (Kafka's SharePartition.fetchPersisterError)."""
    if error in (E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS):
        return E.COORDINATOR_NOT_AVAILABLE
    if error in (E.UNKNOWN_TOPIC_OR_PARTITION, E.FENCED_STATE_EPOCH, E.FENCED_LEADER_EPOCH, E.INVALID_REQUEST):
        return error
    return E.UNKNOWN_SERVER_ERROR


class _StateWriter:
    """One share partition's writes, one at a time: a write asked while another is under way is done after
    it, with the state as it is then (so it carries every change asked before it)."""

    def __init__(self, manager: SharePartitionManager, key, topic_id: bytes):
        self.manager = manager
        self.key = key
        self.topic_id = topic_id
        self.waiting: list[asyncio.Future] = []     # resolved by the next write to start
        self.mode = WRITE
        self.task: asyncio.Task | None = None

    @property
    def busy(self) -> bool:
        return self.task is not None and not self.task.done()

    def request(self, mode: int = 0) -> asyncio.Future:
        """``mode``: WRITE, INITIALIZE (a new state epoch) or DELETE; the strongest asked wins."""
        future = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        self.mode = max(self.mode, mode)
        if not self.busy:
            self.task = asyncio.get_running_loop().create_task(self._run())
        return future

    async def done(self) -> int:
        """The error of the write that carries everything asked so far."""
        if self.waiting:
            return await self.waiting[-1]
        return await self.task if self.busy else E.NONE

    async def _run(self) -> int:
        manager, (group_id, _, index) = self.manager, self.key
        error = E.NONE
        while self.waiting:
            waiting, self.waiting = self.waiting, []
            mode, self.mode = self.mode, WRITE
            current = None if mode == DELETE else manager._current_state(self.key)
            try:
                if mode == DELETE:
                    error = await manager.persister.delete(group_id, self.topic_id, index)
                elif current is not None and mode == INITIALIZE:
                    error = await manager.persister.initialize(group_id, self.topic_id, index,
                                                               current[0].state_epoch, current[0].start_offset)
                elif current is not None:
                    state, leader_epoch, complete = current
                    error = await manager.persister.write(group_id, self.topic_id, index, state, leader_epoch,
                                                          complete)
            except Exception:
                log.exception("writing the state of share partition %s %s-%d failed", *self.key)
                error = E.UNKNOWN_SERVER_ERROR
            for future in waiting:
                if not future.done():
                    future.set_result(error)
        if manager._writers.get(self.key) is self:
            del manager._writers[self.key]
        return error


__all__ = ["SharePartitionManager", "SharePartitionResult"]
