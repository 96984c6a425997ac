"""Scheduler: one background thread running delayed and periodic storage tasks.

Kafka runs flushes after a roll, delayed file deletion, retention and
checkpoints on its KafkaScheduler; this is the same idea, so none of that
work ever runs on the broker's event loop.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time

log = logging.getLogger(__name__)


class Scheduler:
    def __init__(self, name: str = "kafka-scheduler"):
        self._name = name
        self._queue: list = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._shut_down = False

    def start(self) -> "Scheduler":
        with self._cond:
            if self._thread is None:
                self._stopped = False
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        return self

    def schedule(self, name: str, fn, delay_ms: int = 0, period_ms: int | None = None) -> None:
        """Run ``fn()`` after ``delay_ms``, then every ``period_ms`` if given.

        After shutdown a one-shot task runs at once in the caller's thread, so nothing
        (a delayed file deletion, a flush after a roll) is silently dropped.
        """
        if self._shut_down:
            if period_ms is None:
                fn()
            return
        self.start()
        with self._cond:
            if self._stopped:
                return
            due = time.monotonic() + delay_ms / 1000.0
            heapq.heappush(self._queue, (due, next(self._seq), name, fn, period_ms))
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._queue or self._queue[0][0] > time.monotonic()):
                    timeout = self._queue[0][0] - time.monotonic() if self._queue else None
                    self._cond.wait(timeout)
                if self._stopped:
                    return
                due, _, name, fn, period_ms = heapq.heappop(self._queue)
            try:
                fn()
            except Exception:  # a failing task must not stop the others
                log.exception("scheduled task %s failed", name)
            if period_ms is not None:
                with self._cond:
                    if not self._stopped:
                        heapq.heappush(self._queue, (time.monotonic() + period_ms / 1000.0, next(self._seq),
                                                     name, fn, period_ms))

    def run_pending_now(self) -> None:
        """Run every queued one-shot task at once in the caller's thread (used at shutdown)."""
        with self._cond:
            tasks = [t for t in self._queue if t[4] is None]
            self._queue = [t for t in self._queue if t[4] is not None]
            heapq.heapify(self._queue)
        for _, _, name, fn, _ in sorted(tasks):
            try:
                fn()
            except Exception:
                log.exception("scheduled task %s failed", name)

    def shutdown(self, run_pending: bool = False) -> None:
        with self._cond:
            self._stopped = True
            self._shut_down = True
            self._cond.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        if run_pending:
            self.run_pending_now()
        with self._cond:
            self._queue.clear()


_default: Scheduler | None = None
_default_lock = threading.Lock()


def default_scheduler() -> Scheduler:
    """A process-wide scheduler for logs opened without a LogManager."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Scheduler("storage-scheduler")
        return _default.start()
