"""What a listener asks of each connection before serving it (Kafka's ChannelBuilders).

One `ListenerSecurity` per listener, built once from the broker's settings as that listener sees
them (`listener.name.<listener>.<name>` over `<name>`): the TLS context of SSL and SASL_SSL
listeners, the SASL mechanisms of SASL_PLAINTEXT and SASL_SSL ones (each with its credentials:
PLAIN's `user_<name>` JAAS options, the SCRAM credential store, the unsecured OAUTHBEARER
validator), and how a connection's principal is named. The network layer applies it; nothing
here touches a socket.
"""
from __future__ import annotations

import ssl
from typing import Any, Callable, Mapping

from ..configdef import ConfigError, Password
from ..endpoint import SecurityProtocol
from ..protocol.sasl import (
    OAuthBearerServer,
    PlainServer,
    SaslServerAuthenticator,
    ScramMechanism,
    ScramServer,
)
from .jaas import JaasEntry, PlainCredentials, parse_jaas_config
from .oauthbearer import UnsecuredJwsValidator
from .principal import ANONYMOUS, DEFAULT_PRINCIPAL_BUILDER, DefaultPrincipalBuilder, KafkaPrincipal, sasl_principal
from .scram import CredentialStore
from .ssl_context import server_ssl_context

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


def _text(value: Any) -> str | None:
    return value.value if isinstance(value, Password) else value


class ListenerSecurity:
    """The security of one listener; `authenticator()` makes each SASL connection's state machine."""

    def __init__(self, listener_name: str, security_protocol: SecurityProtocol,
                 ssl_context: ssl.SSLContext | None = None, principal_builder: DefaultPrincipalBuilder | None = None,
                 mechanisms: Mapping[str, Callable] | None = None, max_receive_size: int = 524288,
                 reauth_ms: int | Mapping[str, int] = 0):
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self.ssl_context = ssl_context
        self.principal_builder = principal_builder or DefaultPrincipalBuilder()
        self.mechanisms = dict(mechanisms or {})
        self.max_receive_size = max_receive_size
        self.reauth_ms = reauth_ms

    @property
    def sasl(self) -> bool:
        return bool(self.mechanisms)

    def authenticator(self, api_versions: Callable, supported: Mapping[int, tuple[int, int]]):
        """A new connection's SaslServerAuthenticator, or None on a listener without SASL."""
        if not self.mechanisms:
            return None
        return SaslServerAuthenticator(self.mechanisms, api_versions, max_reauth_ms=self.reauth_ms,
                                       max_receive_size=self.max_receive_size, supported=supported)

    def transport_principal(self, peer_cert_der: bytes | None) -> KafkaPrincipal:
        """Who a connection is before SASL: its client certificate's mapped name, else ANONYMOUS."""
        if self.ssl_context is None:
            return ANONYMOUS
        return self.principal_builder.ssl(peer_cert_der)

    @staticmethod
    def sasl_principal(authorization_id: str) -> KafkaPrincipal:
        return sasl_principal(authorization_id)


def _jaas(config: Mapping[str, Any], listener_name: str, mechanism: str) -> list[JaasEntry] | None:
    """The JAAS entries of `listener.name.<listener>.<mechanism>.sasl.jaas.config`, or None."""
    key = f"{mechanism.lower()}.sasl.jaas.config"
    text = _text(config.get(key))
    if text is None:
        return None
    return parse_jaas_config(text, f"listener.name.{listener_name.lower()}.{key}")


def _mechanism_factory(config: Mapping[str, Any], listener_name: str, mechanism: str,
                       credentials: CredentialStore, tokens=None) -> Callable:
    jaas = _jaas(config, listener_name, mechanism)
    if mechanism == "PLAIN":
        if jaas is None:
            name = f"listener.name.{listener_name.lower()}.plain.sasl.jaas.config"
            raise ConfigError(name, message=f"{name}: SASL/PLAIN on listener {listener_name} needs a JAAS "
                                            "configuration with the users (PlainLoginModule user_<name>=\"...\")")
        users = PlainCredentials.from_jaas(jaas)
        return lambda: PlainServer(users.verify)
    scram = ScramMechanism.from_name(mechanism)
    if scram is not None:
        token_lookup = tokens.scram_credential if tokens is not None and tokens.enabled else None
        return lambda: ScramServer(scram, lambda user: credentials.lookup(scram, user), token_lookup=token_lookup)
    if mechanism == "OAUTHBEARER":
        validator = UnsecuredJwsValidator.from_jaas(jaas or [])
        return lambda: OAuthBearerServer(validator)
    raise ConfigError("sasl.enabled.mechanisms", mechanism,
                      f"SASL mechanism {mechanism} is not supported (supported: {', '.join(SUPPORTED_MECHANISMS)})")


def _reauth_ms(config: Mapping[str, Any], mechanisms) -> dict[str, int]:
    """connections.max.reauth.ms per mechanism (`listener.name.<l>.<mechanism>.connections.max.reauth.ms`)."""
    out = {}
    for mechanism in mechanisms:
        raw = config.get(f"{mechanism.lower()}.connections.max.reauth.ms")
        try:
            out[mechanism] = int(raw) if raw is not None else int(config.get("connections.max.reauth.ms") or 0)
        except ValueError:
            raise ConfigError(f"{mechanism.lower()}.connections.max.reauth.ms", raw, "not a number") from None
    return out


def listener_security(listener_name: str, security_protocol: SecurityProtocol, config: Mapping[str, Any],
                      credentials: CredentialStore, tokens=None) -> ListenerSecurity:
    """Build a listener's security from `config` as the listener sees it (BrokerConfig.listener_config).
    ``tokens``: the DelegationTokenManager whose tokens SCRAM logins may use (`tokenauth=true`)."""
    builder = _text(config.get("principal.builder.class"))
    if builder and builder != DEFAULT_PRINCIPAL_BUILDER:
        raise ConfigError("principal.builder.class", builder, "only Kafka's default principal builder is supported")
    try:
        principal_builder = DefaultPrincipalBuilder(_text(config.get("ssl.principal.mapping.rules")) or "DEFAULT")
    except ValueError as e:
        raise ConfigError("ssl.principal.mapping.rules", message=f"ssl.principal.mapping.rules: {e}") from None
    context = None
    if security_protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL):
        context = server_ssl_context(config)
    mechanisms: dict[str, Callable] = {}
    if security_protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL):
        enabled = config.get("sasl.enabled.mechanisms") or []
        if isinstance(enabled, str):
            enabled = [m.strip() for m in enabled.split(",") if m.strip()]
        if not enabled:
            raise ConfigError("sasl.enabled.mechanisms", message=f"listener {listener_name} is "
                                                                 f"{security_protocol.name} but no SASL mechanism "
                                                                 "is enabled")
        for mechanism in enabled:
            mechanisms[mechanism] = _mechanism_factory(config, listener_name, mechanism, credentials, tokens)
    return ListenerSecurity(listener_name, security_protocol, context, principal_builder, mechanisms,
                            int(config.get("sasl.server.max.receive.size") or 524288),
                            _reauth_ms(config, mechanisms))
