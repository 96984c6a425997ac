"""Frames and headers, sans-I/O: splitting a stream, header versions, the ApiVersions fallback."""
from __future__ import annotations

import struct

import pytest

from kafka_compat.protocol.errors import ErrorCode
from kafka_compat.protocol.frames import (
    FrameError,
    FrameReader,
    InvalidRequest,
    UnsupportedApiVersionsRequest,
    parse_request,
    unsupported_api_versions_response,
)
from kafka_compat.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka_compat.protocol.messages.headers import RequestHeader, ResponseHeader
from kafka_compat.protocol.messages.metadata import MetadataRequest


def request_frame(api_key: int, version: int, body, header_version: int, correlation_id=7,
                  client_id="test") -> bytes:
    b = bytearray()
    RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=correlation_id,
                  client_id=client_id).encode_into(b, header_version)
    body.encode_into(b, version)
    return bytes(b)


def sized(frame: bytes) -> bytes:
    return struct.pack(">i", len(frame)) + frame


def test_reader_splits_any_chunking():
    frames = [bytes([i]) * n for i, n in enumerate([0, 1, 5, 70000, 3, 200000, 10])]
    stream = b"".join(sized(f) for f in frames)
    for chunk in (1, 3, 4096, 65536, len(stream)):
        r = FrameReader()
        got = []
        for i in range(0, len(stream), chunk):
            r.feed(stream[i:i + chunk])
            got += r.frames()
        assert got == frames, chunk


def test_reader_uses_buffered_protocol_shape():
    r = FrameReader(small=16)
    big = b"x" * 1000
    data = sized(big) + sized(b"ab")
    pos = 0
    got = []
    while pos < len(data):
        buf = r.get_buffer(-1)
        n = min(len(buf), len(data) - pos, 7)
        buf[:n] = data[pos:pos + n]
        r.buffer_updated(n)
        pos += n
        got += r.frames()
    assert got == [big, b"ab"]
    assert all(isinstance(f, bytearray) for f in got)     # writable: offsets are assigned in place


def test_large_frame_buffer_grows_with_the_bytes_received():
    """A size prefix that lies costs memory only for what really arrives."""
    import tracemalloc

    frame = bytes(range(256)) * 2000                       # 512000 bytes
    for initial, chunk in ((65536, 1000), (65536, 70000), (1 << 20, 4096)):
        r = FrameReader(initial=initial)
        got = []
        data = sized(frame) + sized(b"next")
        for i in range(0, len(data), chunk):
            r.feed(data[i:i + chunk])
            got += r.frames()
        assert got == [frame, b"next"]
    tracemalloc.start()
    try:
        r = FrameReader(initial=1 << 20)
        r.feed(struct.pack(">i", 90 * 1024 * 1024) + b"x" * 100)
        assert r.frames() == []
        assert tracemalloc.get_traced_memory()[1] < 3 * 1024 * 1024
    finally:
        tracemalloc.stop()


def test_oversized_frame_is_refused_before_allocation():
    r = FrameReader(max_frame_size=1000)
    with pytest.raises(FrameError, match="socket.request.max.bytes"):
        r.feed(struct.pack(">i", 1001))
    with pytest.raises(FrameError, match="negative"):
        FrameReader().feed(struct.pack(">i", -5))


def test_header_version_follows_flexibility():
    # Metadata v9 is flexible: request header v2 (tagged fields after a non-compact client id)
    frame = request_frame(3, 9, MetadataRequest(topics=None), header_version=2)
    req = parse_request(frame)
    assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == (3, 9, 7, "test")
    assert req.body.topics is None
    # Metadata v8 is not: header v1
    frame = request_frame(3, 8, MetadataRequest(topics=[]), header_version=1, client_id=None)
    req = parse_request(frame)
    assert req.client_id is None and req.body.topics == []


def test_api_versions_of_too_high_a_version_gets_a_v0_error_reply():
    # A future client: header v2 and a body we cannot know; only the header prefix matters.
    frame = request_frame(18, 4, ApiVersionsRequest(client_software_name="x"), header_version=2,
                          correlation_id=1234)
    frame = frame[:2] + struct.pack(">h", 99) + frame[4:]
    with pytest.raises(UnsupportedApiVersionsRequest) as info:
        parse_request(frame)
    data = unsupported_api_versions_response(info.value.correlation_id)
    size, = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    header, pos = ResponseHeader.decode(data[4:], 0)          # response header v0, always
    assert header.correlation_id == 1234
    body, _ = ApiVersionsResponse.decode(data[4:], 0, pos)
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 5)]


def test_unknown_api_and_unsupported_versions_are_invalid_requests():
    with pytest.raises(InvalidRequest, match="unknown api key"):
        parse_request(struct.pack(">hhi", 999, 0, 1) + b"\x00\x00")
    frame = request_frame(3, 5, MetadataRequest(topics=[]), header_version=1)
    with pytest.raises(InvalidRequest, match="not supported"):
        parse_request(frame, supported={3: (6, 13)})
    with pytest.raises(InvalidRequest):
        parse_request(b"\x00\x03")
    with pytest.raises(InvalidRequest, match="Metadata"):
        parse_request(frame[:-1])                               # truncated body
