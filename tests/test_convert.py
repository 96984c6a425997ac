"""Down-conversion for Fetch v0-v3 over a log that mixes magic 0, 1 and 2 entries.

Old producers' entries are stored as sent, so one partition can hold all three
formats; an old fetcher must get every record back at its own magic. (Regression:
a magic 1 entry read at magic 0 crashed the conversion, closing the fetcher's
connection.)
"""
from kafka_compat.protocol.compression import GZIP
from kafka_compat.protocol.convert import down_convert
from kafka_compat.protocol.records import NO_TIMESTAMP, batches, build_batch, build_legacy_message_set

TS = 1_700_000_000_000


def mixed_log() -> bytes:
    return (build_legacy_message_set([(b"k0", b"v0"), (b"k1", None)], magic=0, base_offset=0)
            + build_legacy_message_set([(b"k2", b"v2", (), TS + 2), (b"k3", b"v3", (), TS + 3)],
                                       magic=1, base_offset=2, compression=GZIP)
            + build_legacy_message_set([(b"k4", b"v4", (), TS + 4)], magic=1, base_offset=4)
            + build_batch([(b"k5", b"v5", [("h", b"5")], TS + 5), (None, b"v6", (), TS + 6)],
                          base_offset=5, compression=GZIP))


def read(data: bytes) -> list[tuple]:
    """(magic, offset, key, value, timestamp) of every record, deep-iterated."""
    return [(view.magic, r.offset, None if r.key is None else bytes(r.key),
             None if r.value is None else bytes(r.value), r.timestamp)
            for view in batches(memoryview(data)) for r in view.records()]


def test_mixed_log_down_converted_to_magic_1():
    got = read(down_convert(mixed_log(), 1))
    assert [g[0] for g in got] == [0, 0, 1, 1, 1, 1, 1]
    assert [g[1:] for g in got] == [
        (0, b"k0", b"v0", NO_TIMESTAMP), (1, b"k1", None, NO_TIMESTAMP),
        (2, b"k2", b"v2", TS + 2), (3, b"k3", b"v3", TS + 3), (4, b"k4", b"v4", TS + 4),
        (5, b"k5", b"v5", TS + 5), (6, None, b"v6", TS + 6)]


def test_mixed_log_down_converted_to_magic_0():
    got = read(down_convert(mixed_log(), 0))
    assert all(g[0] == 0 for g in got)
    assert [g[1:] for g in got] == [
        (0, b"k0", b"v0", NO_TIMESTAMP), (1, b"k1", None, NO_TIMESTAMP),
        (2, b"k2", b"v2", NO_TIMESTAMP), (3, b"k3", b"v3", NO_TIMESTAMP), (4, b"k4", b"v4", NO_TIMESTAMP),
        (5, b"k5", b"v5", NO_TIMESTAMP), (6, None, b"v6", NO_TIMESTAMP)]
