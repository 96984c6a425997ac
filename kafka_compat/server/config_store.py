"""Where dynamic entity configs live: client and user quotas, dynamic broker configs.

Kafka keeps them in ZooKeeper under /config/<type>/<name> (`clients/<client-id>`,
`users/<user>`, `users/<user>/clients/<client-id>`, `brokers/<id>`,
`brokers/<default>`, `ips/<ip>`; names sanitized, `<default>` for the default
entity) and announces each change with a sequential /config/changes/config_change_
node that every broker watches. `ZkConfigStore` does exactly that, for a broker
in a ZooKeeper cluster; `LocalConfigStore` keeps the same entities in one JSON
file in the data directory for a single node. The broker is handed one of them.

Both are blocking (file writes, ZooKeeper round trips): call them from a worker
thread. `watch_changes(callback)` calls back with (entity type, name) on some
other thread after an entity changed, here or on another broker.
"""
from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from typing import Callable, Protocol

from ..zk import zk_data as zd

log = logging.getLogger(__name__)

ENTITY_TYPES = ("clients", "users", "brokers", "ips")
LOCAL_FILE = "dynamic-config.json"
NOTIFICATION_EXPIRATION_MS = 15 * 60 * 1000         # Kafka's ZkConfigManager.changeExpirationMs


class ConfigStore(Protocol):
    def entity_configs(self, entity_type: str, name: str) -> dict[str, str]: ...
    def all_entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]: ...
    def all_user_client_configs(self) -> dict[str, dict[str, str]]: ...
    def change_entity_config(self, entity_type: str, name: str, configs: dict[str, str]) -> None: ...
    def watch_changes(self, callback: Callable[[str, str], None]) -> None: ...
    def close(self) -> None: ...


def user_client_name(user: str, client_id: str) -> str:
    """The name of a (user, client-id) entity under `users`, both sanitized: `<user>/clients/<client-id>`."""
    return f"{user}/clients/{client_id}"


class LocalConfigStore:
    """A single node's entity configs, in `dynamic-config.json` beside its logs (replaced atomically)."""

    def __init__(self, directory: str):
        self.path = os.path.join(directory, LOCAL_FILE)
        self._lock = threading.Lock()
        self._entities: dict[str, dict[str, dict[str, str]]] = {t: {} for t in ENTITY_TYPES}
        if os.path.exists(self.path):
            self._entities.update(self._read())

    def _read(self) -> dict:
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
            entities = data["entities"]
            return {t: {str(n): {str(k): str(v) for k, v in c.items()} for n, c in entities.get(t, {}).items()}
                    for t in ENTITY_TYPES}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            # the broker must still start: lose the dynamic configs loudly rather than refuse to run
            log.error("ignoring unreadable dynamic configs in %s: %s", self.path, e)
            return {}

    def _write(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"version": 1, "entities": self._entities}, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fd = os.open(os.path.dirname(self.path), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def entity_configs(self, entity_type: str, name: str) -> dict[str, str]:
        with self._lock:
            return dict(self._entities[entity_type].get(name, {}))

    def all_entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        with self._lock:
            return {n: dict(c) for n, c in self._entities[entity_type].items() if "/" not in n}

    def all_user_client_configs(self) -> dict[str, dict[str, str]]:
        with self._lock:
            return {n: dict(c) for n, c in self._entities["users"].items() if "/" in n}

    def change_entity_config(self, entity_type: str, name: str, configs: dict[str, str]) -> None:
        with self._lock:
            entities = self._entities[entity_type]
            if configs:
                entities[name] = dict(configs)
            else:
                entities.pop(name, None)
            self._write()

    def watch_changes(self, callback: Callable[[str, str], None]) -> None:
        """Nothing to watch: a single node is the only writer, and applies its own changes."""

    def close(self) -> None:
        pass


class ZkConfigStore:
    """Entity configs in ZooKeeper, as Kafka's AdminZkClient writes them and ZkConfigManager reads them.

    Takes a started KafkaZkClient (the cluster wiring owns it). Change notifications
    are read on a thread of this store, in sequence order; those older than 15
    minutes are deleted, as Kafka's notification listener does.
    """

    def __init__(self, zk_client):
        self.zk = zk_client
        self._callbacks: list[Callable[[str, str], None]] = []
        self._events: queue.Queue = queue.Queue()
        self._last_seen: str | None = None
        self._thread: threading.Thread | None = None
        self._watch = None
        self._closed = False

    def entity_configs(self, entity_type: str, name: str) -> dict[str, str]:
        return self.zk.get_entity_configs(entity_type, name)

    def all_entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        names = self.zk.get_all_entities_with_config(entity_type)      # none while the type's znode is missing
        return self.zk.get_entities_configs(entity_type, names)

    def all_user_client_configs(self) -> dict[str, dict[str, str]]:
        out = {}
        for user in self.all_entity_configs("users"):
            children = self.zk.get_children(zd.config_entity_path("users", user))
            if "clients" not in children:
                continue
            clients = self.zk.get_children(zd.config_entity_path("users", f"{user}/clients"))
            names = [user_client_name(user, c) for c in clients]
            out.update(self.zk.get_entities_configs("users", names))
        return out

    def change_entity_config(self, entity_type: str, name: str, configs: dict[str, str]) -> None:
        self.zk.change_entity_config(entity_type, name, configs)

    def watch_changes(self, callback: Callable[[str, str], None]) -> None:
        self._callbacks.append(callback)
        if self._thread is not None:
            return
        self.zk.make_sure_persistent_path_exists(zd.CONFIG_CHANGES_PATH)
        existing = self._sequences(self.zk.get_children(zd.CONFIG_CHANGES_PATH))
        # configs are read whole at startup, so only changes after this moment need processing
        self._last_seen = existing[-1] if existing else None
        self._thread = threading.Thread(target=self._run, name="config-change-listener", daemon=True)
        self._thread.start()
        self._watch = self.zk.watch_children(zd.CONFIG_CHANGES_PATH,
                                             lambda path, children: self._events.put(children))

    @staticmethod
    def _sequences(children: list[str]) -> list[str]:
        prefix = zd.CONFIG_CHANGE_PREFIX
        return sorted(zd.sequence_number(c, prefix) for c in children if c.startswith(prefix))

    def _run(self) -> None:
        while not self._closed:
            children = self._events.get()
            if children is None:
                return
            try:
                self._process(children)
            except Exception:
                log.exception("failed to process config change notifications")

    def _process(self, children: list[str]) -> None:
        now_ms = int(time.time() * 1000)
        for seq in self._sequences(children):
            path = f"{zd.CONFIG_CHANGES_PATH}/{zd.CONFIG_CHANGE_PREFIX}{seq}"
            if self._last_seen is None or seq > self._last_seen:
                data, _ = self.zk.get_data_and_stat(path)
                if data is not None:
                    try:
                        entity_type, name = zd.decode_config_change(data)
                    except ValueError as e:
                        log.error("ignoring config change notification %s: %s", path, e)
                    else:
                        for callback in list(self._callbacks):
                            callback(entity_type, name)
                self._last_seen = seq
            else:
                _, stat = self.zk.get_data_and_stat(path)
                if stat is not None and now_ms - stat.ctime > NOTIFICATION_EXPIRATION_MS:
                    try:
                        self.zk.zk.delete(path)
                    except Exception as e:          # another broker purged it first
                        log.debug("could not delete %s: %s", path, e)

    def close(self) -> None:
        self._closed = True
        if self._watch is not None:
            self._watch.cancel()
        self._events.put(None)
