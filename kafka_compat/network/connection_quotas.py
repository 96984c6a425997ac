"""ConnectionQuotas: max.connections and max.connections.per.ip (Kafka's ConnectionQuotas).

Every accepted socket is counted against the broker-wide limit and against its
peer address's limit (max.connections.per.ip, or that address's entry in
max.connections.per.ip.overrides). A socket over either limit is closed at once,
before a byte of it is read, so a client that opens connections in a loop costs
one accept each and cannot starve the others of descriptors.
"""
from __future__ import annotations

import ipaddress
import logging
import socket

log = logging.getLogger(__name__)

UNLIMITED = 2**31 - 1


def parse_overrides(value: str | None) -> dict[str, int]:
    """``host:count,host:count`` -> {address: count}; host names are resolved once, as Kafka does.

    Raises ValueError on an entry without a count. IPv6 addresses may be written bare
    (the count is after the last colon) or in brackets.
    """
    out: dict[str, int] = {}
    for entry in (e.strip() for e in (value or "").split(",")):
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        if not sep or not host or not count.strip().lstrip("-").isdigit():
            raise ValueError(f"max.connections.per.ip.overrides entry {entry!r} is not host:count")
        host = host.strip().strip("[]")
        out[_address(host)] = int(count)
    return out


def _address(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return socket.gethostbyname(host)
    except OSError:
        log.warning("max.connections.per.ip.overrides: cannot resolve %r; the entry applies to nothing", host)
        return host


class ConnectionQuotas:
    def __init__(self, max_connections: int = UNLIMITED, max_per_ip: int = UNLIMITED,
                 per_ip_overrides: dict[str, int] | None = None):
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = dict(per_ip_overrides or {})
        self.total = 0
        self.by_ip: dict[str, int] = {}

    def limit_for(self, ip: str) -> int:
        return self.overrides.get(ip, self.max_per_ip)

    def try_acquire(self, ip: str | None) -> str | None:
        """Count a new connection from ``ip``: None if allowed, else why it must be closed."""
        if self.total >= self.max_connections:
            return f"max.connections ({self.max_connections}) reached"
        if ip is not None:
            count = self.by_ip.get(ip, 0)
            limit = self.limit_for(ip)
            if count >= limit:
                return f"{count} connections from {ip} already (max.connections.per.ip {limit})"
            self.by_ip[ip] = count + 1
        self.total += 1
        return None

    def release(self, ip: str | None) -> None:
        self.total -= 1
        if ip is not None:
            count = self.by_ip.get(ip, 0) - 1
            if count > 0:
                self.by_ip[ip] = count
            else:
                self.by_ip.pop(ip, None)
