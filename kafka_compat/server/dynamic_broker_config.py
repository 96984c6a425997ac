"""DynamicBrokerConfig: broker settings changed at runtime, per broker or as a cluster-wide default (KIP-226).

A value set for this broker (resource name = its id) wins over the cluster
default (resource name ""), which wins over server.properties, which wins over
Kafka's default. Validation follows Kafka's: a static setting, a security
setting without a listener prefix, a badly typed value, or a per-broker setting
at the cluster level is refused with INVALID_REQUEST and Kafka's message; the
whole resulting config must still be valid. Settings Kafka can change live but
kafka-compat does not apply at runtime (listeners, TLS/SASL, per-listener
limits, cleaner threads...) are refused with POLICY_VIOLATION, as an alter.config.policy
would, rather than stored and silently ignored.

What is applied: every broker default of a topic setting (log.retention.*,
log.segment.bytes, log.roll.*, message.max.bytes, log.cleanup.policy, ...): each
hosted topic's log config is recomputed, its own overrides still on top; the
thread counts (accepted and unused, as when static); the connection limits and
max.connection.creation.rate (for new connections: open ones stay); and the
replication throttle rates (read by whoever throttles replication through `current`).
"""
from __future__ import annotations

import logging
from typing import Callable

from ..configdef import LONG, LONG_MAX, MEDIUM, ConfigDef, ConfigError, at_least
from ..protocol.errors import ErrorCode, KafkaError
from .kafka_config import BROKER_CONFIG_DEF, DYNAMIC_BROKER_CONFIGS, TOPIC_CONFIG_SYNONYMS, BrokerConfig
from .local_controller import log_config

log = logging.getLogger(__name__)

DEFAULT = "<default>"

# QuotaConfig.brokerQuotaConfigs: settings that exist only dynamically
BROKER_QUOTA_CONFIG_DEF = (
    ConfigDef()
    .define("leader.replication.throttled.rate", LONG, LONG_MAX, at_least(0), MEDIUM,
            "Upper bound (bytes/s) on replication traffic of throttled leader replicas.")
    .define("follower.replication.throttled.rate", LONG, LONG_MAX, at_least(0), MEDIUM,
            "Upper bound (bytes/s) on replication traffic of throttled follower replicas.")
    .define("replica.alter.log.dirs.io.max.bytes.per.second", LONG, LONG_MAX, at_least(0), MEDIUM,
            "Upper bound (bytes/s) on disk I/O moving replicas between log dirs.")
)
# SslConfigs.RECONFIGURABLE_CONFIGS: only per listener (listener.name.<l>.ssl...)
DYNAMIC_SECURITY_CONFIGS = frozenset(n for n in DYNAMIC_BROKER_CONFIGS if n.startswith("ssl."))
# per broker only: listeners and security (Kafka's PerBrokerConfigs)
PER_BROKER_CONFIGS = DYNAMIC_SECURITY_CONFIGS | {"listeners", "advertised.listeners",
                                                 "listener.security.protocol.map", "cordoned.log.dirs"}
THREAD_COUNT_CONFIGS = ("num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
                        "background.threads")
# Kafka's DynamicConnectionQuota: applied by the broker's reconfigurable, checked by its validator
CONNECTION_CONFIGS = ("max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
                      "max.connection.creation.rate")
TOPIC_DEFAULT_CONFIGS = frozenset(s.name for synonyms in TOPIC_CONFIG_SYNONYMS.values() for s in synonyms)
# what this broker applies at runtime
# sasl.kerberos.*: only a GSSAPI login reads them, and this broker has none, as a Kafka broker without a GSSAPI
# listener: stored and in force, with nothing to act on (librdkafka's 0081_admin alters one)
KERBEROS_CONFIGS = frozenset(n for n in DYNAMIC_BROKER_CONFIGS if n.startswith("sasl.kerberos."))
APPLIED_CONFIGS = frozenset((TOPIC_DEFAULT_CONFIGS & DYNAMIC_BROKER_CONFIGS) | set(THREAD_COUNT_CONFIGS)
                            | set(CONNECTION_CONFIGS) | set(BROKER_QUOTA_CONFIG_DEF) | {"cordoned.log.dirs"}
                            | KERBEROS_CONFIGS)


def _set(names) -> str:
    return "Set(" + ", ".join(sorted(names)) + ")"


def is_dynamic(name: str) -> bool:
    return name in DYNAMIC_BROKER_CONFIGS or name in BROKER_QUOTA_CONFIG_DEF


class DynamicBrokerConfig:
    """This broker's dynamic settings over its static BrokerConfig, which it reconfigures in place."""

    def __init__(self, config: BrokerConfig, broker_id: int):
        self.config = config
        self.broker_id = broker_id
        self.dynamic_default: dict[str, str] = {}
        self.dynamic_broker: dict[str, str] = {}
        self.reconfigurables: list[Callable[[set[str]], None]] = []
        self.validators: list[Callable[[BrokerConfig], None]] = []

    @property
    def current(self) -> dict:
        """Typed values of the dynamic-only settings (replication throttles), default where unset."""
        merged = {**self.dynamic_default, **self.dynamic_broker}
        return BROKER_QUOTA_CONFIG_DEF.parse({k: v for k, v in merged.items() if k in BROKER_QUOTA_CONFIG_DEF})

    def add_validator(self, check: Callable[[BrokerConfig], None]) -> None:
        """``check(candidate)`` raises ValueError or ConfigError when a change would make an unusable config."""
        self.validators.append(check)

    def add_reconfigurable(self, callback: Callable[[set[str]], None]) -> None:
        """``callback(changed names)`` after every change that altered a value (on the event loop)."""
        self.reconfigurables.append(callback)

    # -- validation (ConfigAdminManager.validateBrokerConfigChange) ----------------------------
    def validate(self, props: dict[str, str], per_broker: bool) -> None:
        """Raise KafkaError unless ``props`` may become this broker's (or the cluster's) dynamic set."""
        static = {n for n in props if n in BROKER_CONFIG_DEF and not is_dynamic(n)}
        if static:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: {_set(static)}")
        security = {n for n in props if n in DYNAMIC_SECURITY_CONFIGS}
        if security:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "These security configs can be dynamically updated only "
                                                        f"per-listener using the listener prefix: {_set(security)}")
        for name, value in props.items():
            key = BROKER_CONFIG_DEF.get(name) or BROKER_QUOTA_CONFIG_DEF.get(name)
            if key is not None:
                try:
                    key.parse(value)
                except ConfigError as e:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, str(e)) from None
        if not per_broker:
            per = {n for n in props if n in PER_BROKER_CONFIGS}
            if per:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Cannot update these configs at default cluster level, "
                                                            f"broker id must be specified: {_set(per)}")
        default, broker = (self.dynamic_default, props) if per_broker else (props, self.dynamic_broker)
        try:
            candidate = BrokerConfig({**self.config.originals, **_known(default), **_known(broker)})
            log_config(candidate, {})          # the new topic defaults must make a valid LogConfig
            for check in self.validators:
                check(candidate)
        except (ConfigError, ValueError) as e:
            raise KafkaError(ErrorCode.INVALID_REQUEST, str(e)) from None
        self._validate_thread_counts(candidate)
        ignored = sorted(n for n in props if n not in APPLIED_CONFIGS and
                         (is_dynamic(n) or n.startswith("listener.name.")))
        if ignored:
            raise KafkaError(ErrorCode.POLICY_VIOLATION,
                             f"kafka-compat does not apply {', '.join(ignored)} at runtime: set "
                             f"{'it' if len(ignored) == 1 else 'them'} in the broker's properties and restart it")

    def _validate_thread_counts(self, candidate: BrokerConfig) -> None:
        """DynamicThreadPool: a new count is at least 1, at least half and at most double the current one."""
        for name in THREAD_COUNT_CONFIGS:
            new, old = candidate[name], self.config[name]
            if new == old:
                continue
            msg = f"Dynamic thread count update validation failed for {name}={new}"
            if new <= 0:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"{msg}, value should be at least 1")
            if new < old // 2:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"{msg}, value should be at least half the current "
                                                            f"value {old}")
            if new > old * 2:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"{msg}, value should not be greater than double the "
                                                            f"current value {old}")

    # -- applying (DynamicBrokerConfig.updateBrokerConfig / updateDefaultConfig) ----------------
    def update(self, name: str, props: dict[str, str]) -> None:
        """The stored dynamic configs of ``brokers/<name>`` are now ``props``: apply them if they are ours."""
        if name == DEFAULT:
            self.dynamic_default = self._usable(props, per_broker=False)
        elif name == str(self.broker_id):
            self.dynamic_broker = self._usable(props, per_broker=True)
        else:
            return
        try:
            changed = self.config.reconfigure(self.dynamic_default, self.dynamic_broker)
        except ConfigError as e:
            log.error("dynamic broker configs of %s are not valid, keeping the current ones: %s", name, e)
            return
        changed |= {n for n in props if n in BROKER_QUOTA_CONFIG_DEF}
        if changed:
            log.info("dynamic broker configs changed: %s", ", ".join(sorted(changed)))
            for callback in self.reconfigurables:
                callback(changed)

    @staticmethod
    def _usable(props: dict[str, str], per_broker: bool) -> dict[str, str]:
        """Kafka's fromPersistentProps: stored settings that may not be dynamic are dropped with an error."""
        out = {}
        for name, value in props.items():
            if name in BROKER_CONFIG_DEF and not is_dynamic(name):
                log.error("non-dynamic config %s stored as a dynamic broker config is ignored", name)
            elif not per_broker and name in PER_BROKER_CONFIGS:
                log.error("per-broker config %s stored at the default cluster level is ignored", name)
            else:
                out[name] = value
        return out


def _known(props: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in props.items() if k in BROKER_CONFIG_DEF}


def topic_defaults_changed(replica_manager) -> Callable[[set[str]], None]:
    """Kafka's DynamicLogConfig: when a topic default changes, every hosted topic's log config is
    recomputed (its own overrides stay on top)."""
    def reconfigure(changed: set[str]) -> None:
        if changed & TOPIC_DEFAULT_CONFIGS:
            for topic in sorted({t for t, _ in list(replica_manager.partitions)}):
                replica_manager.topic_config_changed(topic)
    return reconfigure
