"""ReplicaManager: the partitions this broker hosts, their logs, and the delayed operations on them.

Handlers go through here to append and read, so that the things Kafka ties
to a partition (leader epoch, high watermark, producer state, waking delayed
fetches after an append) happen in one place and the handlers stay thin.
In a single-node broker every partition is a leader with ISR = {this node},
so the high watermark is the log end offset.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from kafka_compat.storage.log_config import _DEFS as _LOG_DEFS, LogConfig
from kafka_compat.storage.log_manager import LogManager
from kafka_compat.storage.unified_log import UnifiedLog

from ..config import validate_topic_configs
from ..protocol.errors import ErrorCode
from ..purgatory import DelayedOperationPurgatory

log = logging.getLogger(__name__)
LOG_CONFIG_NAMES = frozenset(_LOG_DEFS)

@dataclass
class PartitionState:
    leader: int
    leader_epoch: int
    replicas: tuple
    isr: tuple


class Partition:
    """One hosted partition: its log and what Kafka keeps beside it."""

    def __init__(self, topic: str, index: int, log: UnifiedLog, node_id: int):
        self.topic = topic
        self.index = index
        self.log = log
        self.leader_epoch = 0
        self.state = PartitionState(node_id, 0, (node_id,), (node_id,))
        self.key = (topic, index)   # purgatory key, built once: every append wakes fetches under it

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset


class ReplicaManager:
    def __init__(self, broker):
        self.broker = broker
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.fetch_purgatory: DelayedOperationPurgatory | None = None
        self.produce_purgatory: DelayedOperationPurgatory | None = None
        self.logs: LogManager | None = None

    # ------------------------------------------------------------ lifecycle
    async def startup(self) -> None:
        cfg = self.broker.config
        self.fetch_purgatory = DelayedOperationPurgatory("Fetch")
        self.produce_purgatory = DelayedOperationPurgatory("Produce")
        # The flusher wakes at least every second so flush.ms is honoured even when
        # log.flush.scheduler.interval.ms keeps Kafka's "never" default.
        flush_check = min(cfg["log.flush.scheduler.interval.ms"], 1000)
        self.logs = LogManager(
            self.broker.log_dirs, self.log_config({}), topic_config=self._config_of,
            retention_check_interval_ms=cfg["log.retention.check.interval.ms"],
            flush_check_interval_ms=flush_check,
            checkpoint_interval_ms=cfg["log.flush.offset.checkpoint.interval.ms"] or 60000,
            cleaner_enabled=cfg["log.cleaner.enable"], cleaner_backoff_ms=cfg["log.cleaner.backoff.ms"],
            producer_id_expiration_ms=cfg["producer.id.expiration.ms"])
        # Loading recovers logs after an unclean shutdown: keep that off the event loop.
        await asyncio.to_thread(self.logs.startup)
        for topic in list(self.broker.topics.topics.values()):
            self.add_partitions(topic, 0)

    def _config_of(self, topic_name: str) -> LogConfig:
        topic = self.broker.topics.get(topic_name)
        return self.log_config(topic.configs if topic else {})

    async def shutdown(self) -> None:
        self.partitions.clear()
        if self.logs is not None:
            await asyncio.to_thread(self.logs.shutdown)
            self.logs = None
        for purgatory in (self.fetch_purgatory, self.produce_purgatory):
            if purgatory is not None:
                purgatory.shutdown()

    # ------------------------------------------------------------ configuration
    def log_config(self, topic_configs: dict[str, str]) -> LogConfig:
        """The broker's topic defaults with the topic's overrides, as storage wants them."""
        props = self.broker.config.topic_defaults()
        props.update(validate_topic_configs(topic_configs))
        policy = props.get("cleanup.policy")
        if isinstance(policy, (list, tuple)):
            props["cleanup.policy"] = ",".join(policy)
        return LogConfig({k: v for k, v in props.items() if k in LOG_CONFIG_NAMES})

    def validate_topic_configs(self, configs: dict[str, str]) -> None:
        """Raise ValueError (ConfigError) for an unknown or malformed topic config."""
        self.log_config(configs)

    # ------------------------------------------------------------ partitions
    def add_partitions(self, topic, first_new: int) -> None:
        config = self.log_config(topic.configs)
        for index in range(first_new, topic.partitions):
            key = (topic.name, index)
            if key in self.partitions:
                continue
            partition = Partition(topic.name, index, self.logs.get_or_create_log(topic.name, index, config),
                                  self.broker.node_id)
            partition.log.update_high_watermark(partition.log.log_end_offset)   # the only replica
            self.partitions[key] = partition

    def remove_topic(self, topic) -> None:
        for index in range(topic.partitions):
            p = self.partitions.pop((topic.name, index), None)
            if p is None:
                continue
            self.logs.delete_log(topic.name, index)
            self.fetch_purgatory.check_and_complete(p.key)
        # Kafka forgets the offsets groups committed for a deleted topic's partitions.
        coordinator = getattr(self.broker, "group_coordinator", None)
        if coordinator is not None and coordinator.active:
            coordinator.handle_deleted_partitions([(topic.name, i) for i in range(topic.partitions)])

    def topic_configs_changed(self, topic) -> None:
        self.logs.update_config(topic.name, self.log_config(topic.configs))

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def partition_state(self, topic: str, index: int) -> PartitionState:
        p = self.partitions.get((topic, index))
        if p is None:
            node = self.broker.node_id
            return PartitionState(node, 0, (node,), (node,))
        return p.state

    def lookup(self, topic: str, index: int) -> tuple[Partition | None, int]:
        """The partition, or the error a client should see for it."""
        p = self.partitions.get((topic, index))
        if p is not None:
            return p, ErrorCode.NONE
        return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def appended(self, partition: Partition) -> None:
        """New data: the high watermark follows the log end (the only replica), fetches wake."""
        partition.log.maybe_increment_high_watermark(partition.log.log_end_offset_metadata)
        self.fetch_purgatory.check_and_complete(partition.key)
