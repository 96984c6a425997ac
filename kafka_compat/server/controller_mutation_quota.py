"""The controller mutation quota (KIP-599): partitions created, added or deleted per second, per client.

The quota is the client-quota key `controller_mutation_rate`, set per user, client id, (user,
client id) or their defaults with AlterClientQuotas (kafka-configs --entity-type users/clients),
stored and resolved like the produce and fetch quotas (QuotaManagers.controller_mutation: the most
specific entity wins). As Kafka's ControllerMutationQuotaManager, each quota entity has a token
bucket holding at most quota x controller.quota.window.num x controller.quota.window.size.seconds
tokens (the burst), refilled at the quota's rate; a mutation takes one token per partition. A
*strict* quota (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+) refuses a topic with
THROTTLING_QUOTA_EXCEEDED when the bucket is already below zero, otherwise lets the whole topic
through even if it takes the bucket negative; older versions get a *permissive* quota that only
records. Either way the response's throttle_time_ms is the time until the bucket is back at zero,
and the connection is muted for it (KIP-219, RequestChannel).

One departure from Kafka: a permissive quota still refuses once the bucket is a whole burst below
zero (the client took more than twice its allowance). Kafka relies on muting the connection for
the throttle time, which a client that opens a new connection per request escapes; the fuzzer did
exactly that with old CreateTopics versions and made hundreds of topics a minute. Metadata's topic
auto-creation also takes tokens here, strictly: a client that made many topics lately gets
UNKNOWN_TOPIC_OR_PARTITION (and retries later) instead of a new topic.
"""
from __future__ import annotations

import math

from ..protocol.errors import ErrorCode, KafkaError
from .client_quota_manager import ClientQuotaManager, QuotaManagers, principal_user

# the first strict versions of each API (KIP-599)
STRICT_FROM = {19: 6, 20: 5, 37: 3}
MAX_IDLE_BUCKETS = 1000


class TokenBucket:
    """Kafka's TokenBucket stat; times in ms (the quota manager's clock)."""
    __slots__ = ("rate", "burst", "tokens", "last")

    def __init__(self, rate: float, burst: float, now: int):
        self.rate, self.burst, self.tokens, self.last = rate, burst, burst, now

    def refill(self, now: int) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.last) / 1000.0 * self.rate)
        self.last = now

    def throttle_ms(self) -> int:
        return 0 if self.tokens >= 0 else int(-self.tokens / self.rate * 1000) + 1


class ControllerMutationQuota:
    """One request's view of its client's bucket: `record(partitions)` raises THROTTLING_QUOTA_EXCEEDED
    (strict, bucket already negative); `throttle_time_ms` for the response."""

    def __init__(self, manager: "ControllerMutationQuotaManager", request, user: str, client_id: str,
                 bucket: TokenBucket | None, strict: bool):
        self.manager, self.request, self.bucket, self.strict = manager, request, bucket, strict
        self.user, self.client_id = user, client_id

    def record(self, partitions: int) -> None:
        b = self.bucket
        if b is None or partitions <= 0:
            return
        b.refill(self.manager.clock())
        if b.tokens < (0 if self.strict else -b.burst):
            raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                             f"The throttling quota has been exceeded: retry in {b.throttle_ms()} ms.")
        b.tokens -= partitions
        # the mutation rate metric (and the expiry of idle entities): the bucket decides, not this rate
        self.manager.quotas.record_and_get_throttle_ms(self.user, self.client_id, partitions)

    @property
    def throttle_time_ms(self) -> int:
        b = self.bucket
        if b is None:
            return 0
        b.refill(self.manager.clock())
        throttle = b.throttle_ms()
        if throttle > 0:
            # the connection is muted that long (KIP-219); like Produce's and Fetch's, this throttle stands
            # in for the request quota's
            self.request.throttle_time_ms = throttle
            self.manager.quotas.record_throttle(self.user, self.client_id, throttle)
        return throttle


class ControllerMutationQuotaManager:
    """Token buckets over the `controller_mutation_rate` quotas that ``quotas`` resolves (one bucket per
    quota entity, so a user's client ids share theirs when the quota is the user's)."""

    def __init__(self, quotas: ClientQuotaManager | None = None):
        self.quotas = quotas if quotas is not None else QuotaManagers().controller_mutation
        self.clock = self.quotas.clock
        self.burst_seconds = self.quotas.samples * self.quotas.window_ms / 1000.0
        self.buckets: dict[tuple[str, str], TokenBucket] = {}

    def _bucket(self, user: str, client_id: str) -> TokenBucket | None:
        sensors = self.quotas.sensors_for(user, client_id)
        rate = sensors.bound
        if rate == math.inf:
            return None
        bucket = self.buckets.get(sensors.tags)
        if bucket is None or bucket.rate != rate:
            now = self.clock()
            if len(self.buckets) >= MAX_IDLE_BUCKETS:
                self._forget_full_buckets(now)
            bucket = self.buckets[sensors.tags] = TokenBucket(rate, rate * self.burst_seconds, now)
        return bucket

    def _forget_full_buckets(self, now: int) -> None:
        """A full bucket is a new one: forget those, so clients with ever new ids cannot pile buckets up."""
        for tags, bucket in list(self.buckets.items()):
            bucket.refill(now)
            if bucket.tokens >= bucket.burst:
                del self.buckets[tags]

    def quota_for_request(self, request, strict: bool | None = None) -> ControllerMutationQuota:
        """The quota of the request's client; strict by the API version unless told."""
        if strict is None:
            first = STRICT_FROM.get(request.api_key)
            strict = first is not None and request.api_version >= first
        if not self.quotas.enabled:             # no quota of this type anywhere: nothing to look up
            return ControllerMutationQuota(self, request, "", "", None, strict)
        user, client_id = principal_user(request.connection), request.client_id or ""
        return ControllerMutationQuota(self, request, user, client_id, self._bucket(user, client_id), strict)


def unlimited() -> ControllerMutationQuotaManager:
    return ControllerMutationQuotaManager()
