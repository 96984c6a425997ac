"""ConnectionQuotas: how many connections, and how fast they may come (Kafka's ConnectionQuotas, KIP-612).

Every accepted socket is counted against the broker-wide limit and against its
peer address's limit (max.connections.per.ip, or that address's entry in
max.connections.per.ip.overrides). A socket over either limit is closed at once,
before a byte of it is read, so a client that opens connections in a loop costs
one accept each and cannot starve the others of descriptors.

Creation rates are measured as Kafka measures every quota: a windowed rate of
quota.window.num samples of quota.window.size.seconds. Over
max.connection.creation.rate the listener stops taking new connections for the
time that brings the rate back under it (at most one window), as Kafka's
acceptor waits; the inter-broker listener is exempt when there are others. Over
an address's connection_creation_rate (an `ip` client quota, or the default
ip's) the new connection is not counted, read from, or answered: it is held for
its throttle time and then closed, as Kafka's acceptor does.
"""
from __future__ import annotations

import ipaddress
import logging
import socket

from ..clock import monotonic_ms
from ..metrics.stats import INACTIVE_SENSOR_EXPIRATION_MS, SampledStat

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
        out[address_of(host)] = int(count)
    return out


def address_of(host: str) -> str:
    """An address as ConnectionQuotas keys it: an IP's one spelling, or a host name resolved once."""
    try:
        return normalize_ip(host)
    except ValueError:
        pass
    try:
        return socket.gethostbyname(host)
    except OSError:
        log.warning("cannot resolve %r: its connection quota applies to nothing", host)
        return host



def normalize_ip(ip: str) -> str:
    """One spelling per address (an IPv4-mapped IPv6 peer is its IPv4 address), so quotas and counts agree.
    Raises ValueError for what is not an IP address."""
    address = ipaddress.ip_address(ip)
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address)


class RateQuota:
    """A creation rate and its bound: `record()` counts one connection and says how long to hold it off."""
    __slots__ = ("bound", "stat", "last_record_ms")

    def __init__(self, bound: int, samples: int, window_ms: int):
        self.bound = bound
        self.stat = SampledStat(samples, window_ms)
        self.last_record_ms = 0

    def record(self, now: int, max_throttle_ms: int) -> int:
        """Kafka's Sensor.record with its quota check: the throttle that brings the rate back to the bound."""
        self.stat.record(1.0, now)
        self.last_record_ms = now
        if self.bound >= UNLIMITED:
            return 0
        rate = self.stat.rate(now)
        if rate <= self.bound:
            return 0
        window = self.stat.window_size(now)
        return min(round((rate - self.bound) / self.bound * window), max_throttle_ms) if self.bound > 0 \
            else max_throttle_ms

    def unrecord(self, now: int) -> None:
        self.stat.record(-1.0, now)


class ConnectionQuotas:
    def __init__(self, max_connections: int = UNLIMITED, max_per_ip: int = UNLIMITED,
                 per_ip_overrides: dict[str, int] | None = None, *, max_connection_rate: int = UNLIMITED,
                 samples: int = 11, window_seconds: int = 1, clock=monotonic_ms):
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = dict(per_ip_overrides or {})
        self.total = 0
        self.by_ip: dict[str, int] = {}
        self.samples, self.window_ms, self.clock = samples, window_seconds * 1000, clock
        self.max_throttle_ms = self.window_ms            # Kafka caps a connection's wait at one window
        self.broker_rate = RateQuota(max_connection_rate, samples, self.window_ms)
        self.default_ip_rate = UNLIMITED
        self.ip_rates: dict[str, int] = {}               # connection_creation_rate of single addresses
        self.ip_stats: dict[str, RateQuota] = {}
        self._next_expiry_ms = 0
        # listener.name.<l>.max.connections and .max.connection.creation.rate, where set (Kafka's
        # ListenerConnectionQuota), and each listener's open connections
        self.listener_max: dict[str, int] = {}
        self.listener_rates: dict[str, RateQuota] = {}
        self.by_listener: dict[str, int] = {}

    def set_listener_limits(self, listener: str, max_connections: int, max_connection_rate: int) -> None:
        """One listener's own limits (static: from its `listener.name.<l>.` settings)."""
        if max_connections < UNLIMITED:
            self.listener_max[listener] = max_connections
        if max_connection_rate < UNLIMITED:
            self.listener_rates[listener] = RateQuota(max_connection_rate, self.samples, self.window_ms)

    # -- settings (static, then dynamic: Kafka's DynamicConnectionQuota and IpConfigHandler) ----------
    def update(self, *, max_connections: int | None = None, max_per_ip: int | None = None,
               per_ip_overrides: dict[str, int] | None = None, max_connection_rate: int | None = None) -> None:
        """New broker settings. Connections already open stay, even over a lowered limit, as in Kafka."""
        if max_connections is not None:
            self.max_connections = max_connections
        if max_per_ip is not None:
            self.max_per_ip = max_per_ip
        if per_ip_overrides is not None:
            self.overrides = dict(per_ip_overrides)
        if max_connection_rate is not None:
            self.broker_rate.bound = max_connection_rate

    def update_ip_connection_rate(self, ip: str | None, rate: int | None) -> None:
        """An ip entity's connection_creation_rate (None: removed); ip None is the default ip entity."""
        if ip is None:
            self.default_ip_rate = UNLIMITED if rate is None else rate
            log.info("default connection creation rate per ip is now %s", self.default_ip_rate)
        else:
            ip = address_of(ip)
            if rate is None:
                self.ip_rates.pop(ip, None)
            else:
                self.ip_rates[ip] = rate
            log.info("connection creation rate of %s is now %s", ip, self.ip_rates.get(ip, "the default"))
        for address, quota in self.ip_stats.items():     # rates measured so far stay; their bounds change
            quota.bound = self.ip_rate(address)

    def ip_rate(self, ip: str) -> int:
        return self.ip_rates.get(ip, self.default_ip_rate)

    @property
    def rate_limited(self) -> bool:
        """Whether new connections must wait their turn: without any creation rate they are taken at once."""
        return (self.broker_rate.bound < UNLIMITED or self.default_ip_rate < UNLIMITED or bool(self.ip_rates)
                or bool(self.listener_rates))

    # -- creation rates --------------------------------------------------------------------------
    def record_connection(self, protected: bool = False, listener: str | None = None) -> int:
        """A new connection on a listener: the ms the listener must wait before taking it (0: none), for
        the broker's rate or the listener's own, whichever is longer. The inter-broker listener, when there
        are others, is `protected`: no broker-wide rate applies."""
        now = self.clock()
        wait = 0 if protected else self.broker_rate.record(now, self.max_throttle_ms)
        own = self.listener_rates.get(listener)
        if own is not None:
            wait = max(wait, own.record(now, self.max_throttle_ms))
        return wait

    def record_ip(self, ip: str | None, protected: bool = False, listener: str | None = None) -> int:
        """The address's creation rate: 0 if the connection may go on, else the ms to hold it before closing
        it. A throttled connection is taken back from the broker's rate and the address's, as Kafka does."""
        if ip is None:
            return 0
        bound = self.ip_rate(ip)
        if bound >= UNLIMITED:
            return 0
        now = self.clock()
        self._expire(now)
        quota = self.ip_stats.get(ip)
        if quota is None:
            quota = self.ip_stats[ip] = RateQuota(bound, self.samples, self.window_ms)
        throttle = quota.record(now, self.max_throttle_ms)
        if throttle:
            quota.unrecord(now)
            if not protected:
                self.broker_rate.unrecord(now)
            own = self.listener_rates.get(listener)
            if own is not None:
                own.unrecord(now)
        return throttle

    def _expire(self, now: int) -> None:
        """Forget the rates of addresses silent for an hour (Kafka's sensor expiry): many peers cannot pile up."""
        if now < self._next_expiry_ms:
            return
        self._next_expiry_ms = now + 30_000
        for ip in [ip for ip, q in self.ip_stats.items() if now - q.last_record_ms > INACTIVE_SENSOR_EXPIRATION_MS]:
            del self.ip_stats[ip]

    # -- counts ---------------------------------------------------------------------------------
    def limit_for(self, ip: str) -> int:
        return self.overrides.get(ip, self.max_per_ip)

    def try_acquire(self, ip: str | None, protected: bool = False, listener: str | None = None) -> str | None:
        """Count a new connection from ``ip``: None if allowed, else why it must be closed. A `protected`
        one (the inter-broker listener's) is not held to max.connections; the caller makes room for it.
        A listener's own max.connections holds every connection of it."""
        limit = self.listener_max.get(listener, UNLIMITED)
        if limit < UNLIMITED and self.by_listener.get(listener, 0) >= limit:
            return f"listener {listener}'s max.connections ({limit}) reached"
        if self.total >= self.max_connections and not protected:
            return f"max.connections ({self.max_connections}) reached"
        if ip is not None:
            count = self.by_ip.get(ip, 0)
            limit = self.limit_for(ip)
            if count >= limit:
                return f"{count} connections from {ip} already (max.connections.per.ip {limit})"
            self.by_ip[ip] = count + 1
        self.total += 1
        if listener is not None:
            self.by_listener[listener] = self.by_listener.get(listener, 0) + 1
        return None

    def release(self, ip: str | None, listener: str | None = None) -> None:
        self.total -= 1
        if listener is not None:
            self.by_listener[listener] = self.by_listener.get(listener, 1) - 1
        if ip is not None:
            count = self.by_ip.get(ip, 0) - 1
            if count > 0:
                self.by_ip[ip] = count
            else:
                self.by_ip.pop(ip, None)
