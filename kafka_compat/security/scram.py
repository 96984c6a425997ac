"""SCRAM credentials as Kafka keeps them, where they are kept, and the two APIs that manage them.

A credential is what the server needs to check a SCRAM proof without knowing the
password: salt, StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey =
HMAC(SaltedPassword, "Server Key") and the iteration count (RFC 5802 3).
Its text form is Kafka's ScramCredentialUtils one,
`salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=N`, the value ZooKeeper
holds under /config/users/<user> for each mechanism name.

DescribeUserScramCredentials and AlterUserScramCredentials follow the ZooKeeper-mode
broker (ZkAdminManager): one result per user, a user's changes applied together
or not at all.
"""
from __future__ import annotations

import base64
import binascii
import json
import os
import threading
from typing import Iterable, Mapping, NamedTuple

from ..json_file import read_json, write_json
from ..protocol.errors import ErrorCode
from ..protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsResponse
from ..protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsResponse
from ..protocol.sasl import ScramMechanism

DEFAULT_ITERATIONS = 4096


class ScramCredential(NamedTuple):
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:      # keys stay out of logs
        return f"ScramCredential(iterations={self.iterations})"


def _mechanism(mechanism: ScramMechanism | str) -> ScramMechanism:
    if isinstance(mechanism, ScramMechanism):
        return mechanism
    found = ScramMechanism.from_name(mechanism)
    if found is None:
        raise ValueError(f"Unknown SCRAM mechanism {mechanism}")
    return found


def credential_from_salted_password(mechanism: ScramMechanism | str, salt: bytes, salted_password: bytes,
                                    iterations: int) -> ScramCredential:
    """What AlterUserScramCredentials stores: the client sends salt and SaltedPassword, never the password."""
    mech = _mechanism(mechanism)
    return ScramCredential(bytes(salt), mech.stored_key(salted_password), mech.server_key(salted_password), iterations)


def credential_from_password(mechanism: ScramMechanism | str, password: str, iterations: int = DEFAULT_ITERATIONS,
                             salt: bytes | None = None) -> ScramCredential:
    """A new credential (kafka-configs --add-config 'SCRAM-SHA-256=[password=...]'); a random salt by default."""
    mech = _mechanism(mechanism)
    if salt is None:
        salt = os.urandom(24)
    return credential_from_salted_password(mech, salt, mech.salted_password(password, salt, iterations), iterations)


def format_credential(credential: ScramCredential) -> str:
    b64 = base64.b64encode
    return (f"salt={b64(credential.salt).decode()},stored_key={b64(credential.stored_key).decode()},"
            f"server_key={b64(credential.server_key).decode()},iterations={credential.iterations}")


def parse_credential(text: str) -> ScramCredential:
    """Kafka's text form back to a credential; ValueError('Credentials not valid') on anything else."""
    props = {}
    for token in text.split(","):
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise ValueError("Credentials not valid")
        props[key] = value
    if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
        raise ValueError("Credentials not valid")
    try:
        return ScramCredential(base64.b64decode(props["salt"], validate=True),
                               base64.b64decode(props["stored_key"], validate=True),
                               base64.b64decode(props["server_key"], validate=True), int(props["iterations"]))
    except (binascii.Error, ValueError):
        raise ValueError("Credentials not valid") from None


# -- ZooKeeper's /config/users/<user> --------------------------------------------------


def encode_user_config(credentials: Mapping[str, ScramCredential], other: Mapping[str, str] | None = None) -> bytes:
    """The znode value: {"version":1,"config":{"SCRAM-SHA-256":"salt=...",...}} (quota keys may sit beside)."""
    config = dict(other or {})
    config.update({_mechanism(m).mechanism_name: format_credential(c) for m, c in credentials.items()})
    return json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode()


def decode_user_config(data: bytes) -> dict[str, ScramCredential]:
    """The SCRAM credentials of a /config/users/<user> znode value (other keys ignored)."""
    config = json.loads(data)["config"]
    return {m.mechanism_name: parse_credential(config[m.mechanism_name])
            for m in ScramMechanism if m.mechanism_name in config}


# -- stores -----------------------------------------------------------------------------


class CredentialStore:
    """SCRAM credentials by user and mechanism, in memory. `lookup` is on the login path: one dict read.

    Backends persist in `_persist` (a file here; ZooKeeper later); a change is visible only once persisted.
    """

    def __init__(self, users: Mapping[str, Mapping[str, ScramCredential]] | None = None):
        self._users: dict[str, dict[str, ScramCredential]] = {u: dict(c) for u, c in (users or {}).items()}
        self._lock = threading.Lock()

    def lookup(self, mechanism: ScramMechanism | str, user: str) -> ScramCredential | None:
        creds = self._users.get(user)
        if creds is None:
            return None
        return creds.get(mechanism if isinstance(mechanism, str) else mechanism.mechanism_name)

    def users(self) -> list[str]:
        return sorted(self._users)

    def describe(self, user: str) -> dict[str, ScramCredential]:
        """The user's credentials by mechanism name (empty when there are none)."""
        return dict(self._users.get(user, {}))

    def upsert(self, mechanism: ScramMechanism | str, user: str, credential: ScramCredential) -> None:
        self.alter(upserts=[(user, mechanism, credential)])

    def delete(self, mechanism: ScramMechanism | str, user: str) -> bool:
        if self.lookup(mechanism, user) is None:
            return False
        self.alter(deletions=[(user, mechanism)])
        return True

    def alter(self, upserts: Iterable[tuple[str, ScramMechanism | str, ScramCredential]] = (),
              deletions: Iterable[tuple[str, ScramMechanism | str]] = ()) -> None:
        """Apply deletions then upserts as one change (persisted once)."""
        with self._lock:
            users = {u: dict(c) for u, c in self._users.items()}
            for user, mechanism in deletions:
                creds = users.get(user, {})
                creds.pop(_mechanism(mechanism).mechanism_name, None)
                if not creds:
                    users.pop(user, None)
            for user, mechanism, credential in upserts:
                users.setdefault(user, {})[_mechanism(mechanism).mechanism_name] = credential
            self._persist(users)
            self._users = users

    def _persist(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        pass


class FileCredentialStore(CredentialStore):
    """Credentials in one JSON file (owner-only), rewritten atomically on every change:
    {"version":1,"users":{"alice":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=4096"}}}."""

    def __init__(self, path: str):
        self.path = path
        doc = read_json(path)
        users = {}
        if doc is not None:
            if doc.get("version") != 1:
                raise ValueError(f"{path}: unknown credential file version {doc.get('version')}")
            users = {u: {m: parse_credential(t) for m, t in creds.items()} for u, creds in doc["users"].items()}
        super().__init__(users)

    def _persist(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        write_json(self.path, {"version": 1, "users": {
            u: {m: format_credential(c) for m, c in creds.items()} for u, creds in users.items()}})


# -- DescribeUserScramCredentials (key 50) / AlterUserScramCredentials (key 51) ----------

_Describe = DescribeUserScramCredentialsResponse
_Alter = AlterUserScramCredentialsResponse
USERNAME_MUST_NOT_BE_EMPTY = "Username must not be empty"


def _credential_infos(creds: Mapping[str, ScramCredential]) -> list:
    return [_Describe.CredentialInfo(mechanism=m.type, iterations=creds[m.mechanism_name].iterations)
            for m in ScramMechanism if m.mechanism_name in creds]


def describe_user_scram_credentials(store: CredentialStore, request) -> DescribeUserScramCredentialsResponse:
    """Null or empty Users: every user with a credential, sorted. Otherwise one result per distinct
    name in request order: RESOURCE_NOT_FOUND for an empty or unknown user, DUPLICATE_RESOURCE
    for a name asked twice."""
    result = _Describe.DescribeUserScramCredentialsResult
    names = [u.name for u in request.users] if request.users else None
    if names is None:
        results = [result(user=u, error_code=ErrorCode.NONE, error_message=None,
                          credential_infos=_credential_infos(store.describe(u))) for u in store.users()]
        return _Describe(error_code=ErrorCode.NONE, error_message=None, results=results)
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    results = []
    for user in counts:         # distinct names, first-seen order
        if not user:
            results.append(result(user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                                  error_message=USERNAME_MUST_NOT_BE_EMPTY))
        elif counts[user] > 1:
            results.append(result(user=user, error_code=ErrorCode.DUPLICATE_RESOURCE,
                                  error_message="Cannot describe SCRAM credentials for the same user twice in a "
                                                f"single request: {user}"))
        else:
            creds = store.describe(user)
            if creds:
                results.append(result(user=user, error_code=ErrorCode.NONE, error_message=None,
                                      credential_infos=_credential_infos(creds)))
            else:
                results.append(result(user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                                      error_message=f"Attempt to describe a user credential that does not exist: "
                                                    f"{user}"))
    return _Describe(error_code=ErrorCode.NONE, error_message=None, results=results)


def alter_user_scram_credentials(store: CredentialStore, request) -> AlterUserScramCredentialsResponse:
    """Validate every deletion and upsertion, then apply the users with no error in one store change.

    Per user, in this order: empty name -> UNACCEPTABLE_CREDENTIAL; unknown mechanism ->
    UNSUPPORTED_SASL_MECHANISM; iterations outside 4096..16384 -> UNACCEPTABLE_CREDENTIAL; the same
    (user, mechanism) twice -> DUPLICATE_RESOURCE; deleting a credential that is not there ->
    RESOURCE_NOT_FOUND.
    """
    result = _Alter.AlterUserScramCredentialsResult
    errors: dict[str, tuple[int, str]] = {}

    def fail(user: str, code: int, message: str) -> None:
        errors.setdefault(user, (code, message))

    for d in request.deletions:
        if not d.name:
            fail(d.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, USERNAME_MUST_NOT_BE_EMPTY)
        elif ScramMechanism.from_type(d.mechanism) is None:
            fail(d.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    for u in request.upsertions:
        mech = ScramMechanism.from_type(u.mechanism)
        if not u.name:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, USERNAME_MUST_NOT_BE_EMPTY)
        elif mech is None:
            fail(u.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif u.iterations < mech.min_iterations:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif u.iterations > mech.max_iterations:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    invalid = set(errors)
    results = [result(user=user, error_code=code, error_message=message) for user, (code, message) in errors.items()]

    pairs = [(u.name, u.mechanism) for u in request.upsertions if u.name not in invalid]
    pairs += [(d.name, d.mechanism) for d in request.deletions if d.name not in invalid]
    seen: set = set()
    duplicated: dict[str, None] = {}
    for pair in pairs:
        if pair in seen:
            duplicated[pair[0]] = None
        seen.add(pair)
    results += [result(user=user, error_code=ErrorCode.DUPLICATE_RESOURCE,
                       error_message="A user credential cannot be altered twice in the same request")
                for user in duplicated]
    valid_users = {user for user, _ in pairs if user not in duplicated}

    missing: dict[str, None] = {}
    for d in request.deletions:
        if d.name in valid_users and store.lookup(ScramMechanism.from_type(d.mechanism), d.name) is None:
            missing[d.name] = None
    results += [result(user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                       error_message="Attempt to delete a user credential that does not exist") for user in missing]
    to_alter = [user for user in dict.fromkeys(user for user, _ in pairs)
                if user in valid_users and user not in missing]
    alter = set(to_alter)
    if alter:
        deletions = [(d.name, ScramMechanism.from_type(d.mechanism)) for d in request.deletions if d.name in alter]
        upserts = [(u.name, ScramMechanism.from_type(u.mechanism),
                    credential_from_salted_password(ScramMechanism.from_type(u.mechanism), u.salt, u.salted_password,
                                                    u.iterations))
                   for u in request.upsertions if u.name in alter]
        try:
            store.alter(upserts=upserts, deletions=deletions)
        except Exception as e:      # a file, or ZooKeeper: nothing was changed
            message = f"Could not store the credentials: {getattr(e, 'strerror', None) or e}"
            results += [result(user=user, error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=message)
                        for user in to_alter]
            return _Alter(results=results)
    results += [result(user=user, error_code=ErrorCode.NONE, error_message=None) for user in to_alter]
    return _Alter(results=results)
