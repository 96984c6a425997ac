"""The controller's single event thread: Kafka's ControllerEventManager.

Everything the controller does happens on this one thread, one event at a time: ZooKeeper watch
callbacks, session listeners, responses from brokers and requests from handlers only put an event in
the queue. So the controller's state needs no locks, every ZooKeeper call it makes blocks only this
thread, and events are handled in the order they happened.
"""
from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class ControllerEvent:
    """`process` runs on the event thread; `preempt`, if any, runs instead when the event is dropped
    unprocessed (the queue was cleared or the controller shut down), to answer whoever waits for it."""

    __slots__ = ("name", "process", "preempt")

    def __init__(self, name: str, process: Callable[[], None], preempt: Callable[[], None] | None = None):
        self.name = name
        self.process = process
        self.preempt = preempt

    def __repr__(self) -> str:
        return f"ControllerEvent({self.name})"


class ControllerEventManager:
    def __init__(self, controller_id: int):
        self.controller_id = controller_id
        self._queue: queue.Queue[ControllerEvent | None] = queue.Queue()
        self._put_lock = threading.Lock()
        self._closed = False
        self.state = "Idle"                     # the name of the event being processed
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"controller-event-thread-{controller_id}")

    def start(self) -> None:
        self._thread.start()

    @property
    def on_event_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def put(self, event: ControllerEvent) -> None:
        with self._put_lock:
            if self._closed:
                _preempt(event)
                return
            self._queue.put(event)

    def clear_and_put(self, event: ControllerEvent) -> None:
        """Drop (preempt) everything queued, then queue `event`: the session expired, what was queued
        no longer applies."""
        with self._put_lock:
            for dropped in self._drain():
                _preempt(dropped)
            if self._closed:
                _preempt(event)
            else:
                self._queue.put(event)

    def close(self, timeout: float = 30.0) -> None:
        """Preempt what is queued, let the event being processed finish, and stop the thread."""
        with self._put_lock:
            self._closed = True
            for dropped in self._drain():
                _preempt(dropped)
            self._queue.put(None)
        if self._thread.is_alive() and not self.on_event_thread:
            self._thread.join(timeout)

    def _drain(self) -> list[ControllerEvent]:
        dropped = []
        while True:
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                return dropped
            if event is not None:
                dropped.append(event)

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is None:
                return
            self.state = event.name
            try:
                event.process()
            except Exception:                   # one bad event must not stop the controller
                log.exception("controller %d: uncaught error processing %s", self.controller_id, event.name)
            finally:
                self.state = "Idle"


def _preempt(event: ControllerEvent) -> None:
    if event.preempt is not None:
        try:
            event.preempt()
        except Exception:
            log.exception("controller: preempting %s failed", event.name)
