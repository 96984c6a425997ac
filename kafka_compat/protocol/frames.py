"""Kafka's framing: a 4-byte big-endian size, then a request or response. Sans-I/O.

`FrameReader` splits a byte stream into frames. It speaks asyncio's
BufferedProtocol shape (`get_buffer` / `buffer_updated`) as well as plain
`feed`, so the network layer can receive a large Produce frame straight into
the frame's own buffer: the record bytes are copied once, by the kernel, and
the frame stays writable so storage can assign offsets in place.

`parse_request` reads the header and body with the generated codecs and
classifies the ways a request can be unacceptable, because Kafka treats them
differently: an ApiVersions request of too high a version still gets an
answer (UNSUPPORTED_VERSION, v0 body), anything else unknown closes the
connection.

The other direction, for our own outbound client (a broker fetching from a
leader, the controller sending LeaderAndIsr): `encode_request` frames a
request, `response_correlation_id` and `decode_response` read the answer.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import ErrorCode
from .messages import APIS, ApiInfo
from .messages.api_versions import ApiVersionsResponse
from .messages.headers import RequestHeader, ResponseHeader
from .primitives import DecodeError

DEFAULT_MAX_FRAME = 104857600          # socket.request.max.bytes
_SIZE = struct.Struct(">i")
_PREFIX = struct.Struct(">hhi")
API_VERSIONS = 18
CONTROLLED_SHUTDOWN = 7


class FrameError(Exception):
    """The stream cannot be framed any more (bad or oversized length): close the connection."""


class InvalidRequest(Exception):
    """A frame that is not a request we accept: Kafka closes the connection without a reply."""

    def __init__(self, reason: str, api_key: int | None = None, api_version: int | None = None,
                 correlation_id: int | None = None):
        super().__init__(reason)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class FrameReader:
    """Turns received bytes into frames (bytearrays without the size prefix).

    Frames up to `small` bytes are cut out of a shared receive buffer; a larger
    frame gets its own buffer the moment its size is known, and the rest of it
    is received directly into that buffer. That buffer starts at `initial` bytes
    and doubles as it fills, so memory follows the bytes that really came: a size
    prefix that promises 100 MB and sends nothing costs `initial`, not 100 MB
    (frames up to `initial`, nearly every Produce, are still received without a copy).
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME, small: int = 65536, initial: int = 1 << 20):
        self.max_frame_size = max_frame_size
        self._small = small
        self._initial = max(initial, small)
        self._big_size = 0
        self._buf = bytearray(small + 4)
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None
        self._big_view: memoryview | None = None
        self._big_fill = 0
        self._frames: list[bytearray] = []

    # -- BufferedProtocol shape
    def get_buffer(self, sizehint: int = -1) -> memoryview:
        if self._big is not None:
            if self._big_fill == len(self._big):
                self._grow_big()
            return self._big_view[self._big_fill:]
        if self._start == self._end:
            self._start = self._end = 0
        elif len(self._buf) - self._end < 4096:
            pending = self._end - self._start
            self._buf[:pending] = self._buf[self._start:self._end]
            self._start, self._end = 0, pending
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._big is not None:
            self._big_fill += nbytes
            if self._big_fill == self._big_size:
                self._frames.append(self._big)
                self._big = self._big_view = None
            return
        self._end += nbytes
        self._split()

    # -- plain shape
    def feed(self, data) -> None:
        data = memoryview(data)
        while len(data):
            target = self.get_buffer()
            n = min(len(target), len(data))
            target[:n] = data[:n]
            del target                       # no export left on a buffer that may grow
            data = data[n:]
            self.buffer_updated(n)

    def missing(self) -> int:
        """Bytes still to come for the large frame being received (0 between large frames)."""
        return self._big_size - self._big_fill if self._big is not None else 0

    def frames(self) -> list[bytearray]:
        out, self._frames = self._frames, []
        return out

    def _grow_big(self) -> None:
        """Double the large frame's buffer (up to its announced size) once the bytes received fill it."""
        big = self._big
        self._big_view.release()
        big.extend(bytes(min(len(big), self._big_size - len(big))))
        self._big_view = memoryview(big)

    def _split(self) -> None:
        buf = self._buf
        while self._end - self._start >= 4:
            size, = _SIZE.unpack_from(buf, self._start)
            if size < 0:
                raise FrameError(f"negative frame size {size}")
            if size > self.max_frame_size:
                raise FrameError(f"frame of {size} bytes is larger than socket.request.max.bytes "
                                 f"({self.max_frame_size})")
            have = self._end - self._start - 4
            begin = self._start + 4
            if have >= size:
                self._frames.append(buf[begin:begin + size])
                self._start = begin + size
                continue
            if size > self._small:
                big = bytearray(min(size, max(self._initial, have)))
                big[:have] = buf[begin:self._end]
                self._big, self._big_view, self._big_fill, self._big_size = big, memoryview(big), have, size
                self._start = self._end = 0
            elif size + 4 > len(buf) - self._start:
                self._buf[:have + 4] = buf[self._start:self._end]
                self._start, self._end = 0, have + 4
            return


@dataclass
class Request:
    """A decoded request: its header fields and its body."""
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header: object
    body: object
    info: ApiInfo
    connection: object = None
    size: int = 0                   # the frame's bytes (what a produce quota counts)
    # Set by the broker while it answers (time.monotonic()): when the connection got to this request,
    # when it was dequeued, when the handler returned and when its answer was ready; and the throttle
    # a quota imposed (-1 until decided), for the request metrics and KIP-219's muted channel.
    received_at: float = 0.0
    dequeued_at: float = 0.0
    local_done_at: float = 0.0
    remote_done_at: float = 0.0
    throttle_time_ms: int = -1
    # Set by a handler whose awaitable answer does nothing more in order, only waits (an acks=-1 produce
    # waiting for its replicas): the connection may handle the produce requests behind it meanwhile.
    waits_only: bool = False


def request_header_version(info: ApiInfo, version: int) -> int:
    if info.key == CONTROLLED_SHUTDOWN and version == 0:
        return 0
    return 2 if info.is_flexible(version) else 1


def response_header_version(info: ApiInfo, version: int) -> int:
    if info.key == API_VERSIONS:
        return 0                # KIP-511: always v0, so any client can read the error
    return 1 if info.is_flexible(version) else 0


class UnsupportedApiVersionsRequest(Exception):
    """An ApiVersions request of a version we do not know; answer with `unsupported_api_versions_response`."""

    def __init__(self, correlation_id: int, api_version: int):
        super().__init__(f"ApiVersions v{api_version} is not supported")
        self.correlation_id = correlation_id
        self.api_version = api_version


def parse_request(frame, supported: dict[int, tuple[int, int]] | None = None) -> Request:
    """Decode a request frame (without its size prefix).

    `supported` maps api key -> (min, max) versions the broker accepts; by default
    every version the schemas define. Raises UnsupportedApiVersionsRequest or
    InvalidRequest.
    """
    mv = memoryview(frame)
    if len(mv) < 8:
        raise InvalidRequest("frame shorter than a request header")
    api_key, api_version, correlation_id = _PREFIX.unpack_from(mv, 0)
    info = APIS.get(api_key)
    if info is None:
        raise InvalidRequest(f"unknown api key {api_key}", api_key, api_version, correlation_id)
    if supported is None:
        lo, hi = info.min_version, info.max_version
    else:
        lo, hi = supported.get(api_key, (0, -1))
    if not lo <= api_version <= hi:
        if api_key == API_VERSIONS:
            # as Kafka: the header must still parse, at the header version the (future) version implies
            try:
                RequestHeader.decode(mv, 2 if api_version >= 3 else 1)
            except DecodeError as e:
                raise InvalidRequest(str(e), api_key, api_version, correlation_id) from e
            raise UnsupportedApiVersionsRequest(correlation_id, api_version)
        raise InvalidRequest(f"{info.name} v{api_version} is not supported", api_key, api_version,
                             correlation_id)
    try:
        header, pos = RequestHeader.decode(mv, request_header_version(info, api_version))
        body, _ = info.request.decode(mv, api_version, pos)
    except DecodeError as e:
        raise InvalidRequest(str(e), api_key, api_version, correlation_id) from e
    return Request(api_key, api_version, correlation_id, header.client_id, header, body, info, None, len(mv))


def encode_response(request: Request, body, holes: list | None = None) -> bytearray:
    """Frame a response to `request`: size prefix, response header, body.

    With `holes`, records that are not in memory (file slices) are listed there
    as (position, slice) instead of being copied; the size prefix counts them.
    """
    return frame_response(request.info, request.api_version, request.correlation_id, body, holes)


def frame_response(info: ApiInfo, version: int, correlation_id: int, body,
                   holes: list | None = None) -> bytearray:
    b = bytearray(4)
    ResponseHeader(correlation_id=correlation_id).encode_into(b, response_header_version(info, version))
    h: list = [] if holes is not None else None
    body.encode_into(b, version, h)
    size = len(b) - 4
    if h:
        size += sum(len(s) for _, s in h)
        holes.extend(h)
    _SIZE.pack_into(b, 0, size)
    return b


class InvalidResponse(Exception):
    """A response frame our codecs cannot read: the connection it came on is no longer usable."""


def encode_request(api_key: int, version: int, body, correlation_id: int, client_id: str | None = "kafka-compat"
                   ) -> bytes:
    """A whole request frame (size prefix, the header version the API and version call for, body): what a
    client sends."""
    info = APIS[api_key]
    b = bytearray(4)
    RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=correlation_id,
                  client_id=client_id).encode_into(b, request_header_version(info, version))
    body.encode_into(b, version)
    _SIZE.pack_into(b, 0, len(b) - 4)
    return bytes(b)


def response_correlation_id(frame) -> int:
    """The correlation id that opens every response header (v0 and v1 alike), to find its request."""
    if len(frame) < 4:
        raise InvalidResponse("response shorter than its correlation id")
    return _SIZE.unpack_from(frame, 0)[0]


def decode_response(api_key: int, version: int, frame) -> tuple[int, object]:
    """(correlation id, body) of a response frame without its size prefix. Record fields stay views
    into ``frame``. Raises InvalidResponse on anything the schema does not allow."""
    info = APIS[api_key]
    mv = frame if isinstance(frame, memoryview) else memoryview(frame)
    try:
        header, pos = ResponseHeader.decode(mv, response_header_version(info, version))
        body, _ = info.response.decode(mv, version, pos)
    except DecodeError as e:
        raise InvalidResponse(f"{info.name} v{version} response: {e}") from e
    return header.correlation_id, body


def unsupported_api_versions_response(correlation_id: int, max_version: int | None = None) -> bytes:
    """The v0 reply to an ApiVersions request of too high a version (KIP-511): only key 18 listed, with its
    highest version (by default what the schemas define, as Kafka lists its own)."""
    if max_version is None:
        max_version = APIS[API_VERSIONS].max_version
    body = ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=API_VERSIONS, min_version=0, max_version=max_version)],
    )
    return bytes(frame_response(APIS[API_VERSIONS], 0, correlation_id, body))
