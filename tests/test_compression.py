"""Codec behaviour that interop depends on: framing quirks, bounds, and typed errors."""

import gzip
import random
import struct

import lz4.frame
import pytest
import snappy
import zstandard

from kafka_compat.protocol import compression as c
from kafka_compat.protocol.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    CompressionError,
    DecompressedSizeError,
    compress,
    decompress,
)

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
PAYLOADS = {
    "empty": b"",
    "small": b"hello kafka",
    "compressible": b"0123456789abcdef" * 20_000,  # several 32 KB / 64 KB blocks
    "random": random.Random(7).randbytes(150_000),
}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1, 2])
@pytest.mark.parametrize("name", PAYLOADS)
def test_round_trip(codec, magic, name):
    data = PAYLOADS[name]
    packed = compress(codec, data, magic)
    assert decompress(codec, packed, magic) == data
    assert decompress(codec, memoryview(packed), magic) == data


def test_unknown_codec():
    with pytest.raises(CompressionError):
        decompress(5, b"abc")
    with pytest.raises(ValueError):
        compress(7, b"abc")


# --- gzip ---

def test_gzip_concatenated_members_like_java_gzipinputstream():
    data = gzip.compress(b"first,") + gzip.compress(b"second")
    assert decompress(GZIP, data) == b"first,second"


def test_gzip_truncated():
    packed = compress(GZIP, PAYLOADS["compressible"])
    with pytest.raises(CompressionError):
        decompress(GZIP, packed[:-5])


# --- snappy ---

def xerial(blocks, header_versions=struct.pack(">ii", 1, 1)):
    out = b"\x82SNAPPY\x00" + header_versions
    for block in blocks:
        raw = snappy.compress(block)
        out += struct.pack(">i", len(raw)) + raw
    return out


@pytest.mark.parametrize("versions", [
    struct.pack(">ii", 1, 1),
    struct.pack("<ii", 1, 1),  # little-endian, as some producers write it
    b"\xde\xad\xbe\xef\x00\x00\x00\x00",  # nonsense: must not be validated
])
def test_snappy_xerial_framing_accepted_without_validating_versions(versions):
    data = xerial([b"a" * 40_000, b"b" * 100, b"xyz"], versions)
    assert decompress(SNAPPY, data) == b"a" * 40_000 + b"b" * 100 + b"xyz"


def test_snappy_xerial_and_raw_both_decode_our_output():
    data = PAYLOADS["compressible"]
    framed = compress(SNAPPY, data, xerial=True)
    assert framed.startswith(b"\x82SNAPPY\x00")
    assert decompress(SNAPPY, framed) == data
    assert not compress(SNAPPY, data).startswith(b"\x82SNAPPY")


def test_snappy_xerial_header_only_is_empty():
    assert decompress(SNAPPY, xerial([])) == b""


@pytest.mark.parametrize("bad", [
    b"\x82SNAPPY\x00\x00\x00",                               # truncated header
    xerial([b"abc"])[:-1],                                   # truncated block
    xerial([b"abc"]) + b"\x00\x00",                          # truncated block length
    b"\x82SNAPPY\x00" + bytes(8) + struct.pack(">i", -4) + b"xxxx",  # negative block length
    b"\x05ab",                                               # raw, shorter than its preamble says
])
def test_snappy_malformed(bad):
    with pytest.raises(CompressionError):
        decompress(SNAPPY, bad)


# --- lz4 ---

def _hc_position(frame):
    flg = frame[4]
    return 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)


@pytest.mark.parametrize("store_size", [False, True])
@pytest.mark.parametrize("content_checksum", [False, True])
def test_lz4_header_checksum_matches_liblz4(store_size, content_checksum):
    """Our XXH32 (used for the magic-0 quirk) agrees with liblz4's own HC byte."""
    frame = lz4.frame.compress(b"payload" * 10, store_size=store_size,
                               content_checksum=content_checksum)
    hc = _hc_position(frame)
    assert c._lz4_header_checksum(frame[4:hc]) == frame[hc]


def test_lz4_frames_are_shaped_for_javas_reader():
    """Kafka's Lz4BlockInputStream rejects dependent blocks; Kafka writes 64 KB blocks."""
    for magic in (0, 1, 2):
        frame = compress(LZ4, PAYLOADS["compressible"], magic)
        assert frame[:4] == b"\x04\x22\x4d\x18"
        assert frame[4] & 0x20, "block independence flag must be set"
        assert not frame[4] & 0x08, "old Kafka does not accept a content size"
        assert frame[5] == 0x40, "64 KB maximum block size"


def test_lz4_magic0_writes_the_old_kafka_header_checksum():
    frame = compress(LZ4, b"old client", 0)
    assert frame[6] == c._lz4_header_checksum(frame[0:6])  # hashed over magic + FLG + BD
    assert frame[6] != c._lz4_header_checksum(frame[4:6])
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(frame)  # a strict reader refuses it...
    assert decompress(LZ4, frame, 0) == b"old client"  # ...Kafka (and we) ignore HC for magic 0


def test_lz4_magic0_header_checksum_matches_xxhash():
    xxhash = pytest.importorskip("xxhash")
    frame = compress(LZ4, b"x", 0)
    assert frame[6] == (xxhash.xxh32(frame[0:6]).intdigest() >> 8) & 0xFF


@pytest.mark.parametrize("store_size", [False, True])
def test_lz4_magic0_accepts_any_header_checksum(store_size):
    frame = bytearray(lz4.frame.compress(PAYLOADS["compressible"], store_size=store_size))
    hc = _hc_position(frame)
    frame[hc] = (frame[hc] + 1) % 256
    assert decompress(LZ4, bytes(frame), 0) == PAYLOADS["compressible"]
    with pytest.raises(CompressionError):
        decompress(LZ4, bytes(frame), 1)  # from magic 1 on the checksum is real


def test_lz4_decodes_linked_blocks_and_checksums():
    frame = lz4.frame.compress(PAYLOADS["random"], block_linked=True, content_checksum=True,
                               block_checksum=True)
    assert decompress(LZ4, frame) == PAYLOADS["random"]


@pytest.mark.parametrize("magic", [0, 2])
def test_lz4_truncated_or_garbage(magic):
    frame = compress(LZ4, PAYLOADS["compressible"], magic)
    for bad in (frame[:-4], frame[:5], b"\x04\x22\x4d\x18\xff\xff\xff", b"nonsense"):
        with pytest.raises(CompressionError):
            decompress(LZ4, bad, magic)


# --- zstd ---

def _zstd_streamed(data):
    """Like zstd-jni's streaming output: no content size in the frame header."""
    cobj = zstandard.ZstdCompressor(write_content_size=False, write_checksum=True).compressobj()
    return cobj.compress(data) + cobj.flush()


def test_zstd_frame_without_content_size():
    frame = _zstd_streamed(PAYLOADS["compressible"])
    assert zstandard.frame_content_size(frame) == -1
    assert decompress(ZSTD, frame) == PAYLOADS["compressible"]


def test_zstd_multiple_and_skippable_frames():
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"abc"
    data = _zstd_streamed(b"one,") + skippable + compress(ZSTD, b"two")
    assert decompress(ZSTD, data) == b"one,two"


def test_zstd_truncated_frame_is_an_error_not_partial_data():
    frame = _zstd_streamed(PAYLOADS["compressible"])
    for cut in (len(frame) - 1, len(frame) - 4, len(frame) // 2, 5, 1):
        with pytest.raises(CompressionError):
            decompress(ZSTD, frame[:cut])


def test_zstd_trailing_garbage():
    with pytest.raises(CompressionError):
        decompress(ZSTD, compress(ZSTD, b"abc") + b"junk")


# --- bounds (zip bombs) ---

BOMB = bytes(8 * 1024 * 1024)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
@pytest.mark.parametrize("magic", [0, 2])
def test_decompression_bomb_refused(codec, magic):
    packed = compress(codec, BOMB, magic)
    assert len(packed) < len(BOMB) // 20
    with pytest.raises(DecompressedSizeError):
        decompress(codec, packed, magic, max_size=1024 * 1024)


def test_xerial_bomb_refused_before_decoding_every_block():
    framed = compress(SNAPPY, BOMB, xerial=True)
    with pytest.raises(DecompressedSizeError):
        decompress(SNAPPY, framed, max_size=100_000)


def test_zstd_bomb_without_content_size():
    with pytest.raises(DecompressedSizeError):
        decompress(ZSTD, _zstd_streamed(BOMB), max_size=1024 * 1024)


@pytest.mark.parametrize("codec", CODECS)
def test_limit_is_inclusive(codec):
    data = PAYLOADS["compressible"]
    packed = compress(codec, data)
    assert decompress(codec, packed, max_size=len(data)) == data
    with pytest.raises(DecompressedSizeError):
        decompress(codec, packed, max_size=len(data) - 1)


# --- hostile input raises only CompressionError ---

def damaged_copies(data: bytes, rng: random.Random, count: int, truncation_step: int) -> list:
    """Truncations of ``data`` plus ``count`` copies with 1-4 random bytes overwritten
    (shared with test_records)."""
    out = [data[:n] for n in range(0, len(data), truncation_step)]
    for _ in range(count):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        out.append(bytes(mutated))
    return out


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
@pytest.mark.parametrize("magic", [0, 2])
def test_mutated_input_raises_only_compression_error(codec, magic):
    rng = random.Random(codec * 10 + magic)
    source = b"The quick brown fox " * 300 + rng.randbytes(200)
    packed = compress(codec, source, magic, xerial=True)
    candidates = damaged_copies(packed, rng, 150, max(1, len(packed) // 40))
    candidates += [rng.randbytes(rng.randint(0, 64)) for _ in range(50)]
    errors = 0
    for candidate in candidates:
        try:
            out = decompress(codec, candidate, magic, max_size=1 << 20)
        except CompressionError:
            errors += 1
        else:
            assert isinstance(out, bytes) and len(out) <= 1 << 20
    assert errors > len(candidates) // 4  # most damage is detected, and none escapes untyped
