"""ReplicaAlterLogDirsManager: the threads that move replicas between the log dirs of this broker.

Kafka's ReplicaAlterLogDirsManager and ReplicaAlterLogDirsThread: num.replica.alter.log.dirs.threads
threads (one per log dir unless set), each moving its share of the partitions (by hash). A thread
copies a partition's log into its future log step by step (`Partition.copy_to_future_log`) while the
broker serves from the log; once the future log has caught up, it is flushed and the swap is asked of
the event loop, where no append can come between the last check and the swap (the few batches
appended since the last step are copied there first). A swap that finds the future log still far
behind (a heavy produce load) is tried again after the next steps.

The copy is throttled by replica.alter.log.dirs.io.max.bytes.per.second (a dynamic broker setting,
read at every step): a step of ``n`` bytes is followed by a pause of ``n / rate`` seconds.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Callable

from ..configdef import LONG_MAX
from .partition import Partition

log = logging.getLogger(__name__)

STEP_BYTES = 1024 * 1024          # most bytes one copy step reads (replica.fetch.max.bytes' default)
MAX_TAIL_BYTES = 1024 * 1024      # most bytes the swap may still copy on the event loop
IDLE_WAIT_S = 0.05                # how long a thread with nothing to copy waits before looking again
SWAP_TIMEOUT_S = 30.0


class ReplicaAlterLogDirsThread(threading.Thread):
    def __init__(self, index: int, manager: ReplicaAlterLogDirsManager):
        super().__init__(name=f"ReplicaAlterLogDirsThread-{index}", daemon=True)
        self.manager = manager
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.stopping = False

    def add(self, partition: Partition) -> None:
        with self.lock:
            self.partitions[partition.key] = partition
        self.wake.set()

    def remove(self, key) -> bool:
        with self.lock:
            return self.partitions.pop(key, None) is not None

    def run(self) -> None:
        while not self.stopping:
            with self.lock:
                partitions = list(self.partitions.values())
            busy = False
            for partition in partitions:
                if self.stopping:
                    return
                try:
                    busy |= self._step(partition)
                except Exception as e:       # a disk error, a closed log: this move stops, the others go on
                    self.remove(partition.key)
                    self.manager.failed(partition, e)
            if not busy:      # nothing to move: sleep until a move comes (no polling on an idle broker)
                self.wake.wait(IDLE_WAIT_S if partitions else None)
                self.wake.clear()

    def _step(self, partition: Partition) -> bool:
        """One step of one move; True if bytes were copied."""
        with self.lock:
            if self.partitions.get(partition.key) is not partition:
                return False
        rate = self.manager.rate()
        max_bytes = STEP_BYTES if rate >= LONG_MAX else max(min(STEP_BYTES, rate), 1)
        started = time.monotonic()
        copied = partition.copy_to_future_log(max_bytes)
        if copied < 0:              # the move was called off
            self.remove(partition.key)
            return False
        if copied:
            if rate < LONG_MAX:
                pause = copied / max(rate, 1) - (time.monotonic() - started)
                if pause > 0:
                    self.wake.wait(pause)
            return True
        partition.flush_future_log()      # caught up: make what was copied durable off the event loop
        if self.manager.swap(partition):
            self.remove(partition.key)
        return False


class ReplicaAlterLogDirsManager:
    def __init__(self, num_threads: int, swap: Callable[[Partition], bool], rate: Callable[[], int],
                 failed: Callable[[Partition, BaseException], None]):
        """``swap(partition)`` runs on the event loop and says whether the log was replaced; ``rate()`` is
        the current throttle in bytes/s (LONG_MAX: none); ``failed(partition, error)`` is told of a move
        that stopped on an error."""
        self.threads = [ReplicaAlterLogDirsThread(i, self) for i in range(max(num_threads, 1))]
        self._swap, self.rate, self._failed = swap, rate, failed
        self.loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        self.stopping = False

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def _thread_for(self, key) -> ReplicaAlterLogDirsThread:
        return self.threads[hash(key) % len(self.threads)]

    def add(self, partition: Partition) -> None:
        """Start (or resume) moving ``partition`` into its future log."""
        if not self._started:
            self._started = True
            for thread in self.threads:
                thread.start()
        self._thread_for(partition.key).add(partition)

    def remove(self, keys) -> None:
        for key in keys:
            self._thread_for(key).remove(key)

    def moving(self, key) -> bool:
        thread = self._thread_for(key)
        with thread.lock:
            return key in thread.partitions

    def swap(self, partition: Partition) -> bool:
        """From a mover thread: the swap, on the event loop; False if it did not happen (yet)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return False
        done = asyncio.run_coroutine_threadsafe(self._swap_on_loop(partition), loop)
        deadline = time.monotonic() + SWAP_TIMEOUT_S
        while True:
            try:
                return done.result(0.1)
            except FutureTimeout:
                if self.stopping or time.monotonic() > deadline:
                    done.cancel()
                    return False

    async def _swap_on_loop(self, partition: Partition) -> bool:
        return self._swap(partition)

    def failed(self, partition: Partition, error: BaseException) -> None:
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._failed, partition, error)

    def shutdown(self) -> None:
        """Stop the moves (their future logs stay, to be resumed at the next start)."""
        self.stopping = True
        for thread in self.threads:
            thread.stopping = True
            thread.wake.set()
        if self._started:
            for thread in self.threads:
                thread.join(timeout=5)
