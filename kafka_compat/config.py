"""Broker and topic configuration under Kafka's names, types, defaults and precedence.

Names, types, defaults, validators and importance follow Apache Kafka (trunk,
Oct 2024); the documentation strings are our own short summaries. Where we
differ from Kafka the doc string says so:

- ``broker.id`` and ``node.id`` default to 0: an embedded single node needs no
  id generation (Kafka's default -1 asks ZooKeeper for one), so negative ids are
  refused.
- ``log.dir`` keeps Kafka's default ``/tmp/kafka-logs``; the CLI passes
  ``./kafka-compat-data`` as an override instead.
- CLASS values stay class names (we cannot load Java classes).

Errors raise :class:`ConfigError`, which names the property; the broker answers
it with INVALID_CONFIG (40).
"""

from __future__ import annotations

import enum
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, NamedTuple

from .protocol.errors import ErrorCode, KafkaError


INT_MAX = (1 << 31) - 1
LONG_MAX = (1 << 63) - 1
DOUBLE_MAX = 1.7976931348623157e308


# -- vocabulary --------------------------------------------------------------------


class ConfigType(enum.Enum):
    """ConfigDef.Type; ``id`` is the DescribeConfigs (v3+) ConfigType byte."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9

    @property
    def id(self) -> int:
        return self.value


class Importance(enum.Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class ConfigSource(enum.IntEnum):
    """DescribeConfigs ConfigSource ids (v1+); the wire calls 1 TOPIC_CONFIG."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    DYNAMIC_CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8
    TOPIC_CONFIG = 1  # alias: the name used in DescribeConfigsResponse


_NO_VALUE = object()


class ConfigError(KafkaError, ValueError):
    """A configuration value Kafka would refuse (Kafka's ConfigException): INVALID_CONFIG to a client."""

    def __init__(self, name: str, value: Any = _NO_VALUE, message: str = "") -> None:
        self.name = name
        self.value = None if value is _NO_VALUE else value
        if value is _NO_VALUE:
            text = message if name in message else f"{name}: {message}"
        else:
            shown = "[hidden]" if isinstance(value, Password) else value
            text = f"Invalid value {shown} for configuration {name}" + (f": {message}" if message else "")
        super().__init__(ErrorCode.INVALID_CONFIG, text)


class Password:
    """A secret that never shows in reprs or logs (Kafka's Password)."""

    __slots__ = ("value",)
    HIDDEN = "[hidden]"

    def __init__(self, value: str) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return self.HIDDEN

    __str__ = __repr__


# -- validators --------------------------------------------------------------------


class Range:
    """Numeric bounds, inclusive, with Kafka's messages."""

    def __init__(self, lo: float | None = None, hi: float | None = None) -> None:
        self.lo, self.hi = lo, hi

    @classmethod
    def at_least(cls, lo: float) -> Range:
        return cls(lo, None)

    @classmethod
    def between(cls, lo: float, hi: float) -> Range:
        return cls(lo, hi)

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            raise ConfigError(name, None, "Value must be non-null")
        if self.lo is not None and value < self.lo:
            raise ConfigError(name, value, f"Value must be at least {self.lo}")
        if self.hi is not None and value > self.hi:
            raise ConfigError(name, value, f"Value must be no more than {self.hi}")

    def __str__(self) -> str:
        return f"[{self.lo},...]" if self.hi is None else f"[{self.lo},...,{self.hi}]"


class ValidString:
    """One of a fixed set of strings (case-sensitive, as Kafka)."""

    def __init__(self, *valid: str) -> None:
        self.valid = valid

    def __call__(self, name: str, value: Any) -> None:
        if value not in self.valid:
            raise ConfigError(name, value, "String must be one of: " + ", ".join(self.valid))

    def __str__(self) -> str:
        return "[" + ", ".join(self.valid) + "]"


class ValidList(ValidString):
    """Every element of a list is one of a fixed set."""

    def __call__(self, name: str, value: Any) -> None:
        for item in value:
            super().__call__(name, item)


class _Check:
    """A validator from a predicate and Kafka's message."""

    def __init__(self, ok: Callable[[Any], bool], message: str, shown: str) -> None:
        self.ok, self.message, self.shown = ok, message, shown

    def __call__(self, name: str, value: Any) -> None:
        if not self.ok(value):
            raise ConfigError(name, value, self.message)

    def __str__(self) -> str:
        return self.shown


_GZIP_LEVEL = _Check(lambda v: v == -1 or 1 <= v <= 9, "Value must be between 1 and 9 or equal to -1", "[1,...,9] or -1")
_METADATA_VERSION = _Check(lambda v: bool(re.fullmatch(r"\d+\.\d+(\.\d+){0,2}(-IV\d+)?", v or "")),
                           "not a valid metadata version", "[0.8.0, ..., 3.9-IV0]")


# -- parsing and printing values -----------------------------------------------------

_INT_RANGES = {ConfigType.SHORT: 15, ConfigType.INT: 31, ConfigType.LONG: 63}
_INTEGER_RE = re.compile(r"[+-]?[0-9]+")
_DOUBLE_RE = re.compile(r"[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[fFdD]?")
_LIST_SPLIT = re.compile(r"\s*,\s*")


def parse_type(name: str, value: Any, type_: ConfigType) -> Any:
    """Turn a raw value (usually a string) into the typed value, as ConfigDef.parseType."""
    if value is None:
        return None
    text = value.strip() if isinstance(value, str) else None
    if type_ is ConfigType.BOOLEAN:
        if isinstance(value, bool):
            return value
        if text is not None and text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ConfigError(name, value, "Expected value to be either true or false")
    if type_ in _INT_RANGES:
        bits = _INT_RANGES[type_]
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif text is not None and _INTEGER_RE.fullmatch(text):
            number = int(text)
        else:
            raise ConfigError(name, value, f"Not a number of type {type_.name}")
        if not -(1 << bits) <= number < (1 << bits):
            raise ConfigError(name, value, f"Not a number of type {type_.name}")
        return number
    if type_ is ConfigType.DOUBLE:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if text is not None and _DOUBLE_RE.fullmatch(text):
            return float(text.rstrip("fFdD").replace("Infinity", "inf"))
        raise ConfigError(name, value, "Not a number of type DOUBLE")
    if type_ is ConfigType.LIST:
        if isinstance(value, (list, tuple)):
            return [str(v) for v in value]
        if text is not None:
            return _LIST_SPLIT.split(text) if text else []
        raise ConfigError(name, value, "Expected a comma separated list.")
    if type_ is ConfigType.PASSWORD:
        if isinstance(value, Password):
            return value
        if text is not None:
            return Password(text)
    elif text is not None:  # STRING, CLASS
        return text
    raise ConfigError(name, value, f"Expected value to be a string, but it was a {type(value).__name__}")


def java_double_to_string(d: float) -> str:
    """Java's Double.toString: plain between 1e-3 and 1e7, else ``1.0E10`` style."""
    if math.isnan(d):
        return "NaN"
    if math.isinf(d):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0:
        return "-0.0" if math.copysign(1.0, d) < 0 else "0.0"
    if 1e-3 <= abs(d) < 1e7:
        return repr(d)
    sign, digits, exponent = Decimal(repr(d)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    mantissa = text[0] + "." + (text[1:] or "0")
    return ("-" if sign else "") + mantissa + "E" + str(len(digits) - 1 + exponent)


def convert_to_string(value: Any, type_: ConfigType | None) -> str | None:
    """A typed value as Kafka prints it (ConfigDef.convertToString)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double_to_string(value)
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


# -- definitions ---------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigKey:
    """One defined property: name, type, default (parsed; None = null), importance, doc."""

    name: str
    type: ConfigType
    default: Any
    importance: Importance
    doc: str
    validator: Callable[[str, Any], None] | None = None

    @property
    def has_default(self) -> bool:
        return self.default is not _NO_VALUE

    def parse(self, raw: Any) -> Any:
        value = parse_type(self.name, raw, self.type)
        if self.validator is not None:
            self.validator(self.name, value)
        return value

    @property
    def valid_values(self) -> str:
        return str(self.validator) if self.validator is not None else ""


class _DictView(Mapping):
    """Read-only mapping over ``self._data``."""

    _data: dict

    def __getitem__(self, name: str) -> Any:
        return self._data[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


class ConfigDef(_DictView):
    """An ordered registry of ConfigKeys by name (Kafka's ConfigDef)."""

    def __init__(self) -> None:
        self._data: dict[str, ConfigKey] = {}

    @property
    def config_keys(self) -> dict[str, ConfigKey]:
        return self._data

    def define(self, name: str, type_: ConfigType, default: Any, validator, importance: Importance,
               doc: str) -> ConfigDef:
        if name in self._data:
            raise ValueError(f"Configuration {name} is defined twice.")
        key = ConfigKey(name, type_, _NO_VALUE, importance, doc, validator)
        if default is not _NO_VALUE:
            # Defaults go through the same parser and validator as user values.
            key = ConfigKey(name, type_, parse_type(name, default, type_), importance, doc, validator)
            if validator is not None and key.default is not None:
                validator(name, key.default)
        self._data[name] = key
        return self

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Typed values for every defined key: the given one, else the default."""
        values = {}
        for name, key in self._data.items():
            if name in props:
                values[name] = key.parse(props[name])
            elif key.has_default:
                values[name] = key.default
            else:
                raise ConfigError(name, message=f'Missing required configuration "{name}" which has no default value.')
        return values

    def default_strings(self) -> dict[str, str]:
        """Non-null defaults as strings (Kafka's staticDefaultConfigs)."""
        return {n: convert_to_string(k.default, k.type) for n, k in self._data.items()
                if k.has_default and k.default is not None}


BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = (
    ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.SHORT, ConfigType.LONG,
    ConfigType.DOUBLE, ConfigType.LIST, ConfigType.CLASS, ConfigType.PASSWORD)
HIGH, MEDIUM, LOW = Importance.HIGH, Importance.MEDIUM, Importance.LOW
at_least, between = Range.at_least, Range.between

_COMPRESSION_TYPES = ValidString("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_CLEANUP_POLICIES = ValidList("compact", "delete")
_TIMESTAMP_TYPES = ValidString("CreateTime", "LogAppendTime")
_HOUR_MS, _MINUTE_MS = 3_600_000, 60_000
_DAY_MS = 24 * _HOUR_MS
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024 + 12  # 1 MiB plus the log overhead (offset + size)
RECORD_OVERHEAD_V0 = 14
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

BROKER_CONFIG_DEF = (
    ConfigDef()
    # identity
    .define("broker.id", INT, 0, None, HIGH,
            "This broker's id. Kafka defaults to -1 (generate one); an embedded single node uses 0.")
    .define("node.id", INT, 0, None, HIGH,
            "KRaft name for broker.id; either one sets both. Kafka defaults to -1; we use 0.")
    .define("broker.rack", STRING, None, None, MEDIUM, "Rack of this broker, for rack-aware placement.")
    .define("zookeeper.connect", STRING, None, None, HIGH,
            "ZooKeeper connection string host:port[,host:port][/chroot]; unset for a single node.")
    .define("zookeeper.session.timeout.ms", INT, 18000, None, HIGH, "ZooKeeper session timeout.")
    .define("zookeeper.connection.timeout.ms", INT, None, None, HIGH,
            "Longest wait to connect to ZooKeeper; unset means zookeeper.session.timeout.ms.")
    .define("controller.socket.timeout.ms", INT, 30000, None, MEDIUM, "Socket timeout of controller-to-broker channels.")
    # network
    .define("listeners", STRING, "PLAINTEXT://:9092", None, HIGH,
            "Comma-separated NAME://host:port addresses to listen on; an empty host means every interface.")
    .define("advertised.listeners", STRING, None, None, HIGH,
            "Addresses given to clients in metadata, if different from listeners.")
    .define("listener.security.protocol.map", STRING,
            "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT", None, LOW,
            "LISTENER_NAME:SECURITY_PROTOCOL pairs naming the protocol of each listener.")
    .define("socket.send.buffer.bytes", INT, 100 * 1024, None, HIGH, "SO_SNDBUF of server sockets; -1 for the OS default.")
    .define("socket.receive.buffer.bytes", INT, 100 * 1024, None, HIGH, "SO_RCVBUF of server sockets; -1 for the OS default.")
    .define("socket.request.max.bytes", INT, 100 * 1024 * 1024, at_least(1), HIGH, "Largest request frame accepted.")
    .define("socket.listen.backlog.size", INT, 50, at_least(1), MEDIUM, "Pending-connection backlog of each listener.")
    .define("max.connections.per.ip", INT, INT_MAX, at_least(0), MEDIUM, "Most connections allowed from one address.")
    .define("max.connections.per.ip.overrides", STRING, "", None, MEDIUM, "Per-address limits, host:count pairs.")
    .define("max.connections", INT, INT_MAX, at_least(0), MEDIUM, "Most connections the broker accepts at once.")
    .define("max.connection.creation.rate", INT, INT_MAX, at_least(0), MEDIUM, "Most new connections per second.")
    .define("connections.max.idle.ms", LONG, 600000, None, MEDIUM, "Close connections idle for longer than this.")
    .define("queued.max.requests", INT, 500, at_least(1), HIGH, "Requests queued before the network stops reading.")
    .define("num.network.threads", INT, 3, at_least(1), HIGH, "Kafka's network threads; one event loop serves here.")
    .define("num.io.threads", INT, 8, at_least(1), HIGH, "Kafka's request handler threads; accepted, unused by the loop.")
    .define("background.threads", INT, 10, at_least(1), HIGH, "Threads for background work such as file deletion.")
    .define("message.max.bytes", INT, DEFAULT_MAX_MESSAGE_BYTES, at_least(0), HIGH,
            "Largest record batch accepted, after compression.")
    .define("fetch.max.bytes", INT, 55 * 1024 * 1024, at_least(1024), MEDIUM, "Most bytes returned by one fetch request.")
    .define("max.incremental.fetch.session.cache.slots", INT, 1000, at_least(0), MEDIUM,
            "Incremental fetch sessions kept at once.")
    .define("delete.topic.enable", BOOLEAN, True, None, HIGH, "Allow DeleteTopics; when false it fails.")
    .define("compression.type", STRING, "producer", _COMPRESSION_TYPES, HIGH,
            "Codec for stored batches; producer keeps what the producer sent.")
    .define("compression.gzip.level", INT, -1, _GZIP_LEVEL, MEDIUM, "gzip level when the broker compresses.")
    .define("compression.lz4.level", INT, 9, between(1, 17), MEDIUM, "lz4 level when the broker compresses.")
    .define("compression.zstd.level", INT, 3, between(-131072, 22), MEDIUM, "zstd level when the broker compresses.")
    # replication
    .define("default.replication.factor", INT, 1, None, MEDIUM, "Replication factor of auto-created topics.")
    .define("min.insync.replicas", INT, 1, at_least(1), HIGH, "In-sync replicas an acks=-1 write needs.")
    .define("unclean.leader.election.enable", BOOLEAN, False, None, HIGH,
            "Allow an out-of-sync replica to lead, at the price of data loss.")
    .define("auto.leader.rebalance.enable", BOOLEAN, True, None, HIGH, "Move leadership back to preferred replicas.")
    .define("replica.lag.time.max.ms", LONG, 30000, None, HIGH, "A follower this far behind leaves the ISR.")
    .define("replica.socket.timeout.ms", INT, 30000, None, HIGH, "Socket timeout of follower fetches.")
    .define("replica.fetch.max.bytes", INT, 1024 * 1024, at_least(0), MEDIUM, "Bytes a follower fetches per partition.")
    .define("replica.fetch.wait.max.ms", INT, 500, None, HIGH, "Longest wait of a follower fetch.")
    .define("replica.fetch.min.bytes", INT, 1, None, HIGH, "Bytes a follower fetch waits for.")
    .define("replica.fetch.response.max.bytes", INT, 10 * 1024 * 1024, at_least(0), MEDIUM,
            "Most bytes in one follower fetch response.")
    .define("num.replica.fetchers", INT, 1, None, HIGH, "Follower fetcher threads per source broker.")
    .define("fetch.purgatory.purge.interval.requests", INT, 1000, None, MEDIUM,
            "Completed fetches that may linger in watch lists before a purge.")
    .define("producer.purgatory.purge.interval.requests", INT, 1000, None, MEDIUM,
            "Completed produces that may linger in watch lists before a purge.")
    .define("delete.records.purgatory.purge.interval.requests", INT, 1, None, MEDIUM,
            "Completed delete-records that may linger in watch lists before a purge.")
    # logs
    .define("num.partitions", INT, 1, at_least(1), MEDIUM, "Partitions of an auto-created topic.")
    .define("auto.create.topics.enable", BOOLEAN, True, None, HIGH, "Create unknown topics on metadata requests.")
    .define("log.dir", STRING, "/tmp/kafka-logs", None, HIGH,
            "Data directory, used when log.dirs is unset. Our CLI passes ./kafka-compat-data.")
    .define("log.dirs", STRING, None, None, HIGH, "Comma-separated data directories; overrides log.dir.")
    .define("num.recovery.threads.per.data.dir", INT, 1, at_least(1), HIGH,
            "Threads per data directory for recovery at start and flush at stop.")
    .define("log.segment.bytes", INT, 1024 ** 3, at_least(RECORD_OVERHEAD_V0), HIGH, "Largest size of one segment file.")
    .define("log.roll.ms", LONG, None, None, HIGH, "Roll a new segment after this long; unset means log.roll.hours.")
    .define("log.roll.hours", INT, 168, at_least(1), HIGH, "Roll a new segment after this many hours.")
    .define("log.roll.jitter.ms", LONG, None, None, HIGH,
            "Most random time taken off the roll time; unset means log.roll.jitter.hours.")
    .define("log.roll.jitter.hours", INT, 0, at_least(0), HIGH, "Roll jitter in hours.")
    .define("log.retention.ms", LONG, None, None, HIGH,
            "Keep data this long; -1 for no limit. Wins over log.retention.minutes and .hours.")
    .define("log.retention.minutes", INT, None, None, HIGH, "Retention in minutes; wins over log.retention.hours.")
    .define("log.retention.hours", INT, 168, None, HIGH, "Retention in hours, used when ms and minutes are unset.")
    .define("log.retention.bytes", LONG, -1, None, HIGH, "Largest size of a partition before old segments go; -1 for none.")
    .define("log.retention.check.interval.ms", LONG, 300000, at_least(1), MEDIUM, "How often retention is enforced.")
    .define("log.cleanup.policy", LIST, "delete", _CLEANUP_POLICIES, MEDIUM,
            "What happens to old segments: delete, compact, or both.")
    .define("log.index.size.max.bytes", INT, 10 * 1024 * 1024, at_least(4), MEDIUM, "Largest offset index file.")
    .define("log.index.interval.bytes", INT, 4096, at_least(0), MEDIUM, "Bytes appended between two index entries.")
    .define("log.flush.interval.messages", LONG, LONG_MAX, at_least(1), HIGH, "fsync after this many records.")
    .define("log.flush.interval.ms", LONG, None, None, HIGH,
            "fsync data older than this; unset means log.flush.scheduler.interval.ms.")
    .define("log.flush.scheduler.interval.ms", LONG, LONG_MAX, None, HIGH, "How often the flusher looks for work.")
    .define("log.flush.offset.checkpoint.interval.ms", INT, 60000, at_least(0), HIGH,
            "How often the recovery point is checkpointed.")
    .define("log.flush.start.offset.checkpoint.interval.ms", INT, 60000, at_least(0), HIGH,
            "How often log start offsets are checkpointed.")
    .define("log.segment.delete.delay.ms", LONG, 60000, at_least(0), HIGH, "Wait before a deleted segment's files go.")
    .define("log.preallocate", BOOLEAN, False, None, MEDIUM, "Preallocate segment files.")
    .define("log.message.format.version", STRING, "3.0-IV1", _METADATA_VERSION, MEDIUM,
            "Deprecated; ignored from 3.0 on.")
    .define("log.message.timestamp.type", STRING, "CreateTime", _TIMESTAMP_TYPES, MEDIUM,
            "Keep the producer's timestamp (CreateTime) or stamp the append time (LogAppendTime).")
    .define("log.message.timestamp.difference.max.ms", LONG, LONG_MAX, at_least(0), MEDIUM,
            "Deprecated: largest gap between record and broker time.")
    .define("log.message.timestamp.before.max.ms", LONG, LONG_MAX, at_least(0), MEDIUM,
            "How far in the past a CreateTime timestamp may be.")
    .define("log.message.timestamp.after.max.ms", LONG, LONG_MAX, at_least(0), MEDIUM,
            "How far in the future a CreateTime timestamp may be.")
    .define("log.message.downconversion.enable", BOOLEAN, True, None, LOW,
            "Down-convert batches for old fetch versions.")
    .define("log.local.retention.ms", LONG, -2, at_least(-2), MEDIUM,
            "Local retention with tiered storage; -2 means log.retention.ms.")
    .define("log.local.retention.bytes", LONG, -2, at_least(-2), MEDIUM,
            "Local size limit with tiered storage; -2 means log.retention.bytes.")
    .define("create.topic.policy.class.name", CLASS, None, None, LOW, "Class checking CreateTopics requests.")
    .define("alter.config.policy.class.name", CLASS, None, None, LOW, "Class checking AlterConfigs requests.")
    # log cleaner
    .define("log.cleaner.enable", BOOLEAN, True, None, MEDIUM, "Run the compactor; compacted topics grow without it.")
    .define("log.cleaner.threads", INT, 1, at_least(0), MEDIUM, "Compaction threads.")
    .define("log.cleaner.io.max.bytes.per.second", DOUBLE, DOUBLE_MAX, None, MEDIUM, "Compaction I/O throttle.")
    .define("log.cleaner.dedupe.buffer.size", LONG, 128 * 1024 * 1024, None, MEDIUM, "Memory for the key map of compaction.")
    .define("log.cleaner.io.buffer.size", INT, 512 * 1024, at_least(0), MEDIUM, "I/O buffer memory of compaction.")
    .define("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9, None, MEDIUM, "Fill ratio of the compaction key map.")
    .define("log.cleaner.backoff.ms", LONG, 15000, at_least(0), MEDIUM, "Sleep when nothing needs compaction.")
    .define("log.cleaner.min.cleanable.ratio", DOUBLE, 0.5, between(0, 1), MEDIUM,
            "Dirty share of a log before it is compacted.")
    .define("log.cleaner.delete.retention.ms", LONG, _DAY_MS, at_least(0), MEDIUM, "How long tombstones stay after compaction.")
    .define("log.cleaner.min.compaction.lag.ms", LONG, 0, at_least(0), MEDIUM, "Records younger than this are not compacted.")
    .define("log.cleaner.max.compaction.lag.ms", LONG, LONG_MAX, at_least(1), MEDIUM,
            "Records older than this are compacted whatever the dirty ratio.")
    # group coordinator
    .define("group.min.session.timeout.ms", INT, 6000, None, MEDIUM, "Shortest session timeout a member may ask for.")
    .define("group.max.session.timeout.ms", INT, 1800000, None, MEDIUM, "Longest session timeout a member may ask for.")
    .define("group.initial.rebalance.delay.ms", INT, 3000, None, MEDIUM, "Wait for more members before the first rebalance.")
    .define("group.max.size", INT, INT_MAX, at_least(1), MEDIUM, "Most members in one group.")
    .define("offset.metadata.max.bytes", INT, 4096, None, HIGH, "Largest metadata string of a committed offset.")
    .define("offsets.load.buffer.size", INT, 5 * 1024 * 1024, at_least(1), HIGH, "Read size when loading offsets.")
    .define("offsets.topic.replication.factor", SHORT, 3, at_least(1), HIGH, "Replication factor of __consumer_offsets.")
    .define("offsets.topic.num.partitions", INT, 50, at_least(1), HIGH, "Partitions of __consumer_offsets.")
    .define("offsets.topic.segment.bytes", INT, 100 * 1024 * 1024, at_least(1), HIGH, "Segment size of __consumer_offsets.")
    .define("offsets.topic.compression.codec", INT, 0, None, HIGH, "Codec id for offset commits (0 = none).")
    .define("offsets.retention.minutes", INT, 7 * 24 * 60, at_least(1), HIGH, "Keep offsets of an empty group this long.")
    .define("offsets.retention.check.interval.ms", LONG, 600000, at_least(1), HIGH, "How often stale offsets are removed.")
    .define("offsets.commit.timeout.ms", INT, 5000, at_least(1), HIGH, "Wait for an offset commit to be replicated.")
    # transactions and producer state
    .define("transaction.state.log.num.partitions", INT, 50, at_least(1), HIGH, "Partitions of __transaction_state.")
    .define("transaction.state.log.replication.factor", SHORT, 3, at_least(1), HIGH,
            "Replication factor of __transaction_state.")
    .define("transaction.state.log.min.isr", INT, 2, at_least(1), HIGH, "min.insync.replicas of __transaction_state.")
    .define("transaction.state.log.segment.bytes", INT, 100 * 1024 * 1024, at_least(1), HIGH,
            "Segment size of __transaction_state.")
    .define("transaction.state.log.load.buffer.size", INT, 5 * 1024 * 1024, at_least(1), HIGH,
            "Read size when loading transactions.")
    .define("transactional.id.expiration.ms", INT, 7 * _DAY_MS, at_least(1), HIGH,
            "Forget a transactional id idle this long.")
    .define("transaction.max.timeout.ms", INT, 900000, at_least(1), HIGH, "Longest transaction timeout a producer may ask for.")
    .define("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10000, at_least(1), LOW,
            "How often timed-out transactions are aborted.")
    .define("transaction.remove.expired.transaction.cleanup.interval.ms", INT, _HOUR_MS, at_least(1), LOW,
            "How often expired transactional ids are removed.")
    .define("transaction.partition.verification.enable", BOOLEAN, True, None, LOW,
            "Check that a transactional write's partition was added to the transaction.")
    .define("producer.id.expiration.ms", INT, _DAY_MS, at_least(1), LOW, "Forget an idle producer id's state after this.")
    # security
    .define("ssl.keystore.type", STRING, "JKS", None, MEDIUM, "Key store format.")
    .define("ssl.keystore.location", STRING, None, None, HIGH, "Key store file.")
    .define("ssl.keystore.password", PASSWORD, None, None, HIGH, "Key store password.")
    .define("ssl.key.password", PASSWORD, None, None, HIGH, "Private key password.")
    .define("ssl.truststore.type", STRING, "JKS", None, MEDIUM, "Trust store format.")
    .define("ssl.truststore.location", STRING, None, None, HIGH, "Trust store file.")
    .define("ssl.truststore.password", PASSWORD, None, None, HIGH, "Trust store password.")
    .define("ssl.client.auth", STRING, "none", ValidString("required", "requested", "none"), MEDIUM,
            "Whether clients must present a certificate.")
    .define("sasl.enabled.mechanisms", LIST, "GSSAPI", None, MEDIUM, "SASL mechanisms offered to clients.")
    .define("sasl.jaas.config", PASSWORD, None, None, MEDIUM, "JAAS login settings.")
)


# -- topic-level configs and their broker synonyms -------------------------------------

class ConfigSynonym(NamedTuple):
    """A broker property standing in for a topic property, with a unit conversion."""

    name: str
    to_topic_unit: int = 1  # multiply the broker value by this (hours/minutes -> ms)


def _s(*names: str) -> tuple[ConfigSynonym, ...]:
    units = {"hours": _HOUR_MS, "minutes": _MINUTE_MS}
    return tuple(ConfigSynonym(n, units.get(n.rsplit(".", 1)[-1], 1)) for n in names)


# Topic config -> broker synonyms, highest priority first (ServerTopicConfigSynonyms).
TOPIC_CONFIG_SYNONYMS: dict[str, tuple[ConfigSynonym, ...]] = {
    "segment.bytes": _s("log.segment.bytes"),
    "segment.ms": _s("log.roll.ms", "log.roll.hours"),
    "segment.jitter.ms": _s("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segment.index.bytes": _s("log.index.size.max.bytes"),
    "flush.messages": _s("log.flush.interval.messages"),
    "flush.ms": _s("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "retention.bytes": _s("log.retention.bytes"),
    "retention.ms": _s("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "max.message.bytes": _s("message.max.bytes"),
    "index.interval.bytes": _s("log.index.interval.bytes"),
    "delete.retention.ms": _s("log.cleaner.delete.retention.ms"),
    "min.compaction.lag.ms": _s("log.cleaner.min.compaction.lag.ms"),
    "max.compaction.lag.ms": _s("log.cleaner.max.compaction.lag.ms"),
    "file.delete.delay.ms": _s("log.segment.delete.delay.ms"),
    "min.cleanable.dirty.ratio": _s("log.cleaner.min.cleanable.ratio"),
    "cleanup.policy": _s("log.cleanup.policy"),
    "unclean.leader.election.enable": _s("unclean.leader.election.enable"),
    "min.insync.replicas": _s("min.insync.replicas"),
    "compression.type": _s("compression.type"),
    "compression.gzip.level": _s("compression.gzip.level"),
    "compression.lz4.level": _s("compression.lz4.level"),
    "compression.zstd.level": _s("compression.zstd.level"),
    "preallocate": _s("log.preallocate"),
    "message.format.version": _s("log.message.format.version"),
    "message.timestamp.type": _s("log.message.timestamp.type"),
    "message.timestamp.difference.max.ms": _s("log.message.timestamp.difference.max.ms"),
    "message.timestamp.before.max.ms": _s("log.message.timestamp.before.max.ms"),
    "message.timestamp.after.max.ms": _s("log.message.timestamp.after.max.ms"),
    "message.downconversion.enable": _s("log.message.downconversion.enable"),
    "local.retention.ms": _s("log.local.retention.ms"),
    "local.retention.bytes": _s("log.local.retention.bytes"),
}


def _like_broker(name: str, importance: Importance = MEDIUM, doc: str | None = None) -> tuple:
    """A topic key with the type, default, validator and doc of its primary broker synonym."""
    base = BROKER_CONFIG_DEF[TOPIC_CONFIG_SYNONYMS[name][0].name]
    return name, base.type, base.default, base.validator, importance, doc or base.doc


# Kafka's LogConfig, in Kafka's order.
TOPIC_CONFIG_DEF = ConfigDef()
for _args in (
    _like_broker("segment.bytes"),
    ("segment.ms", LONG, 7 * _DAY_MS, at_least(1), MEDIUM, "Roll a new segment after this long."),
    ("segment.jitter.ms", LONG, 0, at_least(0), MEDIUM, "Most random time taken off segment.ms."),
    _like_broker("segment.index.bytes"),
    _like_broker("flush.messages"),
    ("flush.ms", LONG, LONG_MAX, at_least(0), MEDIUM, "fsync data older than this."),
    _like_broker("retention.bytes"),
    ("retention.ms", LONG, 7 * _DAY_MS, at_least(-1), MEDIUM, "Keep data this long; -1 for no limit."),
    _like_broker("max.message.bytes"),
    _like_broker("index.interval.bytes"),
    _like_broker("delete.retention.ms"),
    _like_broker("min.compaction.lag.ms"),
    _like_broker("max.compaction.lag.ms"),
    _like_broker("file.delete.delay.ms"),
    _like_broker("min.cleanable.dirty.ratio"),
    _like_broker("cleanup.policy"),
    _like_broker("unclean.leader.election.enable"),
    _like_broker("min.insync.replicas"),
    _like_broker("compression.type"),
    _like_broker("compression.gzip.level"),
    _like_broker("compression.lz4.level"),
    _like_broker("compression.zstd.level"),
    _like_broker("preallocate"),
    _like_broker("message.format.version"),
    _like_broker("message.timestamp.type"),
    _like_broker("message.timestamp.difference.max.ms"),
    _like_broker("message.timestamp.before.max.ms"),
    _like_broker("message.timestamp.after.max.ms"),
    ("leader.replication.throttled.replicas", LIST, "", None, MEDIUM,
     "partition:broker pairs (or *) throttled on the leader side."),
    ("follower.replication.throttled.replicas", LIST, "", None, MEDIUM,
     "partition:broker pairs (or *) throttled on the follower side."),
    _like_broker("message.downconversion.enable", LOW),
    ("remote.storage.enable", BOOLEAN, False, None, MEDIUM, "Tiered storage for this topic (not supported here)."),
    _like_broker("local.retention.ms", doc="Local retention with tiered storage; -2 means retention.ms."),
    _like_broker("local.retention.bytes", doc="Local size limit with tiered storage; -2 means retention.bytes."),
    ("remote.log.copy.disable", BOOLEAN, False, None, MEDIUM, "Stop copying segments to tiered storage."),
    ("remote.log.delete.on.disable", BOOLEAN, False, None, MEDIUM, "Delete tiered data when tiering is switched off."),
):
    TOPIC_CONFIG_DEF.define(*_args)
del _args


def broker_config_synonyms(name: str) -> list[str]:
    """Broker properties that stand for the same setting, highest priority first
    (DynamicBrokerConfig.brokerConfigSynonyms): log.retention.hours -> ms, minutes, hours."""
    for synonyms in TOPIC_CONFIG_SYNONYMS.values():
        if len(synonyms) > 1 and any(s.name == name for s in synonyms):
            return [s.name for s in synonyms]
    return [name]


# Broker properties Kafka can change at runtime; every other broker property is read-only.
DYNAMIC_BROKER_CONFIGS = frozenset(
    {s[0].name for t, s in TOPIC_CONFIG_SYNONYMS.items() if t != "message.format.version"} | {
        "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
        "message.max.bytes", "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
        "background.threads", "listeners", "advertised.listeners", "listener.security.protocol.map",
        "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
        "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.client.auth",
        "sasl.enabled.mechanisms", "sasl.jaas.config", "max.connections", "max.connection.creation.rate",
        "max.connections.per.ip", "max.connections.per.ip.overrides", "num.network.threads",
        "producer.id.expiration.ms", "transaction.partition.verification.enable",
    })

# Values DescribeConfigs must hide: PASSWORD types (and anything of unknown type).
SENSITIVE_BROKER_CONFIGS = frozenset(n for n, k in BROKER_CONFIG_DEF.config_keys.items() if k.type is PASSWORD)
READ_ONLY_BROKER_CONFIGS = frozenset(n for n in BROKER_CONFIG_DEF if n not in DYNAMIC_BROKER_CONFIGS)
# Topic configs are never read-only, and none is of PASSWORD type.


# -- .properties files -------------------------------------------------------------------

_NEWLINE = re.compile(r"\r\n|\r|\n")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WS = " \t\f"


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text (java.util.Properties.load rules)."""
    lines = _NEWLINE.split(text)
    props: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue  # blank or comment; a comment never continues onto the next line
        while _odd_trailing_backslashes(line):
            line = line[:-1]
            if i == len(lines):
                break
            line += lines[i].lstrip(_WS)
            i += 1
        key, value = _split_key_value(line)
        props[_unescape(key)] = _unescape(value)
    return props


def _odd_trailing_backslashes(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    escaped = False
    end = len(line)
    has_sep = False
    for pos, c in enumerate(line):
        if not escaped and c in "=:":
            end, has_sep = pos, True
            break
        if not escaped and c in _WS:
            end = pos
            break
        escaped = c == "\\" and not escaped
    start = end + 1 if end < len(line) else end
    while start < len(line):
        c = line[start]
        if c not in _WS:
            if has_sep or c not in "=:":
                break
            has_sep = True
        start += 1
    return line[:end], line[start:]


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        i += 1
        if c != "\\" or i == len(s):
            out.append(c)
            continue
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i:i + 4]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError("Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    text = "".join(out)
    # \uD83D\uDE00 is one character written as two UTF-16 halves.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def load_properties(path: str | os.PathLike) -> dict[str, str]:
    """Read a ``.properties`` file. Java reads ISO-8859-1; we read UTF-8 and fall back
    to ISO-8859-1, which is the same for ASCII files and right for UTF-8 ones."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text)


# -- broker configuration -----------------------------------------------------------------


class EndPoint(NamedTuple):
    """One listener; ``host`` None means every interface."""

    listener_name: str
    security_protocol: str
    host: str | None
    port: int


_LISTENER_RE = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")


def parse_listener_security_protocol_map(name: str, text: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` into a dict, refusing unknown protocols and repeated names."""
    result: dict[str, str] = {}
    for item in filter(None, _LIST_SPLIT.split(text.strip())):
        listener, sep, protocol = item.partition(":")
        listener, protocol = listener.strip().upper(), protocol.strip().upper()
        if not sep or not listener or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(name, text, f"Invalid security protocol in '{item}'")
        if listener in result:
            raise ConfigError(name, text, f"Duplicate listener name {listener}")
        result[listener] = protocol
    return result


def parse_listeners(name: str, text: str, protocol_map: Mapping[str, str]) -> list[EndPoint]:
    """``NAME://host:port,...`` into EndPoints; names must be distinct, and so must ports (but 0)."""
    endpoints = []
    for item in filter(None, _LIST_SPLIT.split(text.strip())):
        m = _LISTENER_RE.fullmatch(item)
        if not m:
            raise ConfigError(name, text, f"Unable to parse {item} to a broker endpoint")
        listener = m.group(1).upper()
        if listener not in protocol_map:
            raise ConfigError(name, text, f"No security protocol defined for listener {listener}")
        port = int(m.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(name, text, f"Invalid port {port}")
        endpoints.append(EndPoint(listener, protocol_map[listener], m.group(2) or None, port))
    if len({e.listener_name for e in endpoints}) != len(endpoints):
        raise ConfigError(name, text, "Each listener must have a different name")
    ports = [e.port for e in endpoints if e.port != 0]
    if len(set(ports)) != len(ports):
        raise ConfigError(name, text, "Each listener must have a different port")
    return endpoints


class BrokerConfig(_DictView):
    """A validated broker configuration: ``cfg["log.segment.bytes"]`` gives the typed value.

    ``originals`` holds what was set explicitly (file, then overrides), as given;
    unknown names are kept there and in ``unknown``, as Kafka keeps them.
    """

    def __init__(self, props: Mapping[str, Any] | None = None) -> None:
        originals = {str(k): v for k, v in (props or {}).items()}
        # broker.id and node.id are one setting under two names.
        if "broker.id" in originals and "node.id" not in originals:
            originals["node.id"] = originals["broker.id"]
        elif "node.id" in originals and "broker.id" not in originals:
            originals["broker.id"] = originals["node.id"]
        self.originals: dict[str, Any] = originals
        self.unknown = {k: v for k, v in originals.items() if k not in BROKER_CONFIG_DEF}
        self._data = BROKER_CONFIG_DEF.parse(originals)  # typed value of every defined name
        self._validate()

    @classmethod
    def from_properties(cls, source: str | os.PathLike | Mapping[str, Any] | None = None,
                        overrides: Mapping[str, Any] | None = None) -> BrokerConfig:
        """Build from a ``.properties`` path or a dict, then apply overrides (CLI flags)."""
        if source is None:
            props: dict[str, Any] = {}
        elif isinstance(source, Mapping):
            props = dict(source)
        else:
            props = load_properties(source)
        props.update(overrides or {})
        return cls(props)

    def is_set(self, name: str) -> bool:
        """True if the property was given explicitly (file or override)."""
        return name in self.originals

    def static_configs(self) -> dict[str, str]:
        """Explicit settings as strings (Kafka's staticBrokerConfigs), passwords in clear."""
        out = {}
        for name, raw in self.originals.items():
            key = BROKER_CONFIG_DEF.config_keys.get(name)
            if isinstance(raw, Password):
                out[name] = raw.value
            elif isinstance(raw, str):
                out[name] = raw
            else:
                out[name] = convert_to_string(raw, key.type if key else None)
        return out

    # -- conveniences ------------------------------------------------------------------

    @property
    def broker_id(self) -> int:
        return self["broker.id"]

    @property
    def node_id(self) -> int:
        return self["node.id"]

    @property
    def log_dirs(self) -> list[str]:
        raw = self["log.dirs"] if self["log.dirs"] is not None else self["log.dir"]
        return [d for d in _LIST_SPLIT.split(raw.strip()) if d]

    @property
    def log_retention_ms(self) -> int:
        """log.retention.ms, else .minutes, else .hours; any negative means -1 (no limit)."""
        if self["log.retention.ms"] is not None:
            ms = self["log.retention.ms"]
        elif self["log.retention.minutes"] is not None:
            ms = self["log.retention.minutes"] * _MINUTE_MS
        else:
            ms = self["log.retention.hours"] * _HOUR_MS
        return -1 if ms < 0 else ms

    @property
    def log_roll_ms(self) -> int:
        ms = self["log.roll.ms"]
        return ms if ms is not None else self["log.roll.hours"] * _HOUR_MS

    @property
    def log_roll_jitter_ms(self) -> int:
        ms = self["log.roll.jitter.ms"]
        return ms if ms is not None else self["log.roll.jitter.hours"] * _HOUR_MS

    @property
    def log_flush_interval_ms(self) -> int:
        ms = self["log.flush.interval.ms"]
        return ms if ms is not None else self["log.flush.scheduler.interval.ms"]

    @property
    def listener_security_protocol_map(self) -> dict[str, str]:
        return parse_listener_security_protocol_map("listener.security.protocol.map",
                                                    self["listener.security.protocol.map"])

    @property
    def listeners(self) -> list[EndPoint]:
        return parse_listeners("listeners", self["listeners"], self.listener_security_protocol_map)

    @property
    def advertised_listeners(self) -> list[EndPoint]:
        """advertised.listeners, or listeners when unset."""
        if self["advertised.listeners"] is None:
            return self.listeners
        return parse_listeners("advertised.listeners", self["advertised.listeners"],
                               self.listener_security_protocol_map)

    def topic_defaults(self) -> dict[str, Any]:
        """Topic-level values this broker gives topics without overrides (extractLogConfigMap)."""
        derived = {"segment.ms": self.log_roll_ms, "segment.jitter.ms": self.log_roll_jitter_ms,
                   "flush.ms": self.log_flush_interval_ms, "retention.ms": self.log_retention_ms}
        out = {}
        for name, key in TOPIC_CONFIG_DEF.config_keys.items():
            if name in derived:
                out[name] = derived[name]
            elif name in TOPIC_CONFIG_SYNONYMS:
                out[name] = self[TOPIC_CONFIG_SYNONYMS[name][0].name]
            else:
                out[name] = key.default
        return out

    def _validate(self) -> None:
        if self.broker_id != self.node_id:
            raise ConfigError("node.id", self.node_id, "node.id must be the same value as broker.id")
        if self.broker_id < 0:
            raise ConfigError("broker.id", self.broker_id,
                              "must be at least 0: this broker does not generate ids")
        if self.log_roll_ms < 1:
            raise ConfigError("log.roll.ms", self.log_roll_ms, "log.roll.ms must be at least 1")
        if self.log_roll_jitter_ms < 0:
            raise ConfigError("log.roll.jitter.ms", self.log_roll_jitter_ms, "log.roll.jitter.ms must be at least 0")
        if self.log_retention_ms == 0:
            raise ConfigError("log.retention.ms", 0, "log.retention.ms must be unlimited (-1) or at least 1")
        if not self.log_dirs:
            raise ConfigError("log.dirs", self["log.dirs"],
                              "At least one log directory must be defined via log.dirs or log.dir.")
        for name in ("replica.socket.timeout.ms", "replica.lag.time.max.ms"):
            if self["replica.fetch.wait.max.ms"] > self[name]:
                raise ConfigError("replica.fetch.wait.max.ms", self["replica.fetch.wait.max.ms"],
                                  f"must not exceed {name}")
        protocol_map = self.listener_security_protocol_map
        listeners = parse_listeners("listeners", self["listeners"], protocol_map)
        if self["advertised.listeners"] is not None:
            advertised = parse_listeners("advertised.listeners", self["advertised.listeners"], protocol_map)
            if any(e.host == "0.0.0.0" for e in advertised):
                raise ConfigError("advertised.listeners", self["advertised.listeners"],
                                  "cannot use the nonroutable meta-address 0.0.0.0")
            if not {e.listener_name for e in advertised} <= {e.listener_name for e in listeners}:
                raise ConfigError("advertised.listeners", self["advertised.listeners"],
                                  "listener names must be equal to or a subset of those in listeners")


# -- DescribeConfigs view ---------------------------------------------------------------


class ConfigSynonymEntry(NamedTuple):
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """One row of a DescribeConfigs answer.

    ``source`` and ``synonyms`` are what Kafka's DescribeConfigs reports;
    ``effective_source`` is where the value really came from (what CreateTopics
    v5+ reports). They differ when a lower synonym supplies the value, e.g.
    log.retention.hours set but log.retention.ms not: Kafka's DescribeConfigs
    then drops every synonym before the primary one and says DEFAULT_CONFIG.
    """

    name: str
    value: str | None
    source: ConfigSource
    effective_source: ConfigSource
    is_sensitive: bool
    read_only: bool
    synonyms: tuple[ConfigSynonymEntry, ...]
    config_type: ConfigType
    documentation: str
    parsed: Any = None


_BROKER_DEFAULT_STRINGS = BROKER_CONFIG_DEF.default_strings()


def _synonym_entries(primary: str, cfg: BrokerConfig, dynamic_broker: Mapping[str, str],
                     dynamic_default: Mapping[str, str], sensitive: bool) -> list[ConfigSynonymEntry]:
    """Kafka's ConfigHelper.configSynonyms: tier by tier, each synonym in order, then drop
    everything before the first entry that names ``primary``."""
    names = broker_config_synonyms(primary)
    tiers = ((dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
             (dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
             (cfg.static_configs(), ConfigSource.STATIC_BROKER_CONFIG),
             (_BROKER_DEFAULT_STRINGS, ConfigSource.DEFAULT_CONFIG))
    entries = [ConfigSynonymEntry(n, None if sensitive else values[n], source)
               for values, source in tiers for n in names if n in values]
    for i, entry in enumerate(entries):
        if entry.name == primary:
            return entries[i:]
    return []


def validate_topic_configs(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Typed topic overrides; unknown names and bad values raise ConfigError (INVALID_CONFIG)."""
    parsed = {}
    for name, raw in overrides.items():
        key = TOPIC_CONFIG_DEF.config_keys.get(name)
        if key is None:
            raise ConfigError(name, message=f"Unknown topic config name: {name}")
        parsed[name] = key.parse(raw)
    return parsed


def effective_topic_config(broker_cfg: BrokerConfig, overrides: Mapping[str, Any] | None = None, *,
                           dynamic_broker_configs: Mapping[str, str] | None = None,
                           dynamic_default_broker_configs: Mapping[str, str] | None = None,
                           ) -> dict[str, ConfigEntry]:
    """Every topic-level config of a topic: value, sources, synonyms, type and doc.

    ``overrides`` are the topic's own settings (DYNAMIC_TOPIC_CONFIG); the
    dynamic broker maps hold settings altered at runtime, if any.
    """
    topic = validate_topic_configs(overrides or {})
    dyn_broker = dict(dynamic_broker_configs or {})
    dyn_default = dict(dynamic_default_broker_configs or {})
    defaults = broker_cfg.topic_defaults()
    merged = {**defaults, **topic}
    min_lag, max_lag = merged["min.compaction.lag.ms"], merged["max.compaction.lag.ms"]
    if max_lag < min_lag:
        raise ConfigError("max.compaction.lag.ms", max_lag, f"must not be less than min.compaction.lag.ms ({min_lag})")
    result = {}
    for name, key in TOPIC_CONFIG_DEF.config_keys.items():
        synonyms = TOPIC_CONFIG_SYNONYMS.get(name, ())
        value, effective = _resolve(name, synonyms, topic, dyn_broker, dyn_default, broker_cfg, defaults)
        text = convert_to_string(value, key.type)
        entries = []
        if name in topic:
            entries.append(ConfigSynonymEntry(name, text, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        if synonyms:
            entries += _synonym_entries(synonyms[0].name, broker_cfg, dyn_broker, dyn_default, False)
        source = entries[0].source if entries else ConfigSource.DEFAULT_CONFIG
        result[name] = ConfigEntry(name, text, source, effective, key.type is PASSWORD, False,
                                   tuple(entries), key.type, key.doc, value)
    return result


def _resolve(name: str, synonyms: tuple[ConfigSynonym, ...], topic: Mapping[str, Any],
             dyn_broker: Mapping[str, str], dyn_default: Mapping[str, str],
             broker_cfg: BrokerConfig, defaults: Mapping[str, Any]) -> tuple[Any, ConfigSource]:
    """The value a topic uses, and its origin, in KafkaConfigSchema's order."""
    if name in topic:
        return topic[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
    for values, source in ((dyn_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                           (dyn_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)):
        for syn in synonyms:
            if syn.name in values:
                value = BROKER_CONFIG_DEF[syn.name].parse(values[syn.name])
                if syn.to_topic_unit != 1:
                    value *= syn.to_topic_unit
                if name == "retention.ms" and value < 0:
                    value = -1  # as KafkaConfig.logRetentionTimeMillis
                return value, source
    value = defaults[name]
    if any(broker_cfg.is_set(s.name) for s in synonyms):
        return value, ConfigSource.STATIC_BROKER_CONFIG
    return value, ConfigSource.DEFAULT_CONFIG


def describe_broker_config(broker_cfg: BrokerConfig, *,
                           dynamic_broker_configs: Mapping[str, str] | None = None,
                           dynamic_default_broker_configs: Mapping[str, str] | None = None,
                           ) -> dict[str, ConfigEntry]:
    """Every broker config as DescribeConfigs reports it for this broker's resource."""
    dyn_broker = dict(dynamic_broker_configs or {})
    dyn_default = dict(dynamic_default_broker_configs or {})
    result = {}
    for name, key in BROKER_CONFIG_DEF.config_keys.items():
        sensitive = key.type is PASSWORD
        value = broker_cfg[name]
        for values in (dyn_broker, dyn_default):
            if name in values:
                value = key.parse(values[name])
                break
        entries = tuple(_synonym_entries(name, broker_cfg, dyn_broker, dyn_default, sensitive))
        source = entries[0].source if entries else ConfigSource.DEFAULT_CONFIG
        text = None if sensitive else convert_to_string(value, key.type)
        result[name] = ConfigEntry(name, text, source, source, sensitive, name not in DYNAMIC_BROKER_CONFIGS,
                                   entries, key.type, key.doc, value)
    return result
