"""Log.append's precomputed roll and flush limits must decide exactly as Kafka's checks do,
also after what changes them (config updates, reopening, truncation), and every batch the
header-only path turns away must still get its Kafka error from the validator."""

import struct

import pytest
from kafka_compat.storage.log_config import LogConfig
from logtools import TS, batch

from kafka_compat.protocol.errors import ErrorCode, KafkaError


def bases(lg):
    return [s.base_offset for s in lg.segments]


def test_lowering_segment_ms_at_runtime_rolls_at_the_new_limit(make_log):
    lg = make_log(segment_ms=600_000)
    lg.append_as_leader(batch(1, ts=TS), 0)
    lg.append_as_leader(batch(1, ts=TS + 60_001), 0)
    assert bases(lg) == [0]
    lg.update_config(LogConfig(segment_ms=60_000))
    lg.append_as_leader(batch(1, ts=TS + 60_000), 0)          # not more than the new segment.ms yet
    assert bases(lg) == [0]
    lg.append_as_leader(batch(1, ts=TS + 60_001), 0)
    assert bases(lg) == [0, 3]


def test_lowering_flush_messages_at_runtime_flushes_at_the_new_count(make_log):
    lg = make_log()
    lg.append_as_leader(batch(4), 0)
    assert lg.recovery_point == 0
    lg.update_config(LogConfig(flush_messages=5))
    lg.append_as_leader(batch(1), 0)
    assert lg.recovery_point == 5
    lg.append_as_leader(batch(4), 0)
    assert lg.recovery_point == 5
    lg.append_as_leader(batch(1), 0)
    assert lg.recovery_point == 10


def test_reopened_segment_rolls_by_its_first_batch_timestamp(make_log):
    lg = make_log(segment_ms=60_000)
    lg.append_as_leader(batch(1, ts=TS), 0)
    lg.close()
    again = make_log(segment_ms=60_000, had_clean_shutdown=True, recovery_point=1)
    again.append_as_leader(batch(1, ts=TS + 60_000), 0)
    assert bases(again) == [0]
    again.append_as_leader(batch(1, ts=TS + 60_001), 0)
    assert bases(again) == [0, 2]


def test_truncated_to_empty_segment_takes_the_next_batch_timestamp_as_its_first(make_log):
    lg = make_log(segment_ms=60_000)
    lg.append_as_leader(batch(1, ts=TS), 0)
    lg.append_as_leader(batch(1, ts=TS + 10), 0)
    lg.truncate_to(0)
    lg.append_as_leader(batch(1, ts=TS + 500_000), 0)         # an empty segment never rolls by time
    lg.append_as_leader(batch(1, ts=TS + 560_000), 0)
    assert bases(lg) == [0]
    lg.append_as_leader(batch(1, ts=TS + 560_001), 0)
    assert bases(lg) == [0, 2]


def test_segment_without_timestamps_rolls_by_the_clock(make_log, clock):
    lg = make_log(segment_ms=60_000)
    lg.append_as_leader(batch(1, ts=-1), 0)
    clock.advance(60_000)
    lg.append_as_leader(batch(1, ts=-1), 0)
    assert bases(lg) == [0]
    clock.advance(1)
    lg.append_as_leader(batch(1, ts=-1), 0)
    assert bases(lg) == [0, 2]


def _with(data: bytearray, fmt: str, at: int, value) -> bytearray:
    struct.pack_into(fmt, data, at, value)
    return data


@pytest.mark.parametrize("make, code", [
    (lambda: _with(batch(1), ">q", 0, 7), ErrorCode.INVALID_RECORD),                 # BaseOffset not 0
    (lambda: _with(batch(1), ">I", 17, 1), ErrorCode.CORRUPT_MESSAGE),               # CRC
    (lambda: _with(batch(2), ">i", 57, 3), ErrorCode.CORRUPT_MESSAGE),               # count breaks the CRC
    (lambda: batch(1, is_control=True), ErrorCode.INVALID_RECORD),
    (lambda: batch(1, producer_id=5, producer_epoch=0, base_sequence=-1), ErrorCode.INVALID_RECORD),
    (lambda: batch(1, value=b"x" * 2000), ErrorCode.MESSAGE_TOO_LARGE),
])
def test_writable_batches_breaking_a_rule_get_kafka_errors(make_log, make, code):
    lg = make_log(max_message_bytes=1000)
    with pytest.raises(KafkaError) as info:
        lg.append_as_leader(make(), 0)
    assert info.value.error_code == code
    assert lg.log_end_offset == 0 and lg.active_segment.size == 0
    assert lg.append_as_leader(batch(2), 0).last_offset == 1  # the log is untouched and still takes batches
