"""DelegationTokenManager: delegation tokens (KIP-48), made, renewed, expired, described, and logged in with.

A token is an id and an HMAC-SHA512 of that id under `delegation.token.secret.key`: a client that holds
both logs in over SCRAM with the `tokenauth=true` extension (username = id, password = the HMAC in
base64) and then acts as the token's owner. Only the token's metadata is stored, as Kafka's ZooKeeper
mode kept it: `/delegation_token/tokens/<id>` with a `token_changes/token_change_<n>` notification that
every broker follows, or a JSON file in the data directory on a single node. Every broker with the same
secret derives the same HMAC, and SCRAM credentials for it (4096 iterations), from that metadata.

The store blocks (files, ZooKeeper); the manager's API calls it from worker threads. The cache it
keeps is read by the SCRAM server on the event loop.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import threading
import uuid
from dataclasses import dataclass, field, replace

from ..clock import now_ms
from ..json_file import write_json
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.sasl import ScramMechanism
from ..security.principal import KafkaPrincipal, parse_principal
from ..security.scram import ScramCredential, credential_from_password

log = logging.getLogger(__name__)

TOKENS_PATH = "/delegation_token/tokens"
TOKEN_CHANGES_PATH = "/delegation_token/token_changes"
TOKEN_CHANGE_PREFIX = "token_change_"
LOCAL_FILE = "delegation-tokens.json"


@dataclass(frozen=True)
class TokenInformation:
    """What is stored of a token (Kafka's TokenInformation); the HMAC is derived, never stored."""

    token_id: str
    owner: KafkaPrincipal
    requester: KafkaPrincipal
    renewers: tuple[KafkaPrincipal, ...]
    issue_ms: int
    expiry_ms: int
    max_ms: int

    def owner_or_renewer(self, principal: KafkaPrincipal) -> bool:
        return principal in (self.owner, self.requester) or principal in self.renewers

    def encode(self) -> bytes:
        """Kafka's DelegationTokenInfoZNode JSON."""
        return json.dumps({"version": 3, "owner": str(self.owner), "tokenRequester": str(self.requester),
                           "renewers": [str(r) for r in self.renewers], "issueTimestamp": self.issue_ms,
                           "maxTimestamp": self.max_ms, "expiryTimestamp": self.expiry_ms,
                           "tokenId": self.token_id}).encode()

    @classmethod
    def decode(cls, data: bytes) -> TokenInformation:
        d = json.loads(data)
        owner = parse_principal(d["owner"])
        return cls(d["tokenId"], owner, parse_principal(d.get("tokenRequester") or d["owner"]),
                   tuple(parse_principal(r) for r in d.get("renewers", [])), int(d["issueTimestamp"]),
                   int(d["expiryTimestamp"]), int(d["maxTimestamp"]))


@dataclass
class _Cached:
    info: TokenInformation
    hmac: bytes
    credentials: dict[str, ScramCredential] = field(default_factory=dict)


class LocalTokenStore:
    """A single node's tokens in `delegation-tokens.json` (replaced atomically)."""

    def __init__(self, directory: str):
        self.path = os.path.join(directory, LOCAL_FILE)
        self._lock = threading.Lock()

    def load(self) -> list[TokenInformation]:
        try:
            with open(self.path, "rb") as f:
                return [TokenInformation.decode(json.dumps(t).encode()) for t in json.load(f)["tokens"]]
        except FileNotFoundError:
            return []
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.error("ignoring unreadable delegation tokens in %s: %s", self.path, e)
            return []

    def _write(self, tokens: list[TokenInformation]) -> None:
        write_json(self.path, {"version": 1, "tokens": [json.loads(t.encode()) for t in tokens]})   # HMACs

    def put(self, info: TokenInformation) -> None:
        with self._lock:
            tokens = [t for t in self.load() if t.token_id != info.token_id] + [info]
            self._write(tokens)

    def remove(self, token_id: str) -> None:
        with self._lock:
            self._write([t for t in self.load() if t.token_id != token_id])

    def watch(self, callback) -> None:
        """Nothing to follow: a single node is the only writer."""

    def close(self) -> None:
        pass


class ZkTokenStore:
    """Tokens in ZooKeeper as Kafka's ZooKeeper mode kept them, changes announced under token_changes."""

    def __init__(self, zk_client):
        self.zk = zk_client          # a started KafkaZkClient
        self._watch = None

    def load(self) -> list[TokenInformation]:
        out = []
        for token_id in self.zk.get_children(TOKENS_PATH) if self.zk.path_exists(TOKENS_PATH) else []:
            data, _ = self.zk.get_data_and_stat(f"{TOKENS_PATH}/{token_id}")
            if data:
                try:
                    out.append(TokenInformation.decode(data))
                except (ValueError, KeyError, TypeError) as e:
                    log.error("ignoring unreadable token znode %s: %s", token_id, e)
        return out

    def _notify(self, token_id: str) -> None:
        self.zk.make_sure_persistent_path_exists(TOKEN_CHANGES_PATH)
        self.zk.zk.create(f"{TOKEN_CHANGES_PATH}/{TOKEN_CHANGE_PREFIX}", token_id.encode(), sequence=True)

    def put(self, info: TokenInformation) -> None:
        path = f"{TOKENS_PATH}/{info.token_id}"
        if self.zk.zk.exists(path):
            self.zk.zk.set(path, info.encode())
        else:
            self.zk.zk.create(path, info.encode(), makepath=True)
        self._notify(info.token_id)

    def remove(self, token_id: str) -> None:
        self.zk.zk.delete(f"{TOKENS_PATH}/{token_id}")
        self._notify(token_id)

    def watch(self, callback) -> None:
        """``callback()`` (on kazoo's thread) whenever a broker announces a token change."""
        self.zk.make_sure_persistent_path_exists(TOKEN_CHANGES_PATH)
        self._watch = self.zk.watch_children(TOKEN_CHANGES_PATH, lambda *_: callback())

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()


def token_hmac(token_id: str, secret: str) -> bytes:
    """Kafka's DelegationTokenManager.createHmac: HMAC-SHA512 of the id, keyed by the secret."""
    return hmac.new(secret.encode(), token_id.encode(), hashlib.sha512).digest()


def new_token_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class DelegationTokenManager:
    def __init__(self, config, store, clock=now_ms):
        secret = config["delegation.token.secret.key"]
        self.secret = secret.value if secret is not None else \
            getattr(config, "originals", {}).get("delegation.token.master.key")     # the name before Kafka 4
        self.max_lifetime_ms = config["delegation.token.max.lifetime.ms"]
        self.default_renew_ms = config["delegation.token.expiry.time.ms"]
        self.store = store
        self.clock = clock
        self._tokens: dict[str, _Cached] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return bool(self.secret)

    # -- the cache, which the SCRAM server reads -------------------------------------------------
    def load(self) -> None:
        """Read every stored token (blocking), and follow other brokers' changes."""
        if not self.enabled:
            return
        self._reload()
        self.store.watch(self._reload)

    def _reload(self) -> None:
        tokens = {t.token_id: t for t in self.store.load()}
        with self._lock:
            old = self._tokens
            self._tokens = {token_id: replace(old[token_id], info=info) if token_id in old else self._cached(info)
                            for token_id, info in tokens.items()}

    def _cached(self, info: TokenInformation) -> _Cached:
        mac = token_hmac(info.token_id, self.secret)
        password = base64.b64encode(mac).decode()
        creds = {m.mechanism_name: credential_from_password(m, password, m.min_iterations) for m in ScramMechanism}
        return _Cached(info, mac, creds)

    def scram_credential(self, mechanism: str, token_id: str) -> tuple[ScramCredential, str] | None:
        """(the SCRAM credential, the owner's name) of a live token, for a `tokenauth` login."""
        cached = self._tokens.get(token_id)
        if cached is None or cached.info.expiry_ms < self.clock():
            return None
        credential = cached.credentials.get(mechanism)
        return (credential, cached.info.owner.name) if credential is not None else None

    def _by_hmac(self, mac: bytes) -> _Cached | None:
        return next((c for c in self._tokens.values() if hmac.compare_digest(c.hmac, bytes(mac))), None)

    # -- the API (blocking: call from a worker thread) --------------------------------------------
    def create(self, owner: KafkaPrincipal, requester: KafkaPrincipal, renewers: list[KafkaPrincipal],
               max_lifetime_ms: int) -> tuple[TokenInformation, bytes]:
        now = self.clock()
        lifetime = self.max_lifetime_ms if max_lifetime_ms <= 0 else min(max_lifetime_ms, self.max_lifetime_ms)
        info = TokenInformation(new_token_id(), owner, requester, tuple(renewers), now,
                                min(now + self.default_renew_ms, now + lifetime), now + lifetime)
        self.store.put(info)
        cached = self._cached(info)
        with self._lock:
            self._tokens[info.token_id] = cached
        return info, cached.hmac

    def renew(self, principal: KafkaPrincipal, mac: bytes, renew_period_ms: int) -> int:
        cached = self._checked(principal, mac)
        now = self.clock()
        period = self.default_renew_ms if renew_period_ms < 0 else renew_period_ms
        expiry = min(now + period, cached.info.max_ms)
        self._update(replace(cached.info, expiry_ms=expiry))
        return expiry

    def expire(self, principal: KafkaPrincipal, mac: bytes, expiry_period_ms: int) -> int:
        """A negative period expires the token now (it is removed); else its expiry moves to now + period."""
        cached = self._checked(principal, mac)
        now = self.clock()
        if expiry_period_ms < 0:
            self.store.remove(cached.info.token_id)
            with self._lock:
                self._tokens.pop(cached.info.token_id, None)
            return now
        expiry = min(now + expiry_period_ms, cached.info.max_ms)
        self._update(replace(cached.info, expiry_ms=expiry))
        return expiry

    def _checked(self, principal: KafkaPrincipal, mac: bytes) -> _Cached:
        cached = self._by_hmac(mac)
        if cached is None:
            raise KafkaError(ErrorCode.DELEGATION_TOKEN_NOT_FOUND)
        if not cached.info.owner_or_renewer(principal):
            raise KafkaError(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
        if cached.info.expiry_ms < self.clock():
            raise KafkaError(ErrorCode.DELEGATION_TOKEN_EXPIRED)
        return cached

    def _update(self, info: TokenInformation) -> None:
        self.store.put(info)
        with self._lock:
            cached = self._tokens.get(info.token_id)
            if cached is not None:
                self._tokens[info.token_id] = replace(cached, info=info)

    def tokens(self) -> list[tuple[TokenInformation, bytes]]:
        return [(c.info, c.hmac) for c in sorted(self._tokens.values(), key=lambda c: c.info.issue_ms)]

    def expire_tokens(self) -> int:
        """Remove every token past its expiry (Kafka's expiry check); how many went."""
        now = self.clock()
        gone = [c.info.token_id for c in list(self._tokens.values()) if c.info.expiry_ms < now]
        for token_id in gone:
            try:
                self.store.remove(token_id)
            except Exception as e:      # another broker removed it first
                log.debug("token %s already gone: %s", token_id, e)
            with self._lock:
                self._tokens.pop(token_id, None)
        return len(gone)

    def close(self) -> None:
        self.store.close()
