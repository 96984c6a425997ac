"""Tiered storage's settings beyond the broker's own: what goes to the remote storage manager (``rsm.config.``)
and to the topic-based metadata manager (``rlmm.config.``), and Kafka's rules for a topic's remote settings.

The broker keys themselves (``remote.log.storage.system.enable``, ``remote.log.manager.*``,
``remote.log.reader.*``, ``remote.fetch.max.wait.ms``) are in kafka_config.py; the topic keys
(``remote.storage.enable``, ``local.retention.*``, ``remote.log.copy.disable``,
``remote.log.delete.on.disable``) in storage/log_config.py.
"""
from __future__ import annotations

from typing import Any

from ..configdef import INT, LONG, MEDIUM, SHORT, ConfigDef, ConfigError, Range
from ..protocol.errors import ErrorCode, KafkaError
from ..storage.log_config import LogConfig

REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"

# TopicBasedRemoteLogMetadataManagerConfig: given under the rlmm prefix, e.g.
# rlmm.config.remote.log.metadata.topic.replication.factor=1
RLMM_CONFIG_DEF = (
    ConfigDef()
    .define("remote.log.metadata.topic.replication.factor", SHORT, 3, Range.at_least(1), MEDIUM,
            "Replication factor of __remote_log_metadata.")
    .define("remote.log.metadata.topic.num.partitions", INT, 50, Range.at_least(1), MEDIUM,
            "Partitions of __remote_log_metadata.")
    .define("remote.log.metadata.topic.retention.ms", LONG, -1, None, MEDIUM,
            "retention.ms of __remote_log_metadata; -1 keeps it forever.")
    .define("remote.log.metadata.consume.wait.ms", LONG, 120000, Range.at_least(0), MEDIUM,
            "How long a metadata write waits to be read back.")
    .define("remote.log.metadata.initialization.retry.max.timeout.ms", LONG, 120000, Range.at_least(1), MEDIUM,
            "How long the metadata manager tries to start.")
    .define("remote.log.metadata.initialization.retry.interval.ms", LONG, 100, Range.at_least(1), MEDIUM,
            "Wait between two tries to start.")
)


def prefixed(config, prefix_key: str) -> dict[str, Any]:
    """The broker's original properties under the prefix that ``prefix_key`` names, the prefix stripped
    (Kafka's originalsWithPrefix)."""
    prefix = config[prefix_key]
    return {k[len(prefix):]: v for k, v in config.originals.items() if k.startswith(prefix)}


def rsm_props(config) -> dict[str, Any]:
    return prefixed(config, "remote.log.storage.manager.impl.prefix")


def rlmm_config(config) -> dict[str, Any]:
    props = prefixed(config, "remote.log.metadata.manager.impl.prefix")
    return RLMM_CONFIG_DEF.parse({k: v for k, v in props.items() if k in RLMM_CONFIG_DEF})


def validate_remote_storage(config, log_config: LogConfig) -> None:
    """Kafka's LogConfig checks for a topic with remote.storage.enable (ConfigError: INVALID_CONFIG)."""
    if not log_config.remote_storage_enable:
        return
    if not config["remote.log.storage.system.enable"]:
        raise KafkaError(ErrorCode.INVALID_CONFIG, "Tiered Storage functionality is disabled in the broker. "
                                                   "Topic cannot be configured with remote log storage.")
    if log_config.compact:
        raise KafkaError(ErrorCode.INVALID_CONFIG, "Remote log storage is unsupported for the compacted topics")
    for local, total in (("local.retention.ms", "retention.ms"), ("local.retention.bytes", "retention.bytes")):
        local_value, total_value = log_config.props[local], log_config.props[total]
        if total_value == -1 and local_value != -2:
            continue
        if local_value == -1 and total_value != -1:
            raise ConfigError(local, local_value, f"Value must not be -1 as {total} value is set as {total_value}.")
        if local_value > total_value:
            raise ConfigError(local, local_value, f"Value must not be more than {total} property value: "
                                                  f"{total_value}")

