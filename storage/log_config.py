"""LogConfig: Kafka's topic-level log settings, under Kafka's names and defaults.

Defaults are those of Kafka's LogConfig/ServerLogConfigs (trunk, Oct 2024).
``message.timestamp.after.max.ms`` is Long.MAX_VALUE there; later Kafka
releases may lower it, so a broker wanting that passes it explicitly.
"""

from __future__ import annotations

import random

LONG_MAX = (1 << 63) - 1

# property name -> (parser, default)
_DEFS = {
    "segment.bytes": (int, 1024 * 1024 * 1024),
    "segment.ms": (int, 7 * 24 * 3600 * 1000),
    "segment.jitter.ms": (int, 0),
    "segment.index.bytes": (int, 10 * 1024 * 1024),
    "index.interval.bytes": (int, 4096),
    "retention.ms": (int, 7 * 24 * 3600 * 1000),
    "retention.bytes": (int, -1),
    "max.message.bytes": (int, 1024 * 1024 + 12),
    "cleanup.policy": (str, "delete"),
    "min.cleanable.dirty.ratio": (float, 0.5),
    "min.compaction.lag.ms": (int, 0),
    "max.compaction.lag.ms": (int, LONG_MAX),
    "delete.retention.ms": (int, 24 * 3600 * 1000),
    "file.delete.delay.ms": (int, 60000),
    "flush.messages": (int, LONG_MAX),
    "flush.ms": (int, LONG_MAX),
    "message.timestamp.type": (str, "CreateTime"),
    "message.timestamp.before.max.ms": (int, LONG_MAX),
    "message.timestamp.after.max.ms": (int, LONG_MAX),
    "preallocate": (lambda v: v if isinstance(v, bool) else str(v).lower() == "true", False),
    "compression.type": (str, "producer"),
}


class LogConfig:
    """Immutable view of one log's settings; attribute names are Kafka's with dots as underscores."""

    __slots__ = tuple(name.replace(".", "_") for name in _DEFS) + (
        "compact", "delete", "log_append_time", "reads_records", "props")

    def __init__(self, props: dict | None = None, **overrides):
        merged = dict(props or {})
        for key, value in overrides.items():
            merged[key.replace("_", ".")] = value
        unknown = [k for k in merged if k not in _DEFS]
        if unknown:
            raise ValueError(f"unknown log config(s): {', '.join(sorted(unknown))}")
        values = {}
        for name, (parse, default) in _DEFS.items():
            raw = merged.get(name, default)
            values[name] = parse(raw) if raw is not None else default
            object.__setattr__(self, name.replace(".", "_"), values[name])
        policies = {p.strip() for p in values["cleanup.policy"].split(",") if p.strip()}
        if not policies <= {"compact", "delete"}:
            raise ValueError(f"invalid cleanup.policy {values['cleanup.policy']!r}")
        if values["message.timestamp.type"] not in ("CreateTime", "LogAppendTime"):
            raise ValueError(f"invalid message.timestamp.type {values['message.timestamp.type']!r}")
        if not 0.0 <= values["min.cleanable.dirty.ratio"] <= 1.0:
            raise ValueError("min.cleanable.dirty.ratio must be within [0, 1]")
        if values["segment.index.bytes"] < 12:
            raise ValueError("segment.index.bytes must hold at least one time index entry")
        object.__setattr__(self, "compact", "compact" in policies)
        object.__setattr__(self, "delete", "delete" in policies)
        object.__setattr__(self, "log_append_time", values["message.timestamp.type"] == "LogAppendTime")
        # Whether produce validation must look at records (null keys, per-record timestamps);
        # otherwise it reads batch headers only.
        bounded = values["message.timestamp.before.max.ms"] != LONG_MAX or \
            values["message.timestamp.after.max.ms"] != LONG_MAX
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
        changed = {k: v for k, v in self.props.items() if v != _DEFS[k][1]}
        return f"LogConfig({changed})"
