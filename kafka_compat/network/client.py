"""NetworkClient: the requests this broker sends to other brokers (Kafka's NetworkClient, small).

A follower fetches from its leader, a leader proposes ISR changes to the
controller, the controller sends LeaderAndIsr to every broker: all of these are
requests this process sends. Each node gets one connection. Requests on it are
pipelined and their answers matched by correlation id. A request that is not
answered within its timeout fails and takes its connection down with it, as in
Kafka's client, because later answers on that connection can no longer be
matched in order. Connecting again waits an exponential backoff
(reconnect.backoff.ms doubling up to reconnect.backoff.max.ms). Responses are
cut by the same bounded FrameReader as requests, so a peer cannot make us
allocate more than ``max_response_bytes`` for one answer.

`ThreadSafeSender` is the face for threads other than the event loop's (the
ZooKeeper controller's event thread): ``send(broker, api_key, api_version,
body)`` returns a ``concurrent.futures.Future`` of the response body.

A client built with a `ClientSecurity` (the inter-broker listener's settings)
secures each connection before its first request, as Kafka's channel builders
do: TLS (trust store, host name, our certificate for mutual TLS), then SASL
(SaslHandshake, SaslAuthenticate rounds driven by the sans-I/O
SaslClientAuthenticator) on the same connection. A login the peer refuses is an
`AuthenticationError` and backs off like any failed connect. When the peer
grants a session lifetime (connections.max.reauth.ms, KIP-368), an idle
connection is replaced by a freshly authenticated one before the session ends.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import random
import socket
import ssl
import time
from typing import Any, Callable, NamedTuple

from ..protocol.frames import (
    DEFAULT_MAX_FRAME,
    FrameError,
    FrameReader,
    InvalidResponse,
    decode_response,
    encode_request,
    response_correlation_id,
)
from ..security.sasl_client import ClientSecurity, SaslClientError
from .client_channel import sasl_exchange

REAUTH_FRACTION = 0.85          # re-login when this share of the granted session lifetime has passed
# While a large answer (a follower's fetch response) is arriving, the kernel wakes us only once this many of
# its bytes are in (SO_RCVLOWAT): a 1 MiB response then costs a few wake-ups and reads, not one per segment.
RCVLOWAT_MAX = 1 << 20

log = logging.getLogger(__name__)

__all__ = ["Node", "NetworkClient", "ThreadSafeSender", "DisconnectedError", "AuthenticationError",
           "RequestTimeoutError", "InvalidResponse"]


class Node(NamedTuple):
    node_id: int
    host: str
    port: int


class DisconnectedError(ConnectionError):
    """The connection failed, or closed before the answer came: the request may or may not have been applied."""


class AuthenticationError(DisconnectedError):
    """The peer refused our SASL login (or its TLS certificate failed our checks); the connection is closed."""


class RequestTimeoutError(TimeoutError):
    """No answer within the request timeout; the connection has been closed."""


def _retrieved(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()


class _Connection(asyncio.BufferedProtocol):
    """One connection to one node: requests out in call order, answers matched by correlation id."""

    def __init__(self, node: Node, max_response_bytes: int):
        self.node = node
        self.reader = FrameReader(max_response_bytes)
        self.in_flight: dict[int, tuple[int, int, asyncio.Future]] = {}
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reauthenticate_at = float("inf")      # monotonic time to replace an idle connection (KIP-368)
        self._sock = None                          # the plain TCP socket whose SO_RCVLOWAT we set (None: TLS)
        self._lowat = 1

    # -- asyncio callbacks
    def connection_made(self, transport):
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # under TLS, bytes the TLS layer already holds do not count: a low-water mark could wait forever
            if transport.get_extra_info("sslcontext") is None and hasattr(socket, "SO_RCVLOWAT"):
                self._sock = sock

    def get_buffer(self, sizehint):
        return self.reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes):
        try:
            self.reader.buffer_updated(nbytes)
        except FrameError as e:
            self.abort(InvalidResponse(f"from node {self.node.node_id}: {e}"))
            return
        for frame in self.reader.frames():
            if not self._answer(frame):
                return
        if self._sock is not None:
            self._set_lowat(min(self.reader.missing(), RCVLOWAT_MAX) or 1)

    def _set_lowat(self, lowat: int) -> None:
        """Never more than the frame still needs, so the kernel never waits for bytes that are not coming."""
        if lowat != self._lowat:
            try:
                self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, lowat)
            except OSError:                     # closing, or a socket that will not: plain reads still work
                self._sock = None
                return
            self._lowat = lowat

    def eof_received(self):
        return False

    def connection_lost(self, exc):
        self.closed = True
        self._fail_all(DisconnectedError(f"connection to node {self.node.node_id} "
                                         f"({self.node.host}:{self.node.port}) closed"
                                         + (f": {exc}" if exc else "")))

    # -- requests
    def send(self, api_key: int, api_version: int, body, correlation_id: int, client_id: str) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        if self.closed:
            future.set_exception(DisconnectedError(f"connection to node {self.node.node_id} is closed"))
            return future
        frame = encode_request(api_key, api_version, body, correlation_id, client_id)
        future.add_done_callback(_retrieved)       # a caller that gave up must not leave it "never retrieved"
        self.in_flight[correlation_id] = (api_key, api_version, future)
        self.transport.write(frame)
        return future

    def _answer(self, frame) -> bool:
        try:
            correlation_id = response_correlation_id(frame)
            entry = self.in_flight.get(correlation_id)
            if entry is None:
                raise InvalidResponse(f"node {self.node.node_id} answered unknown correlation id {correlation_id}")
            api_key, api_version, future = entry
            _, body = decode_response(api_key, api_version, frame)
        except InvalidResponse as e:
            self.abort(e)
            return False
        del self.in_flight[correlation_id]
        if not future.done():
            future.set_result(body)
        return True

    def _fail_all(self, error: Exception) -> None:
        pending, self.in_flight = self.in_flight, {}
        for _, _, future in pending.values():
            if not future.done():
                future.set_exception(error)

    def abort(self, error: Exception) -> None:
        """Fail every request in flight with ``error`` and drop the connection."""
        self.closed = True
        self._fail_all(error)
        if self.transport is not None:
            self.transport.abort()


class NetworkClient:
    """Connections to other nodes, one each, made on first use and again after a failure.

    ``send`` is a coroutine for the event loop this client was first used on.
    """

    def __init__(self, client_id: str = "kafka-compat", *, request_timeout_ms: int = 30000,
                 connection_setup_timeout_ms: int = 10000, reconnect_backoff_ms: int = 50,
                 reconnect_backoff_max_ms: int = 1000, max_response_bytes: int = DEFAULT_MAX_FRAME,
                 security: ClientSecurity | None = None):
        self.client_id = client_id
        self.security = security or ClientSecurity()
        self.request_timeout_ms = request_timeout_ms
        self.connection_setup_timeout_ms = connection_setup_timeout_ms
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.reconnect_backoff_max_ms = max(reconnect_backoff_max_ms, reconnect_backoff_ms)
        self.max_response_bytes = max_response_bytes
        self._connections: dict[int, _Connection] = {}
        self._connecting: dict[int, asyncio.Task] = {}
        self._attempts: dict[int, tuple[float, int]] = {}     # node -> (last attempt, failures in a row)
        self._correlation = itertools.count(1)
        self.closed = False

    async def send(self, node: Node, api_key: int, api_version: int, body, timeout_ms: int | None = None):
        """Send one request to ``node`` and return its decoded response body.

        Raises DisconnectedError (connecting failed, or the connection went before the
        answer), RequestTimeoutError, or InvalidResponse (the answer could not be read).
        """
        connection = await self._ready(node)
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        future = connection.send(api_key, api_version, body, correlation_id, self.client_id)
        timeout = (self.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except asyncio.TimeoutError:
            error = RequestTimeoutError(f"no answer from node {node.node_id} to api {api_key} within "
                                        f"{timeout * 1000:.0f} ms")
            connection.abort(error)
            raise error from None

    def is_ready(self, node_id: int) -> bool:
        connection = self._connections.get(node_id)
        return connection is not None and not connection.closed

    def disconnect(self, node_id: int) -> None:
        connection = self._connections.pop(node_id, None)
        if connection is not None:
            connection.abort(DisconnectedError(f"disconnected from node {node_id}"))

    async def close(self) -> None:
        self.closed = True
        for task in list(self._connecting.values()):
            task.cancel()
        for node_id in list(self._connections):
            self.disconnect(node_id)

    # -- connecting
    async def _ready(self, node: Node) -> _Connection:
        if self.closed:
            raise DisconnectedError("the client is closed")
        connection = self._connections.get(node.node_id)
        if (connection is not None and not connection.in_flight
                and time.monotonic() >= connection.reauthenticate_at):
            self._connections.pop(node.node_id, None)    # its session ends soon: log in again on a new one
            connection.closed = True
            connection.transport.close()
            connection = None
        if connection is not None and not connection.closed and connection.node == node:
            return connection
        if connection is not None and connection.node != node:
            self.disconnect(node.node_id)           # the node moved: its old address is of no use
        task = self._connecting.get(node.node_id)
        if task is None or task.done():
            task = asyncio.get_running_loop().create_task(self._connect(node))
            self._connecting[node.node_id] = task
            task.add_done_callback(_retrieved)
            task.add_done_callback(lambda t, i=node.node_id: self._connecting.pop(i, None)
                                   if self._connecting.get(i) is t else None)
        return await asyncio.shield(task)

    def backoff_ms(self, failures: int) -> float:
        """reconnect.backoff.ms doubled per failure in a row, capped, with Kafka's ±20% jitter."""
        if failures <= 0:
            return 0.0
        base = min(self.reconnect_backoff_ms * 2 ** min(failures - 1, 30), self.reconnect_backoff_max_ms)
        return base * random.uniform(0.8, 1.2)

    async def _connect(self, node: Node) -> _Connection:
        last, failures = self._attempts.get(node.node_id, (0.0, 0))
        wait = last + self.backoff_ms(max(failures, 1)) / 1000 - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        self._attempts[node.node_id] = (time.monotonic(), failures)
        loop = asyncio.get_running_loop()
        context = self.security.ssl_context
        try:
            _, connection = await asyncio.wait_for(
                loop.create_connection(lambda: _Connection(node, self.max_response_bytes), node.host, node.port,
                                       ssl=context, server_hostname=node.host if context is not None else None),
                self.connection_setup_timeout_ms / 1000)
        except ssl.SSLError as e:
            self._attempts[node.node_id] = (time.monotonic(), failures + 1)
            raise AuthenticationError(f"TLS with node {node.node_id} at {node.host}:{node.port} failed: {e}") from e
        except (OSError, asyncio.TimeoutError) as e:
            self._attempts[node.node_id] = (time.monotonic(), failures + 1)
            raise DisconnectedError(f"cannot connect to node {node.node_id} at {node.host}:{node.port}: "
                                    f"{e or type(e).__name__}") from e
        try:
            await asyncio.wait_for(self._authenticate(connection), self.connection_setup_timeout_ms / 1000)
        except BaseException as e:
            self._attempts[node.node_id] = (time.monotonic(), failures + 1)
            error = e if isinstance(e, DisconnectedError) else DisconnectedError(
                f"SASL authentication with node {node.node_id} timed out" if isinstance(e, asyncio.TimeoutError)
                else f"SASL authentication with node {node.node_id} failed: {e or type(e).__name__}")
            connection.abort(error)
            if isinstance(e, (asyncio.TimeoutError, DisconnectedError, InvalidResponse)):
                raise error from None
            raise
        if self.closed:
            connection.abort(DisconnectedError("the client is closed"))
            raise DisconnectedError("the client is closed")
        self._attempts[node.node_id] = (time.monotonic(), 0)
        self._connections[node.node_id] = connection
        return connection

    async def _authenticate(self, connection: _Connection) -> None:
        """The SASL exchange of ``self.security`` on a fresh connection, before any other request."""
        node = connection.node

        def send(api_key: int, version: int, body) -> asyncio.Future:
            return connection.send(api_key, version, body, next(self._correlation) & 0x7FFFFFFF, self.client_id)
        try:
            lifetime_ms = await sasl_exchange(self.security, send)
        except SaslClientError as e:
            raise AuthenticationError(f"SASL/{self.security.sasl_mechanism} login as {self.security.username} "
                                      f"to node {node.node_id} at {node.host}:{node.port} failed: {e}") from None
        if lifetime_ms > 0:
            connection.reauthenticate_at = time.monotonic() + lifetime_ms * REAUTH_FRACTION / 1000

class ThreadSafeSender:
    """``send(broker, api_key, api_version, body) -> concurrent.futures.Future`` from any thread.

    ``resolve`` turns whatever the caller names a broker by into a Node (the composition
    root picks the inter-broker listener's endpoint); the request runs on ``loop``.
    """

    def __init__(self, client: NetworkClient, loop: asyncio.AbstractEventLoop, resolve: Callable[[Any], Node]):
        self.client = client
        self.loop = loop
        self.resolve = resolve

    def __call__(self, broker, api_key: int, api_version: int, body,
                 timeout_ms: int | None = None) -> concurrent.futures.Future:
        return self.send(broker, api_key, api_version, body, timeout_ms)

    def send(self, broker, api_key: int, api_version: int, body,
             timeout_ms: int | None = None) -> concurrent.futures.Future:
        try:
            node = self.resolve(broker)
        except Exception as e:          # no usable endpoint: the caller sees it on the future
            failed: concurrent.futures.Future = concurrent.futures.Future()
            failed.set_exception(e)
            return failed
        return asyncio.run_coroutine_threadsafe(
            self.client.send(node, api_key, api_version, body, timeout_ms), self.loop)
