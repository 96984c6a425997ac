"""The client side of SASL, sans-I/O: what a broker says when it connects to another broker (or a
test client to a broker) over SASL_PLAINTEXT / SASL_SSL.

Mechanisms: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802/7677), as Kafka's clients speak them.
`SaslClientAuthenticator` drives the Kafka exchange: SaslHandshake v1, then SaslAuthenticate
requests carrying the mechanism's tokens; it makes request bodies and reads response bodies, and
the caller moves the bytes. `ClientSecurity` bundles what a connection needs (TLS context, SASL
mechanism and credentials), built from a listener's settings the way Kafka's inter-broker client
reads them: the TLS settings of the listener, and `username` / `password` from its mechanism's
JAAS configuration.
"""
from __future__ import annotations

import base64
import hmac
import secrets
import ssl
from typing import Any, Mapping, NamedTuple

from ..configdef import ConfigError, Password
from ..endpoint import SecurityProtocol
from ..protocol.errors import ErrorCode
from ..protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from ..protocol.messages.sasl_handshake import SaslHandshakeRequest
from ..protocol.sasl import ScramMechanism, scram_saslname
from .jaas import entry_option, parse_jaas_config
from .ssl_context import client_ssl_context

SASL_HANDSHAKE_VERSION = 1


class SaslClientError(Exception):
    """Authentication failed; the message says why (the broker's, or what the server sent wrong)."""


class PlainClient:
    """SASL/PLAIN: one message, `authzid NUL user NUL password`."""
    mechanism_name = "PLAIN"

    def __init__(self, username: str, password: str, authorization_id: str = ""):
        self._message = f"{authorization_id}\x00{username}\x00{password}".encode("utf-8")
        self.complete = False

    def initial(self) -> bytes:
        return self._message

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The server's answer to the one message: empty on success."""
        self.complete = True
        return None


class ScramClient:
    """SCRAM: client-first, then client-final with the proof; the server's final message is checked,
    so a server that does not know the password cannot pass for one that does."""

    def __init__(self, mechanism: ScramMechanism | str, username: str, password: str, nonce: str | None = None,
                 token: bool = False):
        """``token``: log in with a delegation token (username = its id, password = its HMAC in base64)."""
        self.mechanism = mechanism if isinstance(mechanism, ScramMechanism) else ScramMechanism.from_name(mechanism)
        if self.mechanism is None:
            raise ValueError(f"Unknown SCRAM mechanism {mechanism}")
        self.mechanism_name = self.mechanism.mechanism_name
        self._password = password
        self._nonce = nonce or base64.b64encode(secrets.token_bytes(18)).decode("ascii")
        self._first_bare = f"n={scram_saslname(username)},r={self._nonce}" + (",tokenauth=true" if token else "")
        self._server_signature: bytes | None = None
        self.complete = False

    def initial(self) -> bytes:
        return ("n,," + self._first_bare).encode("utf-8")

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self._server_signature is None:
            return self._client_final(bytes(challenge).decode("utf-8", "replace"))
        self._check_server_final(bytes(challenge).decode("utf-8", "replace"))
        self.complete = True
        return None

    def _client_final(self, server_first: str) -> bytes:
        fields = dict(f.split("=", 1) for f in server_first.split(",") if "=" in f)
        nonce, salt, iterations = fields.get("r", ""), fields.get("s"), fields.get("i", "")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslClientError("SCRAM: the server's nonce does not extend ours")
        if salt is None or not iterations.isdigit() or len(iterations) > 9:
            raise SaslClientError("SCRAM: invalid server-first message")
        # below the minimum is weak; above what a broker can store (max_iterations), only a server making
        # us burn CPU would ask for it
        if not self.mechanism.min_iterations <= int(iterations) <= self.mechanism.max_iterations:
            raise SaslClientError(f"SCRAM: {iterations} iterations is outside {self.mechanism.min_iterations}.."
                                  f"{self.mechanism.max_iterations}")
        try:
            salt_bytes = base64.b64decode(salt, validate=True)
        except ValueError:
            raise SaslClientError("SCRAM: the server's salt is not base64") from None
        mech = self.mechanism
        salted = mech.salted_password(self._password, salt_bytes, int(iterations))
        client_key = mech.hmac(salted, b"Client Key")
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{server_first},{without_proof}".encode("utf-8")
        signature = mech.hmac(mech.hash(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_signature = mech.hmac(mech.server_key(salted), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode('ascii')}".encode("ascii")

    def _check_server_final(self, server_final: str) -> None:
        if server_final.startswith("e="):
            raise SaslClientError(f"SCRAM: the server refused: {server_final[2:]}")
        try:
            signature = base64.b64decode(server_final[2:], validate=True) if server_final.startswith("v=") else b""
        except ValueError:
            signature = b""
        if not hmac.compare_digest(signature, self._server_signature):
            raise SaslClientError("SCRAM: invalid server signature")


def sasl_client(mechanism: str, username: str, password: str, token: bool = False):
    """A fresh client of the mechanism (one per connection); ``token``: SCRAM with a delegation token."""
    if mechanism == "PLAIN":
        return PlainClient(username, password)
    if ScramMechanism.from_name(mechanism) is not None:
        return ScramClient(mechanism, username, password, token=token)
    raise ValueError(f"SASL mechanism {mechanism} has no client here (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")


class SaslClientAuthenticator:
    """Kafka's client side of the exchange, sans-I/O:

        handshake = auth.handshake_request()          # send as SaslHandshake v1
        request = auth.handshake_response(response)   # a SaslAuthenticate body to send
        while request is not None:
            request = auth.authenticate_response(response_to(request))
        # auth.complete; failures raise SaslClientError
    """

    def __init__(self, client):
        self.client = client
        self.complete = False
        self.session_lifetime_ms = 0

    def handshake_request(self) -> SaslHandshakeRequest:
        return SaslHandshakeRequest(mechanism=self.client.mechanism_name)

    def handshake_response(self, response) -> SaslAuthenticateRequest:
        if response.error_code != ErrorCode.NONE:
            raise SaslClientError(f"SaslHandshake: {ErrorCode(response.error_code).name}; the broker offers "
                                  f"{', '.join(response.mechanisms or [])}")
        return SaslAuthenticateRequest(auth_bytes=self.client.initial())

    def authenticate_response(self, response) -> SaslAuthenticateRequest | None:
        if response.error_code != ErrorCode.NONE:
            raise SaslClientError(response.error_message or ErrorCode(response.error_code).name)
        reply = self.client.evaluate(response.auth_bytes)
        if reply is None:
            self.complete = True
            self.session_lifetime_ms = getattr(response, "session_lifetime_ms", 0)
            return None
        return SaslAuthenticateRequest(auth_bytes=reply)


def _text(value: Any) -> str | None:
    return value.value if isinstance(value, Password) else value


class ClientSecurity(NamedTuple):
    """How to open a connection to a listener: TLS context (or None), SASL mechanism and credentials."""
    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    token: bool = False                 # SCRAM with a delegation token (tokenauth=true)

    def authenticator(self) -> SaslClientAuthenticator | None:
        if self.sasl_mechanism is None:
            return None
        return SaslClientAuthenticator(sasl_client(self.sasl_mechanism, self.username, self.password, self.token))

    def __repr__(self) -> str:          # no password in logs
        return f"ClientSecurity({self.security_protocol.name}, sasl={self.sasl_mechanism}, user={self.username})"


def client_security(security_protocol: SecurityProtocol, config: Mapping[str, Any],
                    sasl_mechanism: str | None = None, listener_name: str | None = None) -> ClientSecurity:
    """A client's security for a listener, from `config` as that listener sees it: its ssl.* settings
    (trust store, key store for mutual TLS) and, for SASL, `username` / `password` of the mechanism's
    JAAS configuration (`listener.name.<listener>.<mechanism>.sasl.jaas.config`, else sasl.jaas.config)."""
    context = None
    if security_protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL):
        context = client_ssl_context(config)
    if security_protocol not in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL):
        return ClientSecurity(security_protocol, context)
    if not sasl_mechanism:
        raise ConfigError("sasl.mechanism.inter.broker.protocol", message="a SASL listener needs a mechanism")
    key = f"{sasl_mechanism.lower()}.sasl.jaas.config"
    text = _text(config.get(key)) or _text(config.get("sasl.jaas.config"))
    name = f"listener.name.{(listener_name or '').lower()}.{key}" if listener_name else "sasl.jaas.config"
    if text is None:
        raise ConfigError(name, message=f"{name}: no JAAS configuration with the username and password to log "
                                        f"in with SASL/{sasl_mechanism}")
    entries = parse_jaas_config(text, name)
    username, password = entry_option(entries, "username"), entry_option(entries, "password")
    if not username or password is None:
        raise ConfigError(name, message=f"{name}: the JAAS configuration needs username and password options")
    return ClientSecurity(security_protocol, context, sasl_mechanism, username, password)
