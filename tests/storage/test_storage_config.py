"""LogConfig: Kafka's topic-level names and defaults."""

import pytest
from kafka_compat.storage.log_config import LogConfig

from kafka_compat.configdef import LONG_MAX


def test_kafka_defaults():
    c = LogConfig()
    assert (c.segment_bytes, c.segment_ms, c.segment_index_bytes, c.index_interval_bytes) == \
        (1073741824, 604800000, 10485760, 4096)
    assert (c.retention_ms, c.retention_bytes, c.max_message_bytes) == (604800000, -1, 1048588)
    assert (c.cleanup_policy, c.min_cleanable_dirty_ratio, c.min_compaction_lag_ms) == ("delete", 0.5, 0)
    assert (c.delete_retention_ms, c.file_delete_delay_ms) == (86400000, 60000)
    assert (c.flush_messages, c.flush_ms) == (LONG_MAX, LONG_MAX)
    assert c.message_timestamp_type == "CreateTime"
    assert (c.message_timestamp_before_max_ms, c.message_timestamp_after_max_ms) == (LONG_MAX, 3_600_000)
    assert (c.segment_jitter_ms, c.preallocate) == (0, False)
    assert c.delete and not c.compact and not c.reads_records


def test_kafka_names_and_policies():
    c = LogConfig({"cleanup.policy": "compact,delete", "segment.bytes": "1000"})
    assert c.segment_bytes == 1000 and c.compact and c.delete and c.reads_records
    assert LogConfig(cleanup_policy="compact").updated(**{"retention.ms": 5}).retention_ms == 5
    with pytest.raises(ValueError):
        LogConfig({"segment.bytez": 1})
    with pytest.raises(ValueError):
        LogConfig(cleanup_policy="shred")
    with pytest.raises(AttributeError):
        c.segment_bytes = 5
