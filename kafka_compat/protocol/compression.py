"""Kafka's compression codecs, sans-I/O: ``compress`` and bounded ``decompress``.

Codec ids are Kafka's (attributes bits 0-2): 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.

Interop facts this module encodes:
- gzip: Java reads with GZIPInputStream, which accepts concatenated members; so do we.
- snappy: Java writes xerial framing (``\\x82SNAPPY\\x00``, two int32 version fields,
  then int32 big-endian length + raw snappy blocks); librdkafka writes raw snappy.
  We read both and never validate the version fields (some producers write them
  little-endian). We write raw by default, xerial on request: Java's reader falls
  back to raw when the xerial magic is absent.
- lz4: LZ4 frame format shaped like Kafka's Lz4BlockOutputStream (64 KB independent
  blocks, no content size, no checksums): Java's reader rejects linked blocks. Kafka
  0.8-0.10 computed the frame-descriptor checksum (HC byte) over the magic bytes as
  well; Kafka ignores HC for magic 0. So for magic 0 we write that "broken" HC (what
  old clients verify) and on read we replace HC with the correct one before handing
  the frame to lz4, so any HC is accepted.
- zstd: streaming frames, with or without content size, possibly several frames.

Every ``decompress`` is bounded by ``max_size`` (a zip-bomb guard): output beyond it
raises ``DecompressedSizeError`` without materialising more than about ``max_size``.
Malformed or truncated input raises ``CompressionError``.
"""

from __future__ import annotations

import struct
import zlib

import lz4.frame
import snappy
import zstandard

from .primitives import read_uvarint

__all__ = [
    "NONE",
    "GZIP",
    "SNAPPY",
    "LZ4",
    "ZSTD",
    "CODEC_NAMES",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "CompressionError",
    "DecompressedSizeError",
    "compress",
    "decompress",
]

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

# Kafka has no such cap; ours keeps one hostile batch from exhausting memory. A 1 MiB
# batch (message.max.bytes) would need a 64x ratio to hit it; callers may pass more.
DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024


class CompressionError(Exception):
    """Compressed input is malformed or truncated, or the codec id is unknown."""


class DecompressedSizeError(CompressionError):
    """Decompressed output would exceed ``max_size``."""


def _too_big(max_size: int) -> DecompressedSizeError:
    return DecompressedSizeError(f"decompressed size exceeds the limit of {max_size} bytes")


# --- gzip -------------------------------------------------------------------------

_GZIP_WBITS = 16 + zlib.MAX_WBITS  # gzip header/trailer, not zlib or raw deflate


def _gzip_compress(data, level: int | None) -> bytes:
    c = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, _GZIP_WBITS)
    return c.compress(data) + c.flush()


def _gzip_decompress(data, max_size: int) -> bytes:
    chunks = []
    budget = max_size
    rest = data
    while True:
        d = zlib.decompressobj(_GZIP_WBITS)
        try:
            out = d.decompress(rest, budget + 1)
        except zlib.error as e:
            raise CompressionError(f"gzip: {e}") from None
        if len(out) > budget:
            raise _too_big(max_size)
        if not d.eof:
            raise CompressionError("gzip: truncated stream")
        chunks.append(out)
        budget -= len(out)
        rest = d.unused_data
        if not rest:
            return out if len(chunks) == 1 else b"".join(chunks)


# --- snappy -----------------------------------------------------------------------

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, compatible version 1
_XERIAL_HEADER_SIZE = 16
_XERIAL_BLOCK_SIZE = 32 * 1024  # xerial SnappyOutputStream's default
_INT32 = struct.Struct(">i")


def _snappy_compress(data, xerial: bool) -> bytes:
    if not xerial:
        return snappy.compress(data)
    mv = memoryview(data)
    out = bytearray(_XERIAL_HEADER)
    for i in range(0, len(mv), _XERIAL_BLOCK_SIZE):
        block = snappy.compress(mv[i : i + _XERIAL_BLOCK_SIZE])
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_raw_length(block) -> int:
    """Uncompressed length from a raw snappy block's preamble, read before decoding."""
    try:
        return read_uvarint(block, 0)[0]
    except (IndexError, OverflowError):
        raise CompressionError("snappy: bad length preamble") from None


def _snappy_raw_decompress(block) -> bytes:
    try:
        return snappy.decompress(block)
    except snappy.UncompressError as e:
        raise CompressionError(f"snappy: {e.__cause__ or 'corrupt block'}") from None


def _snappy_decompress(data, max_size: int) -> bytes:
    mv = memoryview(data)
    if mv[: len(XERIAL_MAGIC)] != XERIAL_MAGIC:
        if _snappy_raw_length(mv) > max_size:
            raise _too_big(max_size)
        return _snappy_raw_decompress(mv)
    if len(mv) < _XERIAL_HEADER_SIZE:
        raise CompressionError("snappy: truncated xerial header")
    # The two version fields (bytes 8-16) are deliberately not checked.
    chunks = []
    total = 0
    pos = _XERIAL_HEADER_SIZE
    end = len(mv)
    while pos < end:
        if end - pos < 4:
            raise CompressionError("snappy: truncated xerial block length")
        (n,) = _INT32.unpack_from(mv, pos)
        pos += 4
        if n < 0 or n > end - pos:
            raise CompressionError(f"snappy: xerial block length {n} out of bounds")
        block = mv[pos : pos + n]
        pos += n
        total += _snappy_raw_length(block)
        if total > max_size:
            raise _too_big(max_size)
        chunks.append(_snappy_raw_decompress(block))
    return b"".join(chunks)


# --- lz4 --------------------------------------------------------------------------

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_XXH_P1, _XXH_P2, _XXH_P3, _XXH_P4, _XXH_P5 = (
    2654435761, 2246822519, 3266489917, 668265263, 374761393)
_M32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32_short(data: bytes, seed: int = 0) -> int:
    """XXH32 for inputs under 16 bytes: enough for LZ4 frame descriptors (HC byte)."""
    n = len(data)
    if n >= 16:
        raise ValueError("_xxh32_short only handles inputs shorter than 16 bytes")
    h = (seed + _XXH_P5 + n) & _M32
    i = 0
    while i + 4 <= n:
        h = (h + int.from_bytes(data[i : i + 4], "little") * _XXH_P3) & _M32
        h = (_rotl32(h, 17) * _XXH_P4) & _M32
        i += 4
    while i < n:
        h = (h + data[i] * _XXH_P5) & _M32
        h = (_rotl32(h, 11) * _XXH_P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _XXH_P2) & _M32
    h ^= h >> 13
    h = (h * _XXH_P3) & _M32
    h ^= h >> 16
    return h


def _lz4_header_checksum(descriptor: bytes) -> int:
    return (_xxh32_short(descriptor) >> 8) & 0xFF


def _lz4_compress(data, magic: int, level: int | None) -> bytes:
    frame = lz4.frame.compress(
        data,
        compression_level=0 if level is None else level,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )
    if magic != 0:
        return frame
    # Kafka 0.8-0.10 hashed magic + FLG + BD; with no content size the descriptor is
    # bytes 4-6, so HC sits at byte 6.
    out = bytearray(frame)
    out[6] = _lz4_header_checksum(bytes(out[0:6]))
    return bytes(out)


def _lz4_descriptor_end(mv) -> int:
    """Offset of the HC byte: magic, FLG, BD, optional content size and dictionary id."""
    if len(mv) < 7 or mv[:4] != _LZ4_MAGIC:
        raise CompressionError("lz4: not an LZ4 frame")
    flg = mv[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(mv) <= end:
        raise CompressionError("lz4: truncated frame descriptor")
    return end


def _lz4_decompress(data, magic: int, max_size: int) -> bytes:
    mv = memoryview(data)
    d = lz4.frame.LZ4FrameDecompressor()
    try:
        if magic == 0:
            hc = _lz4_descriptor_end(mv)
            descriptor = bytes(mv[: hc + 1])
            fixed = descriptor[:hc] + bytes((_lz4_header_checksum(descriptor[4:hc]),))
            d.decompress(fixed)  # header only: produces no output
            mv = mv[hc + 1 :]
        out = d.decompress(mv, max_length=max_size + 1)
    except RuntimeError as e:  # lz4 reports every frame error as RuntimeError
        raise CompressionError(f"lz4: {e}") from None
    if len(out) > max_size:
        raise _too_big(max_size)
    if not d.eof:
        raise CompressionError("lz4: truncated frame")
    return out


# --- zstd -------------------------------------------------------------------------

_ZSTD_MAGIC = 0xFD2FB528
_UINT32_LE = struct.Struct("<I")
_ZSTD_FCS_SIZES = (0, 2, 4, 8)
_ZSTD_DICT_ID_SIZES = (0, 1, 2, 4)


def _zstd_frames_end(mv) -> int:
    """Walk zstd frame and block headers (RFC 8878) to prove the input is whole.

    zstandard's stream reader returns a truncated frame's partial output silently, so
    completeness is checked structurally; this touches only block headers. Returns
    the number of frames (skippable frames excluded)."""
    pos, end, frames = 0, len(mv), 0
    while pos < end:
        if end - pos < 4:
            raise CompressionError("zstd: truncated frame magic")
        (magic,) = _UINT32_LE.unpack_from(mv, pos)
        pos += 4
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame: uint32 size + payload
            if end - pos < 4:
                raise CompressionError("zstd: truncated skippable frame")
            pos += 4 + _UINT32_LE.unpack_from(mv, pos)[0]
            if pos > end:
                raise CompressionError("zstd: truncated skippable frame")
            continue
        if magic != _ZSTD_MAGIC:
            raise CompressionError("zstd: unknown frame magic")
        if pos >= end:
            raise CompressionError("zstd: truncated frame header")
        fhd = mv[pos]
        single_segment = fhd & 0x20
        fcs = _ZSTD_FCS_SIZES[fhd >> 6] or (1 if single_segment else 0)
        pos += 1 + (0 if single_segment else 1) + _ZSTD_DICT_ID_SIZES[fhd & 3] + fcs
        while True:
            if end - pos < 3:
                raise CompressionError("zstd: truncated block header")
            bh = mv[pos] | (mv[pos + 1] << 8) | (mv[pos + 2] << 16)
            pos += 3
            block_type = (bh >> 1) & 3
            if block_type == 3:
                raise CompressionError("zstd: reserved block type")
            pos += 1 if block_type == 1 else bh >> 3
            if pos > end:
                raise CompressionError("zstd: truncated block")
            if bh & 1:
                break
        if fhd & 0x04:  # content checksum
            pos += 4
            if pos > end:
                raise CompressionError("zstd: truncated content checksum")
        frames += 1
    return frames


def _zstd_decompress(data, max_size: int) -> bytes:
    mv = memoryview(data)
    frames = _zstd_frames_end(mv)
    if frames == 0:
        return b""
    chunks = []
    total = 0
    try:
        with zstandard.ZstdDecompressor().stream_reader(
            mv, read_across_frames=frames > 1, closefd=False
        ) as reader:
            while True:  # read() may return less than asked before the end
                chunk = reader.read(max_size + 1 - total)
                if not chunk:
                    break
                total += len(chunk)
                if total > max_size:
                    raise _too_big(max_size)
                chunks.append(chunk)
    except zstandard.ZstdError as e:
        raise CompressionError(f"zstd: {e}") from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _zstd_compress(data, level: int | None) -> bytes:
    # Content size is written, like librdkafka; readers must not depend on it.
    return zstandard.ZstdCompressor(level=3 if level is None else level).compress(data)


# --- public API -------------------------------------------------------------------


def compress(codec: int, data, magic: int = 2, *, level: int | None = None,
             xerial: bool = False) -> bytes:
    """Compress ``data`` (any bytes-like) for a batch or wrapper message of ``magic``.

    ``xerial`` selects Java's snappy framing instead of raw snappy."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return _gzip_compress(data, level)
    if codec == SNAPPY:
        return _snappy_compress(data, xerial)
    if codec == LZ4:
        return _lz4_compress(data, magic, level)
    if codec == ZSTD:
        return _zstd_compress(data, level)
    raise ValueError(f"unknown compression codec id {codec}")


def decompress(codec: int, data, magic: int = 2,
               max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    """Decompress ``data`` (any bytes-like; memoryview avoids a copy).

    Raises ``DecompressedSizeError`` past ``max_size`` and ``CompressionError`` for
    malformed input or an unknown codec id."""
    if codec == NONE:
        if len(data) > max_size:
            raise _too_big(max_size)
        return bytes(data)
    if codec == GZIP:
        return _gzip_decompress(data, max_size)
    if codec == SNAPPY:
        return _snappy_decompress(data, max_size)
    if codec == LZ4:
        return _lz4_decompress(data, magic, max_size)
    if codec == ZSTD:
        return _zstd_decompress(data, max_size)
    raise CompressionError(f"unknown compression codec id {codec}")
