"""SocketServer: the listeners, their connections, and the idle-connection sweep (Kafka's SocketServer).

It knows sockets and frames, not the broker: the composition root hands it the
request handler, the advertised API versions and each listener's security (TLS
context, SASL mechanisms). Each connection remembers the
listener it came in on, which the Metadata answer needs.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import deque
from typing import Callable, Mapping

from ..metrics.stats import SampledStat
from .connection import Connection, peer_closed
from .connection_quotas import ConnectionQuotas

log = logging.getLogger(__name__)
GONE_SWEEP_S = 5.0          # how often muted connections are checked for a client that went away


class BrokerStartError(Exception):
    """The broker cannot start (port in use, unreadable data directory): a message for people."""


class SocketServer:
    def __init__(self, endpoints, handle: Callable, supported_versions: dict, *, max_request_bytes: int,
                 send_buffer_bytes: int = 102400, receive_buffer_bytes: int = 102400,
                 connections_max_idle_ms: int | None = 600000, backlog: int = 1024,
                 security: Mapping | None = None, failed_authentication_delay_ms: int = 100,
                 request_done: Callable | None = None,
                 connection_quotas: ConnectionQuotas | None = None, inter_broker_listener: str | None = None,
                 max_waiting: int | None = None, disconnect_listeners: tuple = ()):
        """``request_done(request, connection)``, if given, runs after each answer is written and returns
        the seconds to mute that connection for (KIP-219 throttling; 0 for none). Each of
        ``disconnect_listeners`` is called with a client connection once it is gone (Kafka's
        ConnectionDisconnectListener)."""
        self.endpoints = list(endpoints)          # EndPoint(listener_name, host, port, security_protocol)
        self.handle = handle
        self.request_done = request_done
        self.supported_versions = supported_versions
        self.max_request_bytes = max_request_bytes
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.connections_max_idle_ms = connections_max_idle_ms
        self.backlog = backlog
        self.security = dict(security or {})     # listener name -> ListenerSecurity
        self.failed_authentication_delay_ms = failed_authentication_delay_ms
        # a TLS client that never finishes its handshake is idle: Kafka's idle timeout closes it
        self.ssl_handshake_timeout = connections_max_idle_ms / 1000 if connections_max_idle_ms else 60.0
        self.connections: set[Connection] = set()
        self.disconnect_listeners = tuple(disconnect_listeners)
        self.connection_quotas = connection_quotas or ConnectionQuotas()
        self.inter_broker_listener = inter_broker_listener
        self._in_turn: dict[str, deque[Connection]] = {}    # per listener: new connections waiting to be taken
        self._acceptors: dict[str, asyncio.Task] = {}
        self.held: set[Connection] = set()                  # waiting, or held off by their address's rate
        self.max_waiting = backlog if max_waiting is None else max_waiting
        # per listener, for the metrics: connections taken and closed, and the waits of the creation rates
        self.created: dict[str, int] = {}
        self.closed_connections: dict[str, int] = {}
        self.accept_throttle: dict[str, SampledStat] = {}      # the listener's or the broker's rate
        self.ip_throttle: dict[str, SampledStat] = {}          # an address's connection_creation_rate
        self.servers: list[asyncio.AbstractServer] = []
        self.bound: list = []                     # the endpoints with the ports actually bound
        self._idle_timer: asyncio.TimerHandle | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for endpoint in self.endpoints:
            name = endpoint.listener_name
            security = self.security.get(name)
            context = security.ssl_context if security is not None else None
            try:
                server = await loop.create_server(
                    lambda name=name, security=security: Connection(self, name, security), endpoint.host or None,
                    endpoint.port, reuse_address=True, backlog=self.backlog, ssl=context,
                    ssl_handshake_timeout=self.ssl_handshake_timeout if context is not None else None)
            except OSError as e:
                await self.stop()
                raise BrokerStartError(
                    f"cannot listen on {endpoint.host or '0.0.0.0'}:{endpoint.port}: {e.strerror or e}"
                    + (" (is another broker running?)" if e.errno == 98 else "")) from e
            for sock in server.sockets:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.servers.append(server)
            self.bound.append(endpoint._replace(port=server.sockets[0].getsockname()[1]))
        self._schedule_sweep()

    async def stop(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        for s in self.servers:
            s.close()
        for task in self._acceptors.values():
            task.cancel()
        for conn in list(self.held):
            conn.abort()
        self.held.clear()
        for conn in list(self.connections):
            conn.close()
        for s in self.servers:
            await s.wait_closed()
        self.servers.clear()

    def protected(self, listener: str) -> bool:
        """The inter-broker listener, when clients have another: the broker-wide connection limit and
        creation rate do not hold it up, so clients cannot starve replication (Kafka's protectedListener)."""
        return listener == self.inter_broker_listener and len(self.endpoints) > 1

    def make_room(self) -> None:
        """A protected connection took the broker over max.connections: close the client connection that
        was active least recently, as Kafka's processors do (Selector.lowestPriorityChannel)."""
        quotas = self.connection_quotas
        while quotas.total > quotas.max_connections:
            clients = [c for c in self.connections if not c.closed and not self.protected(c.listener)]
            if not clients:
                return
            oldest = min(clients, key=lambda c: c.last_active)
            log.info("closing %s: max.connections (%d) reached and a broker connected", oldest.peer,
                     quotas.max_connections)
            oldest.abort()
            quotas.release(oldest.peer_ip, oldest.listener)     # free now, before asyncio reports the close
            oldest.counted = False
            self.connection_counts(oldest.listener, 0)

    # -- connection creation rates (KIP-612) ------------------------------------------------------
    def accept_in_turn(self, conn: Connection) -> None:
        """Queue a new connection for its listener, which takes them one at a time, as Kafka's acceptor.
        Kafka's waiting acceptor leaves new connections in the kernel's backlog, and a full backlog drops
        them; here they are accepted already, so at most `max_waiting` (the backlog's size) wait and any
        more are closed at once."""
        if len(self.held) >= self.max_waiting:
            log.debug("closing %s: %d connections wait already", conn.peer, len(self.held))
            conn.closed = True
            conn.transport.abort()
            return
        self.held.add(conn)
        self._in_turn.setdefault(conn.listener, deque()).append(conn)
        if conn.listener not in self._acceptors:
            self._acceptors[conn.listener] = asyncio.get_running_loop().create_task(self._accept(conn.listener))

    async def _accept(self, listener: str) -> None:
        quotas = self.connection_quotas
        queue = self._in_turn[listener]
        protected = self.protected(listener)
        try:
            while queue:
                conn = queue.popleft()
                if conn.closed:
                    self.held.discard(conn)
                    continue
                wait_ms = quotas.record_connection(protected, listener)
                if wait_ms:
                    self._record_throttle(self.accept_throttle, listener, wait_ms)
                    # every connection behind this one waits too: the listener takes none meanwhile
                    await asyncio.sleep(wait_ms / 1000)
                    if conn.closed:
                        self.held.discard(conn)
                        continue
                hold_ms = quotas.record_ip(conn.peer_ip, protected, listener)
                if hold_ms:
                    self._record_throttle(self.ip_throttle, listener, hold_ms)
                    log.info("closing %s after %d ms: connection_creation_rate of %s exceeded", conn.peer, hold_ms,
                             conn.peer_ip)
                    conn.close_later(hold_ms / 1000)
                    asyncio.get_running_loop().call_later(hold_ms / 1000, self.held.discard, conn)
                    continue
                self.held.discard(conn)
                conn.accept()
        finally:
            del self._acceptors[listener]

    def _record_throttle(self, stats: dict[str, SampledStat], listener: str, ms: int) -> None:
        quotas = self.connection_quotas
        stat = stats.get(listener)
        if stat is None:
            stat = stats[listener] = SampledStat(quotas.samples, quotas.window_ms)
        stat.record(ms, quotas.clock())

    def connection_counts(self, listener: str, opened: int) -> None:
        """A connection of `listener` was taken (opened 1) or, once taken, closed (opened 0)."""
        counts = self.created if opened else self.closed_connections
        counts[listener] = counts.get(listener, 0) + 1

    def _schedule_sweep(self) -> None:
        """Every few seconds, close connections silent for connections.max.idle.ms, as Kafka's selector
        does, and muted ones whose client has gone away.

        A connection whose request is still being answered (a long-poll fetch) is not idle: its clock
        restarts when the response is written. A muted one (throttled, KIP-219, or holding its read-ahead
        while an answer is awaited) reads nothing, so it cannot see its client close; the kernel can
        (CLOSE_WAIT). Without this a client that gave up on a throttle of hours, as a fuzzer's garbled
        requests earn, would hold a descriptor and its unread frames for all that time.
        """
        idle_ms = self.connections_max_idle_ms
        idle = idle_ms / 1000.0 if idle_ms is not None and idle_ms > 0 else None
        period = min(idle / 4, GONE_SWEEP_S) if idle else GONE_SWEEP_S
        loop = asyncio.get_running_loop()

        def sweep() -> None:
            deadline = time.monotonic() - idle if idle else None
            for conn in list(self.connections):
                if conn.closed:
                    continue
                if conn.paused and peer_closed(conn.transport):
                    log.info("closing %s: the client went away while its connection was muted", conn.peer)
                    conn.abort()
                elif deadline is not None and conn.last_active < deadline and not conn.queue and not conn.busy:
                    log.info("closing %s: idle for more than %d ms", conn.peer, idle_ms)
                    conn.close()
            self._idle_timer = loop.call_later(period, sweep)

        self._idle_timer = loop.call_later(period, sweep)
