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
import threading
from typing import Callable, Protocol

from ..json_file import write_json
from ..zk import zk_data as zd
from .zk_config_manager import ZkConfigManager

log = logging.getLogger(__name__)

ENTITY_TYPES = ("clients", "users", "brokers", "ips", "groups", "client-metrics")
LOCAL_FILE = "dynamic-config.json"


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
        write_json(self.path, {"version": 1, "entities": self._entities})     # owner-only: passwords

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

    Takes a started KafkaZkClient (the cluster wiring owns it). Changes are announced through
    /config/changes and followed by `config_manager`, the broker's one listener, which the broker starts
    (and which also serves its topics); without one the store runs its own.
    """

    def __init__(self, zk_client, config_manager: ZkConfigManager | None = None):
        self.zk = zk_client
        self.config_manager = config_manager
        self._own_listener: ZkConfigManager | None = None

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
        """The caller loaded the current configs already: only changes are reported."""
        listener = self.config_manager
        if listener is None:
            if self._own_listener is not None:
                raise RuntimeError("ZkConfigStore.watch_changes is called once")
            listener = self._own_listener = ZkConfigManager(self.zk)
        for entity_type in ENTITY_TYPES:
            listener.subscribe(entity_type, lambda name, _configs, t=entity_type: callback(t, name), existing=False)
        if self._own_listener is not None:
            self._own_listener.startup()

    def close(self) -> None:
        if self._own_listener is not None:
            self._own_listener.shutdown()
