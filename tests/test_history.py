"""The history checker finds each anomaly it promises, and nothing in a clean history."""
from __future__ import annotations

from kafka_compat.history import History, check


def clean(n: int = 6) -> History:
    """Producer p sends v0..v(n-1), acked at offsets 0.. of partition 0; consumer c reads them all."""
    h = History()
    for i in range(n):
        h.send("p", f"v{i}")
        h.ack(f"v{i}", 0, i)
    for i in range(n):
        h.read("c", 0, i, f"v{i}")
    return h


def test_clean_history_is_ok_also_with_rereads_and_unacked_writes(tmp_path):
    h = clean()
    h.read("c2", 0, 2, "v2")          # a second consumer, or a restart, reads again: not a duplicate
    h.send("p", "never-acked")        # an indefinite write that did not land is no anomaly
    h.fail("never-acked", "timed out")
    r = check(h)
    assert r.ok, r
    assert (r.acked, r.read) == (6, 7)
    h.dump(tmp_path / "h.jsonl")
    assert check(History.load(tmp_path / "h.jsonl")) == r


def test_lost_acknowledged_write():
    h = History()
    for i in range(4):
        h.send("p", f"v{i}")
        h.ack(f"v{i}", 0, i)
    for i in (0, 1, 3):
        h.read("c", 0, i, f"v{i}")
    r = check(h)
    assert r.lost == [("v2", 0, 2)] and not r.duplicates and not r.reordered
    # without read_all only what lies below a read offset counts: v3 unread would not be reported
    h2 = History()
    for i in range(3):
        h2.send("p", f"v{i}")
        h2.ack(f"v{i}", 0, i)
    h2.read("c", 0, 0, "v0")
    assert check(h2, read_all=False).lost == []
    assert [x[0] for x in check(h2).lost] == ["v1", "v2"]


def test_duplicate_and_offset_mismatch():
    h = clean(3)
    h.read("c", 0, 3, "v1")          # v1 stored a second time, at offset 3
    r = check(h)
    assert r.duplicates == [("v1", [(0, 1), (0, 3)])]
    assert not r.lost
    h = History()
    h.send("p", "a")
    h.ack("a", 0, 5)
    h.read("c", 0, 7, "a")
    r = check(h)
    assert r.offset_mismatch == [("a", (0, 5), (0, 7))] and not r.duplicates


def test_divergent_reads_of_one_offset():
    h = clean(2)
    h.send("q", "x")
    h.read("c2", 0, 1, "x")
    r = check(h)
    assert r.divergent == [(0, 1, ["v1", "x"])]


def test_reordering_within_a_partition():
    h = History()
    for i in range(3):
        h.send("p", f"v{i}")
    h.ack("v0", 0, 0)
    h.ack("v2", 0, 1)
    h.ack("v1", 0, 2)
    for o, v in ((0, "v0"), (1, "v2"), (2, "v1")):
        h.read("c", 0, o, v)
    r = check(h)
    assert r.reordered == [(0, "v2", "v1")]
    # two producers interleaved, each in its own order, is fine; so is another partition
    h = History()
    h.send("p", "p0")
    h.send("q", "q0")
    h.send("q", "q1")
    h.send("p", "p1")
    for o, v in enumerate(["q0", "p0", "p1", "q1"]):
        h.ack(v, 0, o)
        h.read("c", 0, o, v)
    assert check(h).ok


def test_reads_of_aborted_or_uncommitted_data():
    h = clean(2)
    h.send("t", "a1", txn="t1")
    h.ack("a1", 0, 2)
    h.abort("t1")
    h.send("t", "o1", txn="t2")      # never committed nor aborted
    h.ack("o1", 0, 4)
    h.send("t", "c1", txn="t3")
    h.ack("c1", 0, 6)
    h.commit("t3")
    for o, v in ((2, "a1"), (4, "o1"), (6, "c1")):
        h.read("c", 0, o, v)
    r = check(h)
    assert r.aborted_reads == [("a1", "t1", "c"), ("o1", "t2", "c")]
    assert not r.lost
    # an aborted value, or one of a transaction never committed, that nobody read is not lost
    h = clean(1)
    h.send("t", "gone", txn="t9")
    h.ack("gone", 0, 1)
    h.abort("t9")
    h.send("t", "open", txn="t10")
    h.ack("open", 0, 2)
    assert check(h).ok
    # a committed one is
    h.send("t", "kept", txn="t11")
    h.ack("kept", 0, 3)
    h.commit("t11")
    assert check(h).lost == [("kept", 0, 3)]


def test_phantom_value():
    h = clean(1)
    h.read("c", 0, 1, "nobody-sent-this")
    r = check(h)
    assert r.phantom == [(0, 1, "nobody-sent-this")]
    assert "phantom 1" in r.summary()


def test_an_acknowledgement_without_an_offset_checks_the_partition_only():
    """librdkafka acknowledges a batch whose answer it lost, once a later one is acknowledged, with no offset."""
    h = clean(3)
    h.send("p", "implicit")
    h.ack("implicit", 0, None)
    h.read("c", 0, 3, "implicit")
    assert check(h).ok and check(h, read_all=False).ok
    h.send("p", "elsewhere")
    h.ack("elsewhere", 0, None)
    h.read("c", 1, 0, "elsewhere")
    assert check(h).offset_mismatch == [("elsewhere", (0, None), (1, 0))]
    h.send("p", "unread")
    h.ack("unread", 0, None)
    assert check(h).lost == [("unread", 0, None)] and check(h, read_all=False).lost == []


def test_records_retention_deleted_before_anyone_read_them_are_unverified_not_lost():
    """A reader read 0..2 and stopped; retention then moved the log start to 6 and a second reader
    read 6..7: 3..5 are unverified. A record a reader passed over stays lost, deleted or not."""
    h = History()
    for i in range(8):
        h.send("p", f"v{i}")
        h.ack(f"v{i}", 0, i)
    for i in (0, 2):                 # v1 skipped by a reader that went on past it
        h.read("live", 0, i, f"v{i}")
    for i in (6, 7):
        h.read("final", 0, i, f"v{i}")
    h.send("p", "implied")           # acknowledged without an offset: it may lie in the hole
    h.ack("implied", 0, None)
    r = check(h, log_start={0: 6})
    assert [x[0] for x in r.unverified] == ["implied", "v3", "v4", "v5"]
    assert r.lost == [("v1", 0, 1)]
    assert not r.ok and "unverified 4" in r.summary()
    assert [x[0] for x in check(h).lost] == ["implied", "v1", "v3", "v4", "v5"]     # without log starts all are lost
