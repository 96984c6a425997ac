"""Topic config overrides of a ZooKeeper cluster member (Kafka's ZkConfigRepository and its topic config listener).

A topic's overrides live in /config/topics/<topic>. They are read (in a worker
thread) the first time a LeaderAndIsr brings one of the topic's partitions here,
before its log is made, and again whenever the broker's one config change
listener (ZkConfigManager) reports that they changed (the broker then applies
them to the topic's logs). Everything else asks the cache: `log_config(topic)`
is the broker's topic defaults under the overrides, as storage wants them.
"""
from __future__ import annotations

import asyncio
from typing import Callable

from kafka_compat.storage.log_config import LogConfig

from ..zk.kafka_zk_client import KafkaZkClient
from .local_controller import log_config
from .zk_config_manager import ZkConfigManager


class ZkTopicConfigs:
    def __init__(self, zk: KafkaZkClient, broker_config, on_changed: Callable[[str], None] = lambda topic: None):
        """``on_changed(topic)`` runs on the event loop after a topic's overrides were re-read."""
        self.zk = zk
        self.broker_config = broker_config
        self.on_changed = on_changed
        self.overrides: dict[str, dict[str, str]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- what handlers and storage ask
    def topic_configs(self, topic: str) -> dict[str, str]:
        return dict(self.overrides.get(topic, {}))

    def log_config(self, topic: str) -> LogConfig:
        return log_config(self.broker_config, self.overrides.get(topic, {}))

    # -- loading (blocking: worker threads)
    def missing(self, topics) -> list[str]:
        return [t for t in dict.fromkeys(topics) if t not in self.overrides]

    def load(self, topics) -> None:
        topics = list(topics)
        for topic, configs in self.zk.get_entities_configs("topics", topics).items():
            self.overrides[topic] = configs

    async def refresh_topic_configs(self, topics) -> None:
        """Read these topics' overrides (in a worker thread)."""
        await asyncio.to_thread(self.load, list(topics))

    # -- change notifications
    def follow(self, config_manager: ZkConfigManager, loop: asyncio.AbstractEventLoop) -> None:
        """Take topic changes from the broker's one /config/changes listener; ``on_changed`` runs on ``loop``.
        Hosted topics' overrides were loaded already: no need for every topic's at startup."""
        self._loop = loop
        config_manager.subscribe("topics", self._on_topic_change, existing=False)

    def _on_topic_change(self, topic: str, configs: dict[str, str]) -> None:     # the listener's thread
        if topic not in self.overrides:           # not hosted here: read when a LeaderAndIsr brings it
            return
        self.overrides[topic] = dict(configs)
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.on_changed, topic)
