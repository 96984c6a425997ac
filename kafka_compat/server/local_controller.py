"""The single node's controller: the one place that changes topics, and the publisher of leadership.

In Kafka the controller owns topic creation, deletion, partition additions and
config changes, and brokers only apply what it publishes: leadership to the
ReplicaManager (LeaderAndIsr) and cluster metadata to the MetadataCache
(UpdateMetadata). Without ZooKeeper this broker is its own controller: topics
persist in the TopicRegistry beside the logs, every partition leads here in
epoch 0 with ISR = {this broker}, and the same two calls publish it, so the
request handlers cannot tell a single node from a cluster member.
"""
from __future__ import annotations

from kafka_compat.storage.log_config import LogConfig, validate_topic_configs

from ..protocol.errors import ErrorCode, KafkaError
from .metadata_cache import MetadataCache, PartitionState
from .replica_manager import ReplicaManager
from .topics import Topic, TopicRegistry, validate_name

MAX_PARTITIONS = 100000
LEADER_EPOCH = 0


class LocalController:
    def __init__(self, config, broker_id: int, registry: TopicRegistry, metadata_cache: MetadataCache):
        self.config = config
        self.broker_id = broker_id
        self.topics = registry
        self.metadata_cache = metadata_cache
        self.replica_manager: ReplicaManager | None = None
        self.on_topic_deleted: list = []      # callbacks(topic name, partition count)

    def startup(self, replica_manager: ReplicaManager) -> None:
        """Publish every known topic: its partitions lead here (their logs load now)."""
        self.replica_manager = replica_manager
        for topic in list(self.topics.topics.values()):
            self._publish(topic, 0, strict=False)   # a log that cannot load stays offline; the rest serve

    def topic_configs(self, topic: str) -> dict[str, str]:
        """A topic's config overrides (Kafka's ConfigRepository.topicConfig); {} for none."""
        t = self.topics.get(topic)
        return dict(t.configs) if t is not None else {}

    def log_config(self, topic: str) -> LogConfig:
        """The broker's topic defaults under the topic's overrides, as storage wants them."""
        return log_config(self.config, self.topic_configs(topic))

    def _publish(self, topic: Topic, first_new: int, strict: bool = True) -> None:
        """Lead the partitions from ``first_new`` on here. With ``strict``, a partition whose log
        cannot be made (out of descriptors or disk) raises KAFKA_STORAGE_ERROR naming it."""
        me = self.broker_id
        states = {i: PartitionState(me, LEADER_EPOCH, (me,), (me,)) for i in range(first_new, topic.partitions)}
        self.metadata_cache.update_partitions(topic.name, topic.topic_id, states)
        messages: dict[int, str] = {}
        self.replica_manager.become_leader_or_follower(topic.name, topic.topic_id, states, messages)
        if messages and strict:
            first = min(messages)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"{len(messages)} of {len(states)} partitions could not be created; {messages[first]}")

    def _storage(self, what: str, action):
        """Run a registry change; a disk that refuses it is this request's KAFKA_STORAGE_ERROR."""
        try:
            return action()
        except OSError as e:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot {what}: {e.strerror or e}") from None

    def check_configs(self, configs: dict[str, str]) -> dict[str, str]:
        """Validate topic-level overrides; raise ConfigError (INVALID_CONFIG) on a bad one."""
        log_config(self.config, configs)
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
        if replication_factor > 1:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Replication factor: {replication_factor} larger than available brokers: 1.")
        self.check_configs(configs)
        return partitions, replication_factor

    def create_topic(self, name: str, partitions: int = -1, replication_factor: int = -1,
                     configs: dict[str, str] | None = None, validate_only: bool = False) -> Topic | None:
        configs = dict(configs or {})
        partitions, _ = self.check_new_topic(name, partitions, replication_factor, configs)
        if validate_only:
            return None
        topic = self._storage(f"record topic {name}", lambda: self.topics.create(name, partitions, configs))
        try:
            self._publish(topic, 0)
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
        self.replica_manager.stop_replicas(name, range(topic.partitions), delete=True)
        for callback in self.on_topic_deleted:
            callback(name, topic.partitions)
        return topic

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
    """The LogConfig of a topic with these overrides; raises ConfigError (INVALID_CONFIG) on a bad one."""
    props = broker_config.topic_defaults()
    props.update(validate_topic_configs(topic_configs))
    return LogConfig(props)
