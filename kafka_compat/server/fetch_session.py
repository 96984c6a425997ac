"""Incremental fetch sessions (KIP-227): Kafka's FetchSession, CachedPartition and FetchSessionCache.

A follower fetches every partition it follows from one leader in each request,
hundreds of them when __consumer_offsets is replicated, and most are idle. In a
session the leader remembers each partition's fetch parameters, so a request
names only the partitions whose parameters changed (and forgets the ones the
follower dropped), and the response carries only partitions with records, a new
high watermark or log start offset, or an error. The leader still reads, and
counts as fetched, every partition of the session on every request.

Sessions are granted to followers only: a consumer asking for one is answered
with SessionId 0 and keeps sending full requests, which the protocol allows.
"""
from __future__ import annotations

import itertools
import random
from collections import OrderedDict

INITIAL_EPOCH = 0          # a full request that asks for a new session (closing the one named)
FINAL_EPOCH = -1           # a full request without a session (closing the one named)


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
                     diverging: bool) -> bool:
        """Kafka's maybeUpdateResponseData: whether an incremental response carries this partition; it
        remembers the high watermark and log start offset it sends (-1 after an error, so the next answer
        after the error carries them again)."""
        respond = has_records or diverging
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

    __slots__ = ("id", "epoch", "uses_topic_ids", "partitions")

    def __init__(self, session_id: int, uses_topic_ids: bool):
        self.id = session_id
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.uses_topic_ids = uses_topic_ids
        self.partitions: dict[tuple, CachedPartition] = {}


class FetchSessionCache:
    """At most ``max_slots`` sessions (max.incremental.fetch.session.cache.slots); the least recently
    used one is evicted to make room for a new one."""

    def __init__(self, max_slots: int = 1000):
        self.max_slots = max_slots
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._ids = itertools.count(random.randint(1, 1 << 30))

    def __len__(self) -> int:
        return len(self.sessions)

    def create(self, uses_topic_ids: bool) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        while len(self.sessions) >= self.max_slots:
            self.sessions.popitem(last=False)
        session_id = next(self._ids) & 0x7FFFFFFF
        while session_id == 0 or session_id in self.sessions:
            session_id = next(self._ids) & 0x7FFFFFFF
        session = self.sessions[session_id] = FetchSession(session_id, uses_topic_ids)
        return session

    def get(self, session_id: int) -> FetchSession | None:
        session = self.sessions.get(session_id)
        if session is not None:
            self.sessions.move_to_end(session_id)
        return session

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)
