"""Dynamic config changes from ZooKeeper: Kafka's ZkConfigManager with its one
ZkNodeChangeNotificationListener on /config/changes, serving every entity type.

Whoever changes an entity's configs (a topic's, a client's...) writes /config/<type>/<name>, then a
sequential /config/changes/config_change_<n> naming it. A broker runs one listener: it reads each
notification newer than the last one it handled (re-reading the entity's znode, so a burst of changes
reads the latest), hands the entity's configs to every handler subscribed to its type (Kafka's
ConfigHandler per type), and deletes notifications older than 15 minutes, as Kafka's brokers do.
Before it listens, it reports every entity's current configs to the handlers that ask for them.

Handlers run on the listener's own thread (ZooKeeper calls block; they must not run on kazoo's
threads nor on the event loop): hand the change over from there. Subscribe before `startup()`.
"""
from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from .. import clock
from ..zk import zk_data as zd
from ..zk.kafka_zk_client import KafkaZkClient, ZkWatch

log = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS = 15 * 60 * 1000
ConfigHandler = Callable[[str, dict[str, str]], None]      # (sanitized entity name, its configs now)


class ZkConfigManager:
    def __init__(self, zk_client: KafkaZkClient, *, change_expiration_ms: int = CHANGE_EXPIRATION_MS):
        self.zk = zk_client
        self.change_expiration_ms = change_expiration_ms
        self.handlers: dict[str, list[tuple[ConfigHandler, bool]]] = {}
        self.last_executed_change = -1
        self._wakeups: queue.Queue[bool] = queue.Queue()
        self._started = self._closed = False
        self._watch: ZkWatch | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="config-change-listener")

    def subscribe(self, entity_type: str, handler: ConfigHandler, *, existing: bool = True) -> None:
        """``handler(name, configs)`` for each change of an entity of ``entity_type``; with ``existing``,
        also for every such entity at startup (a subscriber that loads what it needs itself says False)."""
        if entity_type not in zd.CONFIG_TYPES:
            raise ValueError(f"unknown config entity type {entity_type!r}")
        if self._started:
            raise RuntimeError("subscribe to the config changes before ZkConfigManager.startup()")
        self.handlers.setdefault(entity_type, []).append((handler, existing))

    def startup(self) -> None:
        """Report the existing entities (blocking, on the caller's thread), then listen."""
        self._started = True
        for entity_type, handlers in self.handlers.items():
            wanting = [h for h, existing in handlers if existing]
            if wanting:
                names = self.zk.get_all_entities_with_config(entity_type)
                for name, configs in self.zk.get_entities_configs(entity_type, names).items():
                    self._dispatch(entity_type, name, configs, wanting)
        self.zk.make_sure_persistent_path_exists(zd.CONFIG_CHANGES_PATH)
        self.zk.add_state_listener(self._on_state)
        self._thread.start()
        self._watch = self.zk.watch_children(zd.CONFIG_CHANGES_PATH, lambda *_: self._wake())

    def shutdown(self) -> None:
        listening = self._started and not self._closed
        self._closed = True
        if not listening:
            return
        self.zk.remove_state_listener(self._on_state)
        if self._watch is not None:
            self._watch.cancel()
        self._wakeups.put(False)

    def _on_state(self, state: str) -> None:
        if state == "CONNECTED":            # a new session may have missed notifications
            self._wake()

    def _wake(self) -> None:
        if not self._closed and self._wakeups.empty():
            self._wakeups.put(True)

    def _run(self) -> None:
        while self._wakeups.get():
            try:
                self.process_notifications()
            except Exception:
                if not self._closed:
                    log.exception("processing the config change notifications failed")

    def process_notifications(self) -> None:
        notifications = sorted(self.zk.get_children(zd.CONFIG_CHANGES_PATH))
        now_ms = clock.now_ms()
        for name in notifications:
            try:
                change_id = int(zd.sequence_number(name, zd.CONFIG_CHANGE_PREFIX))
            except ValueError:
                log.warning("ignoring %s/%s: not a config change notification", zd.CONFIG_CHANGES_PATH, name)
                continue
            if change_id > self.last_executed_change:
                self._process_notification(name)
                self.last_executed_change = change_id
        self._purge_obsolete(now_ms, notifications)

    def _process_notification(self, name: str) -> None:
        path = f"{zd.CONFIG_CHANGES_PATH}/{name}"
        data, stat = self.zk.get_data_and_stat(path)
        if stat is None or data is None:
            return
        try:
            entity_type, entity_name = zd.decode_config_change(data)
        except zd.ZkDataError as e:
            log.error("ignoring config change notification %s: %s", path, e)
            return
        handlers = [h for h, _ in self.handlers.get(entity_type, ())]
        if handlers:
            self._dispatch(entity_type, entity_name, self.zk.get_entity_configs(entity_type, entity_name), handlers)

    @staticmethod
    def _dispatch(entity_type: str, name: str, configs: dict[str, str], handlers: list[ConfigHandler]) -> None:
        for handler in handlers:
            try:
                handler(name, dict(configs))
            except Exception:
                log.exception("applying the configs of %s %s failed", entity_type, name)

    def _purge_obsolete(self, now_ms: float, notifications: list[str]) -> None:
        for name in notifications:
            path = f"{zd.CONFIG_CHANGES_PATH}/{name}"
            _, stat = self.zk.get_data_and_stat(path)
            if stat is not None and now_ms - stat.ctime > self.change_expiration_ms:
                self.zk.delete_recursive(path)
