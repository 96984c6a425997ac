"""This broker's membership of a ZooKeeper cluster: /brokers/ids/<id>, the broker epoch, and the session.

As Kafka's KafkaServer and KafkaController do on a broker: the broker registers
an ephemeral /brokers/ids/<id> (v5 JSON from its advertised listeners) once it
listens, and the znode's czxid is its broker epoch, which every control request
must carry. kazoo reports the session's fate on its own thread; here it becomes
calls on the event loop:

- SUSPENDED (connection lost, the session may live): ``on_suspended`` once the
  session may have expired at the server, and the composition root stops acting
  as leader then: after an expiry another broker may be made leader of our
  partitions, and two leaders must never both acknowledge a write. kazoo
  suspends after hearing nothing for at most 2/3 of the session timeout, so the
  server cannot expire the session within the remaining third: until then (a
  short hiccup, a slow ZooKeeper) the broker goes on leading, which no other
  broker can have been made meanwhile.
- CONNECTED again in the same session: ``on_resumed`` if ``on_suspended`` was
  called (nobody replaced us).
- LOST (the session expired: our znode is gone): the epoch becomes unknown
  (``epoch`` is None, so control requests are refused, but for those carrying a
  newer epoch: they wait for the registration under way) and ``on_lost``; once
  kazoo has a new session we register again (a new czxid, a new broker epoch,
  as Kafka's RegisterBrokerAndReelect), retrying until it works, then
  ``on_registered(epoch)``.

All ZooKeeper calls here block, so they run in worker threads, never on the loop
or on kazoo's threads.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from ..zk import zk_data as zd
from ..zk.kafka_zk_client import KafkaZkClient, ZkState

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 1.0


class ZkBrokerRegistration:
    def __init__(self, zk: KafkaZkClient, broker_info: Callable[[], zd.BrokerInfo], loop: asyncio.AbstractEventLoop,
                 *, on_suspended: Callable[[], None], on_resumed: Callable[[], None], on_lost: Callable[[], None],
                 on_registered: Callable[[int], None]):
        self.zk = zk
        self.broker_info = broker_info
        self.loop = loop
        self.on_suspended = on_suspended
        self.on_resumed = on_resumed
        self.on_lost = on_lost
        self.on_registered = on_registered
        self.epoch: int | None = None          # the czxid of our registration; None while not registered
        self.expired_epoch = -1                # the epoch of the registration a session expiry took
        self._registered = asyncio.Event()     # set while self.epoch is known
        self.session_lost = False
        self.suspended = False                 # on_suspended was called and the session is not back yet
        self._suspension: asyncio.TimerHandle | None = None
        self.closed = False
        self._task: asyncio.Task | None = None

    def register(self) -> int:
        """Create /brokers/ids/<id> (blocking); the new broker epoch."""
        info = self.broker_info()
        epoch = self.zk.register_broker(info)
        log.info("registered as broker %d at %s (broker epoch %d)", info.id,
                 ", ".join(zd.connection_string(e) for e in info.endpoints), epoch)
        return epoch

    async def start(self) -> int:
        """Register, then follow the session; the broker epoch."""
        self.epoch = await asyncio.to_thread(self.register)
        self._registered.set()
        self.zk.add_state_listener(self._on_state)
        return self.epoch

    async def wait_registered(self, epoch: int, timeout: float = 30.0) -> bool:
        """Whether a control request carrying broker epoch ``epoch``, which came while we were not
        registered, is for the registration under way; waits (at most ``timeout``) until it is done. A
        controller sees our new znode as soon as it exists, possibly before our create has returned;
        czxids only grow, so an epoch above the expired one can only be the new registration's."""
        if epoch <= self.expired_epoch:
            return False
        try:
            await asyncio.wait_for(self._registered.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return self.epoch is not None and epoch >= self.epoch

    def close(self) -> None:
        self.closed = True
        try:
            self.zk.remove_state_listener(self._on_state)
        except ValueError:
            pass
        if self._task is not None:
            self._task.cancel()
        self._end_suspension()

    def suspension_grace_s(self) -> float:
        """How long after a SUSPENDED the session surely still lives at the server: a third of its timeout
        (the negotiated one when kazoo has it, which a server's maxSessionTimeout may have lowered)."""
        timeout_ms = self.zk.session_timeout_ms
        negotiated = getattr(getattr(self.zk, "zk", None), "_session_timeout", None)
        if isinstance(negotiated, (int, float)) and negotiated > 0:
            timeout_ms = min(timeout_ms, negotiated)
        return timeout_ms / 3000

    def _end_suspension(self) -> None:
        if self._suspension is not None:
            self._suspension.cancel()
            self._suspension = None

    def _suspended_too_long(self) -> None:
        self._suspension = None
        if not self.closed and not self.suspended:
            log.warning("no ZooKeeper connection for a third of the session timeout: not acting as leader until "
                        "the session is back")
            self.suspended = True
            self.on_suspended()

    # -- kazoo's thread: hand over, never block
    def _on_state(self, state: str) -> None:
        if not self.closed:
            self.loop.call_soon_threadsafe(self._on_state_in_loop, state)

    def _on_state_in_loop(self, state: str) -> None:
        if self.closed:
            return
        if state == ZkState.SUSPENDED:
            if self._suspension is None and not self.suspended:
                grace = self.suspension_grace_s()
                log.warning("lost the connection to ZooKeeper; leading on for %.1f s at most", grace)
                self._suspension = self.loop.call_later(grace, self._suspended_too_long)
        elif state == ZkState.LOST:
            log.warning("the ZooKeeper session expired: registration gone (was broker epoch %s)", self.epoch)
            self._end_suspension()
            self.suspended = False
            if self.epoch is not None:
                self.expired_epoch = self.epoch
            self.epoch = None
            self._registered.clear()
            self.session_lost = True
            self.on_lost()
        elif state == ZkState.CONNECTED:
            self._end_suspension()
            if self.session_lost:
                if self._task is None or self._task.done():
                    self._task = self.loop.create_task(self._register_again())
            else:
                log.info("reconnected to ZooKeeper in the same session")
                if self.suspended:
                    self.suspended = False
                    self.on_resumed()

    async def _register_again(self) -> None:
        while not self.closed:
            try:
                epoch = await asyncio.to_thread(self.register)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("registering again failed: %s; retrying", e)
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            if self.closed:
                return
            self.session_lost = False
            self.epoch = epoch
            self.on_registered(epoch)       # before the requests waiting for it go on: they find us unfenced
            self._registered.set()
            return
