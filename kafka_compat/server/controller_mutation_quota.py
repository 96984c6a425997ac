"""The controller mutation quota (KIP-599): partitions created, added or deleted per second, per client.

As Kafka's ControllerMutationQuotaManager, each quota entity has a token bucket
holding at most quota x controller.quota.window.num x
controller.quota.window.size.seconds tokens (the burst), refilled at the quota's
rate; a mutation takes one token per partition. A *strict* quota (CreateTopics
v6+, CreatePartitions v3+, DeleteTopics v5+) refuses a topic with
THROTTLING_QUOTA_EXCEEDED when the bucket is already below zero, otherwise lets
the whole topic through even if it takes the bucket negative; older versions get a
*permissive* quota that only records. Either way the response's throttle_time_ms
is the time until the bucket is back at zero.

One departure from Kafka: a permissive quota still refuses once the bucket is a
whole burst below zero (the client took more than twice its allowance). Kafka
relies on muting the connection for the throttle time, which a client that opens
a new connection per request escapes; the fuzzer did exactly that with old
CreateTopics versions and made hundreds of topics a minute.

Where the quota comes from is the caller's: `quota_for(user, client_id)` answers
(entity key, rate) or None for no quota. Until dynamic client quotas are stored
(/config/users/<default> and friends), the broker gives every user the static
`controller.mutation.rate.default`, so all unauthenticated clients share the
ANONYMOUS user's bucket however they vary their client id. Metadata's topic
auto-creation also takes tokens here, strictly: a client that made many topics
lately gets UNKNOWN_TOPIC_OR_PARTITION (and retries later) instead of a new topic.
"""
from __future__ import annotations

import time
from typing import Callable

from ..protocol.errors import ErrorCode, KafkaError

ANONYMOUS = "ANONYMOUS"
# the first strict versions of each API (KIP-599)
STRICT_FROM = {19: 6, 20: 5, 37: 3}


def principal_user(connection) -> str:
    """The user name of a connection's principal; ANONYMOUS until security sets one."""
    principal = getattr(connection, "principal", None)
    if principal is None:
        return ANONYMOUS
    name = getattr(principal, "name", None) or str(principal)
    return name.split(":", 1)[1] if name.startswith("User:") else name


class TokenBucket:
    __slots__ = ("rate", "burst", "tokens", "last")

    def __init__(self, rate: float, burst: float, now: float):
        self.rate, self.burst, self.tokens, self.last = rate, burst, burst, now

    def refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now

    def throttle_ms(self) -> int:
        return 0 if self.tokens >= 0 else int(-self.tokens / self.rate * 1000) + 1


class ControllerMutationQuota:
    """One request's view of its client's bucket: `record(partitions)` raises THROTTLING_QUOTA_EXCEEDED
    (strict, bucket already negative); `throttle_time_ms` for the response."""

    def __init__(self, bucket: TokenBucket | None, strict: bool, clock: Callable[[], float]):
        self.bucket, self.strict, self.clock = bucket, strict, clock

    def record(self, partitions: int) -> None:
        b = self.bucket
        if b is None or partitions <= 0:
            return
        b.refill(self.clock())
        if b.tokens < (0 if self.strict else -b.burst):
            raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                             f"The throttling quota has been exceeded: retry in {b.throttle_ms()} ms.")
        b.tokens -= partitions

    @property
    def throttle_time_ms(self) -> int:
        b = self.bucket
        if b is None:
            return 0
        b.refill(self.clock())
        return b.throttle_ms()


class ControllerMutationQuotaManager:
    def __init__(self, quota_for: Callable[[str, str | None], tuple[object, float] | None], *,
                 window_num: int = 11, window_size_seconds: int = 1, clock: Callable[[], float] = time.monotonic):
        self.quota_for = quota_for
        self.window_seconds = window_num * window_size_seconds
        self.clock = clock
        self.buckets: dict[object, TokenBucket] = {}

    def _bucket(self, user: str, client_id: str | None) -> TokenBucket | None:
        found = self.quota_for(user, client_id)
        if found is None:
            return None
        key, rate = found
        bucket = self.buckets.get(key)
        if bucket is None or bucket.rate != rate:
            bucket = self.buckets[key] = TokenBucket(rate, rate * self.window_seconds, self.clock())
        return bucket

    def quota_for_request(self, request, strict: bool | None = None) -> ControllerMutationQuota:
        """The quota of the request's client; strict by the API version unless told."""
        if strict is None:
            first = STRICT_FROM.get(request.api_key)
            strict = first is not None and request.api_version >= first
        bucket = self._bucket(principal_user(request.connection), request.client_id)
        return ControllerMutationQuota(bucket, strict, self.clock)


def default_user_quota(rate: float | None):
    """`quota_for` giving every user `rate` (Kafka's /config/users/<default>); None: no quota."""
    if rate is None:
        return lambda user, client_id: None
    return lambda user, client_id: (("user", user), rate)


def unlimited() -> ControllerMutationQuotaManager:
    return ControllerMutationQuotaManager(default_user_quota(None))
