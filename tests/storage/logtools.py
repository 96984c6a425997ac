"""Helpers shared by the storage tests: building client batches and reading a log back."""

from kafka_compat.storage.fetch_data_info import FetchIsolation
from kafka_compat.storage.validator import CLIENT

from kafka_compat.protocol.records import batches, build_batch

TS = 1_700_000_000_000


def batch(n=1, key=b"k", value=b"v", ts=TS, **kwargs) -> bytearray:
    """A client batch of ``n`` records (BaseOffset 0), as a writable buffer like a request frame."""
    return bytearray(build_batch([(key, value, (), ts)] * n, **kwargs))


def keyed(pairs, ts=TS, **kwargs) -> bytearray:
    """A client batch from (key, value) pairs; value None makes a tombstone."""
    return bytearray(build_batch([(k, v, (), ts) for k, v in pairs], **kwargs))


def read_records(lg, start=None, max_bytes=1 << 30):
    """Every record from ``start`` (default: the log start) to the log end, via UnifiedLog.read."""
    start = lg.log_start_offset if start is None else start
    data = read_bytes(lg, start, max_bytes)
    return [r for view in batches(data) for r in view.records()]


def read_views(lg, start=None, max_bytes=1 << 30):
    start = lg.log_start_offset if start is None else start
    return list(batches(read_bytes(lg, start, max_bytes)))


def read_bytes(lg, start, max_bytes=1 << 30, isolation=FetchIsolation.LOG_END) -> bytes:
    return lg.read(start, max_bytes, isolation, True).records.read_bytes()


def append_committed(lg, records, leader_epoch: int = 0, origin: str = CLIENT):
    """Append as leader and count it replicated at once, as a single-replica partition does."""
    info = lg.append_as_leader(records, leader_epoch, origin)
    lg.update_high_watermark(lg.log_end_offset)
    return info


def advance_high_watermark(lg) -> None:
    """Everything written counts as replicated (what a single-replica partition does)."""
    lg.update_high_watermark(lg.log_end_offset)


def assert_consistent(lg, contiguous=True):
    """The log is a valid prefix and both indexes of every segment agree with it.

    Checks, per segment: every batch's checksum; offsets increasing (and, when
    ``contiguous``, with no gaps); each offset index entry points at the start of a
    batch and names the last offset of the append that began there; each time index entry names the
    largest timestamp so far and the batch that reached it.
    """
    from kafka_compat.protocol.batch_header import crc_valid

    expected_next = lg.segments[0].base_offset
    for seg in lg.segments:
        infos = list(seg.batches())
        assert sum(i.size for i in infos) == seg.size
        by_position = {i.position: i for i in infos}
        running_max, max_at = -1, {}
        for info in infos:
            raw = seg.read_bytes(info.position, info.size)
            assert crc_valid(raw, 0, info.size)
            assert info.base_offset >= expected_next
            if contiguous:
                assert info.base_offset == expected_next
            expected_next = info.last_offset + 1
            if info.max_timestamp > running_max:
                running_max = info.max_timestamp
                max_at[info.last_offset] = running_max
        assert seg.next_offset == (infos[-1].last_offset + 1 if infos else seg.base_offset)
        for n in range(seg.offset_index.entries):
            offset, position = seg.offset_index.entry(n)
            # the append that started at ``position`` ended with ``offset`` (one batch, for magic 2)
            assert position in by_position and by_position[position].last_offset <= offset
            assert offset in {i.last_offset for i in infos}
        for n in range(seg.time_index.entries):
            ts, offset = seg.time_index.entry(n)
            assert max_at.get(offset) == ts
    assert expected_next == lg.log_end_offset
