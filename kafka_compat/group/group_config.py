"""GroupConfig: what one consumer, share or streams group may set for itself (the GROUP config resource).

Kafka 4 lets a group override the broker's group.consumer.*, group.share.* and group.streams.*
settings, within the min/max bounds the broker sets for each (KIP-848, KIP-932, KIP-1071); a few
group configs (share.auto.offset.reset, share.isolation.level, ...) have no broker setting and a
default of their own. Kafka keeps the overrides in its metadata; here they are a config entity
`groups/<group>` of the dynamic config store (ZooKeeper's /config/groups in a cluster, the data
directory on a single node), applied on every broker through DynamicConfigManager.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..configdef import (
    BOOLEAN,
    INT,
    LIST,
    MEDIUM,
    STRING,
    ConfigDef,
    ConfigError,
    ConfigSource,
    ConfigType,
    LambdaValidator,
    ValidString,
    at_least,
    convert_to_string,
)
from ..protocol.errors import ErrorCode, KafkaError

# Java's Duration.parse: [sign]P[nD][T[nH][nM][n[.f]S]], case-insensitive, at least one part.
_ISO_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?"
                           r"(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE)


def parse_duration_ms(text: str) -> int | None:
    """Milliseconds of an ISO-8601 duration as Java's Duration.parse reads it; None if it does not."""
    m = _ISO_DURATION.fullmatch(text)
    if m is None or not any(m.group(i) for i in range(2, 6)) or text.upper().endswith("T"):
        return None
    days, hours, minutes, seconds = (int(m.group(i) or 0) for i in range(2, 6))
    fraction = (m.group(6) or "").ljust(9, "0")
    nanos = (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 10**9
    nanos += -int(fraction) if m.group(5) and m.group(5).startswith("-") else int(fraction)
    return (-nanos if m.group(1) == "-" else nanos) // 10**6


def share_auto_offset_reset(value: str) -> tuple[str, int | None]:
    """("earliest"|"latest", None) or ("by_duration", ms); ValueError for anything else."""
    if value in ("earliest", "latest"):
        return value, None
    if value.startswith("by_duration:"):
        ms = parse_duration_ms(value[len("by_duration:"):])
        if ms is not None and ms >= 0:
            return "by_duration", ms
    raise ValueError(value)


def _valid_reset(value: Any) -> bool:
    try:
        share_auto_offset_reset(value)
    except ValueError:
        return False
    return True


class _ResetValidator(LambdaValidator):
    def __call__(self, name: str, value: Any) -> None:
        if not _valid_reset(value):
            raise ConfigError(name, value, f"Invalid value `{value}` for configuration {name}. The value must be "
                                           "either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


ASSIGNORS = ("sticky",)

# name -> (type, the broker setting it defaults to or its own default, validator, bounds, doc).
# Bounds name the broker's min and max settings ("" for none): out of them, Kafka refuses the value.
_GROUP_CONFIGS: dict[str, tuple] = {
    "consumer.session.timeout.ms": (INT, "group.consumer.session.timeout.ms", at_least(1), "consumer.session",
                                    "How long a member of this consumer group may go without heartbeating."),
    "consumer.heartbeat.interval.ms": (INT, "group.consumer.heartbeat.interval.ms", at_least(1), "consumer.heartbeat",
                                       "How often this consumer group's members heartbeat."),
    "consumer.assignment.interval.ms": (INT, "group.consumer.assignment.interval.ms", at_least(0),
                                        "consumer.assignment", "Least time between two assignment updates."),
    "share.session.timeout.ms": (INT, "group.share.session.timeout.ms", at_least(1), "share.session",
                                 "How long a member of this share group may go without heartbeating."),
    "share.heartbeat.interval.ms": (INT, "group.share.heartbeat.interval.ms", at_least(1), "share.heartbeat",
                                    "How often this share group's members heartbeat."),
    "share.record.lock.duration.ms": (INT, "group.share.record.lock.duration.ms", at_least(1000),
                                      "share.record.lock.duration", "How long an acquired record stays locked."),
    "share.delivery.count.limit": (INT, "group.share.delivery.count.limit", at_least(2), "share.delivery.count.limit",
                                   "Deliveries of one record before it is archived."),
    "share.partition.max.record.locks": (INT, "group.share.partition.max.record.locks", at_least(100),
                                         "share.partition.max.record.locks",
                                         "Records of one share-partition that may be acquired at once."),
    "share.assignment.interval.ms": (INT, "group.share.assignment.interval.ms", at_least(0), "share.assignment",
                                     "Least time between two assignment updates."),
    "share.auto.offset.reset": (STRING, "latest", _ResetValidator(_valid_reset, "", "[earliest, latest, by_duration]"),
                                "", "Where a share-partition starts: earliest, latest or by_duration:<ISO-8601>."),
    "share.isolation.level": (STRING, "read_uncommitted", ValidString("read_committed", "read_uncommitted"), "",
                              "read_committed hides aborted transactional records and stops at the LSO."),
    "share.renew.acknowledge.enable": (BOOLEAN, "true", None, "", "Whether members may renew their record locks."),
    "streams.session.timeout.ms": (INT, "group.streams.session.timeout.ms", at_least(1), "streams.session",
                                   "How long a member of this streams group may go without heartbeating."),
    "streams.heartbeat.interval.ms": (INT, "group.streams.heartbeat.interval.ms", at_least(1), "streams.heartbeat",
                                      "How often this streams group's members heartbeat."),
    "streams.num.standby.replicas": (INT, "group.streams.num.standby.replicas", at_least(0), "streams.standby",
                                     "Standby replicas of each task."),
    "streams.initial.rebalance.delay.ms": (INT, "group.streams.initial.rebalance.delay.ms", at_least(0), "",
                                           "Wait for more members before a new group's first assignment."),
    "streams.assignment.interval.ms": (INT, "group.streams.assignment.interval.ms", at_least(0), "streams.assignment",
                                       "Least time between two assignment updates."),
    "streams.assignor.name": (STRING, "group.streams.assignors", None, "",
                              "The task assignor of this group, by name, from group.streams.assignors."),
    "streams.rack.aware.assignment.tags": (LIST, "group.streams.rack.aware.assignment.tags", None, "",
                                           "Client tags the assignor spreads standby tasks over."),
    "errors.deadletterqueue.topic.name": (STRING, "", None, "", "This share group's dead-letter topic (\"\": none)."),
    "errors.deadletterqueue.copy.record.enable": (BOOLEAN, "false", None, "",
                                                  "Whether the dead-letter record carries the original record."),
}
# bounds -> the broker's (min, max) settings
_BOUNDS = {
    "consumer.session": ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    "consumer.heartbeat": ("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
    "consumer.assignment": ("group.consumer.min.assignment.interval.ms", "group.consumer.max.assignment.interval.ms"),
    "share.session": ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    "share.heartbeat": ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    "share.record.lock.duration": ("group.share.min.record.lock.duration.ms",
                                   "group.share.max.record.lock.duration.ms"),
    "share.delivery.count.limit": ("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
    "share.partition.max.record.locks": ("group.share.min.partition.max.record.locks",
                                         "group.share.max.partition.max.record.locks"),
    "share.assignment": ("group.share.min.assignment.interval.ms", "group.share.max.assignment.interval.ms"),
    "streams.session": ("group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
    "streams.heartbeat": ("group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms"),
    "streams.assignment": ("group.streams.min.assignment.interval.ms", "group.streams.max.assignment.interval.ms"),
    "streams.standby": ("", "group.streams.max.standby.replicas"),
}

GROUP_CONFIG_DEF = ConfigDef()
for _name, (_type, _default, _validator, _, _doc) in _GROUP_CONFIGS.items():
    GROUP_CONFIG_DEF.define(_name, _type, None if _default.startswith("group.") else _default,
                            _validator, MEDIUM, _doc)


def broker_synonym(name: str) -> str | None:
    """The broker setting a group config defaults to, or None when it has a default of its own."""
    default = _GROUP_CONFIGS[name][1]
    return default if default.startswith("group.") else None


def _broker_default(name: str, broker: Mapping[str, Any]) -> Any:
    synonym = broker_synonym(name)
    if synonym is None:
        return GROUP_CONFIG_DEF[name].default
    value = broker[synonym]
    return value[0] if name == "streams.assignor.name" else value


def validate(overrides: Mapping[str, str], broker: Mapping[str, Any]) -> dict[str, Any]:
    """The typed overrides, checked as Kafka's GroupConfig.validate and the controller's bounds are.

    Raises KafkaError(INVALID_CONFIG) with Kafka's message for the first bad name or value."""
    for name in overrides:
        if name not in GROUP_CONFIG_DEF:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
    values = {name: GROUP_CONFIG_DEF[name].parse(raw) for name, raw in overrides.items()}
    for name, value in values.items():
        bounds = _GROUP_CONFIGS[name][3]
        if bounds in _BOUNDS:
            lo_key, hi_key = _BOUNDS[bounds]
            hi = broker[hi_key]
            if not lo_key:
                if value > hi:
                    raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name} must be less than or equal to {hi}")
            elif not broker[lo_key] <= value <= hi:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"{name} must be in the range {broker[lo_key]} to {hi} inclusive.")
    assignor = values.get("streams.assignor.name")
    if assignor is not None and assignor not in broker["group.streams.assignors"]:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"streams.assignor.name '{assignor}' is not a registered task "
                                                   f"assignor. Registered assignors are: [{', '.join(ASSIGNORS)}].")
    return values


class GroupConfig(Mapping):
    """One group's effective configs: its overrides, else the broker's defaults (``cfg["share.isolation.level"]``)."""

    def __init__(self, overrides: Mapping[str, Any], broker: Mapping[str, Any]):
        self.overrides = dict(overrides)
        self._broker = broker

    def __getitem__(self, name: str) -> Any:
        if name in self.overrides:
            return self.overrides[name]
        return _broker_default(name, self._broker)

    def __iter__(self):
        return iter(GROUP_CONFIG_DEF)

    def __len__(self) -> int:
        return len(GROUP_CONFIG_DEF)

    def auto_offset_reset(self) -> tuple[str, int | None]:
        """share.auto.offset.reset as ("earliest"|"latest", None) or ("by_duration", ms)."""
        return share_auto_offset_reset(self["share.auto.offset.reset"])


class GroupConfigManager:
    """Every group's overrides, as the config store last reported them (Kafka's GroupConfigManager).

    ``update`` is the DynamicConfigManager handler of the `groups` entity type; it is also how a change
    made through this broker takes effect here at once."""

    def __init__(self, broker: Mapping[str, Any]):
        self.broker = broker
        self._overrides: dict[str, dict[str, Any]] = {}

    def update(self, group_id: str, configs: Mapping[str, str]) -> None:
        try:
            typed = validate(configs, self.broker)
        except KafkaError:
            # stored by an older or differently configured broker: keep what still parses, within bounds
            typed = {}
            for name, raw in configs.items():
                try:
                    typed.update(validate({name: raw}, self.broker))
                except KafkaError:
                    continue
        if typed:
            self._overrides[group_id] = typed
        else:
            self._overrides.pop(group_id, None)

    def names(self) -> list[str]:
        """The groups with configs of their own."""
        return list(self._overrides)

    def overrides(self, group_id: str) -> dict[str, Any]:
        return dict(self._overrides.get(group_id, {}))

    def group_config(self, group_id: str) -> GroupConfig:
        return GroupConfig(self._overrides.get(group_id, {}), self.broker)

    def describe(self, group_id: str, broker_sources: Mapping[str, ConfigSource]) -> list[tuple]:
        """(name, value, source, synonyms [(name, value, source)], type, doc) of every group config, as
        DescribeConfigs reports them: an override is GROUP_CONFIG with the default as its second synonym."""
        own = self._overrides.get(group_id, {})
        out = []
        for name, key in GROUP_CONFIG_DEF.items():
            synonym = broker_synonym(name)
            default = convert_to_string(_broker_default(name, self.broker), key.type) if key.type is not LIST \
                else ",".join(_broker_default(name, self.broker))
            default_source = broker_sources.get(synonym, ConfigSource.DEFAULT_CONFIG) if synonym \
                else ConfigSource.DEFAULT_CONFIG
            synonyms = [(synonym or name, default, default_source)]
            value, source = default, default_source
            if name in own:
                value = convert_to_string(own[name], key.type) if key.type is not ConfigType.LIST \
                    else ",".join(own[name])
                source = ConfigSource.DYNAMIC_GROUP_CONFIG
                synonyms.insert(0, (name, value, source))
            out.append((name, value, source, synonyms, key.type, key.doc))
        return out
