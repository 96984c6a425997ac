"""SharePartition (KIP-932), the sans-I/O state of one share partition: every transition, table-driven.

Each case starts from a fresh partition, runs steps against it, and checks the in-flight ranges as
(first, last, state, delivery count, member) and the start and end offsets afterwards.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from kafka_compat.storage.fetch_data_info import FetchResult

from kafka_compat.protocol.errors import ErrorCode as E
from kafka_compat.protocol.records import ControlRecordType, build_batch, build_control_batch
from kafka_compat.server.share.share_fetch_utils import aborted_batches, read_batch_spans
from kafka_compat.server.share.share_partition import (
    AckBatch,
    AcknowledgeType,
    AcquiredRecords,
    RecordState,
    SharePartition,
)

AV, AQ, AK, AR = RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED
ACCEPT, RELEASE, REJECT, GAP = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT, \
    AcknowledgeType.GAP
LOCK = 1000


def new(start=0, limit=3, locks=100) -> SharePartition:
    return SharePartition(start, record_lock_duration_ms=LOCK, delivery_count_limit=limit, max_record_locks=locks)


def view(sp: SharePartition):
    return [(r.first, r.last, r.state, r.delivery_count, r.member_id) for r in sp.ranges]


def ack(*batches):
    return [AckBatch(f, last, tuple(t) if isinstance(t, (list, tuple)) else (t,)) for f, last, t in batches]


# (name, steps, expected ranges, expected (start, end)); a step is (op, args, expected return)
CASES = [
    ("acquire new records", [
        ("acquire", ("a", [(0, 4), (5, 9)], 500, 0), [AcquiredRecords(0, 9, 1)]),
    ], [(0, 9, AQ, 1, "a")], (0, 9)),
    ("acquire stops after max records, at a batch boundary", [
        ("acquire", ("a", [(0, 4), (5, 9), (10, 14)], 6, 0), [AcquiredRecords(0, 9, 1)]),
    ], [(0, 9, AQ, 1, "a")], (0, 9)),
    ("acquire stops at max record locks", [
        ("acquire", ("a", [(0, 9), (10, 19)], 500, 0), [AcquiredRecords(0, 14, 1)]),
    ], [(0, 14, AQ, 1, "a")], (0, 14)),
    ("nothing acquired at the lock limit until the start moves", [
        ("acquire", ("a", [(0, 14)], 500, 0), [AcquiredRecords(0, 14, 1)]),
        ("acquire", ("b", [(15, 19)], 500, 0), []),
        ("acknowledge", ("a", ack((0, 4, ACCEPT))), E.NONE),
        ("acquire", ("b", [(15, 19)], 500, 0), [AcquiredRecords(15, 19, 1)]),
    ], [(5, 14, AQ, 1, "a"), (15, 19, AQ, 1, "b")], (5, 19)),
    ("acquired records are not acquired again", [
        ("acquire", ("a", [(0, 4)], 500, 0), [AcquiredRecords(0, 4, 1)]),
        ("acquire", ("b", [(0, 4), (5, 6)], 500, 0), [AcquiredRecords(5, 6, 1)]),
    ], [(0, 4, AQ, 1, "a"), (5, 6, AQ, 1, "b")], (0, 6)),
    ("accept all: the start moves past them", [
        ("acquire", ("a", [(0, 9)], 500, 0), [AcquiredRecords(0, 9, 1)]),
        ("acknowledge", ("a", ack((0, 9, ACCEPT))), E.NONE),
    ], [], (10, 9)),
    ("accept in the middle: the start stays", [
        ("acquire", ("a", [(0, 9)], 500, 0), [AcquiredRecords(0, 9, 1)]),
        ("acknowledge", ("a", ack((3, 5, ACCEPT))), E.NONE),
    ], [(0, 2, AQ, 1, "a"), (3, 5, AK, 1, None), (6, 9, AQ, 1, "a")], (0, 9)),
    ("release makes records available with their delivery count", [
        ("acquire", ("a", [(0, 9)], 500, 0), [AcquiredRecords(0, 9, 1)]),
        ("acknowledge", ("a", ack((0, 4, RELEASE), (5, 9, ACCEPT))), E.NONE),
        ("next_fetch_offset", (), 0),
        ("acquire", ("b", [(0, 9)], 500, 0), [AcquiredRecords(0, 4, 2)]),
    ], [(0, 4, AQ, 2, "b"), (5, 9, AK, 1, None)], (0, 9)),
    ("reject archives: never delivered again", [
        ("acquire", ("a", [(0, 9)], 500, 0), [AcquiredRecords(0, 9, 1)]),
        ("acknowledge", ("a", ack((0, 9, REJECT))), E.NONE),
        ("acquire", ("b", [(0, 9)], 500, 0), []),
    ], [], (10, 9)),
    ("gaps are archived", [
        ("acquire", ("a", [(0, 3)], 500, 0), [AcquiredRecords(0, 3, 1)]),
        ("acknowledge", ("a", ack((0, 3, [ACCEPT, GAP, GAP, ACCEPT]))), E.NONE),
    ], [], (4, 3)),
    ("per-offset types split a range", [
        ("acquire", ("a", [(0, 4)], 500, 0), [AcquiredRecords(0, 4, 1)]),
        ("acknowledge", ("a", ack((0, 4, [RELEASE, ACCEPT, ACCEPT, RELEASE, REJECT]))), E.NONE),
    ], [(0, 0, AV, 1, None), (1, 2, AK, 1, None), (3, 3, AV, 1, None), (4, 4, AR, 1, None)], (0, 4)),
    ("release at the delivery count limit archives", [
        ("acquire", ("a", [(0, 0)], 500, 0), [AcquiredRecords(0, 0, 1)]),
        ("acknowledge", ("a", ack((0, 0, RELEASE))), E.NONE),
        ("acquire", ("a", [(0, 0)], 500, 0), [AcquiredRecords(0, 0, 2)]),
        ("acknowledge", ("a", ack((0, 0, RELEASE))), E.NONE),
        ("acquire", ("a", [(0, 0), (1, 1)], 500, 0), [AcquiredRecords(0, 0, 3), AcquiredRecords(1, 1, 1)]),
        ("acknowledge", ("a", ack((0, 0, RELEASE))), E.NONE),
    ], [(1, 1, AQ, 1, "a")], (1, 1)),
    ("an acknowledgement of records another member holds is refused, nothing changes", [
        ("acquire", ("a", [(0, 4)], 500, 0), [AcquiredRecords(0, 4, 1)]),
        ("acknowledge", ("b", ack((0, 4, ACCEPT))), E.INVALID_RECORD_STATE),
    ], [(0, 4, AQ, 1, "a")], (0, 4)),
    ("acknowledging twice is refused", [
        ("acquire", ("a", [(0, 4)], 500, 0), [AcquiredRecords(0, 4, 1)]),
        ("acknowledge", ("a", ack((2, 3, ACCEPT))), E.NONE),
        ("acknowledge", ("a", ack((0, 4, ACCEPT))), E.INVALID_RECORD_STATE),
    ], [(0, 1, AQ, 1, "a"), (2, 3, AK, 1, None), (4, 4, AQ, 1, "a")], (0, 4)),
    ("an acknowledgement outside the in-flight records is refused", [
        ("acquire", ("a", [(0, 4)], 500, 0), [AcquiredRecords(0, 4, 1)]),
        ("acknowledge", ("a", ack((3, 7, ACCEPT))), E.INVALID_RECORD_STATE),
    ], [(0, 4, AQ, 1, "a")], (0, 4)),
    ("a malformed acknowledgement is an invalid request", [
        ("acquire", ("a", [(0, 4)], 500, 0), [AcquiredRecords(0, 4, 1)]),
        ("acknowledge", ("a", ack((0, 4, [ACCEPT, ACCEPT]))), E.INVALID_REQUEST),
        ("acknowledge", ("a", ack((0, 4, 9))), E.INVALID_REQUEST),
        ("acknowledge", ("a", ack((4, 0, ACCEPT))), E.INVALID_REQUEST),
    ], [(0, 4, AQ, 1, "a")], (0, 4)),
    ("a lock that expires makes records available again", [
        ("acquire", ("a", [(0, 4)], 500, 0), [AcquiredRecords(0, 4, 1)]),
        ("acquire", ("a", [(5, 9)], 500, 500), [AcquiredRecords(5, 9, 1)]),
        ("earliest_lock_expiry", (), LOCK),
        ("expire_locks", (LOCK - 1,), 0),
        ("expire_locks", (LOCK,), 5),
        ("acknowledge", ("a", ack((0, 4, ACCEPT))), E.INVALID_RECORD_STATE),
        ("acquire", ("b", [(0, 4), (5, 9)], 500, LOCK), [AcquiredRecords(0, 4, 2)]),
    ], [(0, 4, AQ, 2, "b"), (5, 9, AQ, 1, "a")], (0, 9)),
    ("a lock expiring at the delivery count limit archives", [
        ("acquire", ("a", [(0, 4)], 500, 0), [AcquiredRecords(0, 4, 1)]),
        ("expire_locks", (LOCK,), 5),
        ("acquire", ("a", [(0, 4)], 500, LOCK), [AcquiredRecords(0, 4, 2)]),
        ("expire_locks", (2 * LOCK,), 5),
        ("acquire", ("a", [(0, 4)], 500, 2 * LOCK), [AcquiredRecords(0, 4, 3)]),
        ("expire_locks", (3 * LOCK,), 5),
    ], [], (5, 4)),
    ("a member that leaves releases what it holds", [
        ("acquire", ("a", [(0, 4)], 500, 0), [AcquiredRecords(0, 4, 1)]),
        ("acquire", ("b", [(5, 9)], 500, 0), [AcquiredRecords(5, 9, 1)]),
        ("release_member", ("a",), 5),
    ], [(0, 4, AV, 1, None), (5, 9, AQ, 1, "b")], (0, 9)),
    ("the log start offset archives what is below it", [
        ("acquire", ("a", [(0, 9)], 500, 0), [AcquiredRecords(0, 9, 1)]),
        ("update_log_start_offset", (4,), None),
    ], [(4, 9, AQ, 1, "a")], (4, 9)),
    ("the log start offset past everything in flight", [
        ("acquire", ("a", [(0, 9)], 500, 0), [AcquiredRecords(0, 9, 1)]),
        ("update_log_start_offset", (20,), None),
        ("next_fetch_offset", (), 20),
    ], [], (20, 19)),
    ("the log start offset below the start changes nothing", [
        ("acquire", ("a", [(5, 9)], 500, 0), [AcquiredRecords(5, 9, 1)]),
        ("update_log_start_offset", (2,), None),
    ], [(5, 9, AQ, 1, "a")], (5, 9)),
    ("batches starting before the start offset are clipped", [
        ("acquire", ("a", [(0, 9)], 500, 0), [AcquiredRecords(5, 9, 1)]),
    ], [(5, 9, AQ, 1, "a")], (5, 9)),
    ("a read past a hole in the log archives the hole", [
        ("acquire", ("a", [(5, 6)], 500, 0), [AcquiredRecords(5, 6, 1)]),
        ("acquire", ("a", [(10, 12)], 500, 0), [AcquiredRecords(10, 12, 1)]),
    ], [(5, 6, AQ, 1, "a"), (7, 9, AR, 0, None), (10, 12, AQ, 1, "a")], (5, 12)),
    ("neighbours in the same state merge", [
        ("acquire", ("a", [(0, 4)], 500, 0), [AcquiredRecords(0, 4, 1)]),
        ("acknowledge", ("a", ack((1, 1, ACCEPT))), E.NONE),
        ("acknowledge", ("a", ack((2, 2, ACCEPT))), E.NONE),
    ], [(0, 0, AQ, 1, "a"), (1, 2, AK, 1, None), (3, 4, AQ, 1, "a")], (0, 4)),
]


# cases that need another start offset or record-lock limit than new()'s
SETUP = {
    "acquire stops at max record locks": {"locks": 15},
    "nothing acquired at the lock limit until the start moves": {"locks": 15},
    "the log start offset below the start changes nothing": {"start": 5},
    "batches starting before the start offset are clipped": {"start": 5},
    "a read past a hole in the log archives the hole": {"start": 5},
}


@pytest.mark.parametrize("name, steps, ranges, bounds", CASES, ids=[c[0] for c in CASES])
def test_transitions(name, steps, ranges, bounds):
    sp = new(**SETUP.get(name, {}))
    for op, args, expected in steps:
        assert getattr(sp, op)(*args) == expected, (op, args)
    assert view(sp) == ranges
    assert (sp.start_offset, sp.end_offset) == bounds


def test_many_acknowledgements_keep_few_ranges():
    """Records acknowledged one by one in order keep the state at one range, not one per record."""
    sp = new(locks=10000)
    assert sp.acquire("a", [(0, 9999)], 100000, 0) == [AcquiredRecords(0, 9999, 1)]
    for offset in range(0, 9999, 2):
        assert sp.acknowledge("a", ack((offset + 1, offset + 1, ACCEPT))) == E.NONE
        assert len(sp.ranges) <= 3
        assert sp.acknowledge("a", ack((offset, offset, ACCEPT))) == E.NONE
        assert len(sp.ranges) <= 1
    assert (sp.start_offset, sp.ranges) == (10000, [])


def test_state_of():
    sp = new()
    sp.acquire("a", [(0, 4)], 500, 0)
    sp.acknowledge("a", ack((1, 1, RELEASE)))
    assert sp.state_of(0) == (AQ, 1, "a")
    assert sp.state_of(1) == (AV, 1, None)
    assert sp.state_of(9) is None
    assert sp.can_acquire()


def test_archive_acquired_takes_offsets_out_of_the_answer():
    sp = new()
    acquired = sp.acquire("a", [(0, 9)], 500, 0)
    assert sp.archive_acquired("a", [(2, 3), (7, 9)], acquired) == [
        AcquiredRecords(0, 1, 1), AcquiredRecords(4, 6, 1)]
    assert view(sp) == [(0, 1, AQ, 1, "a"), (2, 3, AR, 1, None), (4, 6, AQ, 1, "a"), (7, 9, AR, 1, None)]


def test_aborted_transactions_are_found_in_a_read():
    """A producer's transactional batches from its aborted transaction's first offset up to its ABORT marker;
    a committed transaction and plain batches are not touched."""
    txn = {"producer_epoch": 0, "is_transactional": True}
    data = b"".join([
        build_batch([(None, b"plain")], base_offset=0),
        build_batch([(None, b"a1"), (None, b"a2")], base_offset=1, producer_id=7, **txn),
        build_batch([(None, b"c1")], base_offset=3, producer_id=8, **txn),
        build_control_batch(ControlRecordType.ABORT, producer_id=7, producer_epoch=0, base_offset=4),
        build_control_batch(ControlRecordType.COMMIT, producer_id=8, producer_epoch=0, base_offset=5),
        build_batch([(None, b"a3")], base_offset=6, producer_id=7, **txn),
    ])
    result = FetchResult([], 0, 7, data)
    spans = read_batch_spans(result)
    assert [(h.base_offset, h.last_offset) for h, _, _ in spans] == [(0, 0), (1, 2), (3, 3), (4, 4), (5, 5), (6, 6)]
    assert spans[-1][1] == len(data)
    aborted = [SimpleNamespace(producer_id=7, first_offset=1)]
    assert aborted_batches(result, spans, aborted) == [(1, 2)], "the batch after the marker is a new transaction"


def test_state_kept_by_the_share_coordinator_round_trips():
    sp = new()
    sp.acquire("a", [(0, 9)], 500, 0)
    sp.acknowledge("a", ack((0, 1, ACCEPT), (4, 4, REJECT), (5, 6, RELEASE)))
    kept = sp.persisted_batches()
    assert kept == [(2, 3, AV, 1), (4, 4, AR, 1), (5, 9, AV, 1)], "acquired is kept as available"
    back = SharePartition.from_state(sp.start_offset, kept)
    assert (back.start_offset, back.end_offset, back.next_fetch_offset()) == (2, 9, 2)
    assert back.acquire("b", [(0, 9)], 500, 0) == [AcquiredRecords(2, 3, 2), AcquiredRecords(5, 9, 2)]
    holes = SharePartition.from_state(10, [(8, 11, AK, 1), (14, 15, AR, 2)])
    assert view(holes) == [(12, 13, AV, 0, None), (14, 15, AR, 2, None)] and holes.start_offset == 12
