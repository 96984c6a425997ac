"""LogDirFailureChannel: where an I/O error on a log directory is reported, once per directory.

As Kafka's: whoever meets an IOException while writing a log (an append, a roll, a truncation, an
index or checkpoint write) reports the directory here, from whatever thread it runs on; the first
report of a directory queues it, later ones are only logged. The broker's handler (Kafka's
LogDirFailureHandler) takes the directory on the event loop and makes ReplicaManager stop serving
what it holds. Only a cluster member has one: a single node keeps answering KAFKA_STORAGE_ERROR per
request until the disk has room again, since no other broker could take its partitions over.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from typing import Callable

log = logging.getLogger(__name__)


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: set[str] = set()
        self._pending: list[str] = []
        self._handler: Callable[[str], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop, handler: Callable[[str], None]) -> None:
        """Hand each offline directory to ``handler(dir)`` on ``loop`` (those reported before too)."""
        with self._lock:
            self._loop, self._handler = loop, handler
            pending, self._pending = self._pending, []
        for directory in pending:
            loop.call_soon_threadsafe(handler, directory)

    @property
    def offline_log_dirs(self) -> set[str]:
        return set(self._offline)

    def maybe_add_offline_log_dir(self, directory: str, message: str, error: BaseException) -> bool:
        """Report ``directory`` as failed (thread-safe); True if this was its first report."""
        with self._lock:
            first = directory not in self._offline
            if first:
                self._offline.add(directory)
                loop, handler = self._loop, self._handler
                if handler is None:
                    self._pending.append(directory)
        log.error("%s: %s", message, error)
        if first and handler is not None:
            try:
                loop.call_soon_threadsafe(handler, directory)
            except RuntimeError:        # the loop closed: the broker is stopping anyway
                pass
        return first
