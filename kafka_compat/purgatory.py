"""Delayed operations parked until they can complete or time out, as Kafka's purgatory.

Kafka keeps requests that cannot be answered yet (a fetch waiting for bytes, a
produce waiting for acks=-1, a JoinGroup waiting for members, a member's session
timeout) in a ``DelayedOperationPurgatory``: each operation is watched under keys
(a partition, a group, a member) so that an event on a key can try to complete it,
and it sits in a hierarchical timing wheel so that it expires on time.

Everything here runs on one asyncio loop thread, so there are no locks; instead
the code stays correct under re-entrancy: completing an operation may add, check
or complete other operations, including on the key being walked.

The timer is driven by ONE ``loop.call_at`` handle armed for the earliest bucket
expiration, not one handle per operation: a purgatory may hold thousands of
parked fetches, and a bucket groups every task that expires in the same tick.
The clock is injectable so tests can move time by hand (``loop=None``).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Callable, Hashable, Iterable

from .clock import monotonic_ms

__all__ = [
    "TimerTask",
    "TimerTaskEntry",
    "TimerTaskList",
    "TimingWheel",
    "SystemTimer",
    "DelayedOperation",
    "DelayedOperationPurgatory",
]

log = logging.getLogger(__name__)


class _TaskCounter:
    """Number of entries held by all buckets of one timer (Kafka's shared AtomicInteger)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


class TimerTask:
    """Something to run once ``delay_ms`` after it is added to a timer, unless cancelled."""

    __slots__ = ("delay_ms", "_timer_task_entry")

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = int(delay_ms)
        self._timer_task_entry: TimerTaskEntry | None = None

    def run(self) -> None:
        raise NotImplementedError

    def cancel(self) -> None:
        """Take the task out of its timer; it will not run."""
        entry = self._timer_task_entry
        if entry is not None:
            entry.remove()
        self._timer_task_entry = None

    @property
    def is_cancelled(self) -> bool:
        return self._timer_task_entry is None

    def _set_timer_task_entry(self, entry: TimerTaskEntry) -> None:
        # A task lives in at most one bucket: re-adding it drops the older entry.
        old = self._timer_task_entry
        if old is not None and old is not entry:
            old.remove()
        self._timer_task_entry = entry


class TimerTaskEntry:
    """A task's place in a bucket, with its absolute expiration in ms."""

    __slots__ = ("timer_task", "expiration_ms", "list")

    def __init__(self, timer_task: TimerTask, expiration_ms: int) -> None:
        self.timer_task = timer_task
        self.expiration_ms = expiration_ms
        self.list: TimerTaskList | None = None
        timer_task._set_timer_task_entry(self)

    @property
    def cancelled(self) -> bool:
        return self.timer_task._timer_task_entry is not self

    def remove(self) -> None:
        if self.list is not None:
            self.list.remove(self)


class TimerTaskList:
    """A bucket: the entries expiring in one tick of one wheel.

    An insertion-ordered dict stands in for Kafka's doubly linked list: O(1)
    add and remove, and entries keep their arrival order.
    """

    __slots__ = ("_entries", "_counter", "expiration")

    def __init__(self, counter: _TaskCounter) -> None:
        self._entries: dict[TimerTaskEntry, None] = {}
        self._counter = counter
        self.expiration = -1

    def set_expiration(self, expiration_ms: int) -> bool:
        """Set the bucket's expiration; True when it changed, i.e. it must be queued again."""
        changed = self.expiration != expiration_ms
        self.expiration = expiration_ms
        return changed

    def add(self, entry: TimerTaskEntry) -> None:
        entry.remove()
        self._entries[entry] = None
        entry.list = self
        self._counter.value += 1

    def remove(self, entry: TimerTaskEntry) -> None:
        if entry.list is self:
            del self._entries[entry]
            entry.list = None
            self._counter.value -= 1

    def flush(self, f: Callable[[TimerTaskEntry], None]) -> None:
        """Empty the bucket, handing each live entry to ``f`` (which re-inserts or runs it)."""
        entries = self._entries
        self._entries = {}
        self._counter.value -= len(entries)
        self.expiration = -1
        for entry in entries:
            entry.list = None
        for entry in entries:
            if not entry.cancelled:
                f(entry)

    def __len__(self) -> int:
        return len(self._entries)


class TimingWheel:
    """One level of Kafka's hierarchical timing wheel.

    ``wheel_size`` buckets of ``tick_ms`` each cover ``[current_time, current_time +
    interval)``; later expirations go to an overflow wheel whose tick is this
    wheel's interval, created on demand. ``offer`` queues a bucket whose expiration
    changed (SystemTimer's delay queue).
    """

    __slots__ = ("tick_ms", "wheel_size", "interval", "current_time", "buckets",
                 "_counter", "_offer", "overflow_wheel")

    def __init__(self, tick_ms: int, wheel_size: int, start_ms: int,
                 counter: _TaskCounter, offer: Callable[[TimerTaskList], None]) -> None:
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval = tick_ms * wheel_size
        self.current_time = start_ms - (start_ms % tick_ms)
        self.buckets = [TimerTaskList(counter) for _ in range(wheel_size)]
        self._counter = counter
        self._offer = offer
        self.overflow_wheel: TimingWheel | None = None

    def add(self, entry: TimerTaskEntry) -> bool:
        """Put the entry in its bucket; False if it is cancelled or already expired."""
        expiration = entry.expiration_ms
        if entry.cancelled:
            return False
        if expiration < self.current_time + self.tick_ms:
            return False
        if expiration < self.current_time + self.interval:
            virtual_id = expiration // self.tick_ms
            bucket = self.buckets[virtual_id % self.wheel_size]
            bucket.add(entry)
            if bucket.set_expiration(virtual_id * self.tick_ms):
                self._offer(bucket)
            return True
        if self.overflow_wheel is None:
            self.overflow_wheel = TimingWheel(self.interval, self.wheel_size, self.current_time,
                                              self._counter, self._offer)
        return self.overflow_wheel.add(entry)

    def advance_clock(self, time_ms: int) -> None:
        if time_ms >= self.current_time + self.tick_ms:
            self.current_time = time_ms - (time_ms % self.tick_ms)
            if self.overflow_wheel is not None:
                self.overflow_wheel.advance_clock(self.current_time)

    def levels(self) -> int:
        """How many wheels exist, this one included (for tests and metrics)."""
        return 1 + (self.overflow_wheel.levels() if self.overflow_wheel else 0)


class SystemTimer:
    """Kafka's SystemTimer on an asyncio loop: a timing wheel plus a queue of buckets.

    ``time_ms`` is the clock (ms, monotonic). With ``loop`` set, one ``call_at``
    handle fires at the earliest bucket expiration and is re-armed whenever an
    earlier bucket is queued. With ``loop=None`` nothing fires by itself: call
    ``advance_clock`` (tests do, with a hand-driven clock).
    """

    def __init__(self, name: str = "timer", tick_ms: int = 1, wheel_size: int = 20,
                 start_ms: int | None = None, time_ms: Callable[[], int] = monotonic_ms,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.name = name
        self._time_ms = time_ms
        self._loop = loop
        self._counter = _TaskCounter()
        self._seq = itertools.count()
        # Kafka's DelayQueue: (expiration, seq, bucket). A bucket is queued again only
        # when its expiration changes; an entry whose bucket moved on is stale.
        self._delay_queue: list[tuple[int, int, TimerTaskList]] = []
        # Entries that were already due when added or flushed, by expiration.
        self._ready: list[tuple[int, int, TimerTaskEntry]] = []
        self._wheel = TimingWheel(tick_ms, wheel_size,
                                  time_ms() if start_ms is None else start_ms,
                                  self._counter, self._offer)
        self._handle: asyncio.TimerHandle | None = None
        self._armed_at: int | None = None
        self._advancing = False
        self._closed = False

    # -- adding ---------------------------------------------------------------

    def add(self, task: TimerTask) -> None:
        """Schedule ``task`` to run ``task.delay_ms`` from now (never inside this call)."""
        self._add_entry(TimerTaskEntry(task, self._time_ms() + task.delay_ms))

    def _add_entry(self, entry: TimerTaskEntry) -> None:
        if not self._wheel.add(entry) and not entry.cancelled:
            # Due already: Kafka hands it to an executor; we run it on the next
            # advance so the caller of add() is never re-entered.
            heapq.heappush(self._ready, (entry.expiration_ms, next(self._seq), entry))
            self._arm(entry.expiration_ms)

    def _offer(self, bucket: TimerTaskList) -> None:
        heapq.heappush(self._delay_queue, (bucket.expiration, next(self._seq), bucket))
        self._arm(bucket.expiration)

    # -- running --------------------------------------------------------------

    def advance_clock(self, now_ms: int | None = None) -> int:
        """Run every task due at ``now_ms`` (default: the clock), in deadline order.

        Returns how many tasks ran. Tasks added while this runs (e.g. by an
        expiring operation) run in the same call if they are due.
        """
        now = self._time_ms() if now_ms is None else now_ms
        ran = 0
        queue, ready = self._delay_queue, self._ready
        nested = self._advancing  # a task may advance the clock from inside run()
        self._advancing = True
        try:
            while True:
                self._drop_stale()
                # A ready entry expired against the wheel's current time, and every
                # queued bucket lies at or beyond it, so ready entries go first.
                if ready and ready[0][0] <= now:
                    entry = heapq.heappop(ready)[2]
                    if not entry.cancelled:
                        ran += 1
                        self._run(entry.timer_task)
                elif queue and queue[0][0] <= now:
                    expiration, _, bucket = heapq.heappop(queue)
                    self._wheel.advance_clock(expiration)
                    bucket.flush(self._add_entry)
                else:
                    return ran
        finally:
            self._advancing = nested
            if not nested:
                nxt = self.next_expiration_ms()
                if nxt is not None:
                    self._arm(nxt)

    def _drop_stale(self) -> None:
        queue = self._delay_queue
        while queue and queue[0][2].expiration != queue[0][0]:
            heapq.heappop(queue)

    def _run(self, task: TimerTask) -> None:
        task._timer_task_entry = None
        try:
            task.run()
        except Exception:
            # One broken callback must not stop the others from expiring.
            log.exception("timer %s: task %r failed", self.name, task)

    def next_expiration_ms(self) -> int | None:
        """Earliest time at which something is due, or None if nothing is queued."""
        self._drop_stale()
        candidates = []
        if self._delay_queue:
            candidates.append(self._delay_queue[0][0])
        if self._ready:
            candidates.append(self._ready[0][0])
        return min(candidates) if candidates else None

    # -- asyncio driver --------------------------------------------------------

    @property
    def armed_at_ms(self) -> int | None:
        """Expiration the single loop handle is armed for (None without a loop or when idle)."""
        return self._armed_at

    def _arm(self, expiration_ms: int) -> None:
        loop = self._loop
        if loop is None or self._closed or self._advancing:
            return  # advance_clock re-arms once it is done
        if self._armed_at is not None and self._armed_at <= expiration_ms:
            return
        if self._handle is not None:
            self._handle.cancel()
        delay_s = max(0, expiration_ms - self._time_ms()) / 1000.0
        self._armed_at = expiration_ms
        self._handle = loop.call_at(loop.time() + delay_s, self._fire, expiration_ms)

    def _fire(self, expiration_ms: int) -> None:
        self._handle = None
        self._armed_at = None
        # The loop may wake a hair before our ms clock ticks over; trust the loop
        # rather than re-arming for the same bucket in a tight loop.
        self.advance_clock(max(self._time_ms(), expiration_ms))

    # -- bookkeeping -----------------------------------------------------------

    def size(self) -> int:
        """Tasks waiting in buckets (Kafka's Timer.size)."""
        return self._counter.value

    def close(self) -> None:
        self._closed = True
        if self._handle is not None:
            self._handle.cancel()
        self._handle = None
        self._armed_at = None


class DelayedOperation(TimerTask):
    """An operation that completes when ``try_complete`` says so, or at ``delay_ms``.

    Subclasses implement ``try_complete`` (check the condition; if met, return
    ``self.force_complete()``), ``on_complete`` (build the response; runs exactly
    once) and optionally ``on_expiration`` (runs after ``on_complete`` when the
    operation timed out).
    """

    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self._completed = False

    @property
    def is_completed(self) -> bool:
        return self._completed

    def force_complete(self) -> bool:
        """Complete now if nobody did yet; True iff this call completed it."""
        if self._completed:
            return False
        self._completed = True
        self.cancel()
        self.on_complete()
        return True

    def try_complete(self) -> bool:
        raise NotImplementedError

    def on_complete(self) -> None:
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Called after ``on_complete`` when completion came from the timeout."""

    def run(self) -> None:
        if self.force_complete():
            self.on_expiration()


class _Watchers:
    """Operations watched under one key, in arrival order (by identity)."""

    __slots__ = ("key", "ops")

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.ops: dict[int, DelayedOperation] = {}


class DelayedOperationPurgatory:
    """Kafka's DelayedOperationPurgatory: watch lists by key plus a timeout timer.

    An operation watched under several keys stays in the other keys' lists after it
    completes; those leftovers are dropped when their key is checked, or all at once
    when more than ``purge_interval`` completed operations may be lingering (Kafka's
    ``*.purgatory.purge.interval.requests``).
    """

    def __init__(self, name: str, timer: SystemTimer | None = None, *,
                 broker_id: int = 0, purge_interval: int = 1000, timer_enabled: bool = True,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.name = name
        self.broker_id = broker_id
        self.purge_interval = purge_interval
        self.timer_enabled = timer_enabled
        if timer is None:
            timer = SystemTimer(name, loop=loop if loop is not None else _running_loop())
        self._timer = timer
        self._watchers_by_key: dict[Hashable, _Watchers] = {}
        # Operations ever watched minus those known gone; drives the purge.
        self._estimated_total_operations = 0

    @property
    def timer(self) -> SystemTimer:
        return self._timer

    def try_complete_else_watch(self, operation: DelayedOperation, watch_keys: Iterable[Hashable]) -> bool:
        """Complete ``operation`` now if it can; otherwise watch it under every key and start its timer.

        Returns True iff it completed during this call. Kafka re-checks after
        watching because another thread may have raced in between; on one loop
        thread nothing can, so one check is enough.
        """
        keys = list(watch_keys)
        if not keys:
            raise ValueError("the watch key list can't be empty")
        if operation.try_complete():
            return True
        if operation.is_completed:
            return False
        for key in keys:
            watchers = self._watchers_by_key.get(key)
            if watchers is None:
                watchers = self._watchers_by_key[key] = _Watchers(key)
            watchers.ops[id(operation)] = operation
        self._estimated_total_operations += 1
        if self.timer_enabled:
            self._timer.add(operation)
            if operation.is_completed:
                operation.cancel()
        self._maybe_purge()
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Try to complete the operations watched under ``key``; returns how many this call completed."""
        watchers = self._watchers_by_key.get(key)
        if watchers is None:
            return 0
        completed = 0
        # Walk a snapshot: callbacks may add to, check or purge this very list.
        for op_id, op in list(watchers.ops.items()):
            if watchers.ops.get(op_id) is not op:
                continue  # removed meanwhile (purged, cancelled, or completed by a nested check)
            if not op.is_completed and op.try_complete():
                completed += 1
            if op.is_completed:
                watchers.ops.pop(op_id, None)
        self._remove_key_if_empty(key, watchers)
        return completed

    def cancel_for_key(self, key: Hashable) -> list[DelayedOperation]:
        """Stop watching ``key`` and cancel the timers of its operations, without completing them."""
        watchers = self._watchers_by_key.pop(key, None)
        if watchers is None:
            return []
        cancelled = list(watchers.ops.values())
        watchers.ops.clear()
        for op in cancelled:
            op.cancel()
        return cancelled

    def watched(self) -> int:
        """Entries in all watch lists; completed operations may still be counted until purged."""
        return sum(len(w.ops) for w in self._watchers_by_key.values())

    def delayed(self) -> int:
        """Operations waiting in the timer (Kafka's NumDelayedOperations)."""
        return self._timer.size()

    def watch_keys(self) -> int:
        """Keys that currently have a watch list."""
        return len(self._watchers_by_key)

    def advance_clock(self, now_ms: int | None = None) -> int:
        """Expire due operations now (the loop does this by itself when the timer has one)."""
        ran = self._timer.advance_clock(now_ms)
        self._maybe_purge()
        return ran

    def purge_completed(self) -> int:
        """Drop completed operations from every watch list; returns how many entries went."""
        self._estimated_total_operations = self.delayed()
        purged = 0
        for key, watchers in list(self._watchers_by_key.items()):
            dead = [op_id for op_id, op in watchers.ops.items() if op.is_completed]
            for op_id in dead:
                del watchers.ops[op_id]
            purged += len(dead)
            self._remove_key_if_empty(key, watchers)
        return purged

    def _maybe_purge(self) -> None:
        if self._estimated_total_operations - self.delayed() > self.purge_interval:
            self.purge_completed()

    def _remove_key_if_empty(self, key: Hashable, watchers: _Watchers) -> None:
        if not watchers.ops and self._watchers_by_key.get(key) is watchers:
            del self._watchers_by_key[key]

    def shutdown(self) -> None:
        self._timer.close()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
