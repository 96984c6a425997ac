"""RequestChannel: what happens around every request besides its handler: request quotas and metrics.

The connection hands each request to `handle` and, once the response is written
(or none is due), calls `request_done`, which answers how long to mute the
connection: KIP-219's throttling sends the response at once, with its
ThrottleTimeMs, then reads nothing more from that client until the throttle has
passed, so a client that ignores the field is slowed all the same.

The request quota (request_percentage) charges a request's handler time and the
time spent sending its answer, as Kafka charges request handler and network
thread time. Produce and Fetch decide their throttle themselves (bytes and
request time together, and a throttled fetch is answered empty); every other
request is throttled here, when its quota is exceeded. SASL and inter-broker
requests are exempt.

Request metrics (kept only when the Prometheus endpoint is on) time each phase
from the moment the connection got to the request: see request_metrics.py. With
neither metrics nor a request quota, requests pass straight through.
"""
from __future__ import annotations

from time import monotonic
from types import CoroutineType

from .client_quota_manager import ClientRequestQuotaManager, QuotaManagers, principal_user
from .fetch import replica_id_of
from .request_metrics import RequestMetrics

FETCH = 1
# SaslHandshake, SaslAuthenticate, and what brokers and controllers send each other
EXEMPT_FROM_REQUEST_QUOTA = frozenset({17, 36, 4, 5, 6, 7, 27, 52, 53, 54, 56, 58, 59, 62, 63, 67})


class RequestChannel:
    def __init__(self, handle, quotas: QuotaManagers, *, metrics: bool):
        self._handle = handle
        self.quotas = quotas
        self.metrics: dict[str, RequestMetrics] | None = {} if metrics else None
        # each API key's RequestMetrics, made at its first request: a list index per request, no name lookup
        self._by_key: list[RequestMetrics | None] = [None] * 128

    def handle(self, request, connection):
        """Run the handler: its response body, an awaitable of one, or None."""
        if self.metrics is None and not self.quotas.request.enabled:
            return self._handle(request, connection)            # nothing to time
        request.received_at = connection.last_active
        request.dequeued_at = monotonic()
        result = self._handle(request, connection)
        if type(result) is CoroutineType:                       # an async handler's (asyncio.iscoroutine)
            request.local_done_at = monotonic()
            return self._remote(request, connection, result)
        request.local_done_at = request.remote_done_at = monotonic()
        if request.throttle_time_ms < 0:
            if self.quotas.request.enabled:
                self._request_quota(request, connection, result)
            else:
                request.throttle_time_ms = 0
        return result

    async def _remote(self, request, connection, waiting):
        result = await waiting
        request.remote_done_at = monotonic()
        if request.throttle_time_ms < 0:
            self._request_quota(request, connection, result)
        return result

    def _request_quota(self, request, connection, result) -> None:
        request.throttle_time_ms = 0
        quota = self.quotas.request
        if not quota.enabled or request.api_key in EXEMPT_FROM_REQUEST_QUOTA:
            return
        user, client_id = principal_user(connection), request.client_id or ""
        throttle = self.quotas.request_throttle_ms(request, user)
        if throttle:
            quota.record_throttle(user, client_id, throttle)
            request.throttle_time_ms = throttle
            if result is not None and hasattr(result, "throttle_time_ms"):
                result.throttle_time_ms = throttle

    def request_done(self, request, connection) -> float:
        """The response is written: record the metrics; the seconds to mute the connection for."""
        throttle = request.throttle_time_ms
        if not request.dequeued_at:                             # not timed (see handle)
            return throttle / 1000.0 if throttle > 0 else 0.0
        now = monotonic()
        if self.metrics is not None:
            # inline, as it runs for every request: the request type's RequestMetrics, by API key
            key = request.api_key
            m = self._by_key[key] if key != FETCH and key < 128 else None
            if m is None:
                m = self._metrics_of(request)
            m.record(request.api_version, request.received_at or request.dequeued_at, request.dequeued_at,
                     request.local_done_at, request.remote_done_at or now, now, throttle if throttle > 0 else 0)
        quota = self.quotas.request
        if quota.enabled and request.api_key not in EXEMPT_FROM_REQUEST_QUOTA and request.remote_done_at:
            # the network thread's share of the request quota, as Kafka's recordNetworkThreadTimeCallback
            quota.record_no_throttle(principal_user(connection), request.client_id or "",
                                     ClientRequestQuotaManager.percentage(int((now - request.remote_done_at) * 1e9)))
        return throttle / 1000.0 if throttle > 0 else 0.0

    def _metrics_of(self, request) -> RequestMetrics:
        """The RequestMetrics a request counts under: Fetch by who fetches, the others by API key (cached)."""
        key = request.api_key
        if key == FETCH:
            # "Fetch" is their sum (snapshot)
            return self._metrics_for("FetchFollower" if replica_id_of(request) >= 0 else "FetchConsumer")
        m = self._metrics_for(request.info.name)
        if key < 128:
            self._by_key[key] = m
        return m

    def _metrics_for(self, name: str) -> RequestMetrics:
        m = self.metrics.get(name)
        if m is None:
            m = self.metrics[name] = RequestMetrics(name)
        return m

    def snapshot(self) -> dict[str, dict]:
        """Every request type's counts and histograms, copied (for a scrape); Fetch sums both kinds."""
        if self.metrics is None:
            return {}
        out = {name: m.snapshot() for name, m in list(self.metrics.items())}
        fetches = [self.metrics[n] for n in ("FetchConsumer", "FetchFollower") if n in self.metrics]
        if fetches:
            out["Fetch"] = fetches[0].add(fetches[1].snapshot()) if len(fetches) == 2 else fetches[0].snapshot()
        return out
