"""ACLs and SCRAM credentials kept in ZooKeeper as Kafka's ZooKeeper mode keeps them, so that every
broker of a cluster (and Kafka's own tools) sees the same ones.

ACLs: one znode per resource pattern, /kafka-acl/<Type>/<name> (LITERAL) and
/kafka-acl-extended/prefixed/<Type>/<name> (PREFIXED), each {"version":1,"acls":[...]}; after a
change a sequential znode under /kafka-acl-changes (or /kafka-acl-extended-changes) names the
resource, and every broker re-reads that resource (Kafka's AclAuthorizer and its
ZkNodeChangeNotificationListener). A change is applied to what ZooKeeper holds now with a
conditional write, retried when another broker wrote first, so concurrent changes from several
brokers all survive.

SCRAM credentials: /config/users/<sanitized user>, {"version":1,"config":{"SCRAM-SHA-256":"salt=...,
stored_key=...,server_key=...,iterations=N",...}} beside any quota keys, announced under
/config/changes as users/<sanitized user> (Kafka's AdminZkClient.changeConfigs).

Every ZooKeeper call blocks: stores are used from worker threads (the ACL and credential APIs run
their changes on one), and change notifications are read on the listener's own thread.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable, Iterable, Mapping

from ..clock import now_ms
from ..sanitizer import desanitize, legacy_sanitize, sanitize
from ..server.zk_config_manager import CHANGE_EXPIRATION_MS, ZkConfigManager
from ..zk import zk_data as zd
from ..zk.kafka_zk_client import KafkaZkClient
from .acl import AccessControlEntry, AclOperation, AclPermissionType, PatternType, ResourcePattern, ResourceType
from .scram import CredentialStore, ScramCredential, decode_user_config, format_credential
from .stores import SecurityStores

log = logging.getLogger(__name__)

SCRAM_KEYS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


class ChangeListener:
    """Wakes `process` on its own thread whenever children appear under one of `directories`
    (Kafka's ZkNodeChangeNotificationListener). Watch callbacks only set an event."""

    def __init__(self, zk: KafkaZkClient, directories: Iterable[str], process: Callable[[], None], name: str):
        self._process = process
        self._wake = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._watches = [zk.watch_children(d, lambda path, children: self._wake.set()) for d in directories]

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._closed:
                return
            try:
                self._process()
            except Exception:
                log.exception("processing ZooKeeper change notifications failed; retrying on the next change")

    def close(self) -> None:
        self._closed = True
        for w in self._watches:
            w.cancel()
        self._wake.set()


def _entries(aces: Iterable[AccessControlEntry]) -> list[zd.AclEntry]:
    return sorted(zd.AclEntry(a.principal, a.permission_type.pascal_name, a.operation.pascal_name, a.host)
                  for a in aces)


def _aces(entries: Iterable[zd.AclEntry]) -> frozenset[AccessControlEntry]:
    return frozenset(AccessControlEntry(e.principal, e.host, AclOperation.from_name(e.operation),
                                        AclPermissionType.from_name(e.permission_type)) for e in entries)


class ZkAclStore:
    """The AclStore of AclAuthorizer over ZooKeeper; `listen(on_change)` reports other brokers' changes."""

    def __init__(self, zk: KafkaZkClient):
        self.zk = zk
        self._known: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._last = {False: "", True: ""}      # last notification processed, literal and extended
        self._listener: ChangeListener | None = None

    def _read(self, pattern: ResourcePattern) -> tuple[frozenset[AccessControlEntry], int]:
        entries, version = self.zk.get_versioned_acls_for_resource(
            pattern.resource_type.pascal_name, pattern.name, pattern.pattern_type.name)
        return _aces(entries), version

    def load(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        self.zk.create_acl_paths()
        for extended in (False, True):          # what is announced from here on is processed later
            seen = self.zk.get_acl_change_notifications(extended)
            self._last[extended] = seen[-1][0] if seen else ""
        acls = {}
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            for rtype in zd.RESOURCE_TYPES:
                for name in self.zk.get_resource_names(rtype, pattern_type.name):
                    pattern = ResourcePattern(ResourceType.from_name(rtype), name, pattern_type)
                    aces, _ = self._read(pattern)
                    if aces:
                        acls[pattern] = aces
        self._known = dict(acls)
        return acls

    def read(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        aces, _ = self._read(pattern)
        self._known[pattern] = aces
        return aces

    def write(self, changes: Mapping[ResourcePattern, frozenset[AccessControlEntry]]) -> None:
        """Apply each pattern's change (what was added and removed since this store last saw it) to what
        ZooKeeper holds now, then announce it."""
        for pattern, wanted in changes.items():
            before = self._known.get(pattern, frozenset())
            added, removed = wanted - before, before - wanted
            rtype, name, ptype = pattern.resource_type.pascal_name, pattern.name, pattern.pattern_type.name
            while True:
                current, version = self._read(pattern)
                new = (current | added) - removed
                if new == current:
                    break
                if new:
                    done, _ = self.zk.conditional_set_acls_for_resource(rtype, name, ptype, _entries(new), version)
                else:
                    done = self.zk.conditional_delete_resource(rtype, name, ptype, version)
                if done:
                    self.zk.create_acl_change_notification(rtype, name, ptype)
                    break
            self._known[pattern] = new

    def listen(self, on_change: Callable[[set[ResourcePattern]], None]) -> None:
        """Call `on_change(patterns)` (on the listener's thread) with the resources other brokers changed."""
        def process() -> None:
            changed = set()
            now = now_ms()
            for extended in (False, True):
                for seq, rtype, name, ptype in self.zk.get_acl_change_notifications(extended, self._last[extended]):
                    changed.add(ResourcePattern(ResourceType.from_name(rtype), name, PatternType.from_name(ptype)))
                    self._last[extended] = seq
                self._purge(extended, now)
            if changed:
                on_change(changed)
        self._listener = ChangeListener(self.zk, (zd.LITERAL_ACL_CHANGES_PATH, zd.EXTENDED_ACL_CHANGES_PATH), process,
                                        "acl-change-listener")

    def _purge(self, extended: bool, now_ms: float) -> None:
        directory = zd.EXTENDED_ACL_CHANGES_PATH if extended else zd.LITERAL_ACL_CHANGES_PATH
        for child in self.zk.get_children(directory):
            path = f"{directory}/{child}"
            _, stat = self.zk.get_data_and_stat(path)
            if stat is not None and stat.ctime + CHANGE_EXPIRATION_MS < now_ms:
                self.zk.delete_recursive(path)

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()


class ZkCredentialStore(CredentialStore):
    """SCRAM credentials in /config/users; other brokers' changes arrive through /config/changes, on
    `config_manager`, the broker's one listener there (Kafka's ZkConfigManager with its handler for
    users); a store used alone runs its own."""

    def __init__(self, zk: KafkaZkClient, config_manager: ZkConfigManager | None = None):
        self.zk = zk
        self.config_manager = config_manager
        self._own_manager: ZkConfigManager | None = None
        users = {}
        for name in zk.get_all_entities_with_config("users"):
            user = desanitize(name)
            creds = self._fetch_user(user)
            if creds:
                users[user] = creds
        super().__init__(users)

    def _fetch(self, sanitized: str) -> dict[str, ScramCredential]:
        path = zd.config_entity_path("users", sanitized)
        data, _ = self.zk.get_data_and_stat(path)
        return decode_user_config(data) if data else {}

    def _fetch_user(self, user: str) -> dict[str, ScramCredential]:
        """The credentials under Kafka's encoding of the name, else under the one earlier releases wrote."""
        creds = self._fetch(sanitize(user))
        legacy = legacy_sanitize(user)
        return creds if creds or legacy == sanitize(user) else self._fetch(legacy)

    def _persist(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        """Write each changed user's credentials beside the keys (quotas) ZooKeeper holds for it, and announce."""
        for user in set(users) | set(self._users):
            wanted = users.get(user, {})
            if wanted == self._users.get(user, {}):
                continue
            sanitized = sanitize(user)
            config = {k: v for k, v in self.zk.get_entity_configs("users", sanitized).items() if k not in SCRAM_KEYS}
            config.update({m: format_credential(c) for m, c in wanted.items()})
            self.zk.change_entity_config("users", sanitized, config)
            self._retire_legacy_znode(user)

    def _retire_legacy_znode(self, user: str) -> None:
        """Drop the credentials an earlier release wrote under its own encoding of the name (`~` kept):
        the user's credentials now live under Kafka's, and a stale copy would come back on a restart."""
        legacy = legacy_sanitize(user)
        if legacy == sanitize(user):
            return
        config = self.zk.get_entity_configs("users", legacy)
        if any(k in config for k in SCRAM_KEYS):
            self.zk.change_entity_config("users", legacy, {k: v for k, v in config.items() if k not in SCRAM_KEYS})

    def listen(self) -> None:
        """Follow the credential changes announced from here on, by other brokers and Kafka's tools (every
        notification still in ZooKeeper is handled once more when the listener starts: what was loaded
        before it started is not missed). Subscribe before the broker starts its config manager."""
        manager = self.config_manager
        if manager is None:
            manager = self._own_manager = ZkConfigManager(self.zk)
        manager.subscribe("users", self._user_changed, existing=False)
        if self._own_manager is not None:
            self._own_manager.startup()

    def _user_changed(self, sanitized: str, _configs: dict[str, str]) -> None:
        """Re-read under the lock that `alter` holds while it writes: the configs the listener read
        before may predate a change this broker has just made."""
        if "/" in sanitized:                    # users/<user>/clients/<id>: a quota, never a credential
            return
        with self._lock:
            users = dict(self._users)
            user = desanitize(sanitized)
            creds = self._fetch_user(user)
            if creds:
                users[user] = creds
            else:
                users.pop(user, None)
            self._users = users

    def close(self) -> None:
        if self._own_manager is not None:
            self._own_manager.shutdown()


def zk_security_stores(zk: KafkaZkClient, config_manager: ZkConfigManager | None = None) -> SecurityStores:
    """ACLs and SCRAM credentials in the cluster's ZooKeeper, on the broker's own client; the credentials
    follow /config/changes on the broker's `config_manager`."""
    return SecurityStores(ZkAclStore(zk), ZkCredentialStore(zk, config_manager))
