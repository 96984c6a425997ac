"""Keyed timers on the event loop (Kafka's coordinator Timer): scheduling a key again replaces its timer.

Consumer groups arm one session timer per member, and a rebalance, join or sync
timer while a member must act; every heartbeat re-arms the session timer.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable, Hashable

log = logging.getLogger(__name__)


class Timer:
    def __init__(self) -> None:
        self._handles: dict[Hashable, asyncio.TimerHandle] = {}

    def schedule(self, key: Hashable, delay_ms: int, fn: Callable[[], None]) -> None:
        self.cancel(key)
        loop = asyncio.get_running_loop()
        self._handles[key] = loop.call_later(max(delay_ms, 0) / 1000, self._fire, key, fn)

    def schedule_if_absent(self, key: Hashable, delay_ms: int, fn: Callable[[], None]) -> None:
        if key not in self._handles:
            self.schedule(key, delay_ms, fn)

    def _fire(self, key: Hashable, fn: Callable[[], None]) -> None:
        self._handles.pop(key, None)
        try:
            fn()
        except Exception:
            log.exception("timer %s failed", key)

    def cancel(self, key: Hashable) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()
