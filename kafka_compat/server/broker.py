"""The broker: configuration, listeners, topics, partitions and the request dispatch.

One asyncio event loop serves every connection. Handlers are plain functions
registered per API key (see registry.py); the broker only routes a decoded
request to its handler and hands the handler the shared state it needs.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from base64 import urlsafe_b64encode

from ..endpoint import EndPoint
from ..protocol.frames import Request
from .registry import HANDLERS, CloseConnection, supported_versions
from .topics import TopicRegistry

log = logging.getLogger(__name__)


class BrokerStartError(Exception):
    """The broker cannot start (port in use, unreadable data directory): a message for people."""


class Broker:
    def __init__(self, config):
        from . import handlers  # noqa: F401  (registers every handler module)
        from .replica_manager import ReplicaManager
        self.config = config
        self.node_id = max(config.node_id, 0)
        self.log_dirs = [os.path.abspath(d) for d in config.log_dirs]
        self.listeners = config.listeners
        self.advertised = config.advertised_listeners if config["advertised.listeners"] else None
        self.supported_versions = supported_versions()
        self.connections: set = set()
        self.servers: list[asyncio.AbstractServer] = []
        self.bound: list[EndPoint] = []
        self.cluster_id: str | None = None
        self.topics: TopicRegistry | None = None
        self.replicas = ReplicaManager(self)
        from .controller import Controller
        self.controller = Controller(self)
        from ..group import GroupCoordinator
        self.group_coordinator = GroupCoordinator(self)
        self.started = False
        self._idle_timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------ lifecycle
    def _prepare_dirs(self) -> None:
        for d in self.log_dirs:
            try:
                os.makedirs(d, exist_ok=True)
                probe = os.path.join(d, ".kafka-compat-write-probe")
                with open(probe, "w") as f:
                    f.write("ok")
                os.unlink(probe)
            except OSError as e:
                raise BrokerStartError(f"log directory {d!r} is not usable: {e.strerror or e}") from e
        self.cluster_id = self._meta_properties(self.log_dirs[0])

    def _meta_properties(self, directory: str) -> str:
        """Kafka's meta.properties: the cluster id and node id this data belongs to."""
        path = os.path.join(directory, "meta.properties")
        props = {}
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    if "=" in line and not line.startswith("#"):
                        k, v = line.strip().split("=", 1)
                        props[k] = v
        if "cluster.id" not in props:
            props = {"version": "1",
                     "cluster.id": urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="),
                     "node.id": str(self.node_id)}
            with open(path, "w") as f:
                f.write("#Written by kafka-compat\n")
                for k, v in props.items():
                    f.write(f"{k}={v}\n")
        return props["cluster.id"]

    async def start(self) -> None:
        self._prepare_dirs()
        self.topics = TopicRegistry(self.log_dirs[0])
        await self.replicas.startup()
        await self.group_coordinator.startup()
        from ..network.connection import Connection
        loop = asyncio.get_running_loop()
        for lst in self.listeners:
            try:
                server = await loop.create_server(lambda: Connection(self), lst.host or None, lst.port,
                                                  reuse_address=True, backlog=1024)
            except OSError as e:
                await self.stop()
                raise BrokerStartError(
                    f"cannot listen on {lst.host or '0.0.0.0'}:{lst.port}: {e.strerror or e}"
                    + (" (is another broker running?)" if e.errno == 98 else "")) from e
            for sock in server.sockets:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            port = server.sockets[0].getsockname()[1]
            self.servers.append(server)
            self.bound.append(lst._replace(port=port))
        self.started = True
        self._schedule_idle_check()
        log.info("kafka-compat node %d serving %s (cluster %s)", self.node_id,
                 ", ".join(f"{b.listener_name}://{b.host or ''}:{b.port}" for b in self.bound), self.cluster_id)

    async def stop(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        for s in self.servers:
            s.close()
        for conn in list(self.connections):
            conn.close()
        for s in self.servers:
            await s.wait_closed()
        self.servers.clear()
        await self.group_coordinator.shutdown()
        await self.replicas.shutdown()
        self.started = False

    def _schedule_idle_check(self) -> None:
        """Close connections silent for connections.max.idle.ms, as Kafka's selector does.

        A connection whose request is still being answered (a long-poll fetch) is
        not idle: its clock restarts when the response is written.
        """
        idle_ms = self.config["connections.max.idle.ms"]
        if idle_ms is None or idle_ms <= 0:
            return
        idle = idle_ms / 1000.0
        loop = asyncio.get_running_loop()

        def check() -> None:
            deadline = time.monotonic() - idle
            for conn in list(self.connections):
                if conn.last_active < deadline and not conn.queue and not conn.busy:
                    log.info("closing %s: idle for more than %d ms", conn.peer, idle_ms)
                    conn.close()
            self._idle_timer = loop.call_later(min(idle / 4, 30.0), check)

        self._idle_timer = loop.call_later(min(idle / 4, 30.0), check)

    # ------------------------------------------------------------ addresses
    def advertised_endpoint(self, listener_name: str | None = None) -> tuple[str, int]:
        """The host and port clients should use; a port of 0 in the config means the bound one."""
        bound = self.bound[0] if self.bound else self.listeners[0]
        if self.advertised:
            adv = self.advertised[0]
            return adv.host or "localhost", adv.port or bound.port
        host = bound.host
        if host in (None, "", "0.0.0.0", "::"):
            host = socket.gethostname()
        return host, bound.port

    # ------------------------------------------------------------ dispatch
    def handle(self, request: Request, conn):
        handler = HANDLERS.get(request.api_key)
        request.connection = conn
        try:
            return handler.fn(self, request)
        except CloseConnection:
            conn.close()
            return None
