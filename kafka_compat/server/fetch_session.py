"""Incremental fetch sessions (KIP-227): Kafka's FetchSession, CachedPartition and FetchSessionCache.

A fetcher names every partition it reads in each request: a follower hundreds of
them when __consumer_offsets is replicated, a consumer all of its assignment,
and most are idle. In a session the broker remembers each partition's fetch
parameters, so a request names only the partitions whose parameters changed
(and forgets the ones the fetcher dropped), and the response carries only
partitions with records, a new high watermark or log start offset, a preferred
read replica, or an error. The broker still reads every partition of the session
on every request. A partition that was answered moves to the end of the
session's order, so under a byte limit the next request starts with the others.

The cache holds max.incremental.fetch.session.cache.slots sessions. When it is
full a new session may evict, as in Kafka: one unused for two minutes; else a
consumer's (unprivileged) session if it is a follower's (privileged); else, among
sessions older than two minutes, a smaller one than itself. A fetcher refused a
session gets SessionId 0 and keeps sending full requests, which the protocol allows.
"""
from __future__ import annotations

import itertools
import random
from collections import OrderedDict

from ..clock import monotonic_ms

INITIAL_EPOCH = 0          # a full request that asks for a new session (closing the one named)
FINAL_EPOCH = -1           # a full request without a session (closing the one named)
EVICTION_MS = 120_000      # a session is safe from eviction this long (MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS)


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: 1 follows the largest int32, the final epoch stays final."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 0x7FFFFFFF else epoch + 1


class CachedPartition:
    """One partition of a session: the fetcher's last parameters and what the leader last told it."""

    __slots__ = ("request", "high_watermark", "leader_log_start_offset")

    def __init__(self, request):
        self.request = request                  # the FetchRequest.FetchPartition last sent for it
        self.high_watermark = -1
        self.leader_log_start_offset = -1

    def must_respond(self, error_code: int, high_watermark: int, log_start_offset: int, has_records: bool,
                     diverging: bool, preferred_replica: bool = False) -> bool:
        """Kafka's maybeUpdateResponseData: whether an incremental response carries this partition; it
        remembers the high watermark and log start offset it sends (-1 after an error, so the next answer
        after the error carries them again)."""
        respond = has_records or diverging or preferred_replica
        if self.high_watermark != high_watermark:
            respond = True
            self.high_watermark = high_watermark
        if self.leader_log_start_offset != log_start_offset:
            respond = True
            self.leader_log_start_offset = log_start_offset
        if error_code:
            self.high_watermark = -1
            respond = True
        return respond


class FetchSession:
    """The partitions of one session, keyed by (topic id or, before Fetch v13, name; partition), in order."""

    __slots__ = ("id", "epoch", "uses_topic_ids", "partitions", "privileged", "creation_ms", "last_used_ms")

    def __init__(self, session_id: int, uses_topic_ids: bool, privileged: bool = True, now_ms: int = 0):
        self.id = session_id
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.uses_topic_ids = uses_topic_ids
        self.partitions: dict[tuple, CachedPartition] = {}
        self.privileged = privileged            # a follower's: consumers' sessions make way for it
        self.creation_ms = self.last_used_ms = now_ms

    def rotate(self, answered: list[tuple]) -> None:
        """Move the partitions just answered to the end of the order (Kafka's IncrementalFetchContext)."""
        partitions = self.partitions
        for key in answered:
            cached = partitions.pop(key, None)
            if cached is not None:
                partitions[key] = cached



class FetchSessionCache:
    """At most ``max_slots`` sessions (max.incremental.fetch.session.cache.slots), evicted by Kafka's rules."""

    def __init__(self, max_slots: int = 1000, eviction_ms: int = EVICTION_MS, clock=monotonic_ms):
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.clock = clock
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()    # least recently used first
        self.evictions = 0
        self._ids = itertools.count(random.randint(1, 1 << 30))

    def __len__(self) -> int:
        return len(self.sessions)

    def partitions_cached(self) -> int:
        return sum(len(s.partitions) for s in list(self.sessions.values()))

    def create(self, uses_topic_ids: bool, privileged: bool = True, size: int = 0) -> FetchSession | None:
        """A new session for a fetcher about to cache `size` partitions, or None when the cache is full
        of sessions it may not evict."""
        if self.max_slots <= 0:
            return None
        now = self.clock()
        while len(self.sessions) >= self.max_slots:
            if not self._evict_one(privileged, size, now):
                return None
        session_id = next(self._ids) & 0x7FFFFFFF
        while session_id == 0 or session_id in self.sessions:
            session_id = next(self._ids) & 0x7FFFFFFF
        session = self.sessions[session_id] = FetchSession(session_id, uses_topic_ids, privileged, now)
        return session

    def _evict_one(self, privileged: bool, size: int, now: int) -> bool:
        """Kafka's tryEvict: the stalest session if unused for eviction_ms, else the least valuable one
        this fetcher outranks (privileged over not, then more partitions) among those it may evict."""
        stalest = next(iter(self.sessions.values()))
        if now - stalest.last_used_ms > self.eviction_ms:
            del self.sessions[stalest.id]
            self.evictions += 1
            return True
        old = now - self.eviction_ms
        # a follower may evict any consumer's session; anyone may evict a session created long enough ago
        evictable = [s for s in self.sessions.values()
                     if s.creation_ms < old or (privileged and not s.privileged)]
        if not evictable:
            return False
        least = min(evictable, key=lambda s: (s.privileged, len(s.partitions), s.id))
        if (privileged, size, 0) < (least.privileged, len(least.partitions), least.id):
            return False
        del self.sessions[least.id]
        self.evictions += 1
        return True

    def get(self, session_id: int) -> FetchSession | None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.last_used_ms = self.clock()
            self.sessions.move_to_end(session_id)
        return session

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)
