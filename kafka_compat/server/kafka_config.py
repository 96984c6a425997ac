"""KafkaConfig: the broker's own properties (BROKER_CONFIG_DEF) and a validated BrokerConfig.

Names, types, defaults, validators and importance follow Apache Kafka (trunk,
Oct 2024); the documentation strings are our own short summaries. A broker
property that stands in for a topic property (log.segment.bytes for
segment.bytes) takes type, default and validator from storage's TOPIC_CONFIG_DEF.
Where we differ from Kafka the doc string says so:

- ``broker.id`` and ``node.id`` default to 0: an embedded single node needs no
  id generation (Kafka's default -1 asks ZooKeeper for one), so negative ids are
  refused. Setting either one sets both, as in Kafka's ZooKeeper mode.
- ``log.dir`` keeps Kafka's default ``/tmp/kafka-logs``; the CLI passes
  ``./kafka-compat-data`` as an override instead.
- CLASS values stay class names (we cannot load Java classes).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from kafka_compat.storage.log_config import TOPIC_CONFIG_DEF

from ..configdef import (
    BOOLEAN,
    CLASS,
    DOUBLE,
    DOUBLE_MAX,
    HIGH,
    INT,
    INT_MAX,
    LIST,
    LONG,
    LONG_MAX,
    LOW,
    MEDIUM,
    PASSWORD,
    SHORT,
    STRING,
    ConfigDef,
    ConfigError,
    DictView,
    Importance,
    Password,
    Range,
    ValidList,
    ValidString,
    at_least,
    convert_to_string,
    parse_type,
)
from ..endpoint import EndPoint, SecurityProtocol, parse_listener_security_protocol_map, parse_listeners
from ..properties import load_properties
from ..security.principal import DEFAULT_PRINCIPAL_BUILDER

_HOUR_MS, _MINUTE_MS = 3_600_000, 60_000


def parse_http_listener(value: str) -> tuple[str, int]:
    """prometheus.listener's ``http://HOST:PORT`` -> (host, port); an empty host means every interface."""
    parts = urlsplit(value)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or port is None or parts.path not in ("", "/"):
        raise ConfigError("prometheus.listener", value, "must be http://HOST:PORT")
    return parts.hostname or "0.0.0.0", port


def _http_listener(name: str, value: str | None) -> None:
    if value is not None:
        parse_http_listener(value)
_DAY_MS = 24 * _HOUR_MS


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
    "remote.copy.lag.bytes": _s("log.remote.copy.lag.bytes"),
    "remote.copy.lag.ms": _s("log.remote.copy.lag.ms"),
    "max.decompressed.message.bytes": _s("max.decompressed.message.bytes"),
}


# The broker property that stands first for each topic property.
_TOPIC_OF = {synonyms[0].name: topic for topic, synonyms in TOPIC_CONFIG_SYNONYMS.items()}


def _from_topic(name: str, importance: Importance, doc: str | None = None) -> tuple:
    """A broker key with the type, default, validator and doc of the topic key it stands for."""
    key = TOPIC_CONFIG_DEF[_TOPIC_OF[name]]
    return name, key.type, key.default, key.validator, importance, doc or key.doc


BROKER_CONFIG_DEF = (
    ConfigDef()
    # identity
    .define("broker.id", INT, 0, None, HIGH,
            "This broker's id. Kafka defaults to -1 (generate one); an embedded single node uses 0.")
    .define("node.id", INT, 0, None, HIGH,
            "KRaft name for broker.id; either one sets both. Kafka defaults to -1; we use 0.")
    .define("broker.rack", STRING, None, None, MEDIUM, "Rack of this broker, for rack-aware placement.")
    .define("replica.selector.class", STRING, None, None, MEDIUM,
            "KIP-392: ...RackAwareReplicaSelector sends consumers to a replica in their rack; unset: the leader.")
    .define("zookeeper.connect", STRING, None, None, HIGH,
            "ZooKeeper connection string host:port[,host:port][/chroot]; unset for a single node.")
    .define("zookeeper.session.timeout.ms", INT, 18000, None, HIGH, "ZooKeeper session timeout.")
    .define("zookeeper.connection.timeout.ms", INT, None, None, HIGH,
            "Longest wait to connect to ZooKeeper; unset means zookeeper.session.timeout.ms.")
    .define("controller.socket.timeout.ms", INT, 30000, None, MEDIUM,
            "Socket timeout of controller-to-broker channels.")
    .define("controlled.shutdown.enable", BOOLEAN, True, None, MEDIUM,
            "On SIGTERM, ask the controller to move leadership away before stopping.")
    .define("controlled.shutdown.max.retries", INT, 3, None, MEDIUM, "Tries of a controlled shutdown.")
    .define("controlled.shutdown.retry.backoff.ms", LONG, 5000, None, MEDIUM,
            "Wait between tries of a controlled shutdown.")
    # network
    .define("listeners", LIST, "PLAINTEXT://:9092", None, HIGH,
            "Comma-separated NAME://host:port addresses to listen on; an empty host means every interface.")
    .define("advertised.listeners", LIST, None, None, HIGH,
            "Addresses given to clients in metadata, if different from listeners.")
    .define("listener.security.protocol.map", STRING,
            "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT", None, LOW,
            "LISTENER_NAME:SECURITY_PROTOCOL pairs naming the protocol of each listener.")
    .define("socket.send.buffer.bytes", INT, 100 * 1024, None, HIGH,
            "SO_SNDBUF of server sockets; -1 for the OS default.")
    .define("socket.receive.buffer.bytes", INT, 100 * 1024, None, HIGH,
            "SO_RCVBUF of server sockets; -1 for the OS default.")
    .define("socket.request.max.bytes", INT, 100 * 1024 * 1024, at_least(1), HIGH, "Largest request frame accepted.")
    .define("socket.listen.backlog.size", INT, 50, at_least(1), MEDIUM, "Pending-connection backlog of each listener.")
    .define("max.connections.per.ip", INT, INT_MAX, at_least(0), MEDIUM, "Most connections allowed from one address.")
    .define("max.connections.per.ip.overrides", STRING, "", None, MEDIUM, "Per-address limits, host:count pairs.")
    .define("max.connections", INT, INT_MAX, at_least(0), MEDIUM, "Most connections the broker accepts at once.")
    .define("max.connection.creation.rate", INT, INT_MAX, at_least(0), MEDIUM, "Most new connections per second.")
    .define("connections.max.idle.ms", LONG, 600000, None, MEDIUM, "Close connections idle for longer than this.")
    .define("queued.max.requests", INT, 500, at_least(1), HIGH, "Requests queued before the network stops reading.")
    .define("num.network.threads", INT, 3, at_least(1), HIGH, "Kafka's network threads; one event loop serves here.")
    .define("num.io.threads", INT, 8, at_least(1), HIGH,
            "Kafka's request handler threads; accepted, unused by the loop.")
    .define("background.threads", INT, 10, at_least(1), HIGH, "Threads for background work such as file deletion.")
    .define(*_from_topic("message.max.bytes", HIGH))
    .define("fetch.max.bytes", INT, 55 * 1024 * 1024, at_least(1024), MEDIUM,
            "Most bytes returned by one fetch request.")
    .define("max.incremental.fetch.session.cache.slots", INT, 1000, at_least(0), MEDIUM,
            "Incremental fetch sessions kept at once.")
    .define("delete.topic.enable", BOOLEAN, True, None, HIGH, "Allow DeleteTopics; when false it fails.")
    # the controller mutation quota (KIP-599; the quotas themselves are client quotas: controller_mutation_rate)
    .define("controller.quota.window.num", INT, 11, at_least(1), LOW, "Samples of the controller mutation rate.")
    .define("controller.quota.window.size.seconds", INT, 1, at_least(1), LOW, "Length of each of those samples.")
    .define(*_from_topic("compression.type", HIGH))
    .define(*_from_topic("compression.gzip.level", MEDIUM))
    .define(*_from_topic("compression.lz4.level", MEDIUM))
    .define(*_from_topic("compression.zstd.level", MEDIUM))
    # replication
    .define("default.replication.factor", INT, 1, None, MEDIUM, "Replication factor of auto-created topics.")
    .define(*_from_topic("min.insync.replicas", HIGH))
    .define(*_from_topic("unclean.leader.election.enable", HIGH))
    .define("auto.leader.rebalance.enable", BOOLEAN, True, None, HIGH, "Move leadership back to preferred replicas.")
    .define("leader.imbalance.check.interval.seconds", LONG, 300, at_least(1), HIGH,
            "How often the controller checks whether leadership should move back to preferred replicas.")
    .define("leader.imbalance.per.broker.percentage", INT, 10, None, HIGH,
            "Share of a broker's preferred partitions led elsewhere that triggers a preferred election.")
    .define("replica.lag.time.max.ms", LONG, 30000, None, HIGH, "A follower this far behind leaves the ISR.")
    .define("replica.high.watermark.checkpoint.interval.ms", LONG, 5000, at_least(1), HIGH,
            "How often each partition's high watermark is saved to replication-offset-checkpoint.")
    .define("replica.socket.timeout.ms", INT, 30000, None, HIGH, "Socket timeout of follower fetches.")
    .define("replica.fetch.max.bytes", INT, 1024 * 1024, at_least(0), MEDIUM, "Bytes a follower fetches per partition.")
    .define("replica.fetch.wait.max.ms", INT, 500, None, HIGH, "Longest wait of a follower fetch.")
    .define("replica.fetch.min.bytes", INT, 1, None, HIGH, "Bytes a follower fetch waits for.")
    .define("replica.fetch.response.max.bytes", INT, 10 * 1024 * 1024, at_least(0), MEDIUM,
            "Most bytes in one follower fetch response.")
    .define("num.replica.fetchers", INT, 1, None, HIGH, "Follower fetcher threads per source broker.")
    .define("num.replica.alter.log.dirs.threads", INT, None, None, HIGH,
            "Threads moving replicas between log directories (unset: one per log directory).")
    .define("alter.log.dirs.replication.quota.window.num", INT, 11, at_least(1), LOW,
            "Samples kept for the quota on moving replicas between log directories.")
    .define("alter.log.dirs.replication.quota.window.size.seconds", INT, 1, at_least(1), LOW,
            "Time span of each sample of that quota.")
    .define("replica.fetch.backoff.ms", INT, 1000, at_least(0), MEDIUM, "Wait after a follower fetch fails.")
    .define("fetch.purgatory.purge.interval.requests", INT, 1000, None, MEDIUM,
            "Completed fetches that may linger in watch lists before a purge.")
    .define("producer.purgatory.purge.interval.requests", INT, 1000, None, MEDIUM,
            "Completed produces that may linger in watch lists before a purge.")
    .define("delete.records.purgatory.purge.interval.requests", INT, 1, None, MEDIUM,
            "Completed delete-records that may linger in watch lists before a purge.")
    # logs
    .define("num.partitions", INT, 1, at_least(1), MEDIUM, "Partitions of an auto-created topic.")
    .define("auto.create.topics.enable", BOOLEAN, True, None, HIGH, "Create unknown topics on metadata requests.")
    .define("log.dir", LIST, "/tmp/kafka-logs", None, HIGH,
            "Data directory, used when log.dirs is unset. Our CLI passes ./kafka-compat-data.")
    .define("log.dirs", LIST, None, None, HIGH, "Comma-separated data directories; overrides log.dir.")
    .define("cordoned.log.dirs", LIST, "", None, HIGH,
            "Log directories (entries of log.dirs or log.dir, or * for all) that take no new replica (KIP-1066).")
    .define("num.recovery.threads.per.data.dir", INT, 2, at_least(1), HIGH,
            "Threads per data directory for recovery at start and flush at stop.")
    .define(*_from_topic("log.segment.bytes", HIGH))
    .define("log.roll.ms", LONG, None, None, HIGH, "Roll a new segment after this long; unset means log.roll.hours.")
    .define("log.roll.hours", INT, 168, at_least(1), HIGH, "Roll a new segment after this many hours.")
    .define("log.roll.jitter.ms", LONG, None, None, HIGH,
            "Most random time taken off the roll time; unset means log.roll.jitter.hours.")
    .define("log.roll.jitter.hours", INT, 0, at_least(0), HIGH, "Roll jitter in hours.")
    .define("log.retention.ms", LONG, None, None, HIGH,
            "Keep data this long; -1 for no limit. Wins over log.retention.minutes and .hours.")
    .define("log.retention.minutes", INT, None, None, HIGH, "Retention in minutes; wins over log.retention.hours.")
    .define("log.retention.hours", INT, 168, None, HIGH, "Retention in hours, used when ms and minutes are unset.")
    .define(*_from_topic("log.retention.bytes", HIGH))
    .define("log.retention.check.interval.ms", LONG, 300000, at_least(1), MEDIUM, "How often retention is enforced.")
    .define(*_from_topic("log.cleanup.policy", MEDIUM))
    .define(*_from_topic("log.index.size.max.bytes", MEDIUM))
    .define(*_from_topic("log.index.interval.bytes", MEDIUM))
    .define(*_from_topic("log.flush.interval.messages", HIGH))
    .define("log.flush.interval.ms", LONG, None, None, HIGH,
            "fsync data older than this; unset means log.flush.scheduler.interval.ms.")
    .define("log.flush.scheduler.interval.ms", LONG, LONG_MAX, None, HIGH, "How often the flusher looks for work.")
    .define("log.flush.offset.checkpoint.interval.ms", INT, 60000, at_least(0), HIGH,
            "How often the recovery point is checkpointed.")
    .define("log.flush.start.offset.checkpoint.interval.ms", INT, 60000, at_least(0), HIGH,
            "How often log start offsets are checkpointed.")
    .define(*_from_topic("log.segment.delete.delay.ms", HIGH))
    .define(*_from_topic("log.preallocate", MEDIUM))
    .define(*_from_topic("log.message.format.version", MEDIUM))
    .define(*_from_topic("log.message.timestamp.type", MEDIUM))
    .define(*_from_topic("log.message.timestamp.difference.max.ms", MEDIUM))
    .define(*_from_topic("log.message.timestamp.before.max.ms", MEDIUM))
    .define(*_from_topic("log.message.timestamp.after.max.ms", MEDIUM))
    .define(*_from_topic("log.message.downconversion.enable", LOW))
    .define(*_from_topic("log.local.retention.ms", MEDIUM,
            "Local retention with tiered storage; -2 means log.retention.ms."))
    .define(*_from_topic("log.local.retention.bytes", MEDIUM,
            "Local size limit with tiered storage; -2 means log.retention.bytes."))
    .define(*_from_topic("log.remote.copy.lag.bytes", MEDIUM))
    .define(*_from_topic("log.remote.copy.lag.ms", MEDIUM))
    .define(*_from_topic("max.decompressed.message.bytes", MEDIUM))
    .define("create.topic.policy.class.name", CLASS, None, None, LOW, "Class checking CreateTopics requests.")
    .define("alter.config.policy.class.name", CLASS, None, None, LOW, "Class checking AlterConfigs requests.")
    # log cleaner
    .define("log.cleaner.enable", BOOLEAN, True, None, MEDIUM, "Run the compactor; compacted topics grow without it.")
    .define("log.cleaner.threads", INT, 1, at_least(0), MEDIUM, "Compaction threads.")
    .define("log.cleaner.io.max.bytes.per.second", DOUBLE, DOUBLE_MAX, None, MEDIUM, "Compaction I/O throttle.")
    .define("log.cleaner.dedupe.buffer.size", LONG, 128 * 1024 * 1024, None, MEDIUM,
            "Memory for the key map of compaction.")
    .define("log.cleaner.io.buffer.size", INT, 512 * 1024, at_least(0), MEDIUM, "I/O buffer memory of compaction.")
    .define("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9, None, MEDIUM, "Fill ratio of the compaction key map.")
    .define("log.cleaner.backoff.ms", LONG, 15000, at_least(0), MEDIUM, "Sleep when nothing needs compaction.")
    .define(*_from_topic("log.cleaner.min.cleanable.ratio", MEDIUM))
    .define(*_from_topic("log.cleaner.delete.retention.ms", MEDIUM))
    .define(*_from_topic("log.cleaner.min.compaction.lag.ms", MEDIUM))
    .define(*_from_topic("log.cleaner.max.compaction.lag.ms", MEDIUM))
    # tiered storage (KIP-405): Kafka's RemoteLogManagerConfig, names and defaults
    .define("remote.log.storage.system.enable", BOOLEAN, False, None, MEDIUM,
            "Run the tiered-storage services; topics may then set remote.storage.enable.")
    .define("remote.log.storage.manager.class.name", STRING, None, None, MEDIUM,
            "The RemoteStorageManager; here always the built-in S3 one, configured under rsm.config.")
    .define("remote.log.storage.manager.impl.prefix", STRING, "rsm.config.", None, MEDIUM,
            "Prefix of the properties handed to the remote storage manager.")
    .define("remote.log.metadata.manager.class.name", STRING,
            "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager", None, MEDIUM,
            "The RemoteLogMetadataManager: the topic-based one (__remote_log_metadata).")
    .define("remote.log.metadata.manager.impl.prefix", STRING, "rlmm.config.", None, MEDIUM,
            "Prefix of the properties handed to the remote log metadata manager.")
    .define("remote.log.metadata.manager.listener.name", STRING, None, None, MEDIUM,
            "Listener the metadata manager's clients use (here it writes through this broker).")
    .define("remote.log.index.file.cache.total.size.bytes", LONG, 1024 ** 3, at_least(1), LOW,
            "Space for the indexes read back from remote storage.")
    .define("remote.log.manager.thread.pool.size", INT, 2, at_least(1), MEDIUM,
            "Threads of the remote log manager's follower tasks.")
    .define("remote.log.manager.copier.thread.pool.size", INT, 10, at_least(1), MEDIUM,
            "Threads copying segments to remote storage.")
    .define("remote.log.manager.expiration.thread.pool.size", INT, 10, at_least(1), MEDIUM,
            "Threads deleting expired remote segments.")
    .define("remote.log.manager.task.interval.ms", LONG, 30000, at_least(1), LOW,
            "How often the copy and expiration tasks run.")
    .define("remote.log.manager.task.retry.backoff.ms", LONG, 500, at_least(1), LOW,
            "First wait before a failed remote task is retried.")
    .define("remote.log.manager.task.retry.backoff.max.ms", LONG, 30000, at_least(1), LOW,
            "Longest wait between retries of a failed remote task.")
    .define("remote.log.manager.task.retry.jitter", DOUBLE, 0.2, Range.between(0, 0.5), LOW,
            "Random jitter of the retry backoff.")
    .define("remote.log.reader.threads", INT, 10, at_least(1), MEDIUM, "Threads serving reads from remote storage.")
    .define("remote.log.reader.max.pending.tasks", INT, 100, at_least(1), MEDIUM,
            "Remote reads queued at most; past that a fetch is answered with an error.")
    .define("remote.log.manager.copy.max.bytes.per.second", LONG, LONG_MAX, at_least(1), MEDIUM,
            "Bytes per second copied to remote storage, for all partitions together.")
    .define("remote.log.manager.copy.quota.window.num", INT, 11, at_least(1), MEDIUM,
            "Samples kept for the copy quota.")
    .define("remote.log.manager.copy.quota.window.size.seconds", INT, 1, at_least(1), MEDIUM,
            "Length of one sample of the copy quota.")
    .define("remote.log.manager.fetch.max.bytes.per.second", LONG, LONG_MAX, at_least(1), MEDIUM,
            "Bytes per second read from remote storage, for all partitions together.")
    .define("remote.log.manager.fetch.quota.window.num", INT, 11, at_least(1), MEDIUM,
            "Samples kept for the fetch quota.")
    .define("remote.log.manager.fetch.quota.window.size.seconds", INT, 1, at_least(1), MEDIUM,
            "Length of one sample of the fetch quota.")
    .define("remote.fetch.max.wait.ms", INT, 500, at_least(1), MEDIUM,
            "Longest wait of a fetch answered from remote storage.")
    .define("remote.list.offsets.request.timeout.ms", LONG, 30000, at_least(1), MEDIUM,
            "Longest wait of a ListOffsets answered from remote storage.")
    # group coordinator
    .define("group.min.session.timeout.ms", INT, 6000, None, MEDIUM, "Shortest session timeout a member may ask for.")
    .define("group.max.session.timeout.ms", INT, 1800000, None, MEDIUM, "Longest session timeout a member may ask for.")
    .define("group.initial.rebalance.delay.ms", INT, 3000, None, MEDIUM,
            "Wait for more members before the first rebalance.")
    .define("group.max.size", INT, INT_MAX, at_least(1), MEDIUM, "Most members in one group.")
    .define("group.coordinator.rebalance.protocols", LIST, "classic,consumer,streams",
            ValidList("classic", "consumer", "streams"), MEDIUM,
            "Rebalance protocols served: \"consumer\" adds the KIP-848 APIs (68, 69), \"streams\" KIP-1071's (88, 89).")
    .define("group.consumer.session.timeout.ms", INT, 45000, at_least(1), MEDIUM,
            "How long a consumer-protocol member may go without heartbeating.")
    .define("group.consumer.min.session.timeout.ms", INT, 45000, at_least(1), MEDIUM,
            "Smallest group.consumer.session.timeout.ms allowed.")
    .define("group.consumer.max.session.timeout.ms", INT, 60000, at_least(1), MEDIUM,
            "Largest group.consumer.session.timeout.ms allowed.")
    .define("group.consumer.heartbeat.interval.ms", INT, 5000, at_least(1), MEDIUM,
            "How often consumer-protocol members heartbeat (the broker tells them).")
    .define("group.consumer.min.heartbeat.interval.ms", INT, 5000, at_least(1), MEDIUM,
            "Smallest group.consumer.heartbeat.interval.ms allowed.")
    .define("group.consumer.max.heartbeat.interval.ms", INT, 15000, at_least(1), MEDIUM,
            "Largest group.consumer.heartbeat.interval.ms allowed.")
    .define("group.consumer.max.size", INT, INT_MAX, at_least(1), MEDIUM, "Most members in one consumer group.")
    .define("group.consumer.assignors", LIST, "uniform,range", ValidList("uniform", "range"), MEDIUM,
            "Server-side assignors of consumer groups; the first is the default.")
    .define("group.consumer.migration.policy", STRING, "bidirectional",
            ValidString("disabled", "upgrade", "downgrade", "bidirectional"), MEDIUM,
            "Which online conversions between classic and consumer groups are allowed.")
    .define("group.consumer.assignment.interval.ms", INT, 1000, at_least(0), MEDIUM,
            "Least time between two assignment updates of a consumer group.")
    .define("group.consumer.min.assignment.interval.ms", INT, 0, at_least(0), MEDIUM,
            "Smallest consumer.assignment.interval.ms a group may set.")
    .define("group.consumer.max.assignment.interval.ms", INT, 15000, at_least(0), MEDIUM,
            "Largest consumer.assignment.interval.ms a group may set.")
    # delegation tokens (KIP-48): off until a secret is set
    .define("delegation.token.secret.key", PASSWORD, None, None, MEDIUM,
            "Key of the tokens' HMACs, alike on every broker (also read as delegation.token.master.key).")
    .define("delegation.token.max.lifetime.ms", LONG, 7 * 24 * 3600 * 1000, at_least(1), MEDIUM,
            "Longest a token may live, renewals included.")
    .define("delegation.token.expiry.time.ms", LONG, 24 * 3600 * 1000, at_least(1), MEDIUM,
            "How long a token lives before it must be renewed, when the request names no period.")
    .define("delegation.token.expiry.check.interval.ms", LONG, 3600 * 1000, at_least(1), LOW,
            "How often expired tokens are removed.")
    .define("telemetry.max.bytes", INT, 1024 * 1024, at_least(1), MEDIUM,
            "Largest client telemetry push (KIP-714) the broker accepts, compressed or not.")
    # share groups (KIP-932): the defaults and the bounds of each group's share.* configs
    .define("group.share.session.timeout.ms", INT, 45000, at_least(1), MEDIUM,
            "How long a share-group member may go without heartbeating.")
    .define("group.share.min.session.timeout.ms", INT, 45000, at_least(1), MEDIUM,
            "Smallest share.session.timeout.ms a group may set.")
    .define("group.share.max.session.timeout.ms", INT, 60000, at_least(1), MEDIUM,
            "Largest share.session.timeout.ms a group may set.")
    .define("group.share.heartbeat.interval.ms", INT, 5000, at_least(1), MEDIUM,
            "How often share-group members heartbeat (the broker tells them).")
    .define("group.share.min.heartbeat.interval.ms", INT, 5000, at_least(1), MEDIUM,
            "Smallest share.heartbeat.interval.ms a group may set.")
    .define("group.share.max.heartbeat.interval.ms", INT, 15000, at_least(1), MEDIUM,
            "Largest share.heartbeat.interval.ms a group may set.")
    .define("group.share.record.lock.duration.ms", INT, 30000, at_least(1000), MEDIUM,
            "How long a share consumer holds the records it acquired before they are offered again.")
    .define("group.share.min.record.lock.duration.ms", INT, 15000, at_least(1000), MEDIUM,
            "Smallest share.record.lock.duration.ms a group may set.")
    .define("group.share.max.record.lock.duration.ms", INT, 60000, at_least(1000), MEDIUM,
            "Largest share.record.lock.duration.ms a group may set.")
    .define("group.share.delivery.count.limit", INT, 5, Range.between(2, 10), MEDIUM,
            "Deliveries of one record to a share group before it is archived.")
    .define("group.share.min.delivery.count.limit", INT, 2, Range.between(2, 10), MEDIUM,
            "Smallest share.delivery.count.limit a group may set.")
    .define("group.share.max.delivery.count.limit", INT, 10, Range.between(2, 10), MEDIUM,
            "Largest share.delivery.count.limit a group may set.")
    .define("group.share.partition.max.record.locks", INT, 2000, at_least(100), MEDIUM,
            "Records of one share-partition that may be acquired at once.")
    .define("group.share.min.partition.max.record.locks", INT, 100, at_least(100), MEDIUM,
            "Smallest share.partition.max.record.locks a group may set.")
    .define("group.share.max.partition.max.record.locks", INT, 4000, at_least(100), MEDIUM,
            "Largest share.partition.max.record.locks a group may set.")
    .define("group.share.assignment.interval.ms", INT, 1000, at_least(0), MEDIUM,
            "Least time between two assignment updates of a share group.")
    .define("group.share.min.assignment.interval.ms", INT, 0, at_least(0), MEDIUM,
            "Smallest share.assignment.interval.ms a group may set.")
    .define("group.share.max.assignment.interval.ms", INT, 15000, at_least(0), MEDIUM,
            "Largest share.assignment.interval.ms a group may set.")
    .define("group.share.max.size", INT, 200, Range.between(1, 1000), MEDIUM, "Most members in one share group.")
    .define("group.share.assignors", LIST, "simple", ValidList("simple"), MEDIUM,
            "The share groups' server-side assignor.")
    .define("group.share.max.share.sessions", INT, 2000, at_least(1), MEDIUM, "Most share sessions on one broker.")
    .define("errors.deadletterqueue.topic.name.prefix", STRING, "dlq.", None, MEDIUM,
            "The prefix a share group's dead-letter topic name must have (\"\" for none).")
    # streams groups (KIP-1071): the defaults and the bounds of each group's streams.* configs
    .define("group.streams.session.timeout.ms", INT, 45000, at_least(1), MEDIUM,
            "How long a streams-group member may go without heartbeating.")
    .define("group.streams.min.session.timeout.ms", INT, 45000, at_least(1), MEDIUM,
            "Smallest streams.session.timeout.ms a group may set.")
    .define("group.streams.max.session.timeout.ms", INT, 60000, at_least(1), MEDIUM,
            "Largest streams.session.timeout.ms a group may set.")
    .define("group.streams.heartbeat.interval.ms", INT, 5000, at_least(1), MEDIUM,
            "How often streams-group members heartbeat (the broker tells them).")
    .define("group.streams.min.heartbeat.interval.ms", INT, 5000, at_least(1), MEDIUM,
            "Smallest streams.heartbeat.interval.ms a group may set.")
    .define("group.streams.max.heartbeat.interval.ms", INT, 15000, at_least(1), MEDIUM,
            "Largest streams.heartbeat.interval.ms a group may set.")
    .define("group.streams.num.standby.replicas", INT, 0, at_least(0), MEDIUM,
            "Standby replicas of each task in a streams group.")
    .define("group.streams.max.standby.replicas", INT, 2, at_least(0), MEDIUM,
            "Largest streams.num.standby.replicas a group may set.")
    .define("group.streams.initial.rebalance.delay.ms", INT, 3000, at_least(0), MEDIUM,
            "Wait for more streams clients before a new streams group's first assignment.")
    .define("group.streams.assignment.interval.ms", INT, 1000, at_least(0), MEDIUM,
            "Least time between two assignment updates of a streams group.")
    .define("group.streams.min.assignment.interval.ms", INT, 0, at_least(0), MEDIUM,
            "Smallest streams.assignment.interval.ms a group may set.")
    .define("group.streams.max.assignment.interval.ms", INT, 15000, at_least(0), MEDIUM,
            "Largest streams.assignment.interval.ms a group may set.")
    .define("group.streams.max.size", INT, INT_MAX, at_least(1), MEDIUM, "Most members in one streams group.")
    .define("group.streams.assignors", LIST, "sticky", ValidList("sticky"), MEDIUM,
            "The streams groups' server-side task assignors; the first is the default.")
    .define("group.streams.rack.aware.assignment.tags", LIST, "", None, MEDIUM,
            "Client tags the assignor spreads standby tasks over.")
    .define("offset.metadata.max.bytes", INT, 4096, None, HIGH, "Largest metadata string of a committed offset.")
    .define("offsets.load.buffer.size", INT, 5 * 1024 * 1024, at_least(1), HIGH, "Read size when loading offsets.")
    .define("offsets.topic.replication.factor", SHORT, 3, at_least(1), HIGH,
            "Replication factor of __consumer_offsets.")
    .define("offsets.topic.num.partitions", INT, 50, at_least(1), HIGH, "Partitions of __consumer_offsets.")
    # the share coordinator's `__share_group_state` (Kafka's ShareCoordinatorConfig)
    .define("share.coordinator.state.topic.num.partitions", INT, 50, at_least(1), HIGH,
            "Partitions of __share_group_state.")
    .define("share.coordinator.state.topic.replication.factor", SHORT, 3, at_least(1), HIGH,
            "Replication factor of __share_group_state.")
    .define("share.coordinator.state.topic.min.isr", SHORT, 2, at_least(1), HIGH,
            "min.insync.replicas of __share_group_state.")
    .define("share.coordinator.state.topic.segment.bytes", INT, 100 * 1024 * 1024, at_least(1), HIGH,
            "Segment size of __share_group_state.")
    .define("share.coordinator.snapshot.update.records.per.snapshot", INT, 500, at_least(0), MEDIUM,
            "ShareUpdate records of a share partition between two of its ShareSnapshots.")
    .define("share.coordinator.write.timeout.ms", INT, 5000, at_least(1), HIGH,
            "Wait for a __share_group_state write to be replicated.")
    .define("share.coordinator.load.buffer.size", INT, 5 * 1024 * 1024, at_least(1), HIGH,
            "Read size when loading __share_group_state.")
    .define("offsets.topic.segment.bytes", INT, 100 * 1024 * 1024, at_least(1), HIGH,
            "Segment size of __consumer_offsets.")
    .define("offsets.topic.compression.codec", INT, 0, None, HIGH, "Codec id for offset commits (0 = none).")
    .define("offsets.retention.minutes", INT, 7 * 24 * 60, at_least(1), HIGH,
            "Keep offsets of an empty group this long.")
    .define("offsets.retention.check.interval.ms", LONG, 600000, at_least(1), HIGH,
            "How often stale offsets are removed.")
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
    .define("transaction.max.timeout.ms", INT, 900000, at_least(1), HIGH,
            "Longest transaction timeout a producer may ask for.")
    .define("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10000, at_least(1), LOW,
            "How often timed-out transactions are aborted.")
    .define("transaction.remove.expired.transaction.cleanup.interval.ms", INT, _HOUR_MS, at_least(1), LOW,
            "How often expired transactional ids are removed.")
    .define("transaction.partition.verification.enable", BOOLEAN, True, None, LOW,
            "Check that a transactional write's partition was added to the transaction.")
    .define("unstable.api.versions.enable", BOOLEAN, False, None, LOW,
            "Serve and advertise API versions Kafka marks unstable (InitProducerId v6, KIP-939).")
    .define("transaction.two.phase.commit.enable", BOOLEAN, False, None, LOW,
            "Allow participation in Two-Phase Commit (2PC) transactions with an external transaction coordinator.")
    .define("producer.id.expiration.ms", INT, _DAY_MS, at_least(1), LOW,
            "Forget an idle producer id's state after this.")
    # security (each may be given per listener as listener.name.<listener>.<name>)
    .define("inter.broker.listener.name", STRING, None, None, MEDIUM,
            "Listener brokers use to reach each other; exclusive with security.inter.broker.protocol.")
    .define("security.inter.broker.protocol", STRING, "PLAINTEXT",
            ValidString("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), MEDIUM,
            "Security protocol of inter-broker connections, when inter.broker.listener.name is unset.")
    .define("ssl.keystore.type", STRING, "JKS", None, MEDIUM, "Key store format; only PEM is supported here.")
    .define("ssl.keystore.location", STRING, None, None, HIGH, "Key store file (PEM: private key and chain).")
    .define("ssl.keystore.password", PASSWORD, None, None, HIGH, "Key store password (not used with PEM).")
    .define("ssl.keystore.key", PASSWORD, None, None, HIGH, "PEM private key, inline.")
    .define("ssl.keystore.certificate.chain", PASSWORD, None, None, HIGH, "PEM certificate chain, inline.")
    .define("ssl.key.password", PASSWORD, None, None, HIGH, "Private key password.")
    .define("ssl.truststore.type", STRING, "JKS", None, MEDIUM, "Trust store format; only PEM is supported here.")
    .define("ssl.truststore.location", STRING, None, None, HIGH, "Trust store file (PEM certificates).")
    .define("ssl.truststore.password", PASSWORD, None, None, HIGH, "Trust store password (not used with PEM).")
    .define("ssl.truststore.certificates", PASSWORD, None, None, HIGH, "Trusted PEM certificates, inline.")
    .define("ssl.client.auth", STRING, "none", ValidString("required", "requested", "none"), MEDIUM,
            "Whether clients must present a certificate.")
    .define("ssl.enabled.protocols", LIST, "TLSv1.2,TLSv1.3", None, MEDIUM, "TLS versions accepted.")
    .define("ssl.protocol", STRING, "TLSv1.3", None, MEDIUM, "TLS protocol of the SSL context.")
    .define("ssl.cipher.suites", LIST, "", None, LOW, "Cipher suites allowed (empty: the defaults).")
    .define("ssl.endpoint.identification.algorithm", STRING, "https", None, LOW,
            "How a client checks the server's host name (empty: not checked).")
    .define("ssl.principal.mapping.rules", STRING, "DEFAULT", None, LOW,
            "Rules mapping a client certificate's subject DN to a principal name.")
    .define("principal.builder.class", CLASS, DEFAULT_PRINCIPAL_BUILDER, None, MEDIUM,
            "Principal builder; only Kafka's default builder is available.")
    .define("sasl.enabled.mechanisms", LIST, "GSSAPI", None, MEDIUM, "SASL mechanisms offered to clients.")
    .define("sasl.mechanism.inter.broker.protocol", STRING, "GSSAPI", None, MEDIUM,
            "SASL mechanism of inter-broker connections.")
    .define("sasl.jaas.config", PASSWORD, None, None, MEDIUM,
            "JAAS login settings; a broker reads listener.name.<listener>.<mechanism>.sasl.jaas.config.")
    .define("sasl.server.max.receive.size", INT, 524288, None, LOW,
            "Largest frame accepted before a SASL client is authenticated.")
    .define("connection.failed.authentication.delay.ms", INT, 100, at_least(0), LOW,
            "Wait before closing a connection whose authentication failed, so the client reads why.")
    .define("connections.max.reauth.ms", LONG, 0, None, MEDIUM,
            "Longest SASL session before the client must re-authenticate (0: no limit).")
    .define("authorizer.class.name", STRING, "", None, LOW,
            "Kafka's AclAuthorizer or StandardAuthorizer class name (both: our ACL authorizer); empty for none.")
    # Kafka 4.4's other broker settings: defined with Kafka's types and defaults so that its configuration
    # files load and DescribeConfigs lists them; each says whether it acts here
    .define("add.partitions.to.txn.retry.backoff.ms", INT, 20, at_least(1), LOW,
            "Back-off of a KIP-890 verification retry.")
    .define("add.partitions.to.txn.retry.backoff.max.ms", INT, 100, at_least(1), LOW,
            "Longest back-off of a KIP-890 verification retry.")
    .define("client.quota.callback.class", CLASS, None, None, LOW,
            "A JVM plugin class in Kafka: accepted for compatibility, unused here.")
    .define("config.providers", LIST, "", None, LOW,
            "Kafka's ConfigProvider plugins (JVM classes): accepted for compatibility, unused here.")
    .define("group.coordinator.threads", INT, 4, at_least(1), LOW,
            "Kafka's group coordinator thread pool; here the event loop runs the coordinator.")
    .define("group.coordinator.background.threads", INT, 2, at_least(1), LOW,
            "Kafka's group coordinator background threads; unused here.")
    .define("group.coordinator.append.linger.ms", INT, -1, at_least(-1), LOW,
            "How long Kafka's coordinator waits to batch its writes (-1: adaptive).")
    .define("group.coordinator.cached.buffer.max.bytes", INT, 1048588, at_least(512 * 1024), LOW,
            "Largest write buffer Kafka's coordinator keeps for reuse.")
    .define("kafka.metrics.polling.interval.secs", INT, 10, at_least(1), LOW,
            "Polling interval of Kafka's Yammer metrics reporters; unused here.")
    .define("kafka.metrics.reporters", LIST, "", None, LOW,
            "A JVM plugin class in Kafka: accepted for compatibility, unused here.")
    .define("log.dir.failure.timeout.ms", LONG, 30000, at_least(1), LOW,
            "How long a KRaft broker with a failed log dir may wait before shutting down.")
    .define("max.request.partition.size.limit", INT, 2000, at_least(1), LOW,
            "Most partitions Kafka lets one paginated request (DescribeTopicPartitions) return.")
    .define("metric.reporters", LIST, "org.apache.kafka.common.metrics.JmxReporter", None, LOW,
            "Kafka's metrics reporters (JVM classes); metrics are served on prometheus.listener here.")
    .define("metrics.num.samples", INT, 2, at_least(1), LOW,
            "Samples kept by Kafka's metrics; unused here.")
    .define("metrics.recording.level", STRING, "INFO", ValidString("INFO", "DEBUG", "TRACE"), LOW,
            "Recording level of Kafka's metrics; unused here.")
    .define("metrics.sample.window.ms", LONG, 30000, at_least(1), LOW,
            "Window of each of Kafka's metric samples; unused here.")
    .define("queued.max.request.bytes", LONG, -1, None, LOW,
            "Bytes of requests Kafka queues before reading no more (-1: no limit).")
    .define("replica.socket.receive.buffer.bytes", INT, 65536, None, LOW,
            "Socket receive buffer of follower fetch connections.")
    .define("replication.quota.window.num", INT, 11, at_least(1), LOW,
            "Samples kept to measure replication throttles.")
    .define("replication.quota.window.size.seconds", INT, 1, at_least(1), LOW,
            "Length of each replication throttle sample.")
    .define("request.timeout.ms", INT, 30000, at_least(0), LOW,
            "Kafka's inter-broker client request timeout.")
    .define("sasl.client.callback.handler.class", CLASS, None, None, LOW,
            "A JVM plugin class in Kafka: accepted for compatibility, unused here.")
    .define("sasl.server.callback.handler.class", CLASS, None, None, LOW,
            "A JVM plugin class in Kafka: accepted for compatibility, unused here.")
    .define("sasl.login.callback.handler.class", CLASS, None, None, LOW,
            "A JVM plugin class in Kafka: accepted for compatibility, unused here.")
    .define("sasl.login.class", CLASS, None, None, LOW,
            "A JVM plugin class in Kafka: accepted for compatibility, unused here.")
    .define("sasl.login.connect.timeout.ms", INT, None, None, LOW,
            "A SASL client login setting (JVM login modules): accepted for compatibility, unused by the broker.")
    .define("sasl.login.read.timeout.ms", INT, None, None, LOW,
            "A SASL client login setting (JVM login modules): accepted for compatibility, unused by the broker.")
    .define("sasl.login.refresh.buffer.seconds", SHORT, 300, None, LOW,
            "A SASL client login setting (JVM login modules): accepted for compatibility, unused by the broker.")
    .define("sasl.login.refresh.min.period.seconds", SHORT, 60, None, LOW,
            "A SASL client login setting (JVM login modules): accepted for compatibility, unused by the broker.")
    .define("sasl.login.refresh.window.factor", DOUBLE, 0.8, None, LOW,
            "A SASL client login setting (JVM login modules): accepted for compatibility, unused by the broker.")
    .define("sasl.login.refresh.window.jitter", DOUBLE, 0.05, None, LOW,
            "A SASL client login setting (JVM login modules): accepted for compatibility, unused by the broker.")
    .define("sasl.login.retry.backoff.ms", LONG, 100, None, LOW,
            "A SASL client login setting (JVM login modules): accepted for compatibility, unused by the broker.")
    .define("sasl.login.retry.backoff.max.ms", LONG, 10000, None, LOW,
            "A SASL client login setting (JVM login modules): accepted for compatibility, unused by the broker.")
    .define("sasl.kerberos.kinit.cmd", STRING, "/usr/bin/kinit", None, LOW,
            "GSSAPI (Kerberos) is not served here: accepted for compatibility, unused.")
    .define("sasl.kerberos.min.time.before.relogin", LONG, 60000, None, LOW,
            "GSSAPI (Kerberos) is not served here: accepted for compatibility, unused.")
    .define("sasl.kerberos.principal.to.local.rules", LIST, "DEFAULT", None, LOW,
            "GSSAPI (Kerberos) is not served here: accepted for compatibility, unused.")
    .define("sasl.kerberos.service.name", STRING, None, None, LOW,
            "GSSAPI (Kerberos) is not served here: accepted for compatibility, unused.")
    .define("sasl.kerberos.ticket.renew.jitter", DOUBLE, 0.05, None, LOW,
            "GSSAPI (Kerberos) is not served here: accepted for compatibility, unused.")
    .define("sasl.kerberos.ticket.renew.window.factor", DOUBLE, 0.8, None, LOW,
            "GSSAPI (Kerberos) is not served here: accepted for compatibility, unused.")
    .define("security.providers", STRING, None, None, LOW,
            "A JVM TLS provider setting: accepted for compatibility; Python's ssl module has no equivalent.")
    .define("socket.connection.setup.timeout.ms", LONG, 10000, None, LOW,
            "First timeout of an inter-broker connection attempt.")
    .define("socket.connection.setup.timeout.max.ms", LONG, 30000, None, LOW,
            "Longest timeout of an inter-broker connection attempt.")
    .define("ssl.allow.dn.changes", BOOLEAN, False, None, LOW,
            "Whether a reconfigured keystore may change the certificate's DN (Kafka refuses by default).")
    .define("ssl.allow.san.changes", BOOLEAN, False, None, LOW,
            "Whether a reconfigured keystore may change the certificate's SANs.")
    .define("ssl.engine.factory.class", CLASS, None, None, LOW,
            "A JVM plugin class in Kafka: accepted for compatibility, unused here.")
    .define("ssl.keymanager.algorithm", STRING, "SunX509", None, LOW,
            "A JVM TLS provider setting: accepted for compatibility; Python's ssl module has no equivalent.")
    .define("ssl.trustmanager.algorithm", STRING, "PKIX", None, LOW,
            "A JVM TLS provider setting: accepted for compatibility; Python's ssl module has no equivalent.")
    .define("ssl.provider", STRING, None, None, LOW,
            "A JVM TLS provider setting: accepted for compatibility; Python's ssl module has no equivalent.")
    .define("ssl.secure.random.implementation", STRING, None, None, LOW,
            "A JVM TLS provider setting: accepted for compatibility; Python's ssl module has no equivalent.")
    .define("sasl.oauthbearer.allow.unverified.audience", BOOLEAN, False, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.allow.unverified.issuer", BOOLEAN, False, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.assertion.algorithm", STRING, "RS256", None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.assertion.claim.aud", STRING, None, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.assertion.claim.exp.seconds", INT, 300, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.assertion.claim.iss", STRING, None, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.assertion.claim.jti.include", BOOLEAN, False, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.assertion.claim.nbf.seconds", INT, 60, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.assertion.claim.sub", STRING, None, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.assertion.file", STRING, None, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.assertion.private.key.file", STRING, None, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.assertion.private.key.passphrase", PASSWORD, None, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.assertion.template.file", STRING, None, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.client.credentials.client.id", STRING, None, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.client.credentials.client.secret", PASSWORD, None, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.clock.skew.seconds", INT, 30, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.expected.audience", LIST, "", None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.expected.issuer", STRING, None, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.jwks.endpoint.refresh.ms", LONG, 3600000, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", LONG, 10000, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", LONG, 100, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.jwks.endpoint.url", STRING, None, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.jwt.retriever.class", CLASS,
            "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever", None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.jwt.validator.class", CLASS,
            "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator", None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.scope", STRING, None, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.scope.claim.name", STRING, "scope", None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.sub.claim.name", STRING, "sub", None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    .define("sasl.oauthbearer.token.endpoint.url", STRING, None, None, LOW,
            "OAUTHBEARER's JWKS/token-endpoint validation is not built (the unsecured JWT validator is): unused.")
    # client quotas (QuotaConfig) and the metrics endpoint
    .define("quota.window.num", INT, 11, at_least(1), LOW, "Samples kept to measure a client's rate against its quota.")
    .define("quota.window.size.seconds", INT, 1, at_least(1), LOW, "Length of each quota sample.")
    .define("prometheus.listener", STRING, None, _http_listener, LOW,
            "http://HOST:PORT serving Prometheus metrics at /metrics; none when unset (not a Kafka key).")
)


def broker_config_synonyms(name: str) -> list[str]:
    """Broker properties that stand for the same setting, highest priority first
    (DynamicBrokerConfig.brokerConfigSynonyms): log.retention.hours -> ms, minutes, hours."""
    for synonyms in TOPIC_CONFIG_SYNONYMS.values():
        if len(synonyms) > 1 and any(s.name == name for s in synonyms):
            return [s.name for s in synonyms]
    return [name]


# Kafka's internal settings (ConfigDef.defineInternal): read as any other, but not listed by DescribeConfigs.
INTERNAL_BROKER_CONFIGS = frozenset({"unstable.api.versions.enable"})

# Broker properties Kafka can change at runtime; every other broker property is read-only.
DYNAMIC_BROKER_CONFIGS = frozenset(
    {s[0].name for t, s in TOPIC_CONFIG_SYNONYMS.items() if t != "message.format.version"} | {
        # dynamic in Kafka; refused at runtime here (DynamicBrokerConfig: none of them acts)
        "config.providers", "metric.reporters", "sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules", "sasl.kerberos.service.name", "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.ticket.renew.window.factor", "sasl.login.refresh.buffer.seconds",
        "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter", "ssl.engine.factory.class", "ssl.keymanager.algorithm",
        "ssl.provider", "ssl.secure.random.implementation", "ssl.trustmanager.algorithm",
        "group.coordinator.cached.buffer.max.bytes",
        "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
        "message.max.bytes", "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
        "background.threads", "listeners", "advertised.listeners", "listener.security.protocol.map",
        "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
        "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.client.auth",
        # the rest of SslConfigs.RECONFIGURABLE_CONFIGS: a listener's context is rebuilt from all of them
        "ssl.protocol", "ssl.enabled.protocols", "ssl.cipher.suites", "ssl.endpoint.identification.algorithm",
        "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
        "sasl.enabled.mechanisms", "sasl.jaas.config", "max.connections", "max.connection.creation.rate",
        "max.connections.per.ip", "max.connections.per.ip.overrides", "num.network.threads",
        "producer.id.expiration.ms", "transaction.partition.verification.enable", "cordoned.log.dirs",
    })

# Values DescribeConfigs must hide: PASSWORD types (and anything of unknown type).
SENSITIVE_BROKER_CONFIGS = frozenset(n for n, k in BROKER_CONFIG_DEF.config_keys.items() if k.type is PASSWORD)
READ_ONLY_BROKER_CONFIGS = frozenset(n for n in BROKER_CONFIG_DEF if n not in DYNAMIC_BROKER_CONFIGS)
# Topic configs are never read-only, and none is of PASSWORD type.


def _known(props: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in props.items() if k in BROKER_CONFIG_DEF}


class BrokerConfig(DictView):
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

    def reconfigure(self, dynamic_default: Mapping[str, str], dynamic_broker: Mapping[str, str]) -> set[str]:
        """KIP-226: the values in force become the static ones under the cluster's dynamic defaults
        under this broker's own dynamic ones. Validated as a whole first (ConfigError leaves this
        config as it was); returns the names whose value changed. ``originals`` stay the static
        settings, which DescribeConfigs reports as STATIC_BROKER_CONFIG."""
        merged = {**self.originals, **_known(dynamic_default), **_known(dynamic_broker)}
        candidate = BrokerConfig(merged)
        changed = {name for name, value in candidate._data.items() if self._data.get(name) != value}
        self._data = candidate._data
        return changed

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
    def cordoned_log_dirs(self) -> list[str]:
        """cordoned.log.dirs as the log.dirs entries it names (``*``: all of them); ConfigError as Kafka's
        validateCordonedLogDirs for an empty entry, ``*`` beside others, or an entry not in log.dirs."""
        entries = list(dict.fromkeys(self["cordoned.log.dirs"] or []))
        if any(not e for e in entries):
            raise ConfigError("cordoned.log.dirs", self["cordoned.log.dirs"],
                              "Configuration 'cordoned.log.dirs' values must not be empty.")
        dirs = self.log_dirs
        if "*" in entries:
            if len(entries) != 1:
                raise ConfigError("cordoned.log.dirs", self["cordoned.log.dirs"],
                                  "requirement failed: When cordoned.log.dirs is set to *, it must not contain "
                                  "other values")
            return dirs
        missing = [e for e in entries if e not in dirs]
        if missing:
            raise ConfigError("cordoned.log.dirs", self["cordoned.log.dirs"],
                              "requirement failed: All entries in cordoned.log.dirs must be present in log.dirs or "
                              f"log.dir. Missing entries : {', '.join(missing)}")
        return [d for d in dirs if d in entries]

    @property
    def log_dirs(self) -> list[str]:
        raw = self["log.dirs"] if self["log.dirs"] is not None else self["log.dir"]
        return [d for d in parse_type("log.dirs", raw, LIST) if d]

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
    def listener_security_protocol_map(self) -> dict[str, SecurityProtocol]:
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

    @property
    def inter_broker_listener_name(self) -> str:
        """inter.broker.listener.name, else the listener named after security.inter.broker.protocol."""
        name = self["inter.broker.listener.name"]
        return name.upper() if name else self["security.inter.broker.protocol"]

    def listener_config(self, listener_name: str) -> dict[str, Any]:
        """Every value as the listener sees it: `listener.name.<listener>.<name>` wins over `<name>`
        (Kafka's valuesWithPrefixOverride). Prefixed names that are not broker keys (a mechanism's
        `plain.sasl.jaas.config`) are kept under their unprefixed name, as given."""
        prefix = f"listener.name.{listener_name.lower()}."
        out = dict(self._data)
        for name, raw in self.originals.items():
            if not name.startswith(prefix):
                continue
            key = name[len(prefix):]
            definition = BROKER_CONFIG_DEF.config_keys.get(key)
            out[key] = raw if definition is None else definition.parse(raw.value if isinstance(raw, Password)
                                                                       else raw)
        return out

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
        self.cordoned_log_dirs     # noqa: B018 (Kafka's validateCordonedLogDirs)
        for name in ("replica.socket.timeout.ms", "replica.lag.time.max.ms"):
            if self["replica.fetch.wait.max.ms"] > self[name]:
                raise ConfigError("replica.fetch.wait.max.ms", self["replica.fetch.wait.max.ms"],
                                  f"must not exceed {name}")
        for kind, what in (("consumer", "session.timeout"), ("consumer", "heartbeat.interval"),
                           ("share", "session.timeout"), ("share", "heartbeat.interval"),
                           ("share", "record.lock.duration")):
            lo, value, hi = (self[f"group.{kind}.{m}{what}.ms"] for m in ("min.", "", "max."))
            if not lo <= value <= hi:
                raise ConfigError(f"group.{kind}.{what}.ms", value,
                                  f"must be between group.{kind}.min.{what}.ms ({lo}) and "
                                  f"group.{kind}.max.{what}.ms ({hi})")
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
        else:
            advertised = listeners
        if self["inter.broker.listener.name"] and self.is_set("security.inter.broker.protocol"):
            raise ConfigError("security.inter.broker.protocol", self["security.inter.broker.protocol"],
                              "Only one of inter.broker.listener.name and security.inter.broker.protocol "
                              "should be set.")
        if self["zookeeper.connect"]:
            # Kafka checks these always; a single node has no inter-broker traffic, so only a cluster does here
            name = self.inter_broker_listener_name
            inter_broker = next((e for e in advertised if e.listener_name == name), None)
            if inter_broker is None:
                raise ConfigError("inter.broker.listener.name", name,
                                  "inter.broker.listener.name must be a listener name defined in "
                                  "advertised.listeners. The valid options based on currently configured "
                                  f"listeners are {','.join(e.listener_name for e in advertised)}")
            if inter_broker.security_protocol.name.startswith("SASL_"):
                mechanism = self["sasl.mechanism.inter.broker.protocol"]
                enabled = self.listener_config(name)["sasl.enabled.mechanisms"]
                if mechanism not in enabled:
                    raise ConfigError("sasl.mechanism.inter.broker.protocol", mechanism,
                                      "sasl.mechanism.inter.broker.protocol must be included in "
                                      "sasl.enabled.mechanisms when SASL is used for inter-broker communication")
