"""One client connection: frames in, requests handled one at a time in order, responses out.

Kafka answers a connection's requests in the order they arrived, so a request
is handled only after the previous one's response is written. Most answers are
ready at once (a produce appended, metadata looked up): those frames are
answered inline, in the read callback that brought them, with no task switch
per request. A request whose answer must wait (a long-poll fetch, a group join,
a sendfile into a full socket) continues in a task, and the frames that arrive
meanwhile are read ahead into a bounded queue (reading pauses when it is full).
While an acks=-1 produce waits for its replicas, the produce requests queued
behind it are handled at once (appended, in order) and answered in order once
their turns come: with one produce at a time, a producer that sends a request
per partition every linger.ms (librdkafka does) outpaces the replication round
trip, and its requests queue for seconds. Nothing is reordered: appends happen
in arrival order, answers go out in arrival order.
Responses are written as bytes with `transport.write` and, for record bytes
that live in segment files, with `os.sendfile` (`loop.sendfile` once the socket
is full); the pieces keep their order because sendfile waits for the
transport's buffer to drain first.

On TLS listeners asyncio runs the handshake before `connection_made`, where the
client certificate (if any) names the principal; record bytes then pass
through user space to be encrypted (no sendfile). On SASL listeners every
frame goes to the connection's `SaslServerAuthenticator` (sans-I/O, in
protocol/sasl.py) until it says the client is authenticated, with frames
capped at sasl.server.max.receive.size meanwhile; afterwards only SaslHandshake
and SaslAuthenticate (KIP-368 re-authentication) go there, and a request
arriving after the session expired closes the connection.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
import time
from collections import deque

from ..protocol.frames import (
    FrameError,
    FrameReader,
    InvalidRequest,
    UnsupportedApiVersionsRequest,
    encode_response,
    parse_request,
    unsupported_api_versions_response,
)
from ..protocol.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE, Authenticated, Close, SaslState, SendBytes, SendToken
from ..security.acl import host_address
from ..security.principal import ANONYMOUS, NoMatchingRule
from .connection_quotas import normalize_ip

log = logging.getLogger(__name__)

READ_AHEAD_FRAMES = 32
PRODUCE = 0
_SIZE = struct.Struct(">i")


class Connection(asyncio.BufferedProtocol):
    """asyncio protocol for one client of one listener; `server.handle(request, conn)` does the work."""

    def __init__(self, server, listener: str, security=None):
        self.server = server
        self.listener = listener
        self.security = security        # the listener's ListenerSecurity (TLS, SASL), or None
        self.reader = FrameReader(server.max_request_bytes)
        self.principal = ANONYMOUS      # who the connection acts as (KafkaPrincipal)
        self.host = ""                  # the client's address as ACLs name it
        self.acl_key = ""               # principal and host in one string: the authorizer's cache key
        self.sasl = None                # the SaslServerAuthenticator of a SASL listener
        self.tls = False
        self.transport: asyncio.Transport | None = None
        self.queue: deque = deque()
        self.closed = False
        self.paused = False
        self.task: asyncio.Task | None = None
        self.peer = None
        self.client_software: tuple[str, str] | None = None    # (name, version) from ApiVersions v3+
        self.token_authenticated = False    # SASL/SCRAM with a delegation token
        self.last_active = time.monotonic()
        self.busy = False               # an answer is being waited for: not idle, later frames queue
        self.answering = None           # the request answer() got to last
        # requests handled while an earlier answer was awaited, (request, answer or awaitable) in order; and
        # whether every answer awaited only waits (acks=-1 produce): then a produce behind may be handled now
        self.ahead: deque = deque()
        self.ahead_ok = False
        self.counted = False            # counted against max.connections / max.connections.per.ip
        self.mute: asyncio.Future | None = None     # the KIP-219 mute under way
        self.waiting = False            # not yet taken by its listener (connection creation rates)

    # -- asyncio callbacks
    def connection_made(self, transport):
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        if self.server.connection_quotas.rate_limited:
            self.waiting = True
            transport.pause_reading()   # nothing is read before the listener takes it, in its turn
            self.server.accept_in_turn(self)
            return
        self.accept()

    def accept(self) -> None:
        """Count the connection against the limits, and start serving it or close it."""
        transport = self.transport
        server = self.server
        protected = server.protected(self.listener)
        refused = server.connection_quotas.try_acquire(self.peer_ip, protected, self.listener)
        if refused is not None:
            log.info("closing %s: %s", self.peer, refused)
            self.closed = True
            transport.abort()
            return
        self.counted = True
        server.connection_counts(self.listener, 1)
        if protected:
            server.make_room()
        set_buffer_sizes(transport.get_extra_info("socket"), self.server.send_buffer_bytes,
                         self.server.receive_buffer_bytes)
        self.server.connections.add(self)
        if self.peer:
            self.host = host_address(self.peer[0])
        self.act_as(ANONYMOUS)
        security = self.security
        if security is not None:
            self.secure(security, transport.get_extra_info("ssl_object"))
        if self.waiting:
            self.waiting = False
            transport.resume_reading()

    def secure(self, security, ssl_object) -> None:
        """Name the principal from the client certificate, and start SASL where the listener wants it."""
        if ssl_object is not None:
            self.tls = True
            try:
                self.act_as(security.transport_principal(ssl_object.getpeercert(binary_form=True)))
            except (NoMatchingRule, ValueError) as e:
                log.info("closing %s: no principal for its certificate: %s", self.peer, e)
                self.close()
                return
        self.sasl = security.authenticator(self._api_versions, self.server.supported_versions)
        if self.sasl is not None:
            self.reader.max_frame_size = min(self.reader.max_frame_size, self.sasl.max_receive_size)

    def act_as(self, principal) -> None:
        self.principal = principal
        self.acl_key = f"{principal}|{self.host}"

    def _api_versions(self, request):
        """The broker's ApiVersions answer, for a client that asks before authenticating."""
        return self.server.handle(request, self)

    def get_buffer(self, sizehint):
        return self.reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes):
        self.last_active = time.monotonic()
        try:
            self.reader.buffer_updated(nbytes)
        except FrameError as e:
            log.info("closing %s: %s", self.peer, e)
            self.close()
            return
        frames = self.reader.frames()
        if frames:
            self.queue.extend(frames)
            if not self.busy:
                self.pump()
                return
            if self.ahead_ok:
                self.answer_ahead()
            if len(self.queue) >= READ_AHEAD_FRAMES and not self.paused:
                self.paused = True
                self.transport.pause_reading()

    def eof_received(self):
        return False

    def connection_lost(self, exc):
        self.closed = True
        self.server.connections.discard(self)
        for listener in getattr(self.server, "disconnect_listeners", ()):
            try:
                listener(self)
            except Exception:
                log.exception("a disconnect listener failed")
        if self.counted:
            self.counted = False
            self.server.connection_quotas.release(self.peer_ip, self.listener)
            self.server.connection_counts(self.listener, 0)

    @property
    def peer_ip(self) -> str | None:
        if not isinstance(self.peer, tuple) or not self.peer:
            return None                 # a Unix socket, or a transport that never had a peer
        try:
            return normalize_ip(self.peer[0])
        except ValueError:
            return self.peer[0]

    def close(self):
        self.closed = True
        if not self.transport.is_closing():     # also ends a delayed close (close_later) at once
            self.transport.close()

    def abort(self) -> None:
        """Close at once, dropping what is still to be written or answered (nobody will read it)."""
        self.closed = True
        self.queue.clear()
        if self.mute is not None:
            self.mute.cancel()
        self.transport.abort()          # an answer still awaited finishes on its own and writes nothing

    def close_later(self, delay: float) -> None:
        """Stop reading and answering, and close after `delay` seconds (connection.failed.authentication.delay.ms:
        a failed login's answer reaches the client before the close, and retries are slowed down)."""
        if self.closed or delay <= 0:
            self.close()
            return
        self.closed = True              # nothing more is read, answered or written
        self.queue.clear()
        self.transport.pause_reading()
        asyncio.get_running_loop().call_later(delay, self._discard_unread_and_close)

    def _discard_unread_and_close(self) -> None:
        """Close after dropping what the peer sent and we will never read: a close over unread bytes sends
        a RST, and a RST makes the peer's TCP stack throw away the answer it has not read yet (the error
        that says why we close)."""
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            try:
                for _ in range(64):             # bounded: a peer that keeps sending gets its RST
                    if not os.read(sock.fileno(), 65536):
                        break
            except OSError:                     # BlockingIOError: nothing more buffered
                pass
        self.transport.close()

    # -- the in-order pipeline
    def pump(self) -> None:
        """Answer queued frames in order, inline while each answer is ready at once; the first
        one that has to wait finishes in a task, which pumps again when it is written."""
        queue = self.queue
        while queue and not self.closed:
            try:
                waiting = self.answer(queue.popleft())
            except Exception:
                log.exception("connection %s failed", self.peer)
                self.close()
                return
            request, self.answering = self.answering, None
            if waiting is not None:
                self.busy = True
                self.task = asyncio.get_running_loop().create_task(self.finish(waiting))
                self.ahead_ok = request is not None and request.waits_only
                if self.ahead_ok:
                    self.answer_ahead()
                return
        if self.paused and not self.closed:
            self.paused = False
            self.transport.resume_reading()

    async def finish(self, waiting) -> None:
        ahead = self.ahead
        try:
            await waiting
            while ahead and not self.closed:      # those handled meanwhile, answered in turn
                request, result = ahead.popleft()
                if asyncio.iscoroutine(result):
                    result = await result
                waiting = self.respond(request, result)
                if waiting is not None:
                    await waiting
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("connection %s failed", self.peer)
            self.close()
            return
        finally:
            self.busy = False
            self.task = None
            self.ahead_ok = False
            while ahead:                            # closed: these are never answered
                _, result = ahead.popleft()
                if asyncio.iscoroutine(result):
                    result.close()
        self.last_active = time.monotonic()
        self.pump()

    def answer_ahead(self) -> None:
        """Handle the produce requests at the head of the queue now, while every answer in flight only waits
        for acks; finish() writes their answers in turn. Anything else waits for the in-order path."""
        queue, ahead, sasl = self.queue, self.ahead, self.sasl
        if sasl is not None and (sasl.state is not SaslState.AUTHENTICATED or sasl.session_expires_at is not None):
            return
        while queue and self.ahead_ok and not self.closed and len(ahead) < READ_AHEAD_FRAMES \
                and _api_key(queue[0]) == PRODUCE:
            try:
                request = parse_request(queue[0], self.server.supported_versions)
            except (InvalidRequest, UnsupportedApiVersionsRequest):
                return                              # answered by the in-order path
            if request.body.acks == 0:              # no answer, maybe a close: the in-order path
                return
            queue.popleft()
            try:
                result = self.server.handle(request, self)
            except Exception:
                log.exception("connection %s failed", self.peer)
                self.close()
                return
            ahead.append((request, result))
            if asyncio.iscoroutine(result) and not request.waits_only:
                self.ahead_ok = False               # it still has work to do in order: nothing overtakes it

    def answer(self, frame):
        """Handle one request frame; None once its response is written, else an awaitable that
        writes it."""
        sasl = self.sasl
        if sasl is not None:
            if sasl.state is not SaslState.AUTHENTICATED or _api_key(frame) in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
                self.authenticate(sasl.receive_frame(frame))
                return None
            if sasl.session_expires_at is not None and sasl.session_expired():
                log.info("closing %s: SASL session expired (connections.max.reauth.ms)", self.peer)
                self.close()
                return None
        try:
            request = parse_request(frame, self.server.supported_versions)
        except UnsupportedApiVersionsRequest as e:
            self.write(unsupported_api_versions_response(e.correlation_id))
            return None
        except InvalidRequest as e:
            log.info("closing %s: %s", self.peer, e)
            self.close()
            return None
        self.answering = request
        result = self.server.handle(request, self)
        if asyncio.iscoroutine(result):
            return self.respond_later(request, result)
        return self.respond(request, result)

    async def respond_later(self, request, result) -> None:
        result = await result
        waiting = self.respond(request, result)
        if waiting is not None:
            await waiting

    def authenticate(self, outputs) -> None:
        """Carry out what the SASL state machine asked for, in order."""
        for out in outputs:
            kind = type(out)
            if kind is SendToken:
                self.write(_SIZE.pack(len(out.token)) + bytes(out.token))
            elif kind is SendBytes:
                self.write(out.data)
            elif kind is Authenticated:
                self.act_as(self.security.sasl_principal(out.authorization_id))
                self.token_authenticated = out.token_authenticated
                self.reader.max_frame_size = self.server.max_request_bytes
                if out.reauthentication:        # KIP-368: worth a line, as a session expiry's close is
                    log.info("%s re-authenticated as %s with SASL/%s (session %d ms)", self.peer, self.principal,
                             out.mechanism, out.session_lifetime_ms)
                else:
                    log.debug("%s authenticated as %s with SASL/%s", self.peer, self.principal, out.mechanism)
            elif kind is Close:
                log.info("closing %s: %s", self.peer, out.reason)
                self.close_later(self.server.failed_authentication_delay_ms / 1000)
                return
            else:                           # SendResponse
                self.write(encode_response(out.request, out.body))

    def respond(self, request, result):
        if result is not None and not self.closed:     # None: acks=0 produce, or the handler closed us
            holes: list = []
            data = encode_response(request, result, holes)
            if holes:
                waiting = self.write_with_slices(data, holes)
                if waiting is not None:
                    return self._done_after(request, waiting)
            else:
                self.write(data)
        return self.done(request)

    async def _done_after(self, request, waiting) -> None:
        await waiting
        muted = self.done(request)
        if muted is not None:
            await muted

    def done(self, request):
        """The answer is written: the server's `request_done` hook (metrics, quotas) says how long this
        client is throttled; KIP-219 mutes the connection that long (nothing read, nothing answered)."""
        mute_s = self.server.request_done(request, self) if self.server.request_done is not None else 0.0
        if mute_s <= 0 or self.closed:
            return None
        if not self.paused:
            self.paused = True
            self.transport.pause_reading()  # pump() resumes reading once the mute is over
        self.mute = asyncio.ensure_future(asyncio.sleep(mute_s))     # abort() ends it early
        return self.mute

    def write(self, data) -> None:
        if not self.closed:
            self.transport.write(data)

    def write_with_slices(self, data: bytearray, holes: list):
        """Write `data` with the file slices of `holes` spliced in at their positions: inline with
        os.sendfile while the socket takes them, the rest (socket full) in an awaitable."""
        parts = _in_wire_order(memoryview(data), holes)
        for part in parts:
            if self.closed:
                return None
            if type(part) is memoryview:
                self.write(part)
                continue
            if self.tls:                    # TLS encrypts in user space: read the slice and write it
                self.write(os.pread(part.fd, part.length, part.position))
                continue
            sent = send_now(self.transport, part)
            if sent < part.length:
                return self._write_rest(part, sent, parts)
        return None

    async def _write_rest(self, piece, sent: int, parts) -> None:
        """The rest of a response once the socket is full: the unsent end of `piece`, then `parts`."""
        loop = asyncio.get_running_loop()
        await send_slice(loop, self.transport, piece.fd, piece.position + sent, piece.length - sent)
        for part in parts:
            if self.closed:
                return
            if type(part) is memoryview:
                self.write(part)
            else:
                await send_slice(loop, self.transport, part.fd, part.position, part.length)


def _api_key(frame) -> int:
    return int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1


def _in_wire_order(view: memoryview, holes: list):
    """A response as sent: runs of `view`'s bytes and, between them, the file slices of `holes`."""
    pos = 0
    for at, records in holes:
        yield view[pos:at]
        pos = at
        yield from records.slices()
    yield view[pos:]


_TCP_CLOSE_WAIT = 8       # tcp_info.tcpi_state (linux/tcp_states.h): the peer sent its FIN


def peer_closed(transport) -> bool:
    """Whether the client closed its end (the kernel holds the socket in CLOSE_WAIT), read from the
    kernel without reading the socket: a connection that stopped reading cannot see the EOF itself."""
    sock = transport.get_extra_info("socket")
    try:
        return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == _TCP_CLOSE_WAIT
    except (AttributeError, OSError):      # no TCP_INFO here, or the socket is gone
        return False


def set_buffer_sizes(sock, send_buffer_bytes: int, receive_buffer_bytes: int) -> None:
    """Kafka's socket.send.buffer.bytes / socket.receive.buffer.bytes on an accepted socket
    (-1 keeps the OS default, which autotunes)."""
    if sock is None:
        return
    for name, option, size in (("socket.send.buffer.bytes", socket.SO_SNDBUF, send_buffer_bytes),
                               ("socket.receive.buffer.bytes", socket.SO_RCVBUF, receive_buffer_bytes)):
        if size != -1:
            try:
                sock.setsockopt(socket.SOL_SOCKET, option, size)
            except OSError as e:       # a value the OS refuses leaves its default in place
                log.warning("cannot set %s=%d: %s", name, size, e)


class _Fd:
    """The file-object face `loop.sendfile` wants, over a segment's descriptor.

    Segments write with pwrite, so the seek asyncio does afterwards is harmless.
    """
    __slots__ = ("fd",)

    def __init__(self, fd: int):
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def seek(self, *args) -> int:
        return 0


def send_now(transport, piece) -> int:
    """Send what of one file slice the socket takes now with os.sendfile: its byte count.

    Only while the transport has nothing buffered (else the bytes would overtake
    it) and on plaintext sockets; 0 otherwise. Sending inline saves the
    event-loop round trips loop.sendfile makes for each slice, which are most of
    a fetch's cost when the client reads fast.
    """
    sock = transport.get_extra_info("socket")
    if sock is None or transport.get_extra_info("sslcontext") is not None or transport.get_write_buffer_size():
        return 0
    try:
        return os.sendfile(sock.fileno(), piece.fd, piece.position, piece.length)
    except (BlockingIOError, InterruptedError):
        return 0


async def send_slice(loop, transport, fd: int, position: int, length: int) -> None:
    """Send a file slice once the transport's buffer has drained: loop.sendfile where the
    transport allows it, else read and write (TLS)."""
    try:
        await loop.sendfile(transport, _Fd(fd), position, length, fallback=False)
    except (asyncio.SendfileNotAvailableError, NotImplementedError):
        transport.write(os.pread(fd, length, position))
