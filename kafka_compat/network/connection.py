"""One client connection: frames in, requests handled one at a time in order, responses out.

Kafka answers a connection's requests in the order they arrived, so a request
is handled only after the previous one's response is written. Most answers are
ready at once (a produce appended, metadata looked up): those frames are
answered inline, in the read callback that brought them, with no task switch
per request. A request whose answer must wait (a long-poll fetch, a group join,
a sendfile into a full socket) continues in a task, and the frames that arrive
meanwhile are read ahead into a bounded queue (reading pauses when it is full).
Responses are written as bytes with `transport.write` and, for record bytes
that live in segment files, with `os.sendfile` (`loop.sendfile` once the socket
is full); the pieces keep their order because sendfile waits for the
transport's buffer to drain first.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
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

log = logging.getLogger(__name__)

READ_AHEAD_FRAMES = 32


class Connection(asyncio.BufferedProtocol):
    """asyncio protocol for one client of one listener; `server.handle(request, conn)` does the work."""

    def __init__(self, server, listener: str):
        self.server = server
        self.listener = listener
        self.reader = FrameReader(server.max_request_bytes)
        self.transport: asyncio.Transport | None = None
        self.queue: deque = deque()
        self.closed = False
        self.paused = False
        self.task: asyncio.Task | None = None
        self.peer = None
        self.last_active = time.monotonic()
        self.busy = False               # an answer is being waited for: not idle, later frames queue
        self.counted = False            # counted against max.connections / max.connections.per.ip

    # -- asyncio callbacks
    def connection_made(self, transport):
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        refused = self.server.connection_quotas.try_acquire(self.peer_ip)
        if refused is not None:
            log.info("closing %s: %s", self.peer, refused)
            self.closed = True
            transport.abort()
            return
        self.counted = True
        set_buffer_sizes(transport.get_extra_info("socket"), self.server.send_buffer_bytes,
                         self.server.receive_buffer_bytes)
        self.server.connections.add(self)

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
            elif len(self.queue) >= READ_AHEAD_FRAMES and not self.paused:
                self.paused = True
                self.transport.pause_reading()

    def eof_received(self):
        return False

    def connection_lost(self, exc):
        self.closed = True
        self.server.connections.discard(self)
        if self.counted:
            self.counted = False
            self.server.connection_quotas.release(self.peer_ip)

    @property
    def peer_ip(self) -> str | None:
        return self.peer[0] if isinstance(self.peer, tuple) and self.peer else None

    def close(self):
        if not self.closed:
            self.closed = True
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
            if waiting is not None:
                self.busy = True
                self.task = asyncio.get_running_loop().create_task(self.finish(waiting))
                return
        if self.paused and not self.closed:
            self.paused = False
            self.transport.resume_reading()

    async def finish(self, waiting) -> None:
        try:
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
        self.last_active = time.monotonic()
        self.pump()

    def answer(self, frame):
        """Handle one request frame; None once its response is written, else an awaitable that
        writes it."""
        try:
            request = parse_request(frame, self.server.supported_versions)
        except UnsupportedApiVersionsRequest as e:
            self.write(unsupported_api_versions_response(e.correlation_id))
            return None
        except InvalidRequest as e:
            log.info("closing %s: %s", self.peer, e)
            self.close()
            return None
        result = self.server.handle(request, self)
        if asyncio.iscoroutine(result):
            return self.respond_later(request, result)
        return self.respond(request, result)

    async def respond_later(self, request, result) -> None:
        result = await result
        waiting = self.respond(request, result)
        if waiting is not None:
            await waiting

    def respond(self, request, result):
        if result is None or self.closed:
            return None                 # acks=0 produce, or the handler closed us
        holes: list = []
        data = encode_response(request, result, holes)
        if not holes:
            self.write(data)
            return None
        return self.write_with_slices(data, holes)

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


def _in_wire_order(view: memoryview, holes: list):
    """A response as sent: runs of `view`'s bytes and, between them, the file slices of `holes`."""
    pos = 0
    for at, records in holes:
        yield view[pos:at]
        pos = at
        yield from records.slices()
    yield view[pos:]


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
