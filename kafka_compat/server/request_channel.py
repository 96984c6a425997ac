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
        self._request_quota_manager = quotas.request           # the same object for the broker's life
        self.metrics: dict[str, RequestMetrics] | None = {} if metrics else None
        # each API key's RequestMetrics, made at its first request: a list index per request, no name lookup
        self._by_key: list[RequestMetrics | None] = [None] * 128
        self._fetch_consumer: RequestMetrics | None = None
        self._fetch_follower: RequestMetrics | None = None
        if metrics:                     # chosen once: the metrics stay on or off for the broker's life
            self.handle = self._timed
            self.request_done = self._timed_request_done

    def handle(self, request, connection):
        """Run the handler: its response body, an awaitable of one, or None."""
        if not self._request_quota_manager.enabled:
            return self._handle(request, connection)            # nothing to time
        return self._timed(request, connection)

    def _timed(self, request, connection):
        """`handle` with the request's timestamps (metrics, or a request quota)."""
        request.received_at = connection.last_active
        request.dequeued_at = monotonic()
        result = self._handle(request, connection)
        request.local_done_at = monotonic()
        if type(result) is CoroutineType:                       # an async handler's (asyncio.iscoroutine)
            return self._remote(request, connection, result)
        if request.throttle_time_ms < 0 and self._request_quota_manager.enabled:
            self._request_quota(request, connection, result)
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
        """The response is written: the seconds to mute the connection for (and the request quota's share)."""
        throttle = request.throttle_time_ms
        if request.dequeued_at:                                 # timed (see handle)
            self._network_time(request, connection, monotonic())
        return throttle / 1000.0 if throttle > 0 else 0.0

    def _timed_request_done(self, request, connection) -> float:
        """`request_done` with the request metrics."""
        now = monotonic()
        m = self._by_key[request.api_key]
        if m is None:
            m = self._metrics_of(request)
        m.record(request, now)
        if self._request_quota_manager.enabled:
            self._network_time(request, connection, now)
        throttle = request.throttle_time_ms
        return throttle / 1000.0 if throttle > 0 else 0.0

    def _network_time(self, request, connection, now: float) -> None:
        """The network thread's share of the request quota, as Kafka's recordNetworkThreadTimeCallback."""
        quota = self.quotas.request
        if quota.enabled and request.api_key not in EXEMPT_FROM_REQUEST_QUOTA:
            done = request.remote_done_at or request.local_done_at
            quota.record_no_throttle(principal_user(connection), request.client_id or "",
                                     ClientRequestQuotaManager.percentage(int((now - done) * 1e9)))

    def _metrics_of(self, request) -> RequestMetrics:
        """The RequestMetrics a request counts under: Fetch by who fetches, the others by API key (cached)."""
        if request.api_key == FETCH:            # "Fetch" is their sum (snapshot)
            if replica_id_of(request) >= 0:
                m = self._fetch_follower or self._metrics_for("FetchFollower", request.info.max_version)
                self._fetch_follower = m
            else:
                m = self._fetch_consumer or self._metrics_for("FetchConsumer", request.info.max_version)
                self._fetch_consumer = m
            return m
        m = self._by_key[request.api_key] = self._metrics_for(request.info.name, request.info.max_version)
        return m

    def _metrics_for(self, name: str, max_version: int) -> RequestMetrics:
        m = self.metrics.get(name)
        if m is None:
            m = self.metrics[name] = RequestMetrics(name, max_version)
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
