"""The topic registry: names, topic ids, partition counts and config overrides.

In a single-node broker this is the whole of the cluster metadata, so it is
persisted (atomically: write, fsync, rename) in the first log directory and
survives restarts together with the logs themselves.
"""
from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass, field

from ..json_file import write_json
from ..protocol.errors import ErrorCode, KafkaError
from ..sentinels import INTERNAL_TOPICS

METADATA_FILE = "kafka-compat-topics.json"
MAX_NAME_LENGTH = 249
LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


@dataclass
class Topic:
    name: str
    topic_id: bytes
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


def validate_name(name: str) -> None:
    """Kafka's topic name rules (Topic.validate)."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name cannot be {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"topic name is longer than {MAX_NAME_LENGTH} characters")
    if not LEGAL.match(name):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_', '-'")


class TopicRegistry:
    def __init__(self, directory: str):
        self.path = os.path.join(directory, METADATA_FILE)
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[bytes, Topic] = {}
        self._load()

    def _load(self) -> None:
        if not os.path.exists(self.path):
            return
        with open(self.path) as f:
            data = json.load(f)
        for t in data["topics"]:
            topic = Topic(t["name"], uuid.UUID(t["id"]).bytes, t["partitions"], t.get("configs", {}))
            self.topics[topic.name] = topic
            self.by_id[topic.topic_id] = topic

    def save(self) -> None:
        data = {"version": 1, "topics": [
            {"name": t.name, "id": str(uuid.UUID(bytes=t.topic_id)), "partitions": t.partitions,
             "configs": t.configs} for t in self.topics.values()]}
        write_json(self.path, data, 0o644)

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def collides(self, name: str) -> str | None:
        """Kafka refuses names that differ only by '.' versus '_' (they share metric names)."""
        norm = name.replace(".", "_")
        for other in self.topics:
            if other != name and other.replace(".", "_") == norm:
                return other
        return None

    def create(self, name: str, partitions: int, configs: dict[str, str] | None = None,
               *, persist: bool = True) -> Topic:
        validate_name(name)
        if name in self.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        other = self.collides(name)
        if other:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"topic {name!r} collides with existing topic {other!r}")
        if partitions < 1:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "number of partitions must be at least 1")
        topic = Topic(name, uuid.uuid4().bytes, partitions, dict(configs or {}))
        self.topics[name] = topic
        self.by_id[topic.topic_id] = topic
        if persist:
            try:
                self.save()
            except OSError:   # not recorded on disk: not created at all
                del self.topics[name], self.by_id[topic.topic_id]
                raise
        return topic

    def delete(self, name: str) -> Topic:
        topic = self.topics.pop(name)
        del self.by_id[topic.topic_id]
        self.save()
        return topic

    def set_partitions(self, name: str, count: int) -> None:
        self.topics[name].partitions = count
        self.save()

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        self.topics[name].configs = dict(configs)
        self.save()
