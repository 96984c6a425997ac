"""The single-node controller: the one place that changes topics.

In Kafka the controller owns topic creation, deletion, partition additions and
config changes, and brokers only apply the result. Keeping that split here
means Metadata auto-creation, CreateTopics, CreatePartitions and the config
APIs share one code path (and the ZooKeeper-backed controller can replace this
one later without touching the handlers).
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode, KafkaError
from .topics import Topic, validate_name

MAX_PARTITIONS = 100000


class Controller:
    def __init__(self, broker):
        self.broker = broker

    @property
    def topics(self):
        return self.broker.topics

    def check_configs(self, configs: dict[str, str]) -> dict[str, str]:
        """Validate topic-level overrides; raise KafkaError(INVALID_CONFIG) on a bad one."""
        try:
            self.broker.replicas.validate_topic_configs(configs)
        except ValueError as e:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from e
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
        cfg = self.broker.config
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
        topic = self.topics.create(name, partitions, configs)
        self.broker.replicas.add_partitions(topic, 0)
        return topic

    def delete_topic(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        if not self.broker.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        self.topics.delete(name)
        self.broker.replicas.remove_topic(topic)
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
        self.topics.set_partitions(name, count)
        self.broker.replicas.add_partitions(topic, old)

    def set_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool = False) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.")
        self.check_configs(configs)
        if validate_only:
            return
        self.topics.set_configs(name, configs)
        self.broker.replicas.topic_configs_changed(topic)
