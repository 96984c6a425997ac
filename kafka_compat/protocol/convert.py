"""Down-conversion: magic-2 batches rewritten as magic 0/1 message sets for Fetch v0-v3.

Only old clients need this, so it may look at every record; the fetch path for
current clients never calls it. Headers cannot be expressed before magic 2 and
are dropped, as Kafka drops them. Each record keeps its absolute offset, so
gaps left by compaction survive the conversion.
"""
from __future__ import annotations

from .records import batches, build_legacy_message_set

TIMESTAMP_TYPE_BIT = 0x08


def down_convert(data, to_magic: int) -> bytes:
    """Every entry of `data` at `to_magic` (0 or 1); entries already at or below it are kept."""
    out = bytearray()
    for view in batches(memoryview(data)):
        if view.magic <= to_magic:
            out += view.buffer[view.position:view.position + view.size]
            continue
        if view.magic == 2 and view.is_control:    # a magic 1 entry read at magic 0 has no control flag
            continue
        ts_type = 1 if (to_magic == 1 and view.timestamp_type) else 0
        for r in view.records():
            key = None if r.key is None else bytes(r.key)
            value = None if r.value is None else bytes(r.value)
            out += build_legacy_message_set([(key, value, (), r.timestamp)], magic=to_magic,
                                            base_offset=r.offset, timestamp_type=ts_type)
    return bytes(out)
