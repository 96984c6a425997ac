"""Client quotas: produce and fetch byte rates and request time, per user, client id or both (KIP-13/55/124).

As Kafka's ClientQuotaManager / ClientRequestQuotaManager: every client's usage
is recorded in a sampled rate (quota.window.num samples of
quota.window.size.seconds, Kafka's Rate over a SampledStat), shared by all the
connections whose user and client id resolve to the same quota entity. When a
recorded value takes the rate over the quota, the client is throttled for
X = (O - T) / T * W ms (O observed, T the bound, W the window): the time that
brings the rate back to the bound if nothing more came. The most specific
quota wins, in this order:

    /config/users/<user>/clients/<client-id>      /config/users/<default>/clients/<client-id>
    /config/users/<user>/clients/<default>        /config/users/<default>/clients/<default>
    /config/users/<user>                          /config/users/<default>
                                                  /config/clients/<client-id>, then <default>

The principal's user comes from the connection once security lands
(`connection.principal`); until then every client is the user ANONYMOUS, as in
Kafka without authentication.
"""
from __future__ import annotations

import logging
import math
import time
from typing import NamedTuple

from ..clock import monotonic_ms
from ..metrics.stats import INACTIVE_SENSOR_EXPIRATION_MS, SampledStat
from ..sanitizer import sanitize

log = logging.getLogger(__name__)

DEFAULT = "<default>"                     # ZooKeeperInternals.DEFAULT_STRING: the default user or client-id
ANONYMOUS = "ANONYMOUS"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
# key -> integral? (Kafka's QuotaConfig types: LONG byte rates, DOUBLE percentages and rates, INT connections)
USER_AND_CLIENT_QUOTA_KEYS = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True, REQUEST_PERCENTAGE: False,
                              CONTROLLER_MUTATION_RATE: False}
IP_QUOTA_KEYS = {CONNECTION_CREATION_RATE: True}
NANOS_TO_PERCENTAGE_PER_SECOND = 100.0 / 1e9

# which kinds of quota entities have ever been configured (Kafka's QuotaTypes)
NO_QUOTAS, CLIENT_ID_QUOTAS, USER_QUOTAS, USER_CLIENT_ID_QUOTAS = 0, 1, 2, 4


def principal_user(connection) -> str:
    """The sanitized user name of a connection's principal; ANONYMOUS until security sets one."""
    principal = getattr(connection, "principal", None)
    if principal is None:
        return ANONYMOUS
    name = getattr(principal, "name", None)
    if name is None:
        name = str(principal)
        if ":" in name:                           # "User:alice"
            name = name.split(":", 1)[1]
    sanitized = _SANITIZED.get(name)
    if sanitized is None:
        if len(_SANITIZED) >= 10_000:             # bounded: user names come from the network
            _SANITIZED.clear()
        sanitized = _SANITIZED[name] = sanitize(name)
    return sanitized


_SANITIZED: dict[str, str] = {}                   # user name -> sanitize(name): every quota check asks


class QuotaEntity(NamedTuple):
    """A configured quota's entity: sanitized user / client id, DEFAULT, or None when not part of it."""
    user: str | None
    client_id: str | None


class ClientSensors:
    """One quota entity's usage, the bound that applies to it and its throttle times."""
    __slots__ = ("tags", "usage", "throttle", "bound", "version", "last_record_ms")

    def __init__(self, tags: tuple[str, str], samples: int, window_ms: int) -> None:
        self.tags = tags
        self.usage = SampledStat(samples, window_ms)
        self.throttle = SampledStat(samples, window_ms)
        self.bound = math.inf
        self.version = -1
        self.last_record_ms = 0


class ClientQuotaManager:
    """One quota type's quotas and usage: Produce and Fetch count bytes, Request counts handler time."""

    metric_name = "byte-rate"

    def __init__(self, quota_type: str, *, samples: int = 11, window_seconds: int = 1, clock=monotonic_ms):
        self.quota_type = quota_type
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self.clock = clock
        self.overrides: dict[QuotaEntity, float] = {}
        self.quota_types_enabled = NO_QUOTAS
        # once any quota was configured for this type, usage is recorded (until a restart), as in Kafka;
        # a plain attribute, read for every produce and fetch
        self.enabled = False
        self.sensors: dict[tuple[str, str], ClientSensors] = {}
        self._version = 0
        self._next_expiry_check = 0

    # -- configuration ------------------------------------------------------------------------
    def update_quota(self, user: str | None, client_id: str | None, bound: float | None) -> None:
        """Set (or with None remove) the quota of an entity; names sanitized (users) or DEFAULT."""
        entity = QuotaEntity(user, client_id)
        if user is not None:
            self.quota_types_enabled |= USER_CLIENT_ID_QUOTAS if client_id is not None else USER_QUOTAS
        elif client_id is not None:
            self.quota_types_enabled |= CLIENT_ID_QUOTAS
        self.enabled = self.quota_types_enabled != NO_QUOTAS
        if bound is None:
            if self.overrides.pop(entity, None) is not None:
                log.info("removing %s quota for %s", self.quota_type, _describe(entity))
        else:
            log.info("changing %s quota for %s to %s", self.quota_type, _describe(entity), bound)
            self.overrides[entity] = bound
        self._version += 1              # every sensor looks its bound up again (and its tags may change)

    def metric_tags(self, user: str, client_id: str) -> tuple[str, str]:
        """Kafka's DefaultQuotaCallback.quotaMetricTags: which entity's usage this client counts towards."""
        enabled = self.quota_types_enabled
        if enabled in (NO_QUOTAS, CLIENT_ID_QUOTAS):
            return "", client_id
        if enabled == USER_QUOTAS:
            return user, ""
        if enabled == USER_CLIENT_ID_QUOTAS:
            return user, client_id
        o = self.overrides
        if (QuotaEntity(user, client_id) in o or QuotaEntity(user, DEFAULT) in o):
            return user, client_id
        if QuotaEntity(user, None) in o:
            return user, ""
        if QuotaEntity(DEFAULT, client_id) in o or QuotaEntity(DEFAULT, DEFAULT) in o:
            return user, client_id
        if QuotaEntity(DEFAULT, None) in o:
            return user, ""
        return "", client_id

    def quota_limit(self, tags: tuple[str, str]) -> float | None:
        """Kafka's DefaultQuotaCallback.quotaLimit for a client's metric tags; None: no quota."""
        user, client_id = tags
        o = self.overrides
        if user and client_id:
            for entity in (QuotaEntity(user, client_id), QuotaEntity(user, DEFAULT), QuotaEntity(DEFAULT, client_id),
                           QuotaEntity(DEFAULT, DEFAULT)):
                if entity in o:
                    return o[entity]
        elif user:
            for entity in (QuotaEntity(user, None), QuotaEntity(DEFAULT, None)):
                if entity in o:
                    return o[entity]
        elif client_id:
            for entity in (QuotaEntity(None, client_id), QuotaEntity(None, DEFAULT)):
                if entity in o:
                    return o[entity]
        return None

    def quota(self, user: str, client_id: str) -> float | None:
        return self.quota_limit(self.metric_tags(user, client_id))

    # -- usage ----------------------------------------------------------------------------------
    def sensors_for(self, user: str, client_id: str) -> ClientSensors:
        tags = self.metric_tags(user, client_id)
        s = self.sensors.get(tags)
        if s is None:
            s = self.sensors[tags] = ClientSensors(tags, self.samples, self.window_ms)
        if s.version != self._version:
            limit = self.quota_limit(tags)
            s.bound = math.inf if limit is None else limit
            s.version = self._version
        return s

    def record_and_get_throttle_ms(self, user: str, client_id: str, value: float, now: int | None = None) -> int:
        """Record usage; the throttle time in ms if it took the rate over the quota, else 0."""
        if not self.enabled:
            return 0
        now = self.clock() if now is None else now
        s = self.sensors_for(user, client_id)
        s.usage.record(value, now)
        s.last_record_ms = now
        self._maybe_expire(now)
        if s.bound == math.inf:
            return 0
        window = s.usage.window_size(now)
        observed = s.usage.rate(now)
        if observed <= s.bound:
            return 0
        return self._throttle_ms((observed - s.bound) / s.bound * window)

    def _throttle_ms(self, ms: float) -> int:
        return round(ms)

    def record_no_throttle(self, user: str, client_id: str, value: float) -> None:
        if self.enabled:
            now = self.clock()
            s = self.sensors_for(user, client_id)
            s.usage.record(value, now)
            s.last_record_ms = now

    def unrecord(self, user: str, client_id: str, value: float) -> None:
        """Take back a recorded value (a throttled fetch sends nothing), as Kafka's unrecordQuotaSensor."""
        self.record_no_throttle(user, client_id, -value)

    def record_throttle(self, user: str, client_id: str, throttle_ms: int) -> None:
        """The throttle-time sensor: what the client was told to wait."""
        if throttle_ms > 0:
            self.sensors_for(user, client_id).throttle.record(throttle_ms, self.clock())

    def max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """The most one request may bring without a guaranteed throttle (caps a fetch's max bytes)."""
        if not self.enabled:
            return math.inf
        bound = self.sensors_for(user, client_id).bound
        return bound * (self.samples - 1) * self.window_ms / 1000.0

    def _maybe_expire(self, now: int) -> None:
        """Forget sensors idle for an hour (Kafka's sensor expiry), so many client ids cannot pile up."""
        if now < self._next_expiry_check:
            return
        self._next_expiry_check = now + 30_000
        stale = [t for t, s in self.sensors.items() if now - s.last_record_ms > INACTIVE_SENSOR_EXPIRATION_MS]
        for t in stale:
            del self.sensors[t]

    def snapshot(self) -> list[tuple[str, str, float, float]]:
        """(user tag, client-id tag, usage rate, average throttle ms) of every live entity, for the metrics."""
        now = self.clock()
        return [(u, c, s.usage.rate(now), s.throttle.average(now)) for (u, c), s in list(self.sensors.items())]


class ClientRequestQuotaManager(ClientQuotaManager):
    """request_percentage: handler and network time as a percentage of one thread (100 = one thread busy)."""

    metric_name = "request-time"

    def __init__(self, **kwargs):
        super().__init__("Request", **kwargs)

    def _throttle_ms(self, ms: float) -> int:
        return round(min(ms, self.window_ms))         # capped at one window, as Kafka

    @staticmethod
    def percentage(nanos: int) -> float:
        return nanos * NANOS_TO_PERCENTAGE_PER_SECOND


class QuotaManagers:
    """Kafka's QuotaFactory.QuotaManagers: the produce, fetch, request and controller mutation quotas of this
    broker. The controller mutation manager only resolves an entity's controller_mutation_rate and records
    what it mutated (for the metrics); its token buckets are controller_mutation_quota.py's."""

    def __init__(self, *, samples: int = 11, window_seconds: int = 1, controller_samples: int = 11,
                 controller_window_seconds: int = 1, clock=monotonic_ms):
        self.produce = ClientQuotaManager("Produce", samples=samples, window_seconds=window_seconds, clock=clock)
        self.fetch = ClientQuotaManager("Fetch", samples=samples, window_seconds=window_seconds, clock=clock)
        self.request = ClientRequestQuotaManager(samples=samples, window_seconds=window_seconds, clock=clock)
        self.controller_mutation = ClientQuotaManager("ControllerMutation", samples=controller_samples,
                                                      window_seconds=controller_window_seconds, clock=clock)
        self.controller_mutation.metric_name = "mutation-rate"

    @classmethod
    def from_config(cls, config) -> "QuotaManagers":
        return cls(samples=config["quota.window.num"], window_seconds=config["quota.window.size.seconds"],
                   controller_samples=config["controller.quota.window.num"],
                   controller_window_seconds=config["controller.quota.window.size.seconds"])

    def request_throttle_ms(self, request, user: str) -> int:
        """Charge a request's handler time so far to the request quota: the throttle that earns, or 0."""
        if not self.request.enabled:
            return 0
        nanos = int((time.monotonic() - request.dequeued_at) * 1e9) if request.dequeued_at else 0
        return self.request.record_and_get_throttle_ms(user, request.client_id or "",
                                                       self.request.percentage(nanos))

    def all(self) -> tuple[ClientQuotaManager, ...]:
        return self.produce, self.fetch, self.request, self.controller_mutation

    def update_entity(self, user: str | None, client_id: str | None, configs: dict[str, str]) -> None:
        """An entity's quota configs changed (Kafka's ClientIdConfigHandler / UserConfigHandler): every
        manager takes its key, or loses its quota when the key is gone."""
        for manager, key in ((self.produce, PRODUCER_BYTE_RATE), (self.fetch, CONSUMER_BYTE_RATE),
                             (self.request, REQUEST_PERCENTAGE),
                             (self.controller_mutation, CONTROLLER_MUTATION_RATE)):
            value = configs.get(key)
            manager.update_quota(user, client_id, float(value) if value is not None else None)


def _describe(entity: QuotaEntity) -> str:
    parts = []
    if entity.user is not None:
        parts.append("default user" if entity.user == DEFAULT else f"user {entity.user}")
    if entity.client_id is not None:
        parts.append("default client-id" if entity.client_id == DEFAULT else f"client-id {entity.client_id}")
    return " ".join(parts)
