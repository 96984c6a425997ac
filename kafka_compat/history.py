"""A history of what clients did, and a checker for it, in the style of Jepsen's Kafka workload.

Producers log each send (a unique value, in the order they sent it) and what
became of it: acknowledged at a partition and offset, failed for sure, or part
of a transaction that was committed or aborted. Consumers log every record they
read (partition, offset, value). `check` then reports what a Kafka user was
promised and did not get:

- lost: acknowledged (and, in a transaction, committed) but never read, though the
  consumers read the partition past its offset or were meant to read everything;
- duplicates: one sent value stored at two offsets;
- divergent: one offset read with two different values;
- offset_mismatch: read at another offset than the one acknowledged;
- reordered: within a partition, a producer's values stored out of its send order;
- aborted_reads: read by a read_committed consumer though its transaction aborted,
  or was never committed;
- phantom: a value nobody sent.

Given the partitions' log start offsets at the end, an acknowledged record below
one that no consumer read is `unverified`, not lost: retention deleted it before
anyone looked, so the history cannot tell; a history with any is not `ok`.

Events are plain tuples kept in memory (appending is thread-safe in CPython, so
delivery callbacks on client threads may log directly) and can be saved as JSON
lines for a later look.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field


class History:
    def __init__(self) -> None:
        self.events: list[tuple] = []
        self._seq: dict[str, int] = {}
        self._lock = threading.Lock()

    # -- producers
    def send(self, producer: str, value: str, txn: str | None = None) -> None:
        """``value`` must be unique across the history; its send order per producer is recorded."""
        with self._lock:
            seq = self._seq.get(producer, 0)
            self._seq[producer] = seq + 1
        self.events.append(("send", producer, value, seq, txn))

    def ack(self, value: str, partition: int, offset: int | None) -> None:
        """``offset`` None: acknowledged without one, as librdkafka's idempotent producer does for a batch
        whose answer it never got once a later batch is acknowledged; then only the partition is checked."""
        self.events.append(("ack", value, partition, offset))

    def fail(self, value: str, error: str = "") -> None:
        """The client gave up on the value (kept for reading the history; the checker needs no more
        than the missing ack, since a timed-out write may still have landed)."""
        self.events.append(("fail", value, error))

    def commit(self, txn: str) -> None:
        self.events.append(("commit", txn))

    def abort(self, txn: str) -> None:
        self.events.append(("abort", txn))

    # -- consumers
    def read(self, consumer: str, partition: int, offset: int, value: str) -> None:
        self.events.append(("read", consumer, partition, offset, value))

    # -- persistence
    def dump(self, path: str) -> None:
        with open(path, "w") as f:
            for e in self.events:
                f.write(json.dumps(e) + "\n")

    @classmethod
    def load(cls, path: str) -> "History":
        h = cls()
        with open(path) as f:
            h.events = [tuple(json.loads(line)) for line in f if line.strip()]
        return h


@dataclass
class Report:
    acked: int = 0
    read: int = 0
    lost: list = field(default_factory=list)              # (value, partition, offset)
    duplicates: list = field(default_factory=list)        # (value, [offsets])
    divergent: list = field(default_factory=list)         # (partition, offset, [values])
    offset_mismatch: list = field(default_factory=list)   # (value, acked (p, o), read (p, o))
    reordered: list = field(default_factory=list)         # (partition, earlier value, later value)
    aborted_reads: list = field(default_factory=list)     # (value, txn, consumer)
    phantom: list = field(default_factory=list)           # (partition, offset, value)
    unverified: list = field(default_factory=list)        # (value, partition, offset): deleted unread

    ANOMALIES = ("lost", "duplicates", "divergent", "offset_mismatch", "reordered", "aborted_reads", "phantom")

    @property
    def ok(self) -> bool:
        return not any(getattr(self, name) for name in self.ANOMALIES) and not self.unverified

    def summary(self) -> str:
        counts = ", ".join(f"{name} {len(getattr(self, name))}" for name in self.ANOMALIES)
        return (f"{self.acked} acknowledged, {self.read} reads: {counts}"
                + (f"; unverified {len(self.unverified)}" if self.unverified else ""))


def check(history: History, *, read_all: bool = True, log_start: dict[int, int] | None = None) -> Report:
    """Check a history. ``read_all``: the consumers were meant to read every acknowledged record
    (they ran until caught up), so one never read is lost; otherwise only records below an offset
    some consumer read in that partition count. ``log_start``: per partition, the log start offset
    at the end; an unread record below it, past every offset read there, is unverified."""
    sends: dict[str, tuple] = {}                       # value -> (producer, seq, txn)
    acks: dict[str, tuple[int, int]] = {}
    committed: set[str] = set()
    aborted: set[str] = set()
    reads: list[tuple] = []
    for e in history.events:
        kind = e[0]
        if kind == "send":
            sends[e[2]] = (e[1], e[3], e[4])
        elif kind == "ack":
            acks[e[1]] = (e[2], e[3])
        elif kind == "commit":
            committed.add(e[1])
        elif kind == "abort":
            aborted.add(e[1])
        elif kind == "read":
            reads.append(e[1:])
    report = Report(acked=len(acks), read=len(reads))

    at_offset: dict[tuple[int, int], set[str]] = {}
    stored: dict[str, set[tuple[int, int]]] = {}
    furthest: dict[int, int] = {}
    for consumer, partition, offset, value in reads:
        at_offset.setdefault((partition, offset), set()).add(value)
        stored.setdefault(value, set()).add((partition, offset))
        furthest[partition] = max(furthest.get(partition, -1), offset)
        sent = sends.get(value)
        if sent is None:
            report.phantom.append((partition, offset, value))
            continue
        txn = sent[2]
        if txn is not None and txn not in committed:
            report.aborted_reads.append((value, txn, consumer))
    for (partition, offset), values in sorted(at_offset.items()):
        if len(values) > 1:
            report.divergent.append((partition, offset, sorted(values)))
    for value, places in stored.items():
        if len(places) > 1:
            report.duplicates.append((value, sorted(places)))
        ack = acks.get(value)
        if ack is not None and ack not in places and not (ack[1] is None and any(p == ack[0] for p, _ in places)):
            report.offset_mismatch.append((value, ack, sorted(places)[0]))

    spans = _spans(reads) if log_start else {}
    for value, (partition, offset) in acks.items():
        txn = sends.get(value, (None, None, None))[2]
        if value in stored or (txn is not None and txn not in committed):
            continue                    # aborted or never committed: nothing was promised
        if log_start and offset is not None and offset < log_start.get(partition, 0) and not any(
                first < offset < last for first, last in spans.get(partition, ())):
            report.unverified.append((value, partition, offset))
        elif read_all or (offset is not None and offset < furthest.get(partition, -1)):
            report.lost.append((value, partition, offset))
    # acknowledged without an offset (a client may infer success from a later batch): unverified
    # where the partition has records deleted unread, as it may have been one of them
    holes = {partition for _, partition, _ in report.unverified}
    report.unverified += [x for x in report.lost if x[2] is None and x[1] in holes]
    report.lost = [x for x in report.lost if not (x[2] is None and x[1] in holes)]
    report.lost.sort(key=lambda x: (x[1], -1 if x[2] is None else x[2]))
    report.unverified.sort(key=lambda x: (x[1], -1 if x[2] is None else x[2]))

    # reordering: per partition, in offset order, each producer's sequence numbers must rise
    by_partition: dict[int, list[tuple[int, str]]] = {}
    for (partition, offset), values in at_offset.items():
        for value in values:
            by_partition.setdefault(partition, []).append((offset, value))
    for partition, entries in sorted(by_partition.items()):
        last: dict[str, tuple[int, str]] = {}
        for offset, value in sorted(entries):
            sent = sends.get(value)
            if sent is None:
                continue
            producer, seq, _ = sent
            prev = last.get(producer)
            if prev is not None and seq < prev[0]:
                report.reordered.append((partition, prev[1], value))
            if prev is None or seq > prev[0]:
                last[producer] = (seq, value)
    return report


def _spans(reads: list[tuple]) -> dict[int, list[tuple[int, int]]]:
    """Per partition, the (first, last) offsets of each run a consumer read in rising order: an
    offset strictly inside one was passed over, so a record there that nobody read was not there."""
    runs: dict[tuple[str, int], list[list[int]]] = {}
    for consumer, partition, offset, _ in reads:
        mine = runs.setdefault((consumer, partition), [])
        if mine and offset > mine[-1][1]:
            mine[-1][1] = offset
        else:
            mine.append([offset, offset])
    spans: dict[int, list[tuple[int, int]]] = {}
    for (_, partition), mine in runs.items():
        spans.setdefault(partition, []).extend((a, b) for a, b in mine if b > a + 1)
    return spans
