"""Purgatory and timing wheel: ordering-based tests on a hand-driven clock, plus one asyncio run."""

from __future__ import annotations

import asyncio
import random

import pytest

from kafka_compat.purgatory import (
    DelayedOperation,
    DelayedOperationPurgatory,
    SystemTimer,
    TimerTask,
    TimerTaskEntry,
    TimingWheel,
    _TaskCounter,
)


class FakeClock:
    def __init__(self, now: int = 0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class Op(DelayedOperation):
    """Completes when ``ready`` is set; records every callback in a shared journal."""

    def __init__(self, delay_ms: int, tag=None, journal: list | None = None) -> None:
        super().__init__(delay_ms)
        self.tag = tag
        self.ready = False
        self.journal = journal if journal is not None else []
        self.tries = 0
        self.completions = 0
        self.expirations = 0
        self.then = None  # optional callback run inside on_complete

    def try_complete(self) -> bool:
        self.tries += 1
        return self.force_complete() if self.ready else False

    def on_complete(self) -> None:
        self.completions += 1
        self.journal.append(("complete", self.tag))
        if self.then is not None:
            self.then(self)

    def on_expiration(self) -> None:
        self.expirations += 1
        self.journal.append(("expire", self.tag))


def make_purgatory(clock: FakeClock, purge_interval: int = 1000) -> DelayedOperationPurgatory:
    timer = SystemTimer("test", tick_ms=1, wheel_size=20, start_ms=clock.now, time_ms=clock)
    return DelayedOperationPurgatory("test", timer, purge_interval=purge_interval)


# -- TimingWheel -------------------------------------------------------------------


class Noop(TimerTask):
    def run(self) -> None:
        pass


def test_wheel_add_rejects_expired_and_builds_overflow_wheels_on_demand():
    offered = []
    wheel = TimingWheel(1, 20, 100, _TaskCounter(), offered.append)
    assert not wheel.add(TimerTaskEntry(Noop(0), 100))  # < current + tick: expired
    assert not wheel.add(TimerTaskEntry(Noop(0), 99))
    assert wheel.levels() == 1
    assert wheel.add(TimerTaskEntry(Noop(0), 101))
    assert wheel.add(TimerTaskEntry(Noop(0), 119))  # last slot of the base wheel
    assert wheel.levels() == 1
    assert wheel.add(TimerTaskEntry(Noop(0), 120))  # first time beyond: overflow level
    assert wheel.levels() == 2
    assert wheel.add(TimerTaskEntry(Noop(0), 100 + 20 * 20 * 20))
    assert wheel.levels() == 4
    # one bucket offered per distinct (bucket, expiration)
    assert sorted(b.expiration for b in offered) == [101, 119, 120, 8000]


def test_cancelled_entry_is_not_added_and_re_adding_a_task_moves_it():
    counter = _TaskCounter()
    wheel = TimingWheel(1, 20, 0, counter, lambda b: None)
    task = Noop(0)
    first = TimerTaskEntry(task, 5)
    assert wheel.add(first)
    second = TimerTaskEntry(task, 7)  # the task now belongs to the second entry
    assert first.cancelled and counter.value == 0
    assert not wheel.add(first)
    assert wheel.add(second) and counter.value == 1
    task.cancel()
    assert counter.value == 0 and task.is_cancelled


# -- expiration order --------------------------------------------------------------


def test_expiration_follows_deadlines_across_wheel_levels():
    rng = random.Random(20241025)
    clock = FakeClock(0)
    purgatory = make_purgatory(clock)
    journal: list = []
    deadlines = {}
    fixed = [1, 2, 19, 20, 21, 399, 400, 401, 7_999, 8_000, 8_001, 160_000, 160_001, 3_200_000]
    tag = 0

    def add_batch(delays):
        nonlocal tag
        for d in delays:
            op = Op(d, tag, journal)
            deadlines[tag] = clock.now + d
            assert not purgatory.try_complete_else_watch(op, [("k", tag % 3)])
            tag += 1

    delays = fixed + [rng.randrange(1, 500_000) for _ in range(300)]
    rng.shuffle(delays)
    add_batch(delays)
    clock.now = 7  # add a second batch after time moved on, with a part-advanced wheel
    purgatory.advance_clock()
    add_batch([rng.randrange(1, 50_000) for _ in range(100)] + fixed)

    seen = 0
    while seen < len(deadlines):
        clock.now += rng.choice([1, 3, 17, 250, 4_000, 60_000])
        purgatory.advance_clock()
        expired = [t for kind, t in journal if kind == "expire"]
        assert set(expired) == {t for t, dl in deadlines.items() if dl <= clock.now}
        seen = len(expired)
    order = [deadlines[t] for kind, t in journal if kind == "expire"]
    assert order == sorted(order)
    assert purgatory.delayed() == 0


def test_one_large_jump_still_expires_in_deadline_order():
    clock = FakeClock(1_000)
    purgatory = make_purgatory(clock)
    journal: list = []
    delays = [9_000_000, 5, 400, 20, 8_001, 1, 160_000, 21, 3]
    for i, d in enumerate(delays):
        purgatory.try_complete_else_watch(Op(d, d, journal), [i])
    clock.now += 10_000_000
    assert purgatory.advance_clock() == len(delays)
    assert [t for kind, t in journal if kind == "expire"] == sorted(delays)


def test_nothing_expires_one_ms_early():
    clock = FakeClock(0)
    purgatory = make_purgatory(clock)
    op = Op(401, "x")
    purgatory.try_complete_else_watch(op, ["k"])
    clock.now = 400
    purgatory.advance_clock()
    assert not op.is_completed
    clock.now = 401
    purgatory.advance_clock()
    assert op.is_completed and op.expirations == 1


# -- exactly once ------------------------------------------------------------------


def test_completed_by_check_then_deadline_passes_completes_once():
    clock = FakeClock()
    purgatory = make_purgatory(clock)
    op = Op(100, "a")
    assert not purgatory.try_complete_else_watch(op, ["p0"])
    assert purgatory.watched() == 1 and purgatory.delayed() == 1
    op.ready = True
    assert purgatory.check_and_complete("p0") == 1
    assert purgatory.delayed() == 0 and purgatory.watched() == 0
    clock.now = 1_000
    assert purgatory.advance_clock() == 0
    assert (op.completions, op.expirations) == (1, 0)


def test_expired_then_checked_completes_once_and_is_not_tried_again():
    clock = FakeClock()
    purgatory = make_purgatory(clock)
    op = Op(100, "a")
    purgatory.try_complete_else_watch(op, ["p0"])
    clock.now = 100
    assert purgatory.advance_clock() == 1
    tries = op.tries
    op.ready = True
    assert purgatory.check_and_complete("p0") == 0
    assert op.tries == tries
    assert (op.completions, op.expirations) == (1, 1)
    assert purgatory.watched() == 0


def test_completable_at_once_is_neither_watched_nor_timed():
    purgatory = make_purgatory(FakeClock())
    op = Op(100)
    op.ready = True
    assert purgatory.try_complete_else_watch(op, ["a", "b"])
    assert (purgatory.watched(), purgatory.delayed(), op.completions) == (0, 0, 1)


def test_empty_watch_keys_are_refused():
    with pytest.raises(ValueError):
        make_purgatory(FakeClock()).try_complete_else_watch(Op(1), [])


def test_op_watched_on_two_keys_lingers_on_the_other_until_checked():
    purgatory = make_purgatory(FakeClock())
    op = Op(100)
    purgatory.try_complete_else_watch(op, ["a", "b"])
    assert purgatory.watched() == 2
    op.ready = True
    assert purgatory.check_and_complete("a") == 1
    assert purgatory.watched() == 1 and purgatory.watch_keys() == 1
    assert purgatory.check_and_complete("b") == 0
    assert purgatory.watched() == 0 and purgatory.watch_keys() == 0
    assert op.completions == 1


def test_delay_zero_runs_on_next_advance_not_inside_add():
    clock = FakeClock(50)
    purgatory = make_purgatory(clock)
    op = Op(0, "now")
    purgatory.try_complete_else_watch(op, ["k"])
    assert not op.is_completed  # the caller of add() is never re-entered
    assert purgatory.advance_clock() == 1
    assert op.expirations == 1


def test_cancel_for_key_stops_watching_without_completing():
    clock = FakeClock()
    purgatory = make_purgatory(clock)
    ops = [Op(10, i) for i in range(3)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["gone"])
    assert purgatory.cancel_for_key("gone") == ops
    assert purgatory.watched() == 0 and purgatory.delayed() == 0
    clock.now = 100
    assert purgatory.advance_clock() == 0
    assert all(op.completions == 0 for op in ops)
    assert purgatory.cancel_for_key("gone") == []


def test_a_failing_expiration_does_not_stop_the_others(caplog):
    clock = FakeClock()
    purgatory = make_purgatory(clock)
    bad, good = Op(5, "bad"), Op(6, "good")

    def boom(_):
        raise RuntimeError("boom")

    bad.then = boom
    purgatory.try_complete_else_watch(bad, ["k"])
    purgatory.try_complete_else_watch(good, ["k"])
    clock.now = 10
    purgatory.advance_clock()
    assert good.expirations == 1 and bad.completions == 1
    assert "boom" in caplog.text


# -- re-entrancy -------------------------------------------------------------------


def test_completion_that_adds_to_the_same_key_keeps_the_new_op():
    purgatory = make_purgatory(FakeClock())
    first = Op(100, "first")
    follow = Op(100, "follow")
    first.then = lambda _: purgatory.try_complete_else_watch(follow, ["k"])
    purgatory.try_complete_else_watch(first, ["k"])
    first.ready = True
    assert purgatory.check_and_complete("k") == 1
    assert not follow.is_completed and purgatory.watched() == 1
    follow.ready = True
    assert purgatory.check_and_complete("k") == 1
    assert (first.completions, follow.completions) == (1, 1)


def test_nested_check_on_the_same_key_completes_each_op_once():
    purgatory = make_purgatory(FakeClock())
    ops = [Op(100, i) for i in range(5)]
    nested = []
    ops[0].then = lambda _: nested.append(purgatory.check_and_complete("k"))
    for op in ops:
        purgatory.try_complete_else_watch(op, ["k"])
        op.ready = True
    outer = purgatory.check_and_complete("k")
    assert nested == [4] and outer == 1
    assert [op.completions for op in ops] == [1] * 5
    assert purgatory.watched() == 0 and purgatory.delayed() == 0


def test_cancel_for_key_from_a_completion_stops_the_walk():
    purgatory = make_purgatory(FakeClock())
    ops = [Op(100, i) for i in range(3)]
    ops[0].then = lambda _: purgatory.cancel_for_key("k")
    for op in ops:
        purgatory.try_complete_else_watch(op, ["k"])
        op.ready = True
    assert purgatory.check_and_complete("k") == 1
    assert [op.completions for op in ops] == [1, 0, 0]


def test_expiration_that_adds_a_due_op_runs_it_in_the_same_advance():
    clock = FakeClock()
    purgatory = make_purgatory(clock)
    journal: list = []
    first = Op(5, "first", journal)
    second = Op(0, "second", journal)
    first.then = lambda _: purgatory.try_complete_else_watch(second, ["k2"])
    purgatory.try_complete_else_watch(first, ["k1"])
    clock.now = 5
    assert purgatory.advance_clock() == 2
    assert journal == [("complete", "first"), ("expire", "first"),
                       ("complete", "second"), ("expire", "second")]


def test_purge_inside_a_walk_does_not_lose_pending_ops():
    purgatory = make_purgatory(FakeClock(), purge_interval=2)
    done = [Op(100, f"d{i}") for i in range(4)]
    for op in done:  # completed via "x", lingering on "k"
        purgatory.try_complete_else_watch(op, ["k", "x"])
        op.ready = True
    purgatory.check_and_complete("x")
    trigger, pending = Op(100, "trigger"), Op(100, "pending")
    purgatory.try_complete_else_watch(trigger, ["k"])
    purgatory.try_complete_else_watch(pending, ["k"])
    extra = Op(100, "extra")
    trigger.then = lambda _: purgatory.try_complete_else_watch(extra, ["other"])  # triggers a purge
    trigger.ready = True
    assert purgatory.check_and_complete("k") == 1
    assert not pending.is_completed
    pending.ready = True
    assert purgatory.check_and_complete("k") == 1


# -- no leaks ----------------------------------------------------------------------


def test_100k_ops_on_two_keys_do_not_leak_watch_entries():
    clock = FakeClock()
    purge_interval = 1000
    purgatory = make_purgatory(clock, purge_interval=purge_interval)
    completed = 0
    high_water = 0

    class Counted(Op):
        def on_complete(self) -> None:
            nonlocal completed
            completed += 1
            assert not self.completions
            self.completions = 1

    for i in range(100_000):
        op = Counted(30_000)
        purgatory.try_complete_else_watch(op, [("fetch", i % 50), ("produce", i % 7)])
        op.ready = True
        purgatory.check_and_complete(("fetch", i % 50))
        if i % 97 == 0:
            high_water = max(high_water, purgatory.watched())
        if i % 1000 == 0:
            clock.now += 1
            purgatory.advance_clock()
    assert completed == 100_000
    # leftovers on the "produce" keys stay bounded by the purge interval
    assert high_water <= purge_interval + 2 + 7
    assert purgatory.delayed() == 0 and purgatory.timer.size() == 0
    purgatory.purge_completed()
    assert purgatory.watched() == 0 and purgatory.watch_keys() == 0


# -- asyncio -----------------------------------------------------------------------


def test_loop_fires_expirations_with_one_rearmed_handle():
    async def scenario():
        purgatory = DelayedOperationPurgatory("fetch")  # picks up the running loop
        timer = purgatory.timer
        fired = asyncio.Event()
        late, soon = Op(60_000, "late"), Op(5, "soon")
        soon.then = lambda _: fired.set()
        purgatory.try_complete_else_watch(late, ["p"])
        armed_for_late = timer.armed_at_ms
        purgatory.try_complete_else_watch(soon, ["p"])
        assert timer.armed_at_ms < armed_for_late  # re-armed for the earlier bucket
        assert timer.armed_at_ms == timer.next_expiration_ms()
        await asyncio.wait_for(fired.wait(), timeout=10)
        assert soon.expirations == 1 and not late.is_completed
        assert purgatory.delayed() == 1
        assert timer.armed_at_ms == timer.next_expiration_ms()  # re-armed for what is left
        purgatory.shutdown()
        assert timer.armed_at_ms is None

    asyncio.run(scenario())
