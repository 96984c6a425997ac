"""SASL authentication of one connection, sans-I/O (Kafka's SaslServerAuthenticator).

`SaslServerAuthenticator` is fed what a client sends before (and, for KIP-368
re-authentication, after) it is authenticated, and answers with a list of
outputs for the network layer to carry out in order: responses to write, raw
token frames, "authenticated as X", or "close the connection". It never touches
a socket, a clock it was not given, or a credential store: mechanisms get their
credentials through callbacks.

Sequence on a SASL listener (Kafka 1.0+ clients, handshake v1):
ApiVersions (optional, once) -> SaslHandshake -> SaslAuthenticate ... -> authenticated.
With SaslHandshake v0 the tokens that follow are raw frames (4-byte size, no header).

The three server mechanisms here follow Kafka's: PLAIN (RFC 4616), SCRAM-SHA-256/512
(RFC 5802/7677) and OAUTHBEARER (RFC 7628). Errors a mechanism raises are of two kinds,
as in Kafka: `SaslAuthenticationError` carries a message the client may see,
`SaslCredentialError` only a log detail (the client gets a generic message, so a
failed login does not tell which user exists).
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import re
import secrets
import time
from enum import Enum
from typing import Any, Callable, Mapping, NamedTuple, Protocol

from .errors import ErrorCode
from .frames import (
    InvalidRequest,
    Request,
    UnsupportedApiVersionsRequest,
    parse_request,
    unsupported_api_versions_response,
)
from .messages import APIS
from .messages.api_versions import ApiVersionsResponse
from .messages.sasl_authenticate import SaslAuthenticateResponse
from .messages.sasl_handshake import SaslHandshakeResponse

log = logging.getLogger(__name__)

SASL_HANDSHAKE = 17
API_VERSIONS = 18
SASL_AUTHENTICATE = 36
DEFAULT_MAX_RECEIVE_SIZE = 524288       # sasl.server.max.receive.size
MIN_REAUTH_INTERVAL_S = 1.0             # Kafka refuses a re-authentication less than 1 s after the last


# -- what comes out ----------------------------------------------------------------


class SendResponse(NamedTuple):
    """Encode `body` as the response to `request` (frames.encode_response) and write it."""
    request: Request
    body: Any


class SendToken(NamedTuple):
    """Write a raw SASL token as one frame: 4-byte size then the bytes (handshake v0 only)."""
    token: bytes


class SendBytes(NamedTuple):
    """Write bytes that are already a whole frame."""
    data: bytes


class Authenticated(NamedTuple):
    """Authentication (or re-authentication) completed; the connection now acts for this id."""
    mechanism: str
    authorization_id: str
    session_lifetime_ms: int            # 0: the session does not expire
    reauthentication: bool
    token_authenticated: bool = False   # logged in with a delegation token (acting for its owner)


class Close(NamedTuple):
    """Close the connection once the outputs listed before this one are written."""
    reason: str


class RawToken(NamedTuple):
    """Event in: one frame received after a v0 SaslHandshake, taken as an opaque token."""
    token: bytes


# -- what a mechanism raises -------------------------------------------------------


class SaslAuthenticationError(Exception):
    """Authentication failed with a message fit for the client (Kafka's SaslAuthenticationException)."""

    def __init__(self, message: str, challenge: bytes = b""):
        super().__init__(message)
        self.message = message
        self.challenge = challenge


class SaslCredentialError(Exception):
    """Authentication failed; the detail is for the log only (Kafka's SaslException).

    `challenge` is still sent (SCRAM's server-final `e=...`, RFC 5802 5.1).
    """

    def __init__(self, detail: str, challenge: bytes = b""):
        super().__init__(detail)
        self.challenge = challenge


class SaslServer(Protocol):
    """One mechanism's server side for one authentication exchange."""
    mechanism_name: str
    complete: bool
    authorization_id: str | None
    credential_expiry_ms: int | None    # wall-clock ms the credential stops being valid (tokens), or None

    def evaluate(self, token: bytes) -> bytes: ...


class SaslState(Enum):
    HANDSHAKE = "handshake"             # ApiVersions (once) or SaslHandshake expected
    AUTHENTICATING = "authenticating"   # mechanism tokens expected
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


def api_key_name(api_key: int) -> str:
    """ApiKeys' Java enum name (METADATA, API_VERSIONS), as Kafka's messages print it."""
    info = APIS.get(api_key)
    if info is None:
        return str(api_key)
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", info.name).upper()


# -- the per-connection state machine ----------------------------------------------


class SaslServerAuthenticator:
    """Kafka's SaslServerAuthenticator for one connection.

    `mechanisms` maps each enabled mechanism name (sasl.enabled.mechanisms, in order) to a
    factory of a fresh `SaslServer`. `api_versions(request)` builds the broker's usual
    ApiVersions response. `max_reauth_ms` is connections.max.reauth.ms, either one value or
    one per mechanism (0 = no re-authentication and no session expiry). `clock` is wall time
    in seconds (credential expiry); `monotonic` times the session.
    """

    def __init__(self, mechanisms: Mapping[str, Callable[[], SaslServer]],
                 api_versions: Callable[[Request], Any], *,
                 max_reauth_ms: int | Mapping[str, int] = 0,
                 max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE,
                 supported: Mapping[int, tuple[int, int]] | None = None,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic):
        if not mechanisms:
            raise ValueError("No SASL mechanisms are enabled")
        self._factories = dict(mechanisms)
        self.enabled_mechanisms = list(self._factories)
        self._api_versions = api_versions
        self._max_reauth_ms = max_reauth_ms
        self.max_receive_size = max_receive_size
        self._supported = {k: (supported or {}).get(k, (APIS[k].min_version, APIS[k].max_version))
                           for k in (SASL_HANDSHAKE, API_VERSIONS, SASL_AUTHENTICATE)}
        self._clock = clock
        self._monotonic = monotonic

        self.state = SaslState.HANDSHAKE
        self.raw_tokens = False             # True after a v0 SaslHandshake: frames are tokens
        self.mechanism: str | None = None
        self.authorization_id: str | None = None
        self.session_lifetime_ms = 0
        self.session_expires_at: float | None = None    # monotonic seconds
        self._versions_seen = False
        self._server: SaslServer | None = None
        self._reauth_from: tuple[str, str] | None = None    # (mechanism, authorization id) being re-authenticated
        self._bad_reauth_mechanism: str | None = None
        self._last_reauth_start: float | None = None

    # -- events in
    def receive_frame(self, frame) -> list:
        """A frame (without its size prefix) that arrived while the connection is not authenticated,
        or a SaslHandshake / SaslAuthenticate frame after it is."""
        if self.state is SaslState.FAILED:
            return [Close("SASL authentication already failed on this connection")]
        if len(frame) > self.max_receive_size:
            return self._fail(None, "Failing SASL authentication due to invalid receive size "
                                    f"({len(frame)} > sasl.server.max.receive.size {self.max_receive_size})")
        if self.raw_tokens and self.state is SaslState.AUTHENTICATING:
            return self.receive(RawToken(bytes(frame)))
        try:
            request = parse_request(frame, self._supported)
        except UnsupportedApiVersionsRequest as e:
            if self.state is SaslState.HANDSHAKE and not self._versions_seen:
                # answered, and the client may retry with a lower version (KIP-511)
                return [SendBytes(unsupported_api_versions_response(e.correlation_id,
                                                                    self._supported[API_VERSIONS][1]))]
            return self._fail(None, f"Unexpected Kafka request of type API_VERSIONS during SASL {self._phase()}")
        except InvalidRequest as e:
            if e.api_key is not None and e.api_key not in self._supported:
                return self.receive_unexpected(e.api_key)
            if self.state is SaslState.HANDSHAKE and e.api_key is None:
                return self._fail(None, "The first packet is not a Kafka request (a 0.9 client's GSSAPI token?) "
                                        "and GSSAPI is not enabled")
            return self._fail(None, f"Invalid SASL request: {e}")
        return self.receive(request)

    def receive_unexpected(self, api_key: int) -> list:
        """A request of some other API arrived while not authenticated: Kafka drops the connection."""
        if self.state is SaslState.AUTHENTICATED:
            return [Close("SASL session expired")] if self.session_expired() else []
        return self._fail(None, f"Unexpected Kafka request of type {api_key_name(api_key)} "
                                f"during SASL {self._phase()}.")

    def receive(self, event: Request | RawToken) -> list:
        """One decoded request (ApiVersions, SaslHandshake, SaslAuthenticate) or a raw v0 token."""
        try:
            return self._receive(event)
        except Exception as e:     # the last line of defence: a bug must not take the broker down
            log.exception("SASL authentication failed unexpectedly")
            self.state = SaslState.FAILED
            self._server = None
            return [Close(f"internal error during SASL authentication: {type(e).__name__}")]

    def session_expired(self, now: float | None = None) -> bool:
        """True once an authenticated session has outlived its lifetime: Kafka then closes the
        connection on the next request that is not a SaslHandshake."""
        if self.session_expires_at is None:
            return False
        return (self._monotonic() if now is None else now) > self.session_expires_at

    # -- internals
    def _phase(self) -> str:
        return "authentication" if self.state is SaslState.AUTHENTICATING else "handshake"

    def _reauth_text(self) -> str:
        return "re-authentication" if self._reauth_from else "authentication"

    def _receive(self, event) -> list:
        state = self.state
        if state is SaslState.FAILED:
            return [Close("SASL authentication already failed on this connection")]
        if isinstance(event, RawToken):
            if state is SaslState.AUTHENTICATING and self.raw_tokens:
                return self._token(None, event.token)
            return self._fail(None, "a raw SASL token arrived outside a v0 SaslHandshake exchange")
        key = event.api_key
        if state is SaslState.HANDSHAKE:
            if key == API_VERSIONS and not self._versions_seen:
                body = self._api_versions(event)
                if getattr(body, "error_code", ErrorCode.NONE) == ErrorCode.NONE:
                    self._versions_seen = True
                return [SendResponse(event, body)]
            if key == SASL_HANDSHAKE:
                return self._handshake(event)
            return self.receive_unexpected(key)
        if state is SaslState.AUTHENTICATING:
            if self.raw_tokens:
                return self._fail(None, "a Kafka request arrived while raw SASL tokens were expected")
            if key == SASL_AUTHENTICATE:
                return self._token(event, event.body.auth_bytes)
            message = f"Unexpected Kafka request of type {api_key_name(key)} during SASL authentication."
            if key == SASL_HANDSHAKE:
                return self._fail(SendResponse(event, SaslHandshakeResponse(
                    error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=list(self.enabled_mechanisms))), message)
            if key == API_VERSIONS:
                return self._fail(SendResponse(event, ApiVersionsResponse(
                    error_code=ErrorCode.ILLEGAL_SASL_STATE)), message)
            return self._fail(None, message)
        # AUTHENTICATED: only the SASL APIs come here
        if key == SASL_HANDSHAKE and self._may_reauthenticate():
            self._last_reauth_start = self._monotonic()
            self._reauth_from = (self.mechanism, self.authorization_id)
            self.state = SaslState.HANDSHAKE
            return self._handshake(event)
        if self.session_expired():
            return [Close("SASL session expired")]
        if key == SASL_HANDSHAKE:
            return [SendResponse(event, SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE))]
        if key == SASL_AUTHENTICATE:
            return [SendResponse(event, SaslAuthenticateResponse(
                error_code=ErrorCode.ILLEGAL_SASL_STATE,
                error_message="SaslAuthenticate request received after successful authentication"))]
        return []

    def _may_reauthenticate(self) -> bool:
        if self.session_expires_at is None:
            return False        # re-authentication is off: KafkaApis answers ILLEGAL_SASL_STATE
        last = self._last_reauth_start
        return last is None or self._monotonic() - last >= MIN_REAUTH_INTERVAL_S

    def _handshake(self, request: Request) -> list:
        mechanism = request.body.mechanism
        enabled = list(self.enabled_mechanisms)
        if mechanism not in self._factories:
            return self._fail(SendResponse(request, SaslHandshakeResponse(
                error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)),
                f"Unsupported SASL mechanism {mechanism}")
        self.raw_tokens = request.api_version == 0
        self.state = SaslState.AUTHENTICATING
        self._bad_reauth_mechanism = None
        if self._reauth_from is not None and mechanism != self._reauth_from[0]:
            # Kafka accepts the handshake, then fails the exchange that follows
            self._bad_reauth_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not supported "
                                          f"for re-authentication of mechanism '{self._reauth_from[0]}'")
            self._server = None
        else:
            self._server = self._factories[mechanism]()
        self.mechanism = mechanism
        return [SendResponse(request, SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled))]

    def _token(self, request: Request | None, token: bytes) -> list:
        if self._bad_reauth_mechanism is not None:
            return self._auth_failure(request, self._bad_reauth_mechanism, b"")
        server = self._server
        try:
            challenge = server.evaluate(token)
        except SaslAuthenticationError as e:
            return self._auth_failure(request, e.message, e.challenge)
        except SaslCredentialError as e:
            log.info("SASL/%s %s failed: %s", self.mechanism, self._reauth_text(), e)
            return self._auth_failure(request, f"Authentication failed during {self._reauth_text()} due to "
                                               f"invalid credentials with SASL mechanism {self.mechanism}",
                                      e.challenge)
        if not server.complete:
            if request is None:
                return [SendToken(challenge)]
            return [SendResponse(request, SaslAuthenticateResponse(auth_bytes=challenge, error_message=None))]
        authorization_id = server.authorization_id
        if self._reauth_from is not None and authorization_id != self._reauth_from[1]:
            return self._auth_failure(request, f"Cannot change principals during re-authentication from "
                                               f"User.{self._reauth_from[1]}: User.{authorization_id}", b"")
        lifetime = self._session_lifetime_ms(server)
        reauthentication = self._reauth_from is not None
        self.state = SaslState.AUTHENTICATED
        self.authorization_id = authorization_id
        self.session_lifetime_ms = lifetime
        self._server = None
        self._reauth_from = None
        out = [SendToken(challenge) if request is None else SendResponse(request, SaslAuthenticateResponse(
            auth_bytes=challenge, error_message=None, session_lifetime_ms=lifetime))]
        out.append(Authenticated(self.mechanism, authorization_id, lifetime, reauthentication,
                                 getattr(server, "token_authenticated", False)))
        return out

    def _session_lifetime_ms(self, server: SaslServer) -> int:
        """min(connections.max.reauth.ms, time left on the credential), as Kafka's ReauthInfo; 0 = none."""
        reauth = self._max_reauth_ms
        if not isinstance(reauth, int):
            reauth = reauth.get(self.mechanism, 0)
        max_reauth_set = reauth is not None and reauth > 0
        expiry = getattr(server, "credential_expiry_ms", None)
        if expiry is None and not max_reauth_set:
            self.session_expires_at = None
            return 0
        now_ms = int(self._clock() * 1000)
        if expiry is None:
            lifetime = reauth
        elif not max_reauth_set:
            lifetime = expiry - now_ms
        else:
            lifetime = min(expiry - now_ms, reauth)
        lifetime = max(0, lifetime)
        self.session_expires_at = self._monotonic() + lifetime / 1000
        return lifetime

    def _auth_failure(self, request: Request | None, message: str, challenge: bytes) -> list:
        if request is None:
            return self._fail(SendToken(challenge) if challenge else None, message)
        return self._fail(SendResponse(request, SaslAuthenticateResponse(
            error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=message, auth_bytes=challenge)), message)

    def _fail(self, last_words, reason: str) -> list:
        log.info("SASL %s failed: %s", self._reauth_text(), reason)
        self.state = SaslState.FAILED
        self._server = None
        return [last_words, Close(reason)] if last_words is not None else [Close(reason)]


# -- PLAIN (RFC 4616) -------------------------------------------------------------


class PlainServer:
    """SASL/PLAIN: one token `[authzid] NUL authcid NUL passwd`, checked by `verify(user, password)`."""
    mechanism_name = "PLAIN"

    def __init__(self, verify: Callable[[str, str], bool]):
        self._verify = verify
        self.complete = False
        self.authorization_id: str | None = None
        self.credential_expiry_ms = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Unexpected SASL/PLAIN token after authentication completed")
        parts = bytes(token).decode("utf-8", "replace").split("\x00", 3)
        if len(parts) != 3:
            raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        try:
            ok = self._verify(username, password)
        except Exception as e:
            raise SaslAuthenticationError("Authentication failed: credentials for user could not be verified") from e
        if not ok:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an authorization id that is "
                                          "different from username")
        self.authorization_id = username
        self.complete = True
        return b""


# -- SCRAM (RFC 5802, RFC 7677) ----------------------------------------------------


class ScramMechanism(Enum):
    """Kafka's SCRAM mechanisms: name, the int8 type of the credential APIs, hash, iteration bounds."""
    SCRAM_SHA_256 = ("SCRAM-SHA-256", 1, "sha256", 4096, 16384)
    SCRAM_SHA_512 = ("SCRAM-SHA-512", 2, "sha512", 4096, 16384)

    def __init__(self, mechanism_name: str, type_: int, hash_name: str, min_iterations: int, max_iterations: int):
        self.mechanism_name = mechanism_name
        self.type = type_
        self.hash_name = hash_name
        self.min_iterations = min_iterations
        self.max_iterations = max_iterations
        self.digest_size = hashlib.new(hash_name).digest_size

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism | None:
        return _SCRAM_BY_NAME.get(name)

    @classmethod
    def from_type(cls, type_: int) -> ScramMechanism | None:
        return _SCRAM_BY_TYPE.get(type_)

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """Hi(password, salt, i): PBKDF2-HMAC. Kafka 'normalizes' a password to its UTF-8 bytes."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)

    def stored_key(self, salted_password: bytes) -> bytes:
        return self.hash(self.hmac(salted_password, b"Client Key"))

    def server_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Server Key")


_SCRAM_BY_NAME = {m.mechanism_name: m for m in ScramMechanism}
_SCRAM_BY_TYPE = {m.type: m for m in ScramMechanism}
TOKEN_AUTH_EXTENSION = "tokenauth"
_EXT_KEY = re.compile(r"[A-Za-z]+")
_PRINTABLE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")       # RFC 5802 'printable': %x21-7E except ','


def scram_server_nonce() -> str:
    """Kafka's server nonce: a 130-bit random number written in base 36."""
    n = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = []
    while True:
        n, r = divmod(n, 36)
        out.append(digits[r])
        if not n:
            return "".join(reversed(out))


def scram_username(saslname: str) -> str:
    """Undo RFC 5802 saslname escaping ('=2C' is ',', '=3D' is '='); any other '=' is invalid."""
    if saslname.replace("=2C", "").replace("=3D", "").find("=") >= 0:
        raise ValueError(f"Invalid username: {saslname}")
    return saslname.replace("=2C", ",").replace("=3D", "=")


def scram_saslname(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def _b64decode(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


class ScramServer:
    """SCRAM server: client-first -> server-first, client-final -> server-final.

    `lookup(username)` returns the stored credential (anything with salt, stored_key,
    server_key and iterations) or None. Only the 'n' gs2 flag is accepted (no channel
    binding), as in Kafka. With the `tokenauth=true` extension the username is a delegation token's id:
    `token_lookup(mechanism name, token id)` returns (credential, owner name) or None, and the
    connection then acts for the owner (refused when no token lookup is given).
    """

    def __init__(self, mechanism: ScramMechanism, lookup: Callable[[str], Any], nonce: Callable[[], str] | None = None,
                 token_lookup: Callable[[str, str], Any] | None = None):
        self.mechanism = mechanism
        self._token_lookup = token_lookup
        self.token_authenticated = False
        self.mechanism_name = mechanism.mechanism_name
        self._lookup = lookup
        self._nonce = nonce or scram_server_nonce
        self.complete = False
        self.authorization_id: str | None = None
        self.credential_expiry_ms = None
        self._step = 0
        self._gs2_header = b""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce_full = ""
        self._credential = None

    def evaluate(self, token: bytes) -> bytes:
        step = self._step
        self._step = -1         # any failure leaves the exchange unusable
        if step == 0:
            out = self._client_first(token)
            self._step = 1
            return out
        if step == 1:
            out = self._client_final(token)
            self._credential = None
            self.complete = True
            self._step = 2
            return out
        raise SaslAuthenticationError(f"Unexpected SASL/{self.mechanism_name} token in this state")

    def _client_first(self, token: bytes) -> bytes:
        try:
            message = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise SaslCredentialError("Invalid SCRAM client first message: not UTF-8") from None
        fields = message.split(",")
        if len(fields) < 4 or fields[0] != "n" or "\x00" in message:
            raise SaslCredentialError("Invalid SCRAM client first message format (only gs2 flag 'n' is accepted)")
        authzid_field = fields[1]
        if authzid_field and not authzid_field.startswith("a="):
            raise SaslCredentialError("Invalid SCRAM client first message format: bad authzid")
        bare = fields[2:]
        if bare[0].startswith("m="):
            raise SaslCredentialError("Invalid SCRAM client first message: mandatory extension 'm' not supported")
        if not bare[0].startswith("n=") or len(bare[0]) < 3 or not bare[1].startswith("r="):
            raise SaslCredentialError("Invalid SCRAM client first message format")
        try:
            username = scram_username(bare[0][2:])
            authzid = scram_username(authzid_field[2:]) if authzid_field else ""
        except ValueError as e:
            raise SaslCredentialError(str(e)) from None
        client_nonce = bare[1][2:]
        if not _PRINTABLE.fullmatch(client_nonce):
            raise SaslCredentialError("Invalid SCRAM client first message: bad nonce")
        extensions = {}
        for ext in bare[2:]:
            k, sep, v = ext.partition("=")
            if not sep or not v or not _EXT_KEY.fullmatch(k):
                raise SaslCredentialError("Invalid SCRAM client first message: bad extension")
            extensions[k] = v
        authorized = username
        if extensions.get(TOKEN_AUTH_EXTENSION, "").lower() == "true":
            found = self._token_lookup(self.mechanism_name, username) if self._token_lookup is not None else None
            if found is None:
                raise SaslCredentialError("Token Authentication failed: Invalid tokenId")
            credential, authorized = found
            self.token_authenticated = True
        else:
            credential = self._lookup(username)
        if credential is None:
            raise SaslCredentialError("Authentication failed: Invalid user credentials")
        if authzid and authzid != authorized:
            raise SaslAuthenticationError("Authentication failed: Client requested an authorization id that is "
                                          "different from username")
        if credential.iterations < self.mechanism.min_iterations:
            raise SaslCredentialError(f"Iterations {credential.iterations} is less than the minimum "
                                      f"{self.mechanism.min_iterations} for {self.mechanism_name}")
        self.authorization_id = authorized
        self._credential = credential
        self._gs2_header = (message[:len(fields[0]) + len(authzid_field) + 2]).encode("utf-8")
        self._client_first_bare = ",".join(bare)
        self._nonce_full = client_nonce + self._nonce()
        self._server_first = (f"r={self._nonce_full},s={base64.b64encode(credential.salt).decode('ascii')},"
                              f"i={credential.iterations}")
        return self._server_first.encode("ascii")

    def _client_final(self, token: bytes) -> bytes:
        try:
            message = bytes(token).decode("ascii")
            cut = message.rindex(",p=")
            without_proof, proof_b64 = message[:cut], message[cut + 3:]
            fields = without_proof.split(",")
            if len(fields) < 2 or not fields[0].startswith("c=") or not fields[1].startswith("r="):
                raise ValueError("format")
            channel_binding = _b64decode(fields[0][2:])
            proof = _b64decode(proof_b64)
        except (UnicodeDecodeError, ValueError, binascii.Error):
            raise SaslCredentialError("Invalid SCRAM client final message format",
                                      b"e=invalid-encoding") from None
        if channel_binding != self._gs2_header:
            raise SaslCredentialError("SCRAM channel binding does not match the gs2 header",
                                      b"e=channel-bindings-dont-match")
        # Kafka checks only that the nonce ends with the server's: librdkafka before 2.1 sends the client
        # nonce twice (cnonce + cnonce + snonce), and the proof covers what was sent either way
        if not fields[1][2:].endswith(self._nonce_full):
            raise SaslCredentialError("Invalid client nonce in the final client message.", b"e=other-error")
        mech = self.mechanism
        credential = self._credential
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode("utf-8")
        if len(proof) != mech.digest_size:
            raise SaslCredentialError("Invalid client credentials", b"e=invalid-proof")
        signature = mech.hmac(credential.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(mech.hash(client_key), credential.stored_key):
            raise SaslCredentialError("Invalid client credentials", b"e=invalid-proof")
        server_signature = mech.hmac(credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


# -- OAUTHBEARER (RFC 7628) --------------------------------------------------------


class OAuthBearerToken(NamedTuple):
    """A validated bearer token (Kafka's OAuthBearerToken)."""
    value: str
    principal_name: str
    lifetime_ms: int                    # wall-clock ms at which it expires
    scope: frozenset = frozenset()
    start_time_ms: int | None = None


class OAuthBearerValidationError(Exception):
    """The token is not acceptable; `status` is the RFC 7628 error status sent back in JSON."""

    def __init__(self, message: str, status: str = "invalid_token", scope: str | None = None,
                 openid_configuration: str | None = None):
        super().__init__(message)
        self.status = status
        self.scope = scope
        self.openid_configuration = openid_configuration


_OAUTH_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_OAUTH_KVPAIRS = r"(?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*"
_OAUTH_INITIAL = re.compile(rf"n,(?:a=(?P<authzid>{_OAUTH_SASLNAME}))?,\x01(?P<kvpairs>{_OAUTH_KVPAIRS})\x01")
_OAUTH_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")


def oauthbearer_error_json(status: str, scope: str | None, openid_configuration: str | None) -> str:
    """The server's error challenge, spelled as Kafka spells it."""
    out = '{"status":' + json.dumps(status)
    if scope is not None:
        out += ', "scope":' + json.dumps(scope)
    if openid_configuration is not None:
        out += ', "openid-configuration":' + json.dumps(openid_configuration)
    return out + "}"


class OAuthBearerServer:
    """SASL/OAUTHBEARER: `n,[a=authzid],^Aauth=Bearer <token>^A[key=value^A...]^A`.

    `validate(token_value)` returns an OAuthBearerToken or raises OAuthBearerValidationError.
    A bad token is answered, as in Kafka, with a JSON error challenge; the client replies
    with a single ^A and the exchange then fails with that JSON as the message.
    """
    mechanism_name = "OAUTHBEARER"

    def __init__(self, validate: Callable[[str], OAuthBearerToken]):
        self._validate = validate
        self.complete = False
        self.authorization_id: str | None = None
        self.credential_expiry_ms: int | None = None
        self.token: OAuthBearerToken | None = None
        self.extensions: dict[str, str] = {}
        self._error: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Unexpected SASL/OAUTHBEARER token after authentication completed")
        if bytes(token) == b"\x01" and self._error is not None:
            raise SaslAuthenticationError(self._error)
        self._error = None
        message = bytes(token).decode("utf-8", "replace")
        m = _OAUTH_INITIAL.fullmatch(message)
        if m is None:
            raise SaslCredentialError("Invalid OAUTHBEARER client first message")
        authzid = m.group("authzid") or ""
        pairs = {}
        for pair in m.group("kvpairs").split("\x01"):
            if pair:
                k, _, v = pair.partition("=")
                pairs[k] = v
        auth = pairs.pop("auth", None)
        if auth is None:
            raise SaslCredentialError("Invalid OAUTHBEARER client first message: 'auth' not specified")
        am = _OAUTH_AUTH.fullmatch(auth)
        if am is None:
            raise SaslCredentialError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
        if am.group("scheme").lower() != "bearer":
            raise SaslCredentialError(f"Invalid scheme in OAUTHBEARER client first message: {am.group('scheme')}")
        try:
            validated = self._validate(am.group("token"))
        except OAuthBearerValidationError as e:
            log.debug("OAUTHBEARER token refused: %s", e)
            self._error = oauthbearer_error_json(e.status, e.scope, e.openid_configuration)
            return self._error.encode("utf-8")
        if authzid and authzid != validated.principal_name:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authzid}) that is different "
                f"from the token's principal name ({validated.principal_name})")
        self.token = validated
        self.extensions = pairs         # Kafka's unsecured validator accepts every extension
        self.authorization_id = validated.principal_name
        self.credential_expiry_ms = validated.lifetime_ms
        self.complete = True
        return b""
