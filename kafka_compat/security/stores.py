"""Where ACLs and SCRAM credentials are kept: a choice the composition root makes.

A single node keeps them in files of its data directory (Kafka keeps both in its
metadata: ZooKeeper, or KRaft's log); a ZooKeeper cluster keeps them in ZooKeeper
as Kafka's ZooKeeper mode does, so every broker sees the same ones (zk_stores.py).
"""
from __future__ import annotations

import os
from typing import NamedTuple

from .authorizer import AclFileStore, AclStore
from .scram import CredentialStore, FileCredentialStore

ACL_FILE = "kafka-compat-acls.json"
CREDENTIALS_FILE = "kafka-compat-scram-credentials.json"


class SecurityStores(NamedTuple):
    acls: AclStore
    credentials: CredentialStore

    def listen(self, authorizer) -> None:
        """Follow changes other brokers make (stores shared through ZooKeeper; files have none)."""
        listen = getattr(self.acls, "listen", None)
        if listen is not None and authorizer is not None:
            listen(authorizer.refresh)
        listen = getattr(self.credentials, "listen", None)
        if listen is not None:
            listen()

    def close(self) -> None:
        for store in self:
            close = getattr(store, "close", None)
            if close is not None:
                close()


def file_security_stores(directory: str) -> SecurityStores:
    """Both in JSON files of `directory` (the first log dir), replaced atomically on each change."""
    return SecurityStores(AclFileStore(os.path.join(directory, ACL_FILE)),
                          FileCredentialStore(os.path.join(directory, CREDENTIALS_FILE)))
