"""Runtime support for the generated codecs: varints, the typed decode error, base classes.

The generated code inlines the common cases (a one-byte varint, a fixed-width run
of fields read with one precompiled `struct.Struct`); this module holds only what
is too long to inline. Nothing here does I/O.
"""
from __future__ import annotations

import struct

__all__ = [
    "DecodeError", "UnsupportedVersionError", "KafkaStruct", "KafkaMessage", "BUFFERS",
    "reason", "write_tags", "first", "ARRAY_STRUCTS", "COMPACT_ARRAY_UNPACK", "DEFAULT", "ZERO_UUID",
    "read_uvarint", "read_uvarlong", "read_varint", "read_varlong",
    "write_uvarint", "write_varint", "write_varlong", "uvarint_size", "new", "LOW_LEVEL",
]

ZERO_UUID = bytes(16)


class _Default:
    """Marks a constructor argument left out, so that None can still mean null."""
    __slots__ = ()

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT = _Default()
new = object.__new__


class DecodeError(ValueError):
    """Bad bytes from the network: names the message, the version and the byte position.

    Every decoder raises this and nothing else, whatever the damage (truncation,
    negative or oversized lengths, varint overflow, invalid UTF-8), so a caller
    needs one `except` to turn any malformed frame into a clean error.
    """

    def __init__(self, message: str, version: int, position: int, reason: str):
        super().__init__(f"{message} v{version}: {reason} at byte {position}")
        self.message_name = message
        self.version = version
        self.position = position
        self.reason = reason


class UnsupportedVersionError(ValueError):
    """A version outside the message's range was asked for."""

    def __init__(self, message: str, version: int):
        super().__init__(f"{message} has no version {version}")
        self.message_name = message
        self.version = version


# Errors Python raises from deep inside a decoder on malformed input.
LOW_LEVEL = (struct.error, IndexError, UnicodeDecodeError, TypeError, OverflowError, MemoryError)


def read_uvarint(buf, p: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (32 bits), as Kafka's ByteUtils.readUnsignedVarint.

    Lengths of up to 2 MiB (three bytes: a 16 KiB batch, say) are read without a loop.
    """
    b = buf[p]
    if b < 0x80:
        return b, p + 1
    value = b & 0x7F
    b = buf[p + 1]
    if b < 0x80:
        return value | b << 7, p + 2
    value |= (b & 0x7F) << 7
    b = buf[p + 2]
    if b < 0x80:
        return value | b << 14, p + 3
    value = 0
    shift = 0
    while True:
        b = buf[p]
        p += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, p
        shift += 7
        if shift > 28:
            raise OverflowError("varint longer than 5 bytes")


def read_uvarlong(buf, p: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        b = buf[p]
        p += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, p
        shift += 7
        if shift > 63:
            raise OverflowError("varlong longer than 10 bytes")


def read_varint(buf, p: int) -> tuple[int, int]:
    v, p = read_uvarint(buf, p)
    return (v >> 1) ^ -(v & 1), p


def read_varlong(buf, p: int) -> tuple[int, int]:
    v, p = read_uvarlong(buf, p)
    return (v >> 1) ^ -(v & 1), p


def write_uvarint(b: bytearray, n: int) -> None:
    if n < 0:
        raise ValueError("negative unsigned varint")
    while n >= 0x80:
        b.append((n & 0x7F) | 0x80)
        n >>= 7
    b.append(n)


def write_varint(b: bytearray, n: int) -> None:
    write_uvarint(b, ((n << 1) ^ (n >> 31)) & 0xFFFFFFFF)


def write_varlong(b: bytearray, n: int) -> None:
    write_uvarint(b, ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


def uvarint_size(n: int) -> int:
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


class KafkaStruct:
    """Base of every generated message and struct: equality and repr over `__slots__`."""
    __slots__ = ()

    def __eq__(self, other):
        if type(self) is not type(other):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def __repr__(self) -> str:
        inner = ", ".join(f"{s}={getattr(self, s)!r}" for s in self.__slots__ if s != "unknown_tags")
        return f"{type(self).__qualname__}({inner})"

    __hash__ = None


BUFFERS = (bytes, bytearray, memoryview)
# Precompiled big-endian array formats for the common short arrays (replica lists and the like).
ARRAY_STRUCTS = {code: [struct.Struct(f">{n}{code}") for n in range(64)] for code in "bhHiIqd?"}
# The same, indexed by a compact array's length byte (count + 1), as bound unpack_from.
COMPACT_ARRAY_UNPACK = {code: (None,) + tuple(s.unpack_from for s in structs)
                        for code, structs in ARRAY_STRUCTS.items()}


def first(pair):
    return pair[0]


def reason(e: BaseException) -> str:
    """A short reason for a low-level failure inside a decoder."""
    if isinstance(e, (struct.error, IndexError)):
        return "truncated"
    if isinstance(e, UnicodeDecodeError):
        return "invalid UTF-8"
    if isinstance(e, OverflowError):
        return str(e) or "varint overflow"
    return type(e).__name__


def write_tags(b: bytearray, tags) -> None:
    """Write a tagged-field section: count, then (tag, size, bytes) in ascending tag order."""
    write_uvarint(b, len(tags))
    for tag, data in tags:
        write_uvarint(b, tag)
        write_uvarint(b, len(data))
        b += data


class KafkaMessage(KafkaStruct):
    """Base of every top-level generated message: version dispatch for encode and decode.

    `_DEC` and `_ENC` map each version to its generated function.
    """
    __slots__ = ()
    _DEC: dict = {}
    _ENC: dict = {}

    @classmethod
    def decode(cls, buf, version: int, pos: int = 0):
        """Decode one message starting at `pos`; return (message, end position)."""
        fn = cls._DEC.get(version)
        if fn is None:
            raise UnsupportedVersionError(cls.name, version)
        if type(buf) is not memoryview:
            buf = memoryview(buf)
        return fn(buf, pos)

    def encode_into(self, b: bytearray, version: int, holes: list | None = None) -> None:
        """Append the encoding to `b`. Records values that are not byte buffers (file slices)
        are left out of `b` and listed in `holes` as (position in b, value), so a writer can
        send them with sendfile between the surrounding bytes."""
        fn = self._ENC.get(version)
        if fn is None:
            raise UnsupportedVersionError(self.name, version)
        h = [] if holes is None else holes
        fn(self, b, h)
        if holes is None and h:
            raise TypeError("records that are not byte buffers need encode_into(..., holes)")

    def encode(self, version: int) -> bytes:
        b = bytearray()
        self.encode_into(b, version)
        return bytes(b)
