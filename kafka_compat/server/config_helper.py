"""ConfigHelper: configs as DescribeConfigs reports them, each with its value, source and synonyms.

A topic's value comes from its own override, else a dynamic broker setting,
else the broker's static or default value, in KafkaConfigSchema's order; a
broker's from dynamic, static or default settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from kafka_compat.storage.log_config import TOPIC_CONFIG_DEF, validate_topic_configs

from ..configdef import PASSWORD, ConfigError, ConfigSource, ConfigType, convert_to_string
from .dynamic_broker_config import BROKER_QUOTA_CONFIG_DEF, is_dynamic
from .kafka_config import (
    BROKER_CONFIG_DEF,
    DYNAMIC_BROKER_CONFIGS,
    INTERNAL_BROKER_CONFIGS,
    TOPIC_CONFIG_SYNONYMS,
    BrokerConfig,
    ConfigSynonym,
    broker_config_synonyms,
)


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
        if name in INTERNAL_BROKER_CONFIGS:
            continue
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
    # settings that exist only dynamically (replication throttles) appear once set
    for values, source in ((dyn_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                           (dyn_broker, ConfigSource.DYNAMIC_BROKER_CONFIG)):
        for name, text in values.items():
            if name in BROKER_QUOTA_CONFIG_DEF:
                result[name] = _dynamic_entry(name, text, source, [(dyn_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                                                                   (dyn_default, source)])
    return result


def describe_default_broker_config(broker_cfg: BrokerConfig, dynamic_default: Mapping[str, str]
                                   ) -> dict[str, ConfigEntry]:
    """The cluster-wide dynamic defaults (resource name ""): only what is set, as Kafka describes them."""
    source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    return {name: _dynamic_entry(name, text, source, [(dynamic_default, source)])
            for name, text in dynamic_default.items()}


def _dynamic_entry(name: str, text: str, source: ConfigSource, tiers) -> ConfigEntry:
    key = BROKER_CONFIG_DEF.get(name) or BROKER_QUOTA_CONFIG_DEF.get(name)
    sensitive = key is None or key.type is PASSWORD      # unknown: Kafka cannot tell, so hides it
    synonyms = tuple(ConfigSynonymEntry(n, None if sensitive else values[n], src)
                     for values, src in tiers for n in broker_config_synonyms(name) if n in values)
    return ConfigEntry(name, None if sensitive else text, source, source, sensitive, not is_dynamic(name),
                       synonyms or (ConfigSynonymEntry(name, None if sensitive else text, source),),
                       key.type if key is not None else None, key.doc if key is not None else "", text)
