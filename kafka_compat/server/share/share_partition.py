"""The state of one share partition (KIP-932, Kafka's SharePartition), sans I/O.

A share group consumes a topic partition cooperatively: records between the share-partition
start offset (SPSO) and end offset (SPEO) are "in flight", each Available, Acquired (locked by
one member until its acquisition lock expires), Acknowledged or Archived, with a delivery
count. They are kept as offset ranges of one state, never per record: a range is split only
where an acquisition or an acknowledgement ends inside it, and neighbours that agree again
are merged back.

Everything is driven from outside: the caller passes the batches it read from the log and the
current time; nothing here reads a log, a socket or a clock.
- ``acquire`` hands out the Available records of the read batches (whole batches, up to
  ``max_records``), new records past SPEO, as far as ``max_record_locks`` in-flight records;
- ``acknowledge`` applies ACCEPT / RELEASE / REJECT (and GAP) from the member holding them;
- ``expire_locks(now)`` releases what was held past ``share.record.lock.duration.ms``;
- a release of a record delivered ``delivery_count_limit`` times archives it instead;
- SPSO moves past Acknowledged and Archived records at its front, and to the log-start offset.
"""
from __future__ import annotations

import bisect
import enum
from dataclasses import dataclass
from typing import Iterable, NamedTuple

from ...protocol.errors import ErrorCode

E = ErrorCode


class RecordState(enum.IntEnum):
    """Kafka's RecordState ids (also what ShareSnapshot/ShareUpdate records store)."""
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """AcknowledgeTypes in ShareFetch / ShareAcknowledge (0 is a gap: an offset with no record)."""
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


TERMINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(slots=True)
class InFlight:
    """Offsets ``first..last`` (inclusive), all in one state."""
    first: int
    last: int
    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    lock_expiry_ms: int = -1        # for ACQUIRED: when the acquisition lock runs out

    def same_as(self, other: InFlight) -> bool:
        return (self.state == other.state and self.delivery_count == other.delivery_count
                and self.member_id == other.member_id and self.lock_expiry_ms == other.lock_expiry_ms)

    def copy(self, first: int, last: int) -> InFlight:
        return InFlight(first, last, self.state, self.delivery_count, self.member_id, self.lock_expiry_ms)


class AcquiredRecords(NamedTuple):
    first_offset: int
    last_offset: int
    delivery_count: int


class AckBatch(NamedTuple):
    first_offset: int
    last_offset: int
    types: tuple       # one AcknowledgeType for the whole range, or one per offset


class SharePartition:
    def __init__(self, start_offset: int, *, record_lock_duration_ms: int = 30000, delivery_count_limit: int = 5,
                 max_record_locks: int = 2000):
        self.start_offset = start_offset
        self.end_offset = start_offset - 1      # the last in-flight offset (start - 1: nothing in flight)
        self.record_lock_duration_ms = record_lock_duration_ms
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        self.ranges: list[InFlight] = []        # sorted, contiguous over start_offset..end_offset
        self._firsts: list[int] = []            # ranges' first offsets, for bisect

    @classmethod
    def from_state(cls, start_offset: int, batches: list, **limits) -> SharePartition:
        """A share partition as the share coordinator kept it: ``batches`` (first, last, delivery state, delivery
        count) from ``start_offset`` on; offsets between them no batch names are Available, never delivered."""
        sp = cls(start_offset, **limits)
        for first, last, state, count in sorted(batches):
            first = max(first, sp.end_offset + 1)
            if first > last:
                continue
            if first > sp.end_offset + 1:
                sp._append(InFlight(sp.end_offset + 1, first - 1, RecordState.AVAILABLE))
            kept = RecordState(state) if state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED) \
                else RecordState.AVAILABLE
            sp._append(InFlight(first, last, kept, count))
        sp._merge()
        sp._advance_start()
        return sp

    def persisted_batches(self) -> list[tuple[int, int, int, int]]:
        """The state the share coordinator keeps: (first, last, delivery state, delivery count) per range, an
        Acquired range kept as Available (a lock does not outlive the leader)."""
        out: list[tuple[int, int, int, int]] = []
        for r in self.ranges:
            state = RecordState.AVAILABLE if r.state == RecordState.ACQUIRED else r.state
            if out and out[-1][1] + 1 == r.first and out[-1][2] == state and out[-1][3] == r.delivery_count:
                out[-1] = (out[-1][0], r.last, int(state), r.delivery_count)
            else:
                out.append((r.first, r.last, int(state), r.delivery_count))
        return out

    # ------------------------------------------------------------ inspection
    def next_fetch_offset(self) -> int:
        """Where the next read starts: the first Available record, else past the end."""
        for r in self.ranges:
            if r.state == RecordState.AVAILABLE:
                return r.first
        return self.end_offset + 1

    def in_flight_count(self) -> int:
        return self.end_offset - self.start_offset + 1

    def can_acquire(self) -> bool:
        """Whether a read could give anything: Available records, or room for new ones."""
        return self.in_flight_count() < self.max_record_locks or any(
            r.state == RecordState.AVAILABLE for r in self.ranges)

    def delivery_complete_count(self) -> int:
        """In-flight records whose delivery is over (Acknowledged or Archived): KIP-1226's DeliveryCompleteCount."""
        return sum(r.last - r.first + 1 for r in self.ranges if r.state in TERMINAL)

    def earliest_lock_expiry(self) -> int | None:
        expiries = [r.lock_expiry_ms for r in self.ranges if r.state == RecordState.ACQUIRED]
        return min(expiries) if expiries else None

    def state_of(self, offset: int) -> tuple[RecordState, int, str | None] | None:
        """(state, delivery count, member) of an in-flight offset; None outside SPSO..SPEO."""
        if not self.start_offset <= offset <= self.end_offset:
            return None
        r = self.ranges[bisect.bisect_right(self._firsts, offset) - 1]
        return r.state, r.delivery_count, r.member_id

    # ------------------------------------------------------------ range bookkeeping
    def _reindex(self) -> None:
        self._firsts = [r.first for r in self.ranges]

    def _split_at(self, offset: int) -> None:
        """Make ``offset`` the first offset of a range (when it lies inside one)."""
        if not self.start_offset < offset <= self.end_offset:
            return
        i = bisect.bisect_right(self._firsts, offset) - 1
        r = self.ranges[i]
        if r.first == offset:
            return
        self.ranges.insert(i + 1, r.copy(offset, r.last))
        self._firsts.insert(i + 1, offset)
        r.last = offset - 1

    def _slice(self, first: int, last: int) -> list[InFlight]:
        """The ranges exactly covering first..last (clipped to what is in flight), split as needed."""
        first, last = max(first, self.start_offset), min(last, self.end_offset)
        if first > last:
            return []
        self._split_at(first)
        self._split_at(last + 1)
        lo = bisect.bisect_left(self._firsts, first)
        hi = bisect.bisect_right(self._firsts, last)
        return self.ranges[lo:hi]

    def _merge(self) -> None:
        out: list[InFlight] = []
        for r in self.ranges:
            if out and out[-1].same_as(r):
                out[-1].last = r.last
            else:
                out.append(r)
        self.ranges = out
        self._reindex()

    def _advance_start(self) -> None:
        """SPSO moves past Acknowledged and Archived records at the front (Kafka's maybeUpdateCachedStateAndOffsets)."""
        drop = 0
        for r in self.ranges:
            if r.state not in TERMINAL:
                break
            drop += 1
        if drop:
            self.start_offset = self.ranges[drop - 1].last + 1
            del self.ranges[:drop]
            self._reindex()

    def _release(self, r: InFlight) -> None:
        """An acquired range goes back: Available, or Archived once delivered delivery_count_limit times."""
        r.state = RecordState.ARCHIVED if r.delivery_count >= self.delivery_count_limit else RecordState.AVAILABLE
        r.member_id = None
        r.lock_expiry_ms = -1

    # ------------------------------------------------------------ acquiring
    def acquire(self, member_id: str, batches: Iterable[tuple[int, int]], max_records: int,
                now_ms: int) -> list[AcquiredRecords]:
        """Acquire for ``member_id`` what is acquirable in the read ``batches`` ((base offset, last offset),
        in order): whole batches, until ``max_records`` are acquired, never more than max_record_locks
        in flight. Returns the acquired ranges with their delivery counts."""
        acquired: list[AcquiredRecords] = []
        count = 0
        expiry = now_ms + self.record_lock_duration_ms
        for base, last in batches:
            if count >= max_records:
                break
            if last < self.start_offset:
                continue
            base = max(base, self.start_offset)
            # the in-flight part: Available records become Acquired
            for r in self._slice(base, min(last, self.end_offset)):
                if r.state != RecordState.AVAILABLE:
                    continue
                r.state, r.member_id, r.lock_expiry_ms = RecordState.ACQUIRED, member_id, expiry
                r.delivery_count += 1
                acquired.append(AcquiredRecords(r.first, r.last, r.delivery_count))
                count += r.last - r.first + 1
            # the new part past SPEO, as far as the record-lock limit lets
            new_first = max(base, self.end_offset + 1)
            new_last = min(last, self.start_offset + self.max_record_locks - 1)
            if new_first <= new_last:
                if new_first > self.end_offset + 1:     # offsets the log no longer has in between: a gap
                    self._append(InFlight(self.end_offset + 1, new_first - 1, RecordState.ARCHIVED))
                self._append(InFlight(new_first, new_last, RecordState.ACQUIRED, 1, member_id, expiry))
                acquired.append(AcquiredRecords(new_first, new_last, 1))
                count += new_last - new_first + 1
        self._merge()
        self._advance_start()
        return _coalesce(acquired)

    def _append(self, r: InFlight) -> None:
        self.ranges.append(r)
        self._firsts.append(r.first)
        self.end_offset = r.last

    # ------------------------------------------------------------ acknowledging
    def acknowledge(self, member_id: str, batches: list[AckBatch]) -> int:
        """Apply the member's acknowledgements; every offset must be Acquired by it (else
        INVALID_RECORD_STATE and nothing changes). Returns the error code."""
        plan = []
        for b in batches:
            n = b.last_offset - b.first_offset + 1
            if n <= 0 or not b.types or (len(b.types) != 1 and len(b.types) != n):
                return E.INVALID_REQUEST
            if any(t not in _ACK_TARGET and t != AcknowledgeType.RELEASE for t in b.types):
                return E.INVALID_REQUEST
            if b.first_offset < self.start_offset or b.last_offset > self.end_offset:
                return E.INVALID_RECORD_STATE
            runs = [(b.first_offset, b.last_offset, b.types[0])] if len(b.types) == 1 else _runs(b)
            for first, last, t in runs:
                for r in self._slice(first, last):
                    if r.state != RecordState.ACQUIRED or r.member_id != member_id:
                        self._merge()
                        return E.INVALID_RECORD_STATE
                plan.append((first, last, t))
        for first, last, t in plan:
            for r in self._slice(first, last):
                if t == AcknowledgeType.RELEASE:
                    self._release(r)
                else:
                    r.state, r.member_id, r.lock_expiry_ms = _ACK_TARGET[t], None, -1
        self._merge()
        self._advance_start()
        return E.NONE

    def archive_acquired(self, member_id: str, ranges: list[tuple[int, int]],
                         acquired: list[AcquiredRecords]) -> list[AcquiredRecords]:
        """Archive what ``member_id`` just acquired inside ``ranges`` (batches of aborted transactions, for
        read_committed) and return ``acquired`` without those offsets."""
        for first, last in ranges:
            for r in self._slice(first, last):
                if r.state == RecordState.ACQUIRED and r.member_id == member_id:
                    r.state, r.member_id, r.lock_expiry_ms = RecordState.ARCHIVED, None, -1
        self._merge()
        self._advance_start()
        out = []
        for a in acquired:
            pieces = [(a.first_offset, a.last_offset)]
            for first, last in ranges:
                pieces = [p for lo, hi in pieces for p in ((lo, min(hi, first - 1)), (max(lo, last + 1), hi))
                          if p[0] <= p[1]]
            out.extend(AcquiredRecords(lo, hi, a.delivery_count) for lo, hi in pieces)
        return out

    def release_member(self, member_id: str) -> int:
        """The member is gone (its share session closed): everything it holds goes back. Returns how many."""
        return self._release_where(lambda r: r.member_id == member_id)

    def expire_locks(self, now_ms: int) -> int:
        """Release every range whose acquisition lock has run out; returns how many records."""
        return self._release_where(lambda r: r.lock_expiry_ms <= now_ms)

    def _release_where(self, pick) -> int:
        n = 0
        for r in self.ranges:
            if r.state == RecordState.ACQUIRED and pick(r):
                n += r.last - r.first + 1
                self._release(r)
        if n:
            self._merge()
            self._advance_start()
        return n

    # ------------------------------------------------------------ the log moving underneath
    def update_log_start_offset(self, log_start_offset: int) -> None:
        """Records below the log's start offset are gone: they are archived and SPSO moves to it."""
        if log_start_offset <= self.start_offset:
            return
        if log_start_offset > self.end_offset:
            self.ranges, self._firsts = [], []
            self.start_offset, self.end_offset = log_start_offset, log_start_offset - 1
            return
        self._split_at(log_start_offset)
        i = bisect.bisect_left(self._firsts, log_start_offset)
        del self.ranges[:i]
        self._reindex()
        self.start_offset = log_start_offset
        self._advance_start()


_ACK_TARGET = {AcknowledgeType.GAP: RecordState.ARCHIVED, AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
               AcknowledgeType.REJECT: RecordState.ARCHIVED}


def _runs(b: AckBatch):
    """Per-offset types as (first, last, type) runs of equal type."""
    out = []
    start = b.first_offset
    for i in range(1, len(b.types) + 1):
        if i == len(b.types) or b.types[i] != b.types[i - 1]:
            out.append((start, b.first_offset + i - 1, b.types[i - 1]))
            start = b.first_offset + i
    return out


def _coalesce(acquired: list[AcquiredRecords]) -> list[AcquiredRecords]:
    out: list[AcquiredRecords] = []
    for a in acquired:
        if out and out[-1].last_offset + 1 == a.first_offset and out[-1].delivery_count == a.delivery_count:
            out[-1] = AcquiredRecords(out[-1].first_offset, a.last_offset, a.delivery_count)
        else:
            out.append(a)
    return out


__all__ = ["AckBatch", "AcknowledgeType", "AcquiredRecords", "InFlight", "RecordState", "SharePartition"]
