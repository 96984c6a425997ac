"""One client connection: frames in, requests handled one at a time in order, responses out.

Kafka answers a connection's requests in the order they arrived, so a request
is handled only after the previous one's response is written; frames that
arrive meanwhile are read ahead into a bounded queue (reading pauses when the
queue is full). Responses are written as bytes with `transport.write` and, for
record bytes that live in segment files, with `loop.sendfile`, which uses
`os.sendfile` on plaintext sockets; the pieces keep their order because
sendfile waits for the transport's buffer to drain first.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import deque

from ..protocol.frames import (
    FrameError, FrameReader, InvalidRequest, UnsupportedApiVersionsRequest, encode_response,
    parse_request, unsupported_api_versions_response,
)

log = logging.getLogger(__name__)

READ_AHEAD_FRAMES = 32


class Connection(asyncio.BufferedProtocol):
    """asyncio protocol for one client; `broker.handle(request, conn)` does the work."""

    def __init__(self, broker):
        self.broker = broker
        self.reader = FrameReader(broker.config["socket.request.max.bytes"])
        self.transport: asyncio.Transport | None = None
        self.queue: deque = deque()
        self.wakeup = asyncio.Event()
        self.closed = False
        self.paused = False
        self.task: asyncio.Task | None = None
        self.peer = None
        self.last_active = time.monotonic()
        self.busy = False               # a request is being answered: not idle

    # -- asyncio callbacks
    def connection_made(self, transport):
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        set_buffer_sizes(transport.get_extra_info("socket"), self.broker.config)
        self.broker.connections.add(self)
        self.task = asyncio.get_running_loop().create_task(self.run())

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
            self.wakeup.set()
            if len(self.queue) >= READ_AHEAD_FRAMES and not self.paused:
                self.paused = True
                self.transport.pause_reading()

    def eof_received(self):
        return False

    def connection_lost(self, exc):
        self.closed = True
        self.broker.connections.discard(self)
        self.wakeup.set()

    def close(self):
        if not self.closed:
            self.closed = True
            self.transport.close()
        self.wakeup.set()

    # -- the in-order pipeline
    async def next_frame(self):
        while not self.queue:
            if self.closed:
                return None
            self.wakeup.clear()
            await self.wakeup.wait()
        frame = self.queue.popleft()
        if self.paused and len(self.queue) < READ_AHEAD_FRAMES // 2 and not self.closed:
            self.paused = False
            self.transport.resume_reading()
        return frame

    async def run(self):
        try:
            while True:
                frame = await self.next_frame()
                if frame is None:
                    return
                self.busy = True
                try:
                    await self.handle_frame(frame)
                finally:
                    self.busy = False
                self.last_active = time.monotonic()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("connection %s failed", self.peer)
            self.close()

    async def handle_frame(self, frame):
        try:
            request = parse_request(frame, self.broker.supported_versions)
        except UnsupportedApiVersionsRequest as e:
            self.write(unsupported_api_versions_response(e.correlation_id))
            return
        except InvalidRequest as e:
            log.info("closing %s: %s", self.peer, e)
            self.close()
            return
        result = self.broker.handle(request, self)
        if asyncio.iscoroutine(result):
            result = await result
        if result is None or self.closed:
            return                      # acks=0 produce, or the handler closed us
        holes: list = []
        data = encode_response(request, result, holes)
        if not holes:
            self.write(data)
        else:
            await self.write_with_slices(data, holes)

    def write(self, data) -> None:
        if not self.closed:
            self.transport.write(data)

    async def write_with_slices(self, data: bytearray, holes: list) -> None:
        """Write `data` with the file slices of `holes` spliced in at their positions."""
        loop = asyncio.get_running_loop()
        view = memoryview(data)
        pos = 0
        for at, records in holes:
            self.write(view[pos:at])
            pos = at
            for piece in records.slices():
                if self.closed:
                    return
                await send_slice(loop, self.transport, piece)
        self.write(view[pos:])


def set_buffer_sizes(sock, config) -> None:
    """Kafka's socket.send.buffer.bytes / socket.receive.buffer.bytes on an accepted socket
    (-1 keeps the OS default, which autotunes)."""
    if sock is None:
        return
    for name, option in (("socket.send.buffer.bytes", socket.SO_SNDBUF),
                         ("socket.receive.buffer.bytes", socket.SO_RCVBUF)):
        size = config[name]
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


async def send_slice(loop, transport, piece) -> None:
    """Send one file slice: sendfile where the transport allows it, else read and write (TLS).

    While the transport has nothing buffered, the slice goes straight out with
    os.sendfile as far as the socket takes it; only the rest (socket full) waits
    in `loop.sendfile`. That saves the event-loop round trips loop.sendfile makes
    for each slice, which is most of a fetch's cost when the client reads fast.
    """
    position, length = piece.position, piece.length
    sock = transport.get_extra_info("socket")
    if sock is not None and transport.get_extra_info("sslcontext") is None \
            and not transport.get_write_buffer_size():
        try:
            sent = os.sendfile(sock.fileno(), piece.fd, position, length)
        except (BlockingIOError, InterruptedError):
            sent = 0
        if sent >= length:
            return
        position += sent
        length -= sent
    try:
        await loop.sendfile(transport, _Fd(piece.fd), position, length, fallback=False)
    except (asyncio.SendfileNotAvailableError, NotImplementedError):
        transport.write(os.pread(piece.fd, length, position))
