"""DynamicConfigManager: dynamic entity configs from the config store, applied to this broker.

Kafka's DynamicConfigManager with its config handlers: at startup every stored
client, user, (user, client-id), broker and ip config is read and applied; after
that each change notification re-reads the entity and applies it again. Quotas
go to the QuotaManagers, `brokers/<id>` and `brokers/<default>` to
DynamicBrokerConfig, `ips/<ip>` to the connection quotas (the broker registers that
handler). A change made through this broker (AlterClientQuotas,
IncrementalAlterConfigs) is written to the store, then applied here at once,
so the next request already sees it; other brokers apply it from the
notification. Other entity types (topics in a ZooKeeper cluster) can be handled
by registering a handler for them.

The store blocks (files, ZooKeeper): it is only called from worker threads, and
everything it reports is applied on the event loop, one change at a time.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from .client_quota_manager import DEFAULT, QuotaManagers, desanitize
from .config_store import ConfigStore
from .dynamic_broker_config import DynamicBrokerConfig

log = logging.getLogger(__name__)


class DynamicConfigManager:
    def __init__(self, store: ConfigStore, quotas: QuotaManagers, broker_config: DynamicBrokerConfig):
        self.store = store
        self.quotas = quotas
        self.broker_config = broker_config
        self.handlers: dict[str, Callable[[str, dict[str, str]], None]] = {
            "clients": self._client_changed, "users": self._user_changed, "brokers": self.broker_config.update}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changes: asyncio.Queue | None = None
        self._worker: asyncio.Task | None = None

    def register_handler(self, entity_type: str, handler: Callable[[str, dict[str, str]], None]) -> None:
        """``handler(sanitized name, configs)`` on the event loop for every change of ``entity_type``."""
        self.handlers[entity_type] = handler

    async def startup(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._changes = asyncio.Queue()
        for entity_type, name, configs in await asyncio.to_thread(self._load_all):
            self.apply(entity_type, name, configs)
        self._worker = self._loop.create_task(self._apply_changes())
        await asyncio.to_thread(self.store.watch_changes, self._notified)

    def _load_all(self) -> list[tuple[str, str, dict[str, str]]]:
        out = []
        for entity_type in ("clients", "users", "brokers", "ips", "groups", "client-metrics"):
            out += [(entity_type, n, c) for n, c in self.store.all_entity_configs(entity_type).items()
                    if entity_type in self.handlers]
        out += [("users", n, c) for n, c in self.store.all_user_client_configs().items()]
        return out

    async def shutdown(self) -> None:
        self.store.close()
        if self._worker is not None:
            self._worker.cancel()
            self._worker = None

    def _notified(self, entity_type: str, name: str) -> None:
        """From the store's thread: queue the entity for re-reading on the loop."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._changes.put_nowait, (entity_type, name))

    async def _apply_changes(self) -> None:
        while True:
            entity_type, name = await self._changes.get()
            if entity_type not in self.handlers:
                continue
            try:
                configs = await asyncio.to_thread(self.store.entity_configs, entity_type, name)
            except Exception:
                log.exception("cannot read the configs of %s/%s", entity_type, name)
                continue
            self.apply(entity_type, name, configs)

    # -- reading and changing ------------------------------------------------------------------
    async def entity_configs(self, entity_type: str, name: str) -> dict[str, str]:
        return await asyncio.to_thread(self.store.entity_configs, entity_type, name)

    async def all_quota_entities(self) -> list[tuple[str, str, dict[str, str]]]:
        """(entity type, sanitized name, configs) of every client, user, (user, client-id) and ip entity."""
        def load():
            out = []
            for entity_type in ("clients", "users", "ips"):
                out += [(entity_type, n, c) for n, c in self.store.all_entity_configs(entity_type).items()]
            return out + [("users", n, c) for n, c in self.store.all_user_client_configs().items()]
        return await asyncio.to_thread(load)

    async def change(self, entity_type: str, name: str, configs: dict[str, str]) -> None:
        """Store an entity's whole config set, then apply it here."""
        await asyncio.to_thread(self.store.change_entity_config, entity_type, name, dict(configs))
        self.apply(entity_type, name, configs)

    def apply(self, entity_type: str, name: str, configs: dict[str, str]) -> None:
        handler = self.handlers.get(entity_type)
        if handler is None:
            return
        try:
            handler(name, dict(configs))
        except Exception:
            log.exception("cannot apply the configs of %s/%s", entity_type, name)

    # -- config handlers (Kafka's ClientIdConfigHandler / UserConfigHandler) --------------------
    def _client_changed(self, name: str, configs: dict[str, str]) -> None:
        self.quotas.update_entity(None, _client_id(name), configs)

    def _user_changed(self, name: str, configs: dict[str, str]) -> None:
        user, sep, client = name.partition("/clients/")
        self.quotas.update_entity(user, _client_id(client) if sep else None, configs)


def _client_id(sanitized: str) -> str:
    """Client ids are matched as clients send them; the default stays DEFAULT."""
    return DEFAULT if sanitized == DEFAULT else desanitize(sanitized)
