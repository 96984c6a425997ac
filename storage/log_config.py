"""LogConfig and TOPIC_CONFIG_DEF: every topic-level setting, under Kafka's names, types and defaults.

This is the one definition of the topic configs (Kafka keeps it in its storage
module's LogConfig); the broker's own ``log.*`` properties that stand in for them
take type, default and validator from here. Defaults are Kafka 4.4's, which
lowered ``message.timestamp.after.max.ms`` to one hour (KIP-1050), beside the
configs that Kafka 4 removed and that we keep for the v0/v1 formats we still serve.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any

from kafka_compat.configdef import (
    BOOLEAN,
    DOUBLE,
    INT,
    LIST,
    LONG,
    LONG_MAX,
    LOW,
    MEDIUM,
    STRING,
    ConfigDef,
    ConfigError,
    LambdaValidator,
    ValidList,
    ValidString,
    at_least,
    between,
)
from kafka_compat.protocol.batch_header import RECORD_OVERHEAD_V0

DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024 + 12  # 1 MiB plus the log overhead (offset + size)
_DAY_MS = 24 * 3_600_000

_COMPRESSION_TYPES = ValidString("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_CLEANUP_POLICIES = ValidList("compact", "delete")
_TIMESTAMP_TYPES = ValidString("CreateTime", "LogAppendTime")
_GZIP_LEVEL = LambdaValidator(lambda v: v == -1 or 1 <= v <= 9, "Value must be between 1 and 9 or equal to -1",
                             "[1,...,9] or -1")
_METADATA_VERSION = LambdaValidator(lambda v: bool(re.fullmatch(r"\d+\.\d+(\.\d+){0,2}(-IV\d+)?", v or "")),
                                   "not a valid metadata version", "[0.8.0, ..., 3.9-IV0]")

# Kafka's LogConfig, in Kafka's order.
TOPIC_CONFIG_DEF = (
    ConfigDef()
    .define("segment.bytes", INT, 1024 ** 3, at_least(RECORD_OVERHEAD_V0), MEDIUM, "Largest size of one segment file.")
    .define("segment.ms", LONG, 7 * _DAY_MS, at_least(1), MEDIUM, "Roll a new segment after this long.")
    .define("segment.jitter.ms", LONG, 0, at_least(0), MEDIUM, "Most random time taken off segment.ms.")
    .define("segment.index.bytes", INT, 10 * 1024 * 1024, at_least(4), MEDIUM, "Largest offset index file.")
    .define("flush.messages", LONG, LONG_MAX, at_least(1), MEDIUM, "fsync after this many records.")
    .define("flush.ms", LONG, LONG_MAX, at_least(0), MEDIUM, "fsync data older than this.")
    .define("retention.bytes", LONG, -1, None, MEDIUM,
            "Largest size of a partition before old segments go; -1 for none.")
    .define("retention.ms", LONG, 7 * _DAY_MS, at_least(-1), MEDIUM, "Keep data this long; -1 for no limit.")
    .define("max.message.bytes", INT, DEFAULT_MAX_MESSAGE_BYTES, at_least(0), MEDIUM,
            "Largest record batch accepted, after compression.")
    .define("index.interval.bytes", INT, 4096, at_least(0), MEDIUM, "Bytes appended between two index entries.")
    .define("delete.retention.ms", LONG, _DAY_MS, at_least(0), MEDIUM, "How long tombstones stay after compaction.")
    .define("min.compaction.lag.ms", LONG, 0, at_least(0), MEDIUM, "Records younger than this are not compacted.")
    .define("max.compaction.lag.ms", LONG, LONG_MAX, at_least(1), MEDIUM,
            "Records older than this are compacted whatever the dirty ratio.")
    .define("file.delete.delay.ms", LONG, 60000, at_least(0), MEDIUM, "Wait before a deleted segment's files go.")
    .define("min.cleanable.dirty.ratio", DOUBLE, 0.5, between(0, 1), MEDIUM,
            "Dirty share of a log before it is compacted.")
    .define("cleanup.policy", LIST, "delete", _CLEANUP_POLICIES, MEDIUM,
            "What happens to old segments: delete, compact, or both.")
    .define("unclean.leader.election.enable", BOOLEAN, False, None, MEDIUM,
            "Allow an out-of-sync replica to lead, at the price of data loss.")
    .define("min.insync.replicas", INT, 1, at_least(1), MEDIUM, "In-sync replicas an acks=-1 write needs.")
    .define("compression.type", STRING, "producer", _COMPRESSION_TYPES, MEDIUM,
            "Codec for stored batches; producer keeps what the producer sent.")
    .define("compression.gzip.level", INT, -1, _GZIP_LEVEL, MEDIUM, "gzip level when the broker compresses.")
    .define("compression.lz4.level", INT, 9, between(1, 17), MEDIUM, "lz4 level when the broker compresses.")
    .define("compression.zstd.level", INT, 3, between(-131072, 22), MEDIUM, "zstd level when the broker compresses.")
    .define("preallocate", BOOLEAN, False, None, MEDIUM, "Preallocate segment files.")
    .define("message.format.version", STRING, "3.0-IV1", _METADATA_VERSION, MEDIUM, "Deprecated; ignored from 3.0 on.")
    .define("message.timestamp.type", STRING, "CreateTime", _TIMESTAMP_TYPES, MEDIUM,
            "Keep the producer's timestamp (CreateTime) or stamp the append time (LogAppendTime).")
    .define("message.timestamp.difference.max.ms", LONG, LONG_MAX, at_least(0), MEDIUM,
            "Deprecated: largest gap between record and broker time.")
    .define("message.timestamp.before.max.ms", LONG, LONG_MAX, at_least(0), MEDIUM,
            "How far in the past a CreateTime timestamp may be.")
    .define("message.timestamp.after.max.ms", LONG, 3_600_000, at_least(0), MEDIUM,
            "How far in the future a CreateTime timestamp may be.")
    .define("leader.replication.throttled.replicas", LIST, "", None, MEDIUM,
            "partition:broker pairs (or *) throttled on the leader side.")
    .define("follower.replication.throttled.replicas", LIST, "", None, MEDIUM,
            "partition:broker pairs (or *) throttled on the follower side.")
    .define("message.downconversion.enable", BOOLEAN, True, None, LOW, "Down-convert batches for old fetch versions.")
    .define("remote.storage.enable", BOOLEAN, False, None, MEDIUM,
            "Tiered storage for this topic (not supported here).")
    .define("local.retention.ms", LONG, -2, at_least(-2), MEDIUM,
            "Local retention with tiered storage; -2 means retention.ms.")
    .define("local.retention.bytes", LONG, -2, at_least(-2), MEDIUM,
            "Local size limit with tiered storage; -2 means retention.bytes.")
    .define("remote.log.copy.disable", BOOLEAN, False, None, MEDIUM, "Stop copying segments to tiered storage.")
    .define("remote.log.delete.on.disable", BOOLEAN, False, None, MEDIUM,
            "Delete tiered data when tiering is switched off.")
    .define("remote.copy.lag.bytes", LONG, -1, at_least(-1), MEDIUM,
            "Bytes a rolled segment waits behind the active one before it is copied to tiered storage.")
    .define("remote.copy.lag.ms", LONG, 0, at_least(0), MEDIUM,
            "Time a rolled segment waits before it is copied to tiered storage.")
    .define("max.decompressed.message.bytes", INT, 2_147_483_639, at_least(0), MEDIUM,
            "Largest decompressed record a compressed batch may carry.")
    .define("errors.deadletterqueue.group.enable", BOOLEAN, False, None, MEDIUM,
            "Whether share groups may use this topic as their dead-letter queue.")
)
_DEFAULTS = TOPIC_CONFIG_DEF.parse({})


def validate_topic_configs(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Typed topic settings; unknown names and bad values raise ConfigError (INVALID_CONFIG)."""
    parsed = {}
    for name, raw in overrides.items():
        key = TOPIC_CONFIG_DEF.config_keys.get(name)
        if key is None:
            raise ConfigError(name, message=f"Unknown topic config name: {name}")
        parsed[name] = key.parse(raw)
    return parsed


class LogConfig:
    """Immutable view of one log's settings; attribute names are Kafka's with dots as underscores.

    Values are typed as TOPIC_CONFIG_DEF parses them, except ``cleanup_policy``,
    which reads as Kafka prints it ("compact,delete"); ``compact`` and ``delete``
    are the flags storage acts on.
    """

    __slots__ = tuple(name.replace(".", "_") for name in TOPIC_CONFIG_DEF) + (
        "compact", "delete", "log_append_time", "reads_records", "props")

    def __init__(self, props: Mapping[str, Any] | None = None, **overrides):
        merged = dict(props or {})
        for key, value in overrides.items():
            merged[key.replace("_", ".")] = value
        values = {**_DEFAULTS, **validate_topic_configs(merged)}
        if values["segment.index.bytes"] < 12:
            raise ConfigError("segment.index.bytes", values["segment.index.bytes"],
                              "must hold at least one time index entry (12 bytes)")
        for name, value in values.items():
            object.__setattr__(self, name.replace(".", "_"), value)
        policies = values["cleanup.policy"]
        object.__setattr__(self, "cleanup_policy", ",".join(policies))
        object.__setattr__(self, "compact", "compact" in policies)
        object.__setattr__(self, "delete", "delete" in policies)
        object.__setattr__(self, "log_append_time", values["message.timestamp.type"] == "LogAppendTime")
        # Whether produce validation must look at records (null keys, per-record timestamps);
        # otherwise it reads batch headers only. A future bound needs no record: a batch's max
        # timestamp within it puts every record within it (UnifiedLog checks the header).
        bounded = values["message.timestamp.before.max.ms"] != LONG_MAX
        object.__setattr__(self, "reads_records", "compact" in policies or (
            bounded and values["message.timestamp.type"] == "CreateTime"))
        object.__setattr__(self, "props", values)

    def __setattr__(self, name, value):
        raise AttributeError("LogConfig is immutable; build a new one with updated()")

    def updated(self, **overrides) -> "LogConfig":
        """A copy with some properties changed (keys as Python names or Kafka names)."""
        props = dict(self.props)
        for key, value in overrides.items():
            props[key if "." in key else key.replace("_", ".")] = value
        return LogConfig(props)

    def random_segment_jitter(self) -> int:
        """Kafka draws a per-segment jitter below min(segment.jitter.ms, segment.ms)."""
        bound = min(self.segment_jitter_ms, self.segment_ms)
        return random.randrange(bound) if bound > 0 else 0

    def __repr__(self):
        changed = {k: v for k, v in self.props.items() if v != _DEFAULTS[k]}
        return f"LogConfig({changed})"
