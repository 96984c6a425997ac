"""The remote log manager (Kafka's RemoteLogManager): copies rolled segments of tiered topics to remote storage,
expires them there, and answers reads below the local log start from it.

Every `remote.log.manager.task.interval.ms`, for each partition led here whose topic has
`remote.storage.enable` (and not `remote.log.copy.disable`):
- copy: each rolled segment past the highest offset already copied whose offsets are all below the last stable
  offset goes up with its offset and time indexes, the producer snapshot at its end, its leader-epoch checkpoint
  and its transaction index (storage/remote_storage_manager.py), within
  `remote.log.manager.copy.max.bytes.per.second`. COPY_SEGMENT_STARTED is written to `__remote_log_metadata`
  before the upload and COPY_SEGMENT_FINISHED after it: a segment is readable from remote only then, so a broker
  killed mid-upload leaves a started copy that the next leader deletes and copies again;
- local retention: segments copied and past `local.retention.ms`/`local.retention.bytes` leave the local disk
  (UnifiedLog.delete_old_segments); the log start offset stays at the first remote offset;
- remote retention: remote segments past `retention.ms`, or beyond `retention.bytes` with the local-only part
  counted, or wholly below the log start offset, are deleted (DELETE_SEGMENT_STARTED, the objects,
  DELETE_SEGMENT_FINISHED).
A failure (the store down or refusing) is logged and the partition's task backs off
(`remote.log.manager.task.retry.backoff.ms`, doubling to `...backoff.max.ms`); local data stays until copied.

In a cluster (Kafka's RLMCopyTask, RLMExpirationTask and RLMFollowerTask): every broker reads
`__remote_log_metadata` (remote_log_metadata.py), so every replica knows its partition's remote segments, and a
follower's local retention too deletes only what is copied. Only the leader copies and expires, and only once it
has read the partition's metadata to its end. Where copying resumes is what Kafka's findHighestRemoteOffset says:
the highest copied offset of the latest of our own leader epochs that remote storage holds, capped at that
epoch's end here, so a new leader never copies what another leader's lineage wrote. When a segment of ours began
below that offset (replicas roll segments where they each fill up) only its part above goes up, so the bucket
holds every offset once. A copy finished after our leadership moved is deleted again, never published.
A follower below the leader's local log start gets OFFSET_MOVED_TO_TIERED_STORAGE and starts its log at the end
of the remote segment below that start, with its leader-epoch checkpoint and producer snapshot
(remote_log_aux_state, Kafka's ReplicaFetcherTierStateMachine).

Reads: a consumer's fetch below the local log start but within the remote part is read on the
`remote.log.reader.threads` pool (Kafka's DelayedRemoteFetch), never on the event loop, and answered within
`remote.fetch.max.wait.ms` (empty if the store is slower: the consumer fetches again). Batches are checked
(CRC) before they are served.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import os
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import crc32c

from kafka_compat.storage.fetch_data_info import FetchDataInfo, FetchIsolation, FetchResult
from kafka_compat.storage.log_offset_metadata import LogOffsetMetadata
from kafka_compat.storage.producer_state import snapshot_path
from kafka_compat.storage.remote_storage_manager import (
    COPY_SEGMENT_FINISHED,
    COPY_SEGMENT_STARTED,
    DELETE_PARTITION_FINISHED,
    DELETE_PARTITION_MARKED,
    DELETE_PARTITION_STARTED,
    DELETE_SEGMENT_FINISHED,
    DELETE_SEGMENT_STARTED,
    RemoteLogSegmentMetadata,
    RemoteStorageError,
    S3RemoteStorageManager,
)
from kafka_compat.storage.segment import segment_paths, txn_index_path

from ..clock import now_ms
from ..protocol.errors import ErrorCode
from .partition import LogReadResult
from .remote_log_config import REMOTE_LOG_METADATA_TOPIC, rlmm_config, rsm_props
from .remote_log_metadata import TopicBasedRemoteLogMetadataManager

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">qi")          # base offset, batch length
_LAST_OFFSET_DELTA = struct.Struct(">i")
_CRC = struct.Struct(">I")


class ByteRateQuota:
    """A byte rate over `window_num` samples of `window_seconds` each (Kafka's quota windows), blocking: callers
    on worker threads wait until the rate allows their bytes."""

    def __init__(self, bytes_per_second: int, window_num: int, window_seconds: int):
        self.rate = bytes_per_second
        self.span = window_num * window_seconds
        self.samples: collections.deque = collections.deque()
        self.lock = threading.Lock()

    def acquire(self, size: int, stop: threading.Event | None = None) -> None:
        if self.rate >= 1 << 62:
            return
        while True:
            with self.lock:
                now = time.monotonic()
                while self.samples and self.samples[0][0] < now - self.span:
                    self.samples.popleft()
                used = sum(n for _, n in self.samples)
                start = self.samples[0][0] if self.samples else now
                elapsed = max(now - start, 1.0)
                if used == 0 or (used + size) / max(elapsed, self.span) <= self.rate:
                    self.samples.append((now, size))
                    return
            if stop is not None and stop.wait(0.1):
                return
            if stop is None:
                time.sleep(0.1)


def epoch_checkpoint(epochs: dict[int, int]) -> bytes:
    """A leader-epoch checkpoint file's text (version 0, count, "epoch start" lines)."""
    lines = ["0", str(len(epochs))] + [f"{e} {o}" for e, o in sorted(epochs.items())]
    return ("\n".join(lines) + "\n").encode()


def parse_epoch_checkpoint(data: bytes) -> list[tuple[int, int]]:
    """A leader-epoch checkpoint file's [(epoch, start offset)]; ValueError if it is not one."""
    lines = data.decode().split("\n")
    if lines[0].strip() != "0":
        raise ValueError(f"not a version 0 leader-epoch checkpoint: {lines[0]!r}")
    count = int(lines[1])
    out = []
    for line in lines[2:2 + count]:
        epoch, offset = line.split()
        out.append((int(epoch), int(offset)))
    if len(out) != count:
        raise ValueError("a leader-epoch checkpoint cut short")
    return out


def whole_batches(data: bytes, fetch_offset: int, max_bytes: int, min_one: bool) -> tuple[bytes, int]:
    """The whole batches of ``data`` (read from a batch boundary) that hold offsets from ``fetch_offset`` on,
    up to ``max_bytes`` (at least one when ``min_one``); and the bytes a first batch needs when ``data`` ends
    inside it (0 otherwise). Raises ValueError on a batch whose CRC does not match."""
    mv = memoryview(data)
    pos, start, end = 0, None, 0
    while pos + 12 <= len(mv):
        base, length = _HEADER.unpack_from(mv, pos)
        size = 12 + length
        if length < 0:
            raise ValueError(f"a batch of negative length at {pos}")
        magic = mv[pos + 16] if pos + 17 <= len(mv) else 2
        if pos + size > len(mv):
            if start is None and min_one:
                return b"", pos + size
            break
        last = base + _LAST_OFFSET_DELTA.unpack_from(mv, pos + 23)[0] if magic >= 2 else base
        if last >= fetch_offset:
            if magic >= 2 and crc32c.crc32c(mv[pos + 21:pos + size]) != _CRC.unpack_from(mv, pos + 17)[0]:
                raise ValueError(f"corrupt batch at offset {base} (CRC mismatch)")
            if start is None:
                start = pos
            elif pos + size - start > max_bytes:
                break
            end = pos + size
            if end - start >= max_bytes:
                break
        pos += size
    if start is None:
        return b"", 0
    if not min_one and end - start > max_bytes:
        return b"", 0
    return bytes(mv[start:end]), 0


class RemoteLogManager:
    def __init__(self, config, broker_id: int, replica_manager, metadata_cache, controller, *,
                 cluster: bool = False, send=None):
        self.config = config
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.cluster = cluster
        self.rsm = S3RemoteStorageManager(rsm_props(config))
        self.rlmm = TopicBasedRemoteLogMetadataManager(rlmm_config(config), broker_id, replica_manager,
                                                       metadata_cache, controller, cluster, send=send,
                                                       on_change=self._metadata_changed)
        self.interval_s = config["remote.log.manager.task.interval.ms"] / 1000
        self.backoff_ms = config["remote.log.manager.task.retry.backoff.ms"]
        self.backoff_max_ms = config["remote.log.manager.task.retry.backoff.max.ms"]
        self.fetch_max_wait_s = config["remote.fetch.max.wait.ms"] / 1000
        self.copy_quota = ByteRateQuota(config["remote.log.manager.copy.max.bytes.per.second"],
                                        config["remote.log.manager.copy.quota.window.num"],
                                        config["remote.log.manager.copy.quota.window.size.seconds"])
        self.fetch_quota = ByteRateQuota(config["remote.log.manager.fetch.max.bytes.per.second"],
                                         config["remote.log.manager.fetch.quota.window.num"],
                                         config["remote.log.manager.fetch.quota.window.size.seconds"])
        self.copier = ThreadPoolExecutor(config["remote.log.manager.copier.thread.pool.size"],
                                         thread_name_prefix="remote-log-copier")
        self.readers = ThreadPoolExecutor(config["remote.log.reader.threads"], thread_name_prefix="remote-log-reader")
        self.max_pending_reads = config["remote.log.reader.max.pending.tasks"]
        self.pending_reads = 0
        self._stop = threading.Event()
        self._task: asyncio.Task | None = None
        self._retry_at: dict[tuple[str, int], tuple[float, float]] = {}   # partition -> (next try, backoff ms)
        self._deletions: set[asyncio.Task] = set()
        # Kafka's BrokerTopicMetrics Remote*PerSec meters, per topic and for all topics
        self.stats = replica_manager.broker_topic_stats
        # and its gauges (broker_topic_stats.REMOTE_GAUGES) of each partition led here, as of the last run
        self.partition_gauges: dict[tuple[str, int], tuple[int, int, int, int]] = {}
        self._runs = 0

    # -- life ---------------------------------------------------------------------------------
    async def startup(self) -> None:
        await self.rlmm.start()
        if not self.cluster:
            self._sync_logs()
        self._task = asyncio.create_task(self._run(), name="remote-log-manager")

    async def shutdown(self) -> None:
        self._stop.set()
        for task in list(self._deletions):
            task.cancel()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        await self.rlmm.close()
        self.copier.shutdown(wait=True, cancel_futures=True)
        self.readers.shutdown(wait=False, cancel_futures=True)
        self.rsm.close()

    async def _run(self) -> None:
        while not self._stop.is_set():
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("remote log manager task failed")
            await asyncio.sleep(self.interval_s)

    def _tiered_partitions(self):
        for partition in list(self.replica_manager.partitions.values()):
            if partition.topic == REMOTE_LOG_METADATA_TOPIC or not partition.is_leader:
                continue
            if partition.log.config.remote_storage_enable:
                yield partition

    def _sync_logs(self) -> None:
        """What the metadata says is remote, told to each hosted tiered log (after loading, or a copy)."""
        for partition in list(self.replica_manager.partitions.values()):
            if partition.topic != REMOTE_LOG_METADATA_TOPIC:
                self.sync_partition(partition)

    def sync_partition(self, partition) -> None:
        copied = self.rlmm.copied_segments(partition.topic, partition.index)
        partition.set_remote_offsets(copied[0].start_offset if copied else None,
                                     copied[-1].end_offset if copied else -1)

    def _metadata_changed(self, keys) -> None:
        """A cluster's metadata read: leaders and followers alike learn what is remote (Kafka's RLMFollowerTask
        keeps a follower's highest remote offset, which bounds its local retention)."""
        partitions = self.replica_manager.partitions
        for key in keys:
            partition = partitions.get(key)
            if partition is not None:
                self.sync_partition(partition)

    async def run_once(self) -> None:
        now = time.monotonic()
        caught_up = None
        if self.cluster:
            if not self.rlmm.ready:
                return
            caught_up = await self.rlmm.poll()
            self._runs += 1
            if self._runs % 20 == 1:     # replicas made since their partition's metadata last changed learn it too
                self._sync_logs()
        led = list(self._tiered_partitions())
        gauges = {}
        for partition in led:
            key = (partition.topic, partition.index)
            gauges[key] = self.partition_gauges.get(key, (0, 0, 0, 0))
        self.partition_gauges = gauges
        for partition in led:
            key = (partition.topic, partition.index)
            self._measure(partition, key)
            try:
                await self._run_partition(partition, key, now, caught_up)
            finally:
                self._measure(partition, key)

    def _measure(self, partition, key) -> None:
        """RemoteLogSizeBytes, RemoteCopyLagBytes (what may be copied and is not yet), RemoteCopyLagSegments and
        RemoteLogMetadataCount of one partition led here."""
        copied = self.rlmm.copied_segments(partition.topic, partition.index)
        highest = self.copied_offset(partition) if self.cluster else copied[-1].end_offset if copied else -1
        lag = [s.size for s, _ in partition.log.segments_to_copy(highest)]
        self.partition_gauges[key] = (sum(m.segment_size for m in copied), sum(lag), len(lag),
                                      len(self.rlmm.segments.get(key, ())))

    def topic_gauges(self) -> dict[str, tuple[int, ...]]:
        """REMOTE_GAUGES per topic, summed over its partitions led here."""
        out: dict[str, tuple[int, ...]] = {}
        for (topic, _), values in list(self.partition_gauges.items()):
            before = out.get(topic)
            out[topic] = values if before is None else tuple(a + b for a, b in zip(before, values))
        return out

    async def _run_partition(self, partition, key, now: float, caught_up) -> None:
        """One partition's turn: clean up, copy, local retention, remote retention; backs off on failure."""
        retry = self._retry_at.get(key)
        if retry is not None and retry[0] > now:
            return
        if caught_up is not None and self.rlmm.partition_for(partition) not in caught_up:
            return          # not read to its leader's end: what is copied is not known yet
        try:
            await self._clean_unfinished(partition)
            if not partition.log.config.remote_log_copy_disable:
                await self._copy(partition)
            partition.delete_old_segments()
            await self._expire(partition)
            self._retry_at.pop(key, None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            backoff = min(self.backoff_max_ms, retry[1] * 2 if retry else self.backoff_ms)
            self._retry_at[key] = (time.monotonic() + backoff / 1000, backoff)
            self.stats.record_remote(partition.topic, "remote_copy_errors")
            log.warning("%s-%d: tiered storage task failed (retry in %d ms): %s", *key, backoff, exc,
                        exc_info=not isinstance(exc, RemoteStorageError))

    # -- copy ----------------------------------------------------------------------------------
    async def _clean_unfinished(self, partition) -> None:
        """A copy that started and never finished (the broker died meanwhile), or a deletion that never finished:
        its objects go, and its metadata says so, before anything is copied again."""
        for m in self.rlmm.unfinished_segments(partition.topic, partition.index):
            if m.state == COPY_SEGMENT_STARTED:
                await self.rlmm.update_segment(m, DELETE_SEGMENT_STARTED)
            await asyncio.get_running_loop().run_in_executor(self.copier, self.rsm.delete_log_segment_data, m)
            await self.rlmm.update_segment(m, DELETE_SEGMENT_FINISHED)

    def copied_offset(self, partition) -> int:
        """Kafka's findHighestRemoteOffset: from our latest leader epoch down, the first that remote storage
        holds offsets of gives the highest copied offset, capped at that epoch's end in our log (-1: none)."""
        log_ = partition.log
        entries = log_.leader_epoch_cache.entries
        copied = self.rlmm.copied_segments(partition.topic, partition.index)
        for i in range(len(entries) - 1, -1, -1):
            epoch = entries[i].epoch
            epoch_end = entries[i + 1].start_offset - 1 if i + 1 < len(entries) else log_.log_end_offset - 1
            highest = -1
            for m in copied:
                epochs = sorted(m.segment_leader_epochs.items())
                for j, (e, _start) in enumerate(epochs):
                    if e == epoch:
                        highest = max(highest, epochs[j + 1][1] - 1 if j + 1 < len(epochs) else m.end_offset)
            if highest >= 0:
                return min(highest, epoch_end)
        return -1

    async def _copy(self, partition) -> None:
        loop = asyncio.get_running_loop()
        log_ = partition.log
        if self.cluster:
            highest = max(self.copied_offset(partition), log_.local_log_start_offset - 1)
        else:
            highest = self.rlmm.highest_offset(partition.topic, partition.index)
        leader_epoch = partition.leader_epoch
        for segment, end in log_.segments_to_copy(highest):
            if self._stop.is_set() or not partition.is_leader or partition.leader_epoch != leader_epoch:
                return
            base = segment.base_offset
            log_path, index_path, time_index_path = segment_paths(log_.dir, base)
            txn_path = txn_index_path(log_.dir, base)
            files = {"log": log_path, "index": index_path, "timeindex": time_index_path,
                     "snapshot": snapshot_path(log_.dir, end + 1), "txnindex": txn_path}
            size = segment.size
            if base <= highest:
                # begun below what is copied (another leader's segments ended elsewhere): only the rest goes up
                cut = await loop.run_in_executor(self.copier, segment.slice_from, highest + 1)
                if cut is None or cut[0] > end:
                    continue
                base, files["log"], files["index"], files["timeindex"] = cut
                files["txnindex"] = b""
                size = len(files["log"])
                log.info("%s-%d: copying segment %d from %d, where the copied offsets end", partition.topic,
                         partition.index, segment.base_offset, base)
            m = RemoteLogSegmentMetadata.new(
                partition.topic, partition.topic_id, partition.index, start_offset=base, end_offset=end,
                max_timestamp_ms=segment.largest_timestamp(), broker_id=self.broker_id,
                event_timestamp_ms=now_ms(),
                segment_leader_epochs=log_.leader_epochs_between(base, end), segment_size=size,
                broker_leader_epoch=leader_epoch)
            txn = files["txnindex"]
            m.txn_index_empty = not txn or not os.path.exists(txn) or os.path.getsize(txn) == 0
            # as Kafka uploads it: the whole leader-epoch cache up to the segment's end
            files["leader-epoch-checkpoint"] = epoch_checkpoint(
                {e.epoch: e.start_offset for e in log_.leader_epoch_cache.entries if e.start_offset <= end})
            await self.rlmm.add_segment(m)
            started = time.monotonic()
            await loop.run_in_executor(self.copier, self._upload, m, files)
            if not partition.is_leader or partition.leader_epoch != leader_epoch:
                # another leader carries on from what is published: this copy never was
                log.info("%s-%d: leadership moved during the copy of %d-%d: deleting it", partition.topic,
                         partition.index, base, end)
                await self.rlmm.update_segment(m, DELETE_SEGMENT_STARTED)
                await loop.run_in_executor(self.copier, self.rsm.delete_log_segment_data, m)
                await self.rlmm.update_segment(m, DELETE_SEGMENT_FINISHED)
                return
            await self.rlmm.update_segment(m, COPY_SEGMENT_FINISHED)
            self.stats.record_remote(partition.topic, "remote_copy_requests")
            self.stats.record_remote(partition.topic, "remote_copy_bytes", m.segment_size)
            log.info("%s-%d: copied segment %d-%d (%d bytes) to remote storage in %.0f ms", partition.topic,
                     partition.index, base, end, m.segment_size, (time.monotonic() - started) * 1000)
            copied = self.rlmm.copied_segments(partition.topic, partition.index)
            partition.set_remote_offsets(copied[0].start_offset, end)
            self._measure(partition, (partition.topic, partition.index))

    def _upload(self, m: RemoteLogSegmentMetadata, files: dict) -> None:
        self.copy_quota.acquire(m.segment_size, self._stop)
        self.rsm.copy_log_segment_data(m, files)

    # -- remote retention --------------------------------------------------------------------------
    async def _expire(self, partition) -> None:
        log_ = partition.log
        config = log_.config
        copied = self.rlmm.copied_segments(partition.topic, partition.index)
        if not copied:
            return
        now = now_ms()
        retention_ms, retention_bytes = config.retention_ms, config.retention_bytes
        local_only = sum(s.size for s in log_.segments if s.base_offset > copied[-1].end_offset)
        total = sum(m.segment_size for m in copied) + local_only
        start = log_.log_start_offset        # DeleteRecords may have moved it into the remote part
        expired = []
        for m in copied:
            if retention_ms >= 0 and now - m.max_timestamp_ms > retention_ms:
                pass
            elif 0 <= retention_bytes < total:
                pass
            elif m.end_offset < start:
                pass
            else:
                break
            expired.append(m)
            total -= m.segment_size
        if not expired:
            return
        # readers first: the log start moves past what is about to go
        rest = copied[len(expired):]
        partition.set_remote_offsets(rest[0].start_offset if rest else None, copied[-1].end_offset)
        loop = asyncio.get_running_loop()
        for m in expired:
            await self.rlmm.update_segment(m, DELETE_SEGMENT_STARTED)
            try:
                await loop.run_in_executor(self.copier, self.rsm.delete_log_segment_data, m)
            except RemoteStorageError:
                self.stats.record_remote(partition.topic, "remote_delete_errors")
                raise
            self.stats.record_remote(partition.topic, "remote_delete_requests")
            await self.rlmm.update_segment(m, DELETE_SEGMENT_FINISHED)
            log.info("%s-%d: deleted remote segment %d-%d (retention)", partition.topic, partition.index,
                     m.start_offset, m.end_offset)

    # -- topic deletion -------------------------------------------------------------------------------
    def on_topic_deleted(self, topic: str, partitions: int) -> None:
        """Kafka deletes a deleted topic's remote data: each partition marked, its segments deleted, finished."""
        if any(self.rlmm.segments.get((topic, p)) for p in range(partitions)):
            task = asyncio.ensure_future(self._delete_partitions(topic, partitions))
            self._deletions.add(task)
            task.add_done_callback(self._deletions.discard)

    async def _delete_partitions(self, topic: str, partitions: int) -> None:
        loop = asyncio.get_running_loop()
        for p in range(partitions):
            segments = sorted(self.rlmm.segments.get((topic, p), {}).values(), key=lambda m: m.start_offset)
            if not segments:
                continue
            last = segments[-1]
            try:
                await self.rlmm.update_partition(last, DELETE_PARTITION_MARKED)
                await self.rlmm.update_partition(last, DELETE_PARTITION_STARTED)
                for m in segments:
                    await self.rlmm.update_segment(m, DELETE_SEGMENT_STARTED)
                    await loop.run_in_executor(self.copier, self.rsm.delete_log_segment_data, m)
                    await self.rlmm.update_segment(m, DELETE_SEGMENT_FINISHED)
                await self.rlmm.update_partition(last, DELETE_PARTITION_FINISHED)
                log.info("%s-%d: deleted %d remote segments of the deleted topic", topic, p, len(segments))
            except Exception as exc:
                log.warning("%s-%d: deleting the remote data of a deleted topic failed: %s", topic, p, exc)

    # -- followers -----------------------------------------------------------------------------------
    async def remote_log_aux_state(self, topic: str, index: int, offset: int) -> tuple[int, list, bytes]:
        """For a follower below its leader's local log start: the remote segment holding ``offset`` (the one
        before that start) gives (the offset to fetch from, its leader epochs [(epoch, start offset)], its
        producer snapshot). Raises RemoteStorageError when the segment is not known here (yet)."""
        m = self.rlmm.segment_for(topic, index, offset)
        if m is None and self.cluster:
            await self.rlmm.poll()
            m = self.rlmm.segment_for(topic, index, offset)
        if m is None:
            raise RemoteStorageError(f"no remote segment of {topic}-{index} holds offset {offset}")
        loop = asyncio.get_running_loop()
        checkpoint = await loop.run_in_executor(self.readers, self.rsm.fetch_index, m, "leader-epoch-checkpoint")
        snapshot = await loop.run_in_executor(self.readers, self.rsm.fetch_index, m, "snapshot")
        return m.end_offset + 1, parse_epoch_checkpoint(checkpoint), snapshot

    # -- reads --------------------------------------------------------------------------------------
    def holds(self, topic: str, index: int, offset: int) -> bool:
        return self.rlmm.segment_for(topic, index, offset) is not None

    def _read(self, m: RemoteLogSegmentMetadata, offset: int, max_bytes: int, min_one: bool) -> bytes:
        position = self.rsm.position_for(m, offset)
        end = min(m.segment_size, position + max_bytes + 65536)
        data = self.rsm.fetch_log_segment(m, position, end)
        out, needed = whole_batches(data, offset, max_bytes, min_one)
        if needed:
            data = self.rsm.fetch_log_segment(m, position, min(m.segment_size, position + needed))
            out, _ = whole_batches(data, offset, max_bytes, min_one)
        self.fetch_quota.acquire(len(out), self._stop)
        return out

    async def read(self, topic: str, index: int, offset: int, max_bytes: int, min_one: bool) -> bytes | None:
        """The records at ``offset`` from remote storage; None if not there (any more)."""
        m = self.rlmm.segment_for(topic, index, offset)
        if m is None:
            return None
        if self.pending_reads >= self.max_pending_reads:
            raise RemoteStorageError("too many remote reads queued")
        self.pending_reads += 1
        try:
            data = await asyncio.get_running_loop().run_in_executor(self.readers, self._read, m, offset, max_bytes,
                                                                    min_one)
        finally:
            self.pending_reads -= 1
        self.stats.record_remote(topic, "remote_fetch_requests")
        self.stats.record_remote(topic, "remote_fetch_bytes", len(data))
        return data

    async def delayed_remote_fetch(self, params, fetches, results, remote: list[int]) -> list:
        """Kafka's DelayedRemoteFetch: the remote partitions of a fetch read in parallel, the whole fetch answered
        when they are read or remote.fetch.max.wait.ms has passed (an unread partition then comes back empty)."""
        committed = params.isolation == FetchIsolation.TXN_COMMITTED
        budget = params.max_bytes

        async def one(i: int):
            topic, index, info = fetches[i]
            r = results[i]
            try:
                data = await self.read(topic, index, info.fetch_offset, max(min(info.max_bytes, budget), 1), True)
            except (RemoteStorageError, ValueError) as exc:
                self.stats.record_remote(topic, "remote_fetch_errors")
                log.warning("%s-%d: remote read at %d failed: %s", topic, index, info.fetch_offset, exc)
                return LogReadResult(ErrorCode.KAFKA_STORAGE_ERROR, None, r.high_watermark, r.log_start_offset,
                                     r.log_end_offset, r.last_stable_offset, error_message=str(exc))
            if data is None:
                return r
            fetched = FetchDataInfo(LogOffsetMetadata(info.fetch_offset),
                                    FetchResult([], r.log_start_offset, r.log_end_offset, data),
                                    [] if committed else None)
            return LogReadResult(ErrorCode.NONE, fetched, r.high_watermark, r.log_start_offset, r.log_end_offset,
                                 r.last_stable_offset)

        tasks = {i: asyncio.ensure_future(one(i)) for i in remote}
        done, pending = await asyncio.wait(tasks.values(), timeout=self.fetch_max_wait_s)
        out = list(results)
        for i, task in tasks.items():
            if task in done:
                out[i] = task.result()
            else:
                task.cancel()
                r = results[i]
                out[i] = LogReadResult(ErrorCode.NONE, FetchDataInfo(
                    LogOffsetMetadata(fetches[i][2].fetch_offset), FetchResult([], r.log_start_offset,
                                                                              r.log_end_offset, b""),
                    [] if committed else None), r.high_watermark, r.log_start_offset, r.log_end_offset,
                    r.last_stable_offset)
        return out
