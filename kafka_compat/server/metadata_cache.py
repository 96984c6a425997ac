"""MetadataCache: what this broker knows of the cluster, for answering clients.

Kafka's brokers never read cluster state from ZooKeeper on a request path: they
answer Metadata, DescribeCluster, DescribeTopicPartitions and FindCoordinator
from a cache that only UpdateMetadata fills (ZkMetadataCache). Here the same cache
is fed either by UpdateMetadata from the cluster's controller or, in a single
node, by the local controller; handlers cannot tell the two apart.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from ..protocol.primitives import ZERO_UUID

NO_LEADER = -1
LEADER_DURING_DELETE = -2
log = logging.getLogger(__name__)
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


@dataclass(frozen=True)
class BrokerEndpoint:
    listener: str
    host: str
    port: int
    security_protocol: str


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker as UpdateMetadata's LiveBrokers describes it."""

    broker_id: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None

    def endpoint(self, listener: str) -> BrokerEndpoint | None:
        for e in self.endpoints:
            if e.listener == listener:
                return e
        return None


@dataclass(frozen=True)
class PartitionState:
    """One partition's leadership as the controller last published it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    partition_epoch: int = 0          # the state znode's zkVersion; 0 on a single node
    controller_epoch: int = 0
    offline_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass
class TopicMetadata:
    name: str
    topic_id: bytes
    partition_states: dict[int, PartitionState] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    @property
    def partitions(self) -> int:
        """How many partitions the topic has (partition indexes run from 0)."""
        return len(self.partition_states)


class MetadataCache:
    def __init__(self, broker_id: int, cluster_id: str | None = None):
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.controller_id: int = NO_LEADER
        self.controller_epoch = -1
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.by_id: dict[bytes, TopicMetadata] = {}
        self._topic_listeners: list[Callable[[set[str]], None]] = []

    def add_topic_listener(self, listener: Callable[[set[str]], None]) -> None:
        """``listener(topic names)`` after topics are created, deleted or change partition count
        (consumer groups recompute their assignments from that)."""
        self._topic_listeners.append(listener)

    def _topics_changed(self, names: set[str]) -> None:
        for listener in self._topic_listeners:
            try:
                listener(names)
            except Exception:
                log.exception("topic listener failed")

    # -- updates (UpdateMetadata, or the local controller) ------------------------------
    def update_brokers(self, brokers: list[BrokerInfo], controller_id: int, controller_epoch: int = 0) -> None:
        self.brokers = {b.broker_id: b for b in brokers}
        self.controller_id = controller_id
        self.controller_epoch = controller_epoch

    def update_partitions(self, topic: str, topic_id: bytes, states: dict[int, PartitionState]) -> None:
        """Add or replace partition states of a topic (a partial update keeps the others)."""
        meta = self.topics.get(topic)
        before = -1
        if meta is None or (topic_id != ZERO_UUID and meta.topic_id != topic_id):
            if meta is not None:
                self.by_id.pop(meta.topic_id, None)
            meta = self.topics[topic] = TopicMetadata(topic, topic_id)
            if topic_id != ZERO_UUID:
                self.by_id[topic_id] = meta
        else:
            before = meta.partitions
        meta.partition_states.update(states)
        if meta.partitions != before and self._topic_listeners:
            self._topics_changed({topic})

    def update_metadata(self, controller_id: int, controller_epoch: int, brokers: list[BrokerInfo],
                        topics: list[tuple[str, bytes, dict[int, PartitionState]]]) -> list[tuple[str, int]]:
        """UpdateMetadata, as Kafka's ZkMetadataCache.updateMetadata: the live brokers and the controller
        are replaced; the partition states given are added or replaced, the others kept; a leader of -2
        (the topic is being deleted) removes the partition. Returns the partitions removed."""
        self.update_brokers(brokers, controller_id if controller_id >= 0 else NO_LEADER, controller_epoch)
        deleted = []
        for name, topic_id, states in topics:
            keep = {}
            for index, state in states.items():
                if state.leader == LEADER_DURING_DELETE:
                    if self.remove_partition(name, index):
                        deleted.append((name, index))
                else:
                    keep[index] = state
            if keep:
                self.update_partitions(name, topic_id, keep)
        return deleted

    def remove_partition(self, topic: str, index: int) -> bool:
        """Forget one partition (and the topic with its last one); True if it was known."""
        meta = self.topics.get(topic)
        if meta is None or meta.partition_states.pop(index, None) is None:
            return False
        if not meta.partition_states:
            self.remove_topic(topic)
        return True

    def remove_topic(self, topic: str) -> None:
        meta = self.topics.pop(topic, None)
        if meta is not None:
            self.by_id.pop(meta.topic_id, None)
            if self._topic_listeners:
                self._topics_changed({topic})

    # -- questions ----------------------------------------------------------------------
    def get_topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: bytes) -> TopicMetadata | None:
        return self.by_id.get(topic_id)

    def get(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def topic_names(self) -> list[str]:
        return list(self.topics)

    def collides(self, name: str) -> str | None:
        """Kafka refuses names that differ only by '.' versus '_' (they share metric names)."""
        norm = name.replace(".", "_")
        for other in self.topics:
            if other != name and other.replace(".", "_") == norm:
                return other
        return None

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        meta = self.topics.get(topic)
        return meta.partition_states.get(partition) if meta is not None else None

    def alive_brokers(self) -> list[BrokerInfo]:
        return sorted(self.brokers.values(), key=lambda b: b.broker_id)

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self.brokers

    def endpoint(self, broker_id: int, listener: str) -> BrokerEndpoint | None:
        """The address clients of ``listener`` reach ``broker_id`` at, if it is alive and listens there."""
        broker = self.brokers.get(broker_id)
        return broker.endpoint(listener) if broker is not None else None
