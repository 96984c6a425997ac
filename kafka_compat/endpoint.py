"""EndPoint and SecurityProtocol: what `listeners`, `advertised.listeners` and
`listener.security.protocol.map` say, parsed with Kafka's rules and messages.

A listener's name picks its security protocol through the map, so every name in
`listeners` must be mapped; the default map names each protocol after itself.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from typing import NamedTuple

from .configdef import ConfigError, ConfigType, parse_type


class SecurityProtocol(enum.StrEnum):
    """Kafka's SecurityProtocol; ``id`` is the number UpdateMetadata and ZooKeeper carry."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def id(self) -> int:
        return list(SecurityProtocol).index(self)


class EndPoint(NamedTuple):
    """One listener; ``host`` None means every interface, ``port`` 0 any free port."""

    listener_name: str
    host: str | None
    port: int
    security_protocol: SecurityProtocol


# NAME://host:port, an IPv6 host in brackets; as Kafka's uriParseExp.
_LISTENER_RE = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")


def _items(name: str, text: str) -> list[str]:
    return [item for item in parse_type(name, text, ConfigType.LIST) if item]


def parse_listener_security_protocol_map(name: str, text: str) -> dict[str, SecurityProtocol]:
    """``NAME:PROTOCOL,...`` into a dict, refusing unknown protocols and repeated names."""
    result: dict[str, SecurityProtocol] = {}
    for item in _items(name, text):
        listener, sep, protocol = item.partition(":")
        listener, protocol = listener.strip().upper(), protocol.strip().upper()
        if not sep or not listener or protocol not in SecurityProtocol.__members__:
            raise ConfigError(name, text, f"Invalid security protocol in '{item}'")
        if listener in result:
            raise ConfigError(name, text, f"Duplicate listener name {listener}")
        result[listener] = SecurityProtocol[protocol]
    return result


def parse_endpoint(item: str, protocol_map: Mapping[str, SecurityProtocol], name: str = "listeners",
                   text: str | None = None) -> EndPoint:
    """One ``NAME://host:port`` (Kafka's EndPoint.createEndPoint); ConfigError names ``name``."""
    text = item if text is None else text
    m = _LISTENER_RE.fullmatch(item) if isinstance(item, str) else None
    if not m:
        raise ConfigError(name, text, f"Unable to parse {item} to a broker endpoint")
    listener = m.group(1).upper()
    if listener not in protocol_map:
        raise ConfigError(name, text, f"No security protocol defined for listener {listener}")
    port = int(m.group(3)) if len(m.group(3)) <= 6 else -1
    if not 0 <= port <= 65535:
        raise ConfigError(name, text, f"Invalid port {m.group(3)}")
    return EndPoint(listener, m.group(2) or None, port, SecurityProtocol(protocol_map[listener]))


def connection_string(endpoint: EndPoint) -> str:
    """``LISTENER://host:port`` as Kafka prints it: an IPv6 host in brackets, no host as ``LISTENER://:port``."""
    if endpoint.host is None:
        return f"{endpoint.listener_name}://:{endpoint.port}"
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return f"{endpoint.listener_name}://{host}:{endpoint.port}"


def parse_listeners(name: str, text: str | list[str], protocol_map: Mapping[str, SecurityProtocol]) -> list[EndPoint]:
    """``NAME://host:port,...`` (or its items, as a LIST config holds them) into EndPoints; names must be
    distinct, and so must ports (but 0)."""
    if isinstance(text, (list, tuple)):
        text = ",".join(text)
    endpoints = [parse_endpoint(item, protocol_map, name, text) for item in _items(name, text)]
    if len({e.listener_name for e in endpoints}) != len(endpoints):
        raise ConfigError(name, text, "Each listener must have a different name")
    ports = [e.port for e in endpoints if e.port != 0]
    if len(set(ports)) != len(ports):
        raise ConfigError(name, text, "Each listener must have a different port")
    return endpoints
