"""ClientMetricsManager: client telemetry (KIP-714), and the CLIENT_METRICS subscriptions that drive it.

An operator names the metrics to collect in CLIENT_METRICS config resources (`metrics` prefixes,
`interval.ms`, `match` selectors on the client's id, software and address). A client asks
GetTelemetrySubscriptions which apply to it (the union of the matching subscriptions, the shortest
interval), then pushes its metrics as OTLP protobuf every interval. Kafka hands the payload to an
exporter plugin and has none of its own; here the payload is decoded (opentelemetry-proto) and each
client's latest values are served on the broker's /metrics under the client's labels, until the
client goes quiet for max(60 s, 3 intervals).

The validation, the errors and the pacing of requests are Kafka's. Everything runs on the event loop.
"""
from __future__ import annotations

import base64
import logging
import os
import re
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

import crc32c
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from ..configdef import INT, LIST, MEDIUM, ConfigDef
from ..protocol.compression import CompressionError, DecompressedSizeError, decompress
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.primitives import ZERO_UUID

log = logging.getLogger(__name__)

CLIENT_METRICS_CONFIG_DEF = (
    ConfigDef()
    .define("interval.ms", INT, 300_000, None, MEDIUM, "Metrics push interval in milliseconds")
    .define("match", LIST, "", None, MEDIUM, "Client match criteria")
    .define("metrics", LIST, "", None, MEDIUM, "Telemetry metric name prefix list"))
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
MATCH_PARAMS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
                "client_source_address", "client_source_port")
ALL_METRICS = "*"
# ZSTD, LZ4, GZIP, SNAPPY: Kafka's preference order; a client compresses with the first it has
ACCEPTED_COMPRESSION_TYPES = [4, 3, 1, 2]
CACHE_MAX_SIZE = 16384
CACHE_EXPIRY_MS = 60_000
ONE_UUID = bytes(15) + b"\x01"


def parse_match(patterns: list[str]) -> dict[str, re.Pattern]:
    """`param=regex` selectors, as ClientMetricsConfigs.parseMatchingPatterns reads them."""
    out = {}
    for pattern in patterns:
        parts = pattern.split("=")
        while len(parts) > 1 and not parts[-1]:
            parts.pop()                                 # Java's split drops trailing empty strings
        param = parts[0].strip() if len(parts) == 2 else ""
        if param not in MATCH_PARAMS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")
        try:
            out[param] = re.compile(parts[1].strip())
        except re.error:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}") from None
    return out


def validate_subscription(name: str, configs: Mapping[str, str | None]) -> None:
    """Kafka's ClientMetricsConfigs.validate: the name, then every key, then interval.ms and match."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key in configs:
        if key not in CLIENT_METRICS_CONFIG_DEF:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    if configs.get("interval.ms") is not None:
        interval = CLIENT_METRICS_CONFIG_DEF["interval.ms"].parse(configs["interval.ms"])
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid value {interval} for interval.ms, interval must "
                                                        f"be between {MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)")
    if configs.get("match") is not None:
        parse_match(configs["match"].split(","))


@dataclass(frozen=True)
class Subscription:
    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: dict[str, re.Pattern]

    @classmethod
    def from_configs(cls, name: str, configs: Mapping[str, str]) -> Subscription:
        values = CLIENT_METRICS_CONFIG_DEF.parse(configs)
        return cls(name, frozenset(values["metrics"]), values["interval.ms"], parse_match(values["match"]))


@dataclass
class ClientInstance:
    """One client instance's subscription and its pacing (Kafka's ClientMetricsInstance)."""

    instance_id: bytes
    labels: dict[str, str]              # the match parameters, as the client presented itself
    subscription_id: int
    version: int                        # of the subscriptions it was computed from
    metrics: list[str]
    push_interval_ms: int
    last_get_ms: float = -1e18
    last_push_ms: float = -1e18
    terminating: bool = False
    last_error: int = ErrorCode.NONE
    expires_ms: float = 0.0
    values: dict = field(default_factory=dict)   # (name, kind, help, label items) -> value, for /metrics

    def may_get(self, now: float) -> bool:
        if now - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now
            return True
        return False

    def may_push(self, now: float) -> bool:
        """A push straight after a GetTelemetrySubscriptions is accepted early: clients add jitter."""
        ok = self.last_get_ms > self.last_push_ms or now - self.last_push_ms >= self.push_interval_ms
        if ok:
            self.last_push_ms = now
        return ok


def uuid_hash(instance_id: bytes) -> int:
    """Java's Uuid.hashCode, as a signed int."""
    h = int.from_bytes(instance_id[:8], "big") ^ int.from_bytes(instance_id[8:], "big")
    return _int32((h >> 32) ^ (h & 0xFFFFFFFF))


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def subscription_id(metrics: list[str], interval_ms: int, instance_id: bytes) -> int:
    """CRC32C of the metric set and interval, XORed with the instance id's hash (Kafka's computeSubscriptionId)."""
    text = ("[" + ", ".join(metrics) + "]" + str(interval_ms)).encode()
    return _int32(_int32(crc32c.crc32c(text)) ^ uuid_hash(instance_id))


class ClientMetricsManager:
    def __init__(self, telemetry_max_bytes: int, clock=lambda: time.monotonic() * 1000):
        self.telemetry_max_bytes = telemetry_max_bytes
        self.clock = clock
        self.subscriptions: dict[str, Subscription] = {}
        self.configs: dict[str, dict[str, str]] = {}     # each subscription's configs as stored
        self.version = 0
        self.instances: OrderedDict[bytes, ClientInstance] = OrderedDict()

    # -- subscriptions (the CLIENT_METRICS config entities) ----------------------------------
    def update_subscription(self, name: str, configs: Mapping[str, str]) -> None:
        """The config store's handler: a subscription's configs now (none: it is gone)."""
        if configs:
            self.configs[name] = dict(configs)
        else:
            self.configs.pop(name, None)
        if configs:
            try:
                self.subscriptions[name] = Subscription.from_configs(name, configs)
            except KafkaError as e:
                log.error("ignoring client metrics subscription %s: %s", name, e.message)
                return
        elif self.subscriptions.pop(name, None) is None:
            return
        self.version += 1

    def names(self) -> list[str]:
        return sorted(self.subscriptions)

    # -- client instances ---------------------------------------------------------------------
    def _instance(self, instance_id: bytes, labels: dict[str, str], now: float) -> ClientInstance:
        inst = self.instances.get(instance_id)
        if inst is None or inst.version < self.version:
            inst = self._evaluate(instance_id, inst.labels if inst is not None else labels, inst)
            self.instances[instance_id] = inst
            while len(self.instances) > CACHE_MAX_SIZE:
                self.instances.popitem(last=False)
        self.instances.move_to_end(instance_id)
        inst.expires_ms = now + max(CACHE_EXPIRY_MS, 3 * inst.push_interval_ms)
        return inst

    def _evaluate(self, instance_id: bytes, labels: dict[str, str], old: ClientInstance | None) -> ClientInstance:
        interval, metrics, everything = CLIENT_METRICS_CONFIG_DEF["interval.ms"].default, set(), False
        for sub in self.subscriptions.values():
            if all(k in labels and p.fullmatch(labels[k]) for k, p in sub.match.items()):
                everything = everything or ALL_METRICS in sub.metrics
                metrics |= sub.metrics
                interval = min(interval, sub.interval_ms)
        chosen = [ALL_METRICS] if everything else sorted(metrics)
        inst = ClientInstance(instance_id, labels, subscription_id(chosen, interval, instance_id), self.version,
                              chosen, interval)
        if old is not None:     # a changed subscription is given out at once, as a new instance; the values stay
            inst.values = old.values
        return inst

    def expire(self) -> None:
        now = self.clock()
        for instance_id in [i for i, inst in self.instances.items() if inst.expires_ms <= now]:
            del self.instances[instance_id]

    def get_subscriptions(self, instance_id: bytes, labels: dict[str, str]) -> tuple[int, ClientInstance]:
        """(error code, the instance) for GetTelemetrySubscriptions; a zero id is given a new one."""
        self.expire()
        now = self.clock()
        if instance_id == ZERO_UUID:
            instance_id = _new_instance_id(self.instances)
        labels = dict(labels, client_instance_id=_uuid_text(instance_id))
        inst = self._instance(instance_id, labels, now)
        if not inst.may_get(now) and inst.last_error not in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                                                             ErrorCode.UNSUPPORTED_COMPRESSION_TYPE):
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED, inst
        inst.last_error = ErrorCode.NONE
        return ErrorCode.NONE, inst

    def push(self, instance_id: bytes, labels: dict[str, str], subscription: int, terminating: bool,
             compression: int, payload) -> int:
        """The error code of a PushTelemetry, as Kafka checks it; the metrics are kept for /metrics."""
        self.expire()
        if instance_id in (ZERO_UUID, ONE_UUID):
            return ErrorCode.INVALID_REQUEST
        now = self.clock()
        inst = self._instance(instance_id, dict(labels, client_instance_id=_uuid_text(instance_id)), now)
        try:
            code = self._check_push(inst, now, subscription, terminating, compression, payload)
        finally:
            inst.terminating = terminating
        if code == ErrorCode.NONE and payload:
            code = self._export(inst, compression, payload)
        inst.last_error = code
        return code

    def _check_push(self, inst: ClientInstance, now: float, subscription: int, terminating: bool,
                    compression: int, payload) -> int:
        if inst.terminating:
            return ErrorCode.INVALID_REQUEST
        if not inst.may_push(now) and not terminating:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        if subscription != inst.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if compression not in (0, 1, 2, 3, 4):
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if payload is not None and len(payload) > self.telemetry_max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE
        return ErrorCode.NONE

    def _export(self, inst: ClientInstance, compression: int, payload) -> int:
        try:
            raw = decompress(compression, payload, max_size=self.telemetry_max_bytes)
        except DecompressedSizeError:   # retryable, unlike a malformed payload (which stops the client pushing)
            return ErrorCode.TELEMETRY_TOO_LARGE
        except CompressionError:
            return ErrorCode.INVALID_RECORD
        data = MetricsData()
        try:
            data.ParseFromString(raw)
        except Exception:      # protobuf's DecodeError, or worse: the payload is not OTLP
            return ErrorCode.INVALID_RECORD
        base = tuple(sorted(inst.labels.items()))
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    _record(inst.values, metric, base)
        return ErrorCode.NONE

    def snapshot(self) -> list[tuple[str, str, str, tuple, float]]:
        """(name, kind, help, labels, value) of every live client's latest metrics, for /metrics."""
        self.expire()
        return [(name, kind, doc, labels, value) for inst in self.instances.values()
                for (name, kind, doc, labels), value in inst.values.items()]


_NAME = re.compile(r"[^a-zA-Z0-9_]")
_RESERVED_SUFFIXES = ("_total", "_count", "_sum", "_bucket", "_created", "_info")


def prometheus_name(otlp_name: str, counter: bool) -> str:
    """An OTLP metric name as a valid Prometheus name that promtool's lint accepts: counters end in
    _total, and no other kind ends in a suffix the text format reserves."""
    name = _NAME.sub("_", otlp_name)
    if name[:1].isdigit():
        name = "_" + name
    if counter:
        return name if name.endswith("_total") else name + "_total"
    return name + "_value" if name.endswith(_RESERVED_SUFFIXES) else name


def _label(key: str) -> str:
    key = _NAME.sub("_", key)
    return "_" + key if key[:1].isdigit() or key.startswith("__") else key


def _record(values: dict, metric, base: tuple) -> None:
    kind = metric.WhichOneof("data")
    if kind == "gauge":
        points, counter, delta = metric.gauge.data_points, False, False
    elif kind == "sum":
        s = metric.sum
        counter = s.is_monotonic
        points, delta = s.data_points, s.aggregation_temporality == 1      # AGGREGATION_TEMPORALITY_DELTA
    else:
        return          # histograms and summaries: the Java client and librdkafka push none
    name = prometheus_name(metric.name, counter)
    doc = metric.description or metric.name
    for p in points:
        labels = tuple(sorted(dict(base, **{_label(a.key): _attribute(a.value) for a in p.attributes}).items()))
        value = p.as_double if p.WhichOneof("value") == "as_double" else float(p.as_int)
        key = (name, "counter" if counter else "gauge", doc, labels)
        values[key] = values.get(key, 0.0) + value if delta else value


def _attribute(v) -> str:
    which = v.WhichOneof("value")
    return str(getattr(v, which)) if which else ""


def _uuid_text(instance_id: bytes) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(instance_id).decode().rstrip("=")


def _new_instance_id(taken) -> bytes:
    while True:
        candidate = os.urandom(16)
        if candidate not in (ZERO_UUID, ONE_UUID) and candidate not in taken \
                and not _uuid_text(candidate).startswith("-"):
            return candidate
