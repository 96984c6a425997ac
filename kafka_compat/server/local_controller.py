"""The single node's controller: the one place that changes topics, and the publisher of leadership.

In Kafka the controller owns topic creation, deletion, partition additions and
config changes, and brokers only apply what it publishes: leadership to the
ReplicaManager (LeaderAndIsr) and cluster metadata to the MetadataCache
(UpdateMetadata). Without ZooKeeper this broker is its own controller: topics
persist in the TopicRegistry beside the logs, every partition leads here in
epoch 0 with ISR = {this broker}, and the same two calls publish it, so the
request handlers cannot tell a single node from a cluster member.

Making or deleting a partition's log costs file-system work (directories, files,
fsyncs: milliseconds each), so a topic of thousands of partitions must not be
made in one go on the event loop, where it would hold every client up for a
minute. Partitions are published for TURN_BUDGET_S at once and the rest as
much per event-loop turn; until then Metadata shows them without a leader
(LEADER_NOT_AVAILABLE, which clients retry), as a Kafka cluster does while its
controller works. Deletion goes the same way, after the topic has left the
metadata, and a topic made again under the same name first finishes it. The
internal topics (__consumer_offsets, __transaction_state), made once by the
broker itself, are made whole at once, so a coordinator is never asked for a
partition that does not lead yet.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from kafka_compat.storage.log_config import LogConfig, validate_topic_configs

from ..protocol.errors import ErrorCode, KafkaError
from ..sentinels import INTERNAL_TOPICS
from .metadata_cache import MetadataCache, PartitionLeadership
from .remote_log_config import validate_remote_storage
from .replica_manager import ReplicaManager
from .topics import Topic, TopicRegistry, validate_name

MAX_PARTITIONS = 100000
LEADER_EPOCH = 0
TURN_BUDGET_S = 0.05                    # time one event-loop turn may spend making or deleting logs
log = logging.getLogger(__name__)


class LocalController:
    def __init__(self, config, broker_id: int, registry: TopicRegistry, metadata_cache: MetadataCache):
        self.config = config
        self.broker_id = broker_id
        self.topics = registry
        self.metadata_cache = metadata_cache
        self.replica_manager: ReplicaManager | None = None
        self.on_topic_deleted: list = []      # callbacks(topic name, partition count)
        self._deleting: dict[str, list[int]] = {}   # topic -> partitions whose logs are still to delete
        self.stopped = False

    def startup(self, replica_manager: ReplicaManager) -> None:
        """Publish every known topic: its partitions lead here (their logs load now)."""
        self.replica_manager = replica_manager
        for topic in list(self.topics.topics.values()):
            self._publish(topic, 0, chunked=False, strict=False)   # before the listeners open: all at once;
            # a log that cannot load stays offline, the rest serve

    def shutdown(self) -> None:
        """No more chunks: the replica manager and the logs are about to close."""
        self.stopped = True

    def topic_configs(self, topic: str) -> dict[str, str]:
        """A topic's config overrides (Kafka's ConfigRepository.topicConfig); {} for none."""
        t = self.topics.get(topic)
        return dict(t.configs) if t is not None else {}

    def log_config(self, topic: str) -> LogConfig:
        """The broker's topic defaults under the topic's overrides, as storage wants them."""
        return log_config(self.config, self.topic_configs(topic))

    def _publish(self, topic: Topic, first_new: int, chunked: bool = True, strict: bool = True) -> None:
        """Lead the partitions from ``first_new`` on here. With ``chunked``, only for TURN_BUDGET_S per
        event-loop turn (the rest follow on later turns, LEADER_NOT_AVAILABLE meanwhile), so a huge
        creation never stalls other clients. With ``strict``, a partition of this turn whose log cannot be
        made (out of descriptors or disk) raises KAFKA_STORAGE_ERROR naming it; later turns log theirs."""
        end = topic.partitions
        messages: dict[int, str] = {}
        now = self._publish_range(topic, first_new, end, TURN_BUDGET_S if chunked else None, messages)
        if messages and strict:
            first = min(messages)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"{len(messages)} of {now - first_new} partitions could not be created; {messages[first]}")
        if now < end:
            me = self.broker_id
            self.metadata_cache.update_partitions(topic.name, topic.topic_id, {
                i: PartitionLeadership(-1, LEADER_EPOCH, (me,), (me,)) for i in range(now, end)})
            asyncio.get_running_loop().call_soon(self._publish_later, topic.name, topic.topic_id, now, end)

    def _storage(self, what: str, action):
        """Run a registry change; a disk that refuses it is this request's KAFKA_STORAGE_ERROR."""
        try:
            return action()
        except OSError as e:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot {what}: {e.strerror or e}") from None

    def _publish_range(self, topic: Topic, first: int, end: int, budget: float | None,
                       messages: dict[int, str] | None = None) -> int:
        """Lead partitions first.. of `topic` until `end` or until `budget` seconds are spent (at least
        one); the first not done. Logs that cannot be made put their reason in ``messages``."""
        me = self.broker_id
        deadline = None if budget is None else time.monotonic() + budget
        i = first
        while i < end:
            upto = end if deadline is None else i + 1
            states = {p: PartitionLeadership(me, LEADER_EPOCH, (me,), (me,)) for p in range(i, upto)}
            self.replica_manager.apply_local_leadership(topic.name, topic.topic_id, states, messages)
            self.metadata_cache.update_partitions(topic.name, topic.topic_id, states)
            i = upto
            if deadline is not None and time.monotonic() >= deadline:
                break
        return i

    def _publish_later(self, name: str, topic_id: bytes, first: int, end: int) -> None:
        topic = self.topics.get(name)
        if topic is None or topic.topic_id != topic_id or self.stopped:
            return                              # deleted (or deleted and made again) meanwhile
        messages: dict[int, str] = {}
        try:
            now = self._publish_range(topic, first, end, TURN_BUDGET_S, messages)
        except Exception:
            log.exception("publishing partitions %d.. of %s failed", first, name)
            return
        for index, message in sorted(messages.items()):
            log.error("partition %d of %s stays offline: %s", index, name, message)
        if now < end:
            asyncio.get_running_loop().call_soon(self._publish_later, name, topic_id, now, end)

    def _usable_brokers(self) -> int:
        """1, or 0 when every log dir is cordoned (KIP-1066: Kafka's controller then places no new replica on
        the broker)."""
        rm = self.replica_manager
        if rm is None:
            return 1
        dirs = rm.log_manager.log_dirs
        return 0 if dirs and set(dirs) <= rm.cordoned_log_dirs else 1

    def check_configs(self, configs: dict[str, str]) -> dict[str, str]:
        """Validate topic-level overrides; raise ConfigError (INVALID_CONFIG) on a bad one."""
        check_topic_configs(self.config, configs)
        return configs

    def check_new_topic(self, name: str, partitions: int, replication_factor: int,
                        configs: dict[str, str]) -> tuple[int, int]:
        validate_name(name)
        if self.topics.get(name) is not None:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        other = self.topics.collides(name)
        if other:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"Topic '{name}' collides with existing topic: {other}")
        cfg = self.config
        if partitions == -1:
            partitions = cfg["num.partitions"]
        if replication_factor == -1:
            replication_factor = cfg["default.replication.factor"]
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        if replication_factor < 1:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "Replication factor must be larger than 0.")
        if replication_factor > self._usable_brokers():
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Replication factor: {replication_factor} larger than available brokers: "
                             f"{self._usable_brokers()}.")
        self.check_configs(configs)
        return partitions, replication_factor

    def create_topic(self, name: str, partitions: int = -1, replication_factor: int = -1,
                     configs: dict[str, str] | None = None, validate_only: bool = False,
                     on_valid: Callable[[int], None] | None = None) -> Topic | None:
        """`on_valid(partitions)` runs once every check has passed, before the topic is made (where the
        controller mutation quota is charged, and may refuse)."""
        configs = dict(configs or {})
        partitions, _ = self.check_new_topic(name, partitions, replication_factor, configs)
        if validate_only:
            return None
        if on_valid is not None:
            on_valid(partitions)
        self._finish_deleting(name)
        topic = self._storage(f"record topic {name}", lambda: self.topics.create(name, partitions, configs))
        try:
            # the coordinators' own topics are made whole at once: their partitions must lead when asked for
            self._publish(topic, 0, chunked=name not in INTERNAL_TOPICS)
        except KafkaError:
            self._discard(topic)   # all or nothing: no half-created topic survives a failed request
            raise
        return topic

    def _discard(self, topic: Topic) -> None:
        try:
            self.topics.delete(topic.name)
        except OSError:
            pass
        self.metadata_cache.remove_topic(topic.name)
        self.replica_manager.stop_replicas(topic.name, range(topic.partitions), delete=True)

    def delete_topic(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        if not self.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        self.topics.delete(name)
        self.metadata_cache.remove_topic(name)
        self._finish_deleting(name)
        self._deleting[name] = list(range(topic.partitions))
        self._delete_later(name)
        for callback in self.on_topic_deleted:
            callback(name, topic.partitions)
        return topic

    def _delete_later(self, name: str) -> None:
        rest = self._deleting.get(name)
        if not rest or self.stopped:
            return
        deadline = time.monotonic() + TURN_BUDGET_S
        try:
            while rest and time.monotonic() < deadline:
                self.replica_manager.stop_replicas(name, [rest.pop()], delete=True)
        except Exception:
            log.exception("deleting partitions of %s failed", name)
        if not rest:
            del self._deleting[name]
        else:
            asyncio.get_running_loop().call_soon(self._delete_later, name)

    def _finish_deleting(self, name: str) -> None:
        """Delete what is left of an earlier topic of this name now, before its name is used again."""
        rest = self._deleting.pop(name, None)
        if rest:
            self.replica_manager.stop_replicas(name, rest, delete=True)

    def create_partitions(self, name: str, count: int, validate_only: bool = False) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        if count < topic.partitions:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {topic.partitions} partitions, which is higher than "
                             f"the requested {count}.")
        if count == topic.partitions:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic already has {topic.partitions} partitions.")
        if count > MAX_PARTITIONS:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Too many partitions.")
        if not self._usable_brokers():
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "Replication factor: 1 larger than available brokers: 0.")
        if validate_only:
            return
        old = topic.partitions
        self._storage(f"add partitions to {name}", lambda: self.topics.set_partitions(name, count))
        try:
            self._publish(topic, old)
        except KafkaError:
            self.replica_manager.stop_replicas(name, range(old, count), delete=True)
            meta = self.metadata_cache.get_topic(name)
            for index in range(old, count):
                meta.partition_states.pop(index, None)
            try:
                self.topics.set_partitions(name, old)
            except OSError:
                pass
            raise

    def set_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool = False) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.")
        self.check_configs(configs)
        if validate_only:
            return
        self.topics.set_configs(name, configs)
        self.replica_manager.topic_config_changed(name)


def log_config(broker_config, topic_configs: dict[str, str]) -> LogConfig:
    """The LogConfig of a topic with these overrides; raises ConfigError (INVALID_CONFIG) on a bad one.

    As Kafka's UnifiedLog.isRemoteLogEnabled, a log is tiered only while the broker's
    remote.log.storage.system.enable is on: otherwise its remote.storage.enable reads false here (and the
    usual retention applies), whatever the topic says (DescribeConfigs still shows the topic's value)."""
    props = broker_config.topic_defaults()
    props.update(validate_topic_configs(topic_configs))
    if props.get("remote.storage.enable") and not broker_config["remote.log.storage.system.enable"]:
        props["remote.storage.enable"] = False
    return LogConfig(props)


def check_topic_configs(broker_config, topic_configs: dict[str, str]) -> LogConfig:
    """The topic's LogConfig as given, then Kafka's rules for tiered storage (remote.storage.enable needs the
    broker's system on, and no compaction; local.retention.* within retention.*): what a create or an alter
    must pass."""
    props = broker_config.topic_defaults()
    props.update(validate_topic_configs(topic_configs))
    config = LogConfig(props)
    validate_remote_storage(broker_config, config)
    return config
