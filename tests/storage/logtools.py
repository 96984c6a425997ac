"""Helpers shared by the storage tests: building client batches and reading a log back."""

from kafka_compat.protocol.records import batches, build_batch

TS = 1_700_000_000_000


def batch(n=1, key=b"k", value=b"v", ts=TS, **kwargs) -> bytearray:
    """A client batch of ``n`` records (BaseOffset 0), as a writable buffer like a request frame."""
    return bytearray(build_batch([(key, value, (), ts)] * n, **kwargs))


def keyed(pairs, ts=TS, **kwargs) -> bytearray:
    """A client batch from (key, value) pairs; value None makes a tombstone."""
    return bytearray(build_batch([(k, v, (), ts) for k, v in pairs], **kwargs))


def read_records(lg, start=None, max_bytes=1 << 30):
    """Every record from ``start`` (default: the log start) to the log end, via Log.read."""
    start = lg.log_start_offset if start is None else start
    data = lg.read(start, max_bytes).read_bytes()
    return [r for view in batches(data) for r in view.records()]


def read_views(lg, start=None, max_bytes=1 << 30):
    start = lg.log_start_offset if start is None else start
    data = lg.read(start, max_bytes).read_bytes()
    return list(batches(data))
