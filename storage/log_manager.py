"""LogManager: the partitions of every log.dir, their recovery, and the background work.

- A partition lives in ``<log dir>/<topic>-<partition>``; a new one goes to the log
  dir holding the fewest partitions (Kafka's nextLogDirs).
- At startup each dir's checkpoints are read; a dir without the clean-shutdown marker
  has every log recovered from its recovery point. The marker is removed while running.
- Background (never on the caller's thread): retention every
  log.retention.check.interval.ms, flush.ms checks, checkpoints, the cleaner, and the expiry
  of producers idle for producer.id.expiration.ms (checked every
  producer.id.expiration.check.interval.ms).
- Shutdown flushes and closes every log, writes the checkpoints, then the marker.
- A replica moving to another log dir of this broker (AlterReplicaLogDirs) has a future log there,
  ``<topic>-<partition>.<unique id>-future`` (Kafka's naming); it is loaded at startup beside the
  current one, and `replace_current_with_future_log` swaps the two once the broker has copied
  everything (the current log is renamed ``<topic>-<partition>.<same id>-delete`` first, then the
  future takes the partition's name: a crash between the two renames leaves a future whose
  ``-delete`` twin proves the copy was whole, and the next start finishes the swap).
- ``cordoned.log.dirs`` (KIP-1066): new partitions go to an uncordoned dir (to the first dir when
  every one is cordoned, as Kafka's nextLogDirs); a dir named for a partition by AlterReplicaLogDirs
  before it is hosted here is where it will be created (Kafka's preferred log dirs).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from kafka_compat.clock import now_ms
from kafka_compat.protocol.errors import ErrorCode, KafkaError

from . import checkpoint
from .cleaner import LogCleaner
from .local_log import FUTURE_DIR_SUFFIX
from .log_config import LogConfig
from .producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from .scheduler import Scheduler
from .unified_log import UnifiedLog

log = logging.getLogger(__name__)

_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_FUTURE_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)\.(?P<id>[0-9a-f]+)" + FUTURE_DIR_SUFFIX + "$")
DELETE_DIR_SUFFIX = "-delete"
CHECKPOINT_BATCH_MS = 100   # how long a change waits for others to share its checkpoint write


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    m = _PARTITION_DIR.match(name)
    if not m:
        return None
    return m.group("topic"), int(m.group("partition"))


def parse_future_dir(name: str) -> tuple[str, int, str] | None:
    """(topic, partition, unique id) of a future replica's directory name, else None."""
    m = _FUTURE_DIR.match(name)
    if not m:
        return None
    return m.group("topic"), int(m.group("partition")), m.group("id")


def hosted_topics(log_dirs) -> list[str]:
    """The topics with a partition folder in ``log_dirs`` (those being deleted left out), before any
    log is loaded: a ZooKeeper-mode broker reads their config overrides first, as Kafka's LogManager
    does at startup, so that its existing logs never run with the broker's defaults."""
    topics = set()
    for directory in log_dirs:
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            continue
        for name in names:
            parsed = None if name.endswith(DELETE_DIR_SUFFIX) else (parse_partition_dir(name)
                                                                    or parse_future_dir(name))
            if parsed is not None and os.path.isdir(os.path.join(directory, name)):
                topics.add(parsed[0])
    return sorted(topics)


class LogManager:
    def __init__(self, log_dirs: list[str], default_config: LogConfig | None = None, *,
                 topic_config: Callable[[str], LogConfig] | None = None, clock: Callable[[], int] = now_ms,
                 retention_check_interval_ms: int = 300000, flush_check_interval_ms: int = 1000,
                 checkpoint_interval_ms: int = 60000, cleaner_enabled: bool = True, cleaner_backoff_ms: int = 15000,
                 cleaner_upper_bound: Callable[[UnifiedLog], int | None] | None = None,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 producer_id_expiration_check_interval_ms: int = 600000,
                 recovery_threads_per_data_dir: int = 1,
                 dir_failed: Callable[[str, str, OSError], None] | None = None):
        """``dir_failed(dir, what, error)``: told of an I/O error of the background work (flush, retention,
        checkpoints) in a log dir; a cluster member's LogDirFailureChannel takes the dir offline."""
        if not log_dirs:
            raise ValueError("log.dirs is empty")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self._configured_dirs = frozenset(self.log_dirs)    # log_dirs less any that failed are the live ones
        self.default_config = default_config or LogConfig()
        self._topic_config = topic_config or (lambda topic: self.default_config)
        self.clock = clock
        self.retention_check_interval_ms = retention_check_interval_ms
        self.flush_check_interval_ms = flush_check_interval_ms
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producer_id_expiration_check_interval_ms = producer_id_expiration_check_interval_ms
        #: num.recovery.threads.per.data.dir: logs recovered at once after an unclean shutdown
        self.recovery_threads_per_data_dir = max(recovery_threads_per_data_dir, 1)
        self.scheduler = Scheduler("kafka-log-manager")
        self._logs: dict[tuple[str, int], UnifiedLog] = {}
        self._dir_of: dict[tuple[str, int], str] = {}
        self._future_logs: dict[tuple[str, int], UnifiedLog] = {}     # replicas moving to another dir
        self._future_dir_of: dict[tuple[str, int], str] = {}
        #: where a partition not hosted yet is to be created (AlterReplicaLogDirs before its LeaderAndIsr)
        self.preferred_log_dirs: dict[tuple[str, int], str] = {}
        #: cordoned.log.dirs: no new partition goes there (absolute paths)
        self.cordoned_log_dirs: frozenset[str] = frozenset()
        self._orphan_futures: set[str] = set()      # future log dirs found without their current log
        self._lock = threading.Lock()
        self._checkpoint_lock = threading.Lock()
        self._checkpoints_due: set[str] = set()
        #: (dir, file) -> the entries last written there; a pass that would write the same skips it
        self._last_written: dict[tuple[str, str], dict] = {}
        self.checkpoint_writes = 0   # files written (a figure for tests and operators)
        self.cleaner = LogCleaner(self._cleanable_logs_by_dir, clock, cleaner_backoff_ms,
                                  upper_bound=cleaner_upper_bound) if cleaner_enabled else None
        self.started = False
        self._dir_failed = dir_failed

    # -- startup ------------------------------------------------------------------------
    def startup(self, background: bool = True) -> None:
        """Load (and recover) every partition found, then start the background tasks."""
        for directory in self.log_dirs:
            os.makedirs(directory, exist_ok=True)
        self._finish_interrupted_swaps()
        for directory in self.log_dirs:
            self._load_dir(directory)
        self.started = True
        if background:
            self.scheduler.schedule("kafka-log-retention", self.cleanup_logs, self.retention_check_interval_ms,
                                    self.retention_check_interval_ms)
            self.scheduler.schedule("kafka-log-flusher", self.flush_dirty_logs, self.flush_check_interval_ms,
                                    self.flush_check_interval_ms)
            self.scheduler.schedule("kafka-recovery-point-checkpoint", self.checkpoint_recovery_points,
                                    self.checkpoint_interval_ms, self.checkpoint_interval_ms)
            self.scheduler.schedule("kafka-log-start-offset-checkpoint", self.checkpoint_log_start_offsets,
                                    self.checkpoint_interval_ms, self.checkpoint_interval_ms)
            self.scheduler.schedule("PeriodicProducerExpirationCheck", self.remove_expired_producers,
                                    self.producer_id_expiration_check_interval_ms,
                                    self.producer_id_expiration_check_interval_ms)
            if self.cleaner is not None:
                self.cleaner.start()

    def _finish_interrupted_swaps(self) -> None:
        """A future log whose current log was renamed ``<tp>.<its id>-delete`` by a swap that the process
        did not live to finish is the partition's whole log: it takes the partition's name now. A future
        log without such a twin and without a current log is left alone (not loaded, not deleted)."""
        names = {d: set(os.listdir(d)) for d in self.log_dirs}
        current = {tp for d, entries in names.items() for tp in map(parse_partition_dir, entries) if tp}
        for directory, entries in names.items():
            for name in sorted(entries):
                parsed = parse_future_dir(name)
                if parsed is None:
                    continue
                topic, partition, unique = parsed
                if (topic, partition) in current:
                    continue
                twin = f"{topic}-{partition}.{unique}{DELETE_DIR_SUFFIX}"
                if not any(twin in e for e in names.values()):
                    # its current log may be on a disk that is not there now: nothing of it is touched
                    log.warning("%s in %s: a future log without its current log; left as it is", name, directory)
                    self._orphan_futures.add(os.path.join(directory, name))
                    continue
                os.rename(os.path.join(directory, name), os.path.join(directory, f"{topic}-{partition}"))
                checkpoint.fsync_dir(directory)
                current.add((topic, partition))
                log.info("finished moving %s-%d to %s (the swap was interrupted)", topic, partition, directory)

    def _load_dir(self, directory: str) -> None:
        """Load every partition of ``directory``. After a clean shutdown each log costs a few
        syscalls (its checkpointed offsets are trusted, nothing is scanned); otherwise the logs
        are recovered on num.recovery.threads.per.data.dir threads, as Kafka's loadLogs does."""
        clean = checkpoint.had_clean_shutdown(directory)
        recovery_points = checkpoint.read_offsets(os.path.join(directory, checkpoint.RECOVERY_POINT_CHECKPOINT))
        start_offsets = checkpoint.read_offsets(os.path.join(directory, checkpoint.LOG_START_OFFSET_CHECKPOINT))
        configs: dict[str, LogConfig] = {}   # one LogConfig per topic, not per partition
        jobs = []
        with os.scandir(directory) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if not entry.is_dir():
                    continue
                if entry.name.endswith(DELETE_DIR_SUFFIX):
                    shutil.rmtree(entry.path, ignore_errors=True)   # a deletion that did not finish
                    continue
                tp = parse_partition_dir(entry.name)
                future = False
                if tp is None:
                    parsed = parse_future_dir(entry.name)
                    if parsed is None:
                        continue
                    tp, future = parsed[:2], True
                    if entry.path in self._orphan_futures:
                        continue
                    if tp in self._future_logs:
                        raise RuntimeError(f"duplicate future log directories for {tp}: "
                                           f"{self._future_dir_of[tp]} and {directory}")
                elif tp in self._logs:
                    raise RuntimeError(f"duplicate log directories for {tp}: {self._dir_of[tp]} and {directory}")
                config = configs.get(tp[0])
                if config is None:
                    config = configs[tp[0]] = self._topic_config(tp[0])
                jobs.append((tp, entry.path, config, future))

        def load(job) -> UnifiedLog:
            tp, path, config, _ = job
            return UnifiedLog(path, config, recovery_point=recovery_points.get(tp, 0),
                              log_start_offset=start_offsets.get(tp, 0), had_clean_shutdown=clean,
                              scheduler=self.scheduler, clock=self.clock,
                              producer_id_expiration_ms=self.producer_id_expiration_ms)
        threads = 1 if clean else min(self.recovery_threads_per_data_dir, len(jobs))
        if threads > 1:
            with ThreadPoolExecutor(threads, thread_name_prefix="log-recovery") as pool:
                loaded = list(pool.map(load, jobs))
        else:
            loaded = [load(job) for job in jobs]
        for (tp, _, _, future), lg in zip(jobs, loaded):
            if future:
                self._future_logs[tp] = lg
                self._future_dir_of[tp] = directory
            else:
                self._logs[tp] = lg
                self._dir_of[tp] = directory
        # Until the next clean shutdown, a crash must be treated as unclean.
        checkpoint.remove_clean_shutdown(directory)
        self._write_checkpoints(directory)

    # -- partitions ---------------------------------------------------------------------
    def get_log(self, topic: str, partition: int) -> UnifiedLog | None:
        return self._logs.get((topic, partition))

    @property
    def logs(self) -> dict:
        return dict(self._items())

    def _items(self) -> list:
        """The (partition, log) pairs now, copied under the lock: a copy taken while another thread
        adds a log can fail (the copy's allocations may run a finalizer, which lets that thread in)."""
        with self._lock:
            return list(self._logs.items())

    def logs_by_dir(self) -> dict[str, list[UnifiedLog]]:
        result: dict[str, list[UnifiedLog]] = {d: [] for d in self.log_dirs}
        with self._lock:
            for tp, lg in self._logs.items():
                result[self._dir_of[tp]].append(lg)
        return result

    def _cleanable_logs_by_dir(self) -> dict[str, list[UnifiedLog]]:
        """What the cleaner may clean: not a log being moved to another dir (Kafka pauses its cleaning)."""
        with self._lock:
            moving = set(self._future_logs)
        return {d: [lg for lg in logs if (lg.topic, lg.partition) not in moving]
                for d, logs in self.logs_by_dir().items()}

    def _checkpointed_logs(self, directory: str) -> list[UnifiedLog]:
        """The logs whose offsets ``directory``'s checkpoints hold: its current and its future logs."""
        with self._lock:
            return ([lg for tp, lg in self._logs.items() if self._dir_of[tp] == directory]
                    + [lg for tp, lg in self._future_logs.items() if self._future_dir_of[tp] == directory])

    def next_log_dir(self) -> str:
        """The uncordoned log dir holding the fewest partitions (ties: the first listed; every dir
        cordoned: the first, as Kafka's nextLogDirs falls back)."""
        if len(self.log_dirs) == 1:
            return self.log_dirs[0]
        candidates = [d for d in self.log_dirs if d not in self.cordoned_log_dirs] or self.log_dirs[:1]
        counts = {d: 0 for d in candidates}
        for d in self._dir_of.values():
            if d in counts:
                counts[d] += 1
        return min(candidates, key=lambda d: counts[d])

    def is_log_dir_online(self, directory: str) -> bool:
        """Kafka's isLogDirOnline: KafkaError LOG_DIR_NOT_FOUND unless ``directory`` (absolute) is configured."""
        if directory not in self._configured_dirs:
            raise KafkaError(ErrorCode.LOG_DIR_NOT_FOUND, f"Log dir {directory} is not found in the config.")
        return directory in self.log_dirs

    def maybe_update_preferred_log_dir(self, topic: str, partition: int, directory: str) -> None:
        """Remember ``directory`` for a partition unless its current or future log is already there."""
        tp = (topic, partition)
        with self._lock:
            if self._dir_of.get(tp) != directory and self._future_dir_of.get(tp) != directory:
                self.preferred_log_dirs[tp] = directory

    def log_dir_of(self, topic: str, partition: int, future: bool = False) -> str | None:
        return (self._future_dir_of if future else self._dir_of).get((topic, partition))

    def get_future_log(self, topic: str, partition: int) -> UnifiedLog | None:
        return self._future_logs.get((topic, partition))

    @property
    def future_logs(self) -> dict:
        with self._lock:
            return dict(self._future_logs)

    def create_future_log(self, topic: str, partition: int, config: LogConfig | None = None) -> UnifiedLog:
        """The future log of a partition in its preferred dir (Kafka's createLogIfNotExists(isFuture)),
        or the one there is already."""
        tp = (topic, partition)
        with self._lock:
            lg = self._future_logs.get(tp)
            if lg is not None:
                return lg
            directory = self.preferred_log_dirs.get(tp)
            if directory is None or directory == self._dir_of.get(tp):
                raise ValueError(f"no other preferred log dir for the future log of {topic}-{partition}")
            path = os.path.join(directory, f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}")
            lg = self._new_log(path, config or self._topic_config(topic), False, f"the future log of {topic}-"
                               f"{partition} in {directory}")
            self.preferred_log_dirs.pop(tp, None)
            self._future_logs[tp] = lg
            self._future_dir_of[tp] = directory
            return lg

    def delete_future_log(self, topic: str, partition: int) -> None:
        """The move was called off: the future log goes (renamed ``-delete``, removed later)."""
        with self._lock:
            tp = (topic, partition)
            lg = self._future_logs.pop(tp, None)
            directory = self._future_dir_of.pop(tp, None)
        if lg is not None:
            self._async_delete(lg, directory)

    def _async_delete(self, lg: UnifiedLog, directory: str) -> None:
        lg.close(sync=False)   # its files are going: nothing to make durable
        doomed = f"{lg.dir}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        os.rename(lg.dir, doomed)
        self._remove_later(doomed, lg)
        self.schedule_checkpoints(directory)

    def _remove_later(self, doomed: str, lg: UnifiedLog) -> None:
        self.scheduler.schedule(f"delete-{lg.name}", lambda: shutil.rmtree(doomed, ignore_errors=True),
                                lg.config.file_delete_delay_ms)

    def replace_current_with_future_log(self, topic: str, partition: int) -> UnifiedLog:
        """The future log becomes the partition's log (Kafka's replaceCurrentWithFutureLog); the caller
        has made sure both end at the same offset and that nothing writes to either meanwhile.

        Both logs are closed (the future one synced), the current dir is renamed
        ``<tp>.<future's id>-delete``, the future dir takes the partition's name, and the log is opened
        there again as after a clean shutdown (a few syscalls: nothing is scanned). Returns it."""
        tp = (topic, partition)
        with self._lock:
            source, dest = self._logs[tp], self._future_logs[tp]
            source_dir, dest_dir = self._dir_of[tp], self._future_dir_of[tp]
        unique = parse_future_dir(os.path.basename(dest.dir))[2]
        high_watermark = source.high_watermark
        dest.close(sync=True)
        source.close(sync=False)
        doomed = os.path.join(source_dir, f"{topic}-{partition}.{unique}{DELETE_DIR_SUFFIX}")
        os.rename(source.dir, doomed)
        checkpoint.fsync_dir(source_dir)
        final = os.path.join(dest_dir, f"{topic}-{partition}")
        os.rename(dest.dir, final)
        checkpoint.fsync_dir(dest_dir)
        lg = UnifiedLog(final, dest.config, recovery_point=dest.log_end_offset, log_start_offset=dest.log_start_offset,
                        had_clean_shutdown=True, scheduler=self.scheduler, clock=self.clock,
                        producer_id_expiration_ms=self.producer_id_expiration_ms)
        lg.update_high_watermark(min(high_watermark, lg.log_end_offset))
        with self._lock:
            self._logs[tp] = lg
            self._dir_of[tp] = dest_dir
            del self._future_logs[tp], self._future_dir_of[tp]
        self._remove_later(doomed, source)
        self.schedule_checkpoints(source_dir)
        self.schedule_checkpoints(dest_dir)
        log.info("the current replica of %s-%d is replaced with its future replica in %s", topic, partition, dest_dir)
        return lg

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> UnifiedLog:
        with self._lock:
            tp = (topic, partition)
            lg = self._logs.get(tp)
            if lg is not None:
                return lg
            directory = self.preferred_log_dirs.get(tp)
            if directory is None or directory not in self.log_dirs:
                directory = self.next_log_dir()
            path = os.path.join(directory, f"{topic}-{partition}")
            lg = self._new_log(path, config or self._topic_config(topic), os.path.isdir(path),
                               f"the log of {topic}-{partition} in {directory}")
            self.preferred_log_dirs.pop(tp, None)
            self._logs[tp] = lg
            self._dir_of[tp] = directory
            return lg

    def _new_log(self, path: str, config: LogConfig, existed: bool, what: str) -> UnifiedLog:
        """A new log at ``path``; out of descriptors or disk: KafkaError (KAFKA_STORAGE_ERROR), the broker goes
        on, and no half-made directory is left for the next start to trip over."""
        try:
            return UnifiedLog(path, config, had_clean_shutdown=True, scheduler=self.scheduler, clock=self.clock,
                              producer_id_expiration_ms=self.producer_id_expiration_ms)
        except OSError as exc:
            if not existed:
                shutil.rmtree(path, ignore_errors=True)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot create {what}: {exc.strerror or exc}") from None

    def update_config(self, topic: str, config: LogConfig) -> None:
        for (t, _), lg in self._items() + list(self.future_logs.items()):
            if t == topic:
                lg.update_config(config)

    def delete_log(self, topic: str, partition: int) -> None:
        """Rename to ``<dir>.<uuid>-delete`` now, remove after file.delete.delay.ms (as Kafka does)."""
        with self._lock:
            tp = (topic, partition)
            lg = self._logs.pop(tp, None)
            directory = self._dir_of.pop(tp, None)
            self.preferred_log_dirs.pop(tp, None)
        self.delete_future_log(topic, partition)
        if lg is not None:
            self._async_delete(lg, directory)

    def _report_dir_failure(self, directory: str, what: str, exc: OSError) -> bool:
        """Hand an I/O error to ``dir_failed``; False without one (the caller goes on as it always did)."""
        if self._dir_failed is None:
            return False
        self._dir_failed(directory, what, exc)
        return True

    def handle_log_dir_failure(self, directory: str) -> list[tuple[str, int]]:
        """A write in ``directory`` failed (Kafka's handleLogDirFailure): it leaves the live log dirs (no
        new log, checkpoint or clean-shutdown marker goes there; the next start recovers it) and its
        logs are forgotten and closed as far as the disk lets them. Returns their partitions."""
        with self._lock:
            if directory in self.log_dirs:
                self.log_dirs.remove(directory)
            gone = [tp for tp, d in self._dir_of.items() if d == directory]
            logs = [self._logs.pop(tp) for tp in gone]
            for tp in gone:
                del self._dir_of[tp]
            futures = [tp for tp, d in self._future_dir_of.items() if d == directory]
            logs += [self._future_logs.pop(tp) for tp in futures]
            for tp in futures:
                del self._future_dir_of[tp]
        for lg in logs:
            try:
                lg.close(sync=False)
            except OSError as exc:
                log.error("cannot close %s in the failed log dir %s: %s", lg.name, directory, exc)
        return gone

    def schedule_checkpoints(self, directory: str) -> None:
        """Write ``directory``'s checkpoints soon on the scheduler thread, once however many changes
        asked for it meanwhile (deleting a topic of a thousand partitions writes each file once, and
        never on the caller's thread, which is the broker's event loop)."""
        with self._lock:
            if directory in self._checkpoints_due:
                return
            self._checkpoints_due.add(directory)

        def write() -> None:
            with self._lock:
                self._checkpoints_due.discard(directory)
            self._write_checkpoints(directory)
        self.scheduler.schedule(f"checkpoint-{directory}", write, CHECKPOINT_BATCH_MS)

    # -- background work ------------------------------------------------------------------
    def cleanup_logs(self) -> int:
        """One retention pass over every log; returns the number of segments deleted."""
        deleted = 0
        now = self.clock()
        for _, lg in self._items():
            if not lg.closed:
                try:
                    deleted += lg.delete_old_segments(now)
                except OSError as exc:
                    if not self._report_dir_failure(os.path.dirname(lg.dir), f"deleting old segments of {lg.name}",
                                                    exc):
                        raise
        return deleted

    def remove_expired_producers(self) -> int:
        """Forget the producers idle for producer.id.expiration.ms in every log."""
        now = self.clock()
        return sum(lg.remove_expired_producers(now) for _, lg in self._items() if not lg.closed)

    def flush_dirty_logs(self) -> None:
        """fsync logs whose flush.ms has passed since their last flush."""
        now = self.clock()
        for _, lg in self._items() + list(self.future_logs.items()):
            if not lg.closed and lg.unflushed_messages > 0 and now - lg.last_flush_ms >= lg.config.flush_ms:
                try:
                    lg.flush()
                except OSError as exc:
                    if not self._report_dir_failure(os.path.dirname(lg.dir), f"flushing {lg.name}", exc):
                        raise

    def checkpoint_recovery_points(self) -> None:
        for directory in self.log_dirs:
            self._write_checkpoint(directory, checkpoint.RECOVERY_POINT_CHECKPOINT, lambda lg: lg.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        for directory in self.log_dirs:
            self._write_checkpoint(directory, checkpoint.LOG_START_OFFSET_CHECKPOINT, lambda lg: lg.log_start_offset)

    def _write_checkpoint(self, directory: str, name: str, value) -> bool:
        """Write one checkpoint file if its entries changed since it was last written; False if the
        disk refused it (logged: the next pass tries again, and recovery covers a stale file)."""
        offsets = {(lg.topic, lg.partition): value(lg) for lg in self._checkpointed_logs(directory)}
        key = (directory, name)
        if self._last_written.get(key) == offsets:
            return True
        try:
            checkpoint.write_offsets(os.path.join(directory, name), offsets)
        except OSError as exc:
            self._last_written.pop(key, None)
            log.error("cannot write %s in %s: %s", name, directory, exc)
            self._report_dir_failure(directory, f"writing {name}", exc)
            return False
        self._last_written[key] = offsets
        self.checkpoint_writes += 1
        return True

    def _write_checkpoints(self, directory: str) -> bool:
        with self._checkpoint_lock:   # the scheduler's pass and shutdown's must not interleave
            ok = self._write_checkpoint(directory, checkpoint.RECOVERY_POINT_CHECKPOINT, lambda lg: lg.recovery_point)
            return self._write_checkpoint(directory, checkpoint.LOG_START_OFFSET_CHECKPOINT,
                                          lambda lg: lg.log_start_offset) and ok

    # -- shutdown ---------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop background work, close every log, write checkpoints and the clean-shutdown marker."""
        self._dir_failed = None      # stopping: a write that fails now only leaves the dir to recovery
        if self.cleaner is not None:
            self.cleaner.shutdown()
        self.scheduler.shutdown(run_pending=True)
        failed = set()
        futures = self.future_logs
        for tp, lg in self._items() + list(futures.items()):
            try:
                lg.close(sync=False)
            except OSError as exc:   # a full disk: the next start recovers this dir from its log
                log.error("cannot close %s cleanly: %s", lg.name, exc)
                failed.add(self._future_dir_of[tp] if futures.get(tp) is lg else self._dir_of[tp])
        os.sync()   # the producer snapshots just written, once for all, before the marker vouches for them
        for directory in self.log_dirs:
            if not self._write_checkpoints(directory) or directory in failed:
                continue   # no marker: the next start recovers this dir rather than trust stale files
            try:
                checkpoint.write_clean_shutdown(directory)
            except OSError as exc:
                log.error("cannot write the clean-shutdown marker in %s: %s", directory, exc)
        self.started = False
