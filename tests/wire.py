"""A minimal Kafka wire client for tests: our own codecs over a plain socket.

Real clients hide what the broker actually sent; these tests want to see the
exact response (or the absence of one), so they speak the protocol directly.
"""
from __future__ import annotations

import asyncio
import socket
import struct

from kafka_compat.protocol import frames
from kafka_compat.protocol.frames import decode_response

__all__ = ["WireClient", "AsyncWireClient", "encode_request", "decode_response"]


def encode_request(api_key: int, version: int, body, correlation_id: int = 1, client_id: str = "wire") -> bytes:
    return frames.encode_request(api_key, version, body, correlation_id, client_id)


class WireClient:
    """Blocking client: `call(api_key, version, body)` returns the decoded response body."""

    def __init__(self, host: str, port: int, timeout: float = 10.0, source: str | None = None,
                 client_id: str = "wire"):
        """``source``: the local address to connect from (any 127.x.y.z reaches a loopback listener)."""
        self.sock = socket.create_connection((host, port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.correlation = 0
        self.client_id = client_id

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes | None:
        head = self._read_exact(4)
        if head is None:
            return None
        size, = struct.unpack(">i", head)
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def send(self, api_key: int, version: int, body) -> int:
        self.correlation += 1
        self.send_raw(encode_request(api_key, version, body, self.correlation, self.client_id))
        return self.correlation

    def receive(self, api_key: int, version: int):
        frame = self.read_frame()
        if frame is None:
            raise ConnectionError("broker closed the connection")
        return decode_response(api_key, version, frame)

    def call(self, api_key: int, version: int, body):
        cid = self.send(api_key, version, body)
        got, resp = self.receive(api_key, version)
        assert got == cid
        return resp

    def is_closed_by_peer(self, wait: float = 5.0) -> bool:
        self.sock.settimeout(wait)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self) -> None:
        self.sock.close()


class AsyncWireClient:
    """The same over asyncio streams, for tests that run a broker in the test's own loop."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.correlation = 0

    @classmethod
    async def connect(cls, host: str, port: int) -> "AsyncWireClient":
        return cls(*await asyncio.open_connection(host, port))

    async def send(self, api_key: int, version: int, body) -> int:
        self.correlation += 1
        self.writer.write(encode_request(api_key, version, body, self.correlation))
        await self.writer.drain()
        return self.correlation

    async def receive(self, api_key: int, version: int):
        size, = struct.unpack(">i", await self.reader.readexactly(4))
        return decode_response(api_key, version, await self.reader.readexactly(size))

    async def call(self, api_key: int, version: int, body):
        await self.send(api_key, version, body)
        return (await self.receive(api_key, version))[1]

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()
