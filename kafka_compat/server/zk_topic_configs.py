"""Topic config overrides of a ZooKeeper cluster member (Kafka's ZkConfigRepository and its topic config listener).

A topic's overrides live in /config/topics/<topic>. They are read (in a worker
thread) the first time a LeaderAndIsr brings one of the topic's partitions here,
before its log is made, and again whenever /config/changes announces that they
changed (the broker then applies them to the topic's logs). Everything else asks
the cache: `log_config(topic)` is the broker's topic defaults under the
overrides, as storage wants them.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from kafka_compat.storage.log_config import LogConfig

from ..zk import zk_data as zd
from ..zk.kafka_zk_client import KafkaZkClient
from .local_controller import log_config

log = logging.getLogger(__name__)


class ZkTopicConfigs:
    def __init__(self, zk: KafkaZkClient, broker_config, on_changed: Callable[[str], None] = lambda topic: None):
        """``on_changed(topic)`` runs on the event loop after a topic's overrides were re-read."""
        self.zk = zk
        self.broker_config = broker_config
        self.on_changed = on_changed
        self.overrides: dict[str, dict[str, str]] = {}
        self._seen: str | None = None                 # the last change notification handled
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watch = None
        self._lock = asyncio.Lock()

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
    def start_watching(self, loop: asyncio.AbstractEventLoop) -> None:
        """Follow /config/changes; existing notifications predate what we read, so start after them."""
        self._loop = loop
        children = sorted(self.zk.get_children(zd.CONFIG_CHANGES_PATH))
        self._seen = children[-1] if children else None
        self._watch = self.zk.watch_children(zd.CONFIG_CHANGES_PATH, self._on_children)

    def follow(self, add_listener: Callable[[Callable[[str, dict[str, str]], None]], None],
               loop: asyncio.AbstractEventLoop) -> None:
        """Take topic changes from the broker's other /config/changes listener (the admin manager's
        ZkConfigManager) instead of watching too: one listener per broker, as in Kafka.
        ``add_listener(callback)`` registers ``callback(topic, overrides)``, called on that listener's thread."""
        self._loop = loop
        add_listener(self._on_topic_change)

    def _on_topic_change(self, topic: str, configs: dict[str, str]) -> None:     # the listener's thread
        if topic not in self.overrides:           # not hosted here: read when a LeaderAndIsr brings it
            return
        self.overrides[topic] = dict(configs)
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.on_changed, topic)

    def stop_watching(self) -> None:
        if self._watch is not None:
            self._watch.cancel()

    def _on_children(self, path: str, children: list[str]) -> None:       # kazoo's thread
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(lambda: self._loop.create_task(self._process(children)))

    async def _process(self, children: list[str]) -> None:
        async with self._lock:
            fresh = sorted(c for c in children if c.startswith(zd.CONFIG_CHANGE_PREFIX)
                           and (self._seen is None or c > self._seen))
            if not fresh:
                return
            self._seen = fresh[-1]
            try:
                changed = await asyncio.to_thread(self._read_changes, fresh)
            except Exception as e:
                log.warning("cannot read config change notifications: %s", e)
                return
            for topic in changed:
                self.on_changed(topic)

    def _read_changes(self, names: list[str]) -> list[str]:
        changed = []
        for name in names:
            data, _ = self.zk.get_data_and_stat(f"{zd.CONFIG_CHANGES_PATH}/{name}")
            if data is None:
                continue
            try:
                entity_type, entity = zd.decode_config_change(data)
            except zd.ZkDataError as e:
                log.warning("ignoring config change %s: %s", name, e)
                continue
            if entity_type == "topics" and entity in self.overrides:
                self.load([entity])
                changed.append(entity)
        return changed
