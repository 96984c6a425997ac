"""Mutations of request frames, as a broker meets them from broken or hostile clients.

A `Case` is what one fuzzed request puts on the wire: its bytes in the chunks
they are written in (a frame split at every byte arrives one byte per segment),
whether the stream is still framed afterwards (a lying size prefix leaves the
broker waiting for bytes that never come, or reading the next frame from the
middle of this one), and what was done, for the report.
"""
from __future__ import annotations

import random
import struct
from dataclasses import dataclass

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
BOUNDARY = {
    I16: (0, 1, -1, 2, 0x7F, 0xFF, 0x100, 0x7FFF, -0x8000, 0x7FFE),
    I32: (0, 1, -1, 2, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0xFFFFFF, 0x7FFFFFFF, -0x80000000, 0x7FFFFFFE, 0x40000000),
    I64: (0, -1, 1, 2**63 - 1, -2**63, 2**32, 2**31),
}
UVARINT_BOUNDARY = (0, 1, 2, 0x7F, 0x80, 0x3FFF, 0x4000, 0x7FFFFFFF, 0xFFFFFFFF, 2**35)
MAX_FRAME = 104857600                    # socket.request.max.bytes' default


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


@dataclass
class Case:
    chunks: list[bytes]
    framed: bool = True                  # the stream is still framed after these bytes
    what: str = ""

    @property
    def size(self) -> int:
        return sum(len(c) for c in self.chunks)


def count_like_positions(body: bytes, start: int = 8) -> list[tuple[int, struct.Struct]]:
    """Offsets of big-endian int16/int32 values that look like a length or a count (0..4096), where a
    lie does the most harm."""
    out = []
    for p in range(start, len(body) - 1):
        if p + 4 <= len(body):
            v = I32.unpack_from(body, p)[0]
            if 0 <= v <= 4096 or v == -1:
                out.append((p, I32))
        v = I16.unpack_from(body, p)[0]
        if 0 < v <= 512 or v == -1:
            out.append((p, I16))
    return out


class Mutator:
    """Makes `Case`s from seed frames; deterministic for a seed."""

    def __init__(self, seeds: list[bytes], rng: random.Random, max_frame: int = MAX_FRAME):
        self.seeds = seeds
        self.rng = rng
        self.max_frame = max_frame
        self._positions: dict[int, list] = {}
        self.by_key: dict[int, list[bytes]] = {}
        for s in seeds:
            self.by_key.setdefault(I16.unpack_from(s, 0)[0], []).append(s)
        self.ops = [
            (self.bit_flips, 20), (self.boundary_at_count, 25), (self.boundary_anywhere, 10),
            (self.uvarint_boundary, 8), (self.truncate, 8), (self.extend, 5), (self.random_body, 4),
            (self.splice, 5), (self.other_version, 8), (self.delete_range, 4), (self.duplicate_range, 3),
        ]
        self._op_weights = [w for _, w in self.ops]

    # -- whole cases
    def case(self) -> Case:
        return self.mutate(self.rng.choice(self.seeds))

    def mutate(self, seed_frame: bytes) -> Case:
        rng = self.rng
        body = bytearray(seed_frame)
        names = []
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            op = rng.choices(self.ops, self._op_weights)[0][0]
            try:
                names.append(op(body, seed_frame))
            except (struct.error, ValueError, IndexError):      # an earlier cut left too little to work on
                names.append(f"{op.__name__} skipped")
        frame = bytes(body)
        prefix, framed, lie = self.size_prefix(len(frame))
        if lie:
            names.append(lie)
        wire = prefix + frame
        roll = rng.random()
        if roll < 0.02 and len(wire) <= 4096:
            chunks, names = [wire[i:i + 1] for i in range(len(wire))], names + ["split at every byte"]
        elif roll < 0.10 and len(wire) > 1:
            cuts = sorted(rng.sample(range(1, len(wire)), min(len(wire) - 1, rng.randint(1, 4))))
            chunks = [wire[a:b] for a, b in zip([0] + cuts, cuts + [len(wire)])]
            names.append(f"split in {len(chunks)}")
        else:
            chunks = [wire]
        return Case(chunks, framed, f"{I16.unpack_from(seed_frame, 0)[0]}: " + ", ".join(names))

    def size_prefix(self, n: int) -> tuple[bytes, bool, str]:
        """The true size mostly; else a lie: shorter or longer than the frame, 0, negative, huge."""
        rng = self.rng
        if rng.random() >= 0.06:
            return I32.pack(n), True, ""
        lie = rng.choice((n - 1, n + 1, n // 2, n + rng.randint(2, 4096), 0, -1, -0x80000000, 0x7FFFFFFF,
                          self.max_frame, self.max_frame + 1, rng.randint(1, 1 << 20)))
        return I32.pack(max(-0x80000000, min(0x7FFFFFFF, lie))), False, f"size prefix {lie} for {n}"

    # -- body mutations (in place); each returns what it did
    def bit_flips(self, b: bytearray, seed: bytes) -> str:
        k = self.rng.choice((1, 1, 2, 4, 8))
        for _ in range(k):
            p = self._pos(b)
            b[p] ^= 1 << self.rng.randrange(8)
        return f"{k} bit flips"

    def _pos(self, b: bytearray) -> int:
        # mostly past the api key and version, so the body's decoders see the damage
        lo = 4 if self.rng.random() < 0.9 and len(b) > 5 else 0
        return self.rng.randrange(lo, len(b))

    def boundary_at_count(self, b: bytearray, seed: bytes) -> str:
        key = id(seed)
        positions = self._positions.get(key)
        if positions is None:
            positions = self._positions[key] = count_like_positions(seed)
        positions = [(p, s) for p, s in positions if p + s.size <= len(b)]
        if not positions:
            return self.boundary_anywhere(b, seed)
        p, s = self.rng.choice(positions)
        v = self.rng.choice(BOUNDARY[s])
        s.pack_into(b, p, v)
        return f"count/length at {p} = {v}"

    def boundary_anywhere(self, b: bytearray, seed: bytes) -> str:
        s = self.rng.choice((I16, I32, I32, I64))
        if len(b) < s.size + 8:
            return "nothing"
        p = self.rng.randrange(8, len(b) - s.size + 1)
        v = self.rng.choice(BOUNDARY[s])
        s.pack_into(b, p, v)
        return f"int{s.size * 8} at {p} = {v}"

    def uvarint_boundary(self, b: bytearray, seed: bytes) -> str:
        """Replace a one-byte unsigned varint (compact lengths, counts, tag counts) by a long one."""
        if len(b) < 10:
            return "nothing"
        p = self.rng.randrange(8, len(b))
        v = self.rng.choice(UVARINT_BOUNDARY)
        b[p:p + 1] = uvarint(v)
        return f"uvarint at {p} = {v}"

    def truncate(self, b: bytearray, seed: bytes) -> str:
        n = self.rng.randrange(0, len(b))
        del b[n:]
        return f"truncated to {n}"

    def extend(self, b: bytearray, seed: bytes) -> str:
        n = self.rng.choice((1, 4, 16, 256, 4096))
        b += self.rng.randbytes(n) if self.rng.random() < 0.5 else bytes(n)
        return f"extended by {n}"

    def random_body(self, b: bytearray, seed: bytes) -> str:
        n = self.rng.choice((0, 1, 7, 64, 1000, 20000))
        b[8:] = self.rng.randbytes(n)
        return f"random body of {n}"

    def splice(self, b: bytearray, seed: bytes) -> str:
        """Head of this frame, tail of another of the same API (another client or version)."""
        others = self.by_key.get(I16.unpack_from(seed, 0)[0], [seed])
        other = self.rng.choice(others)
        cut_a = self.rng.randrange(8, max(9, len(b)))
        cut_b = self.rng.randrange(8, max(9, len(other)))
        b[cut_a:] = other[cut_b:]
        return f"spliced at {cut_a}/{cut_b}"

    def other_version(self, b: bytearray, seed: bytes) -> str:
        """The body as another version reads it (flexible vs not, fields added or gone)."""
        v = self.rng.randrange(0, 18)
        I16.pack_into(b, 2, v)
        return f"as v{v}"

    def delete_range(self, b: bytearray, seed: bytes) -> str:
        if len(b) < 12:
            return "nothing"
        p = self.rng.randrange(8, len(b) - 1)
        n = self.rng.randint(1, min(32, len(b) - p))
        del b[p:p + n]
        return f"deleted {n} at {p}"

    def duplicate_range(self, b: bytearray, seed: bytes) -> str:
        if len(b) < 12:
            return "nothing"
        p = self.rng.randrange(8, len(b) - 1)
        n = self.rng.randint(1, min(256, len(b) - p))
        b[p:p] = b[p:p + n] * self.rng.choice((1, 2, 16))
        return f"repeated {n} at {p}"
