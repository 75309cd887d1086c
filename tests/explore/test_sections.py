"""Atomicity-directed schedules (``strategies.sections``): a preemption between two
critical sections of one lock, for any lock, found where uniform random rarely looks.

The program is a toy, not an adapter: two threads each add one to a counter in two
critical sections of the same lock (read, then write), the shape of every "copy then
clear", "check then commit" split. A lost update needs a preemption exactly in the
gap and the other thread's whole operation before the first resumes.
"""

from __future__ import annotations

from typing import Any

import pytest

from chunk_adapter.explore import RandomStrategy
from chunk_adapter.explore.runtime.primitives import ControlledRuntime
from chunk_adapter.explore.strategies import SectionStrategy, Strategy
from tests.explore._programs import every_execution

WORK = 20
"""Switch points of other work around each operation: where a uniform random schedule
spends most of its preemptions."""


def _split_increments(seen: list[int]) -> Any:
    def program(rt: ControlledRuntime) -> None:
        lock = rt.Lock()
        box = [0]
        done = rt.Event()

        def add() -> None:
            for _ in range(3):
                for _ in range(WORK):  # other work between operations: switch points
                    done.is_set()
                with lock:
                    value = box[0]
                with lock:
                    box[0] = value + 1

        worker = rt.start_thread(add, "worker")
        add()
        worker.join()
        done.set()
        seen.append(box[0])

    return program


def _lost_updates(strategy: Strategy) -> int:
    seen: list[int] = []
    controllers = every_execution(_split_increments(seen), strategy)
    assert all(not c.failures for c in controllers), [c.failures for c in controllers]
    return sum(1 for total in seen if total < 6)


def test_section_schedules_find_the_split_operation_more_often_than_uniform_random() -> None:
    directed = _lost_updates(SectionStrategy(seed=0, executions=40))
    uniform = _lost_updates(RandomStrategy(seed=0, executions=40))
    assert directed >= 30, f"only {directed} of 40 section schedules lost an update"
    assert directed > 2 * uniform, (directed, uniform)  # measured: 38 against 10


def test_without_a_gap_the_running_thread_mostly_keeps_running() -> None:
    strategy = SectionStrategy(seed=3, executions=1)
    assert strategy.start_execution()
    strategy.gap = False
    kept = sum(strategy.next_task([0, 1, 2], 1) == 1 for _ in range(400))
    assert kept >= 340  # a rare random switch (5 %), nothing more


def test_in_a_gap_it_switches_and_keeps_the_other_thread_running() -> None:
    strategy = SectionStrategy(seed=1, executions=1)
    assert strategy.start_execution()
    strategy.gap = True
    picks = [strategy.next_task([0, 1], 0) for _ in range(60)]
    first = picks.index(1)  # switched in the gap, sooner or later
    strategy.gap = False
    run = picks[first:]
    assert run[: min(len(run), 2)] == [1] * min(len(run), 2)  # and kept the other a while


def test_the_controller_says_when_a_thread_is_between_two_sections() -> None:
    gaps: list[bool] = []

    class Spy(RandomStrategy):
        watches_sections = True

        def next_task(self, runnable: Any, current: int | None) -> int:
            gaps.append(self.gap)
            return current if current in runnable else runnable[0]

    def program(rt: ControlledRuntime) -> None:
        lock = rt.Lock()

        def other() -> None:
            rt.sleep(10.0)

        rt.start_thread(other, "other")
        with lock:  # first section: not a gap (nothing released yet)
            pass
        with lock:  # second section: a gap
            pass

    every_execution(program, Spy(seed=0, executions=1))
    assert gaps.count(True) == 1, gaps


def _poll_race(preempt: float, factory: Any) -> Any:
    """``pipeline/q4-receiver-finished`` with every call taking up to 10 ms and no think
    time: the RECV thread sleeps through its get while the scheduler polls (timing seed 2:
    latencies under which its get ends inside the poll's window; seeds 2 to 5 of 0 to 5
    reach it with ``preempt``, none without)."""
    from dataclasses import replace

    from chunk_adapter.explore import LIBRARY, explore

    world = replace(LIBRARY["q4-receiver-finished"], latency=0.01, preempt=preempt, timing_seed=2)
    return explore(world, SectionStrategy(seed=0, executions=60), factory=factory)


@pytest.mark.rule("R14", "R15")
def test_a_thread_asleep_gets_into_the_gap_only_when_time_may_pass_there() -> None:
    """``Scenario.preempt``: a thread preempted between two sections may stay off the CPU
    while a timer fires, so a RECV thread asleep in its get commits inside ``poll_ready``'s
    copy-then-clear (``SplitPoll``, R14/R15). Without it virtual time moves only when no
    thread can run, and 60 section schedules never reach the gap. The reference adapter,
    whose ``poll_ready`` is one section, passes the same 60. The failing schedule, with its
    "time passes" choice (``_``), replays to the same failure."""
    from chunk_adapter.explore import replay
    from chunk_adapter.factory import reference_factory
    from tests.quality.broken_explore import SplitPoll

    split = lambda connector, **kw: SplitPoll(connector, **kw)  # noqa: E731
    assert _poll_race(0.0, split).failure is None
    report = _poll_race(0.01, split)
    assert report.failure is not None, report.summary()
    rules = [r for f in report.failure.failures for r in f.rules]
    assert {"R14", "R15"} & set(rules), report.describe_failure()
    schedule = report.failure.schedule
    assert "_" in schedule.split(":", 2)[2], schedule
    again = replay(report.failure.scenario, schedule, factory=split)
    assert [f.rules[:1] for f in again.failures] == [f.rules[:1] for f in report.failure.failures]
    assert _poll_race(0.01, reference_factory).failure is None


class _Box:
    """Shared state: ``n`` is written under a lock by one thread."""

    n = 0


def _reset_after_the_lock(rt: ControlledRuntime, lost: list[bool], pause: float = 0.0) -> None:
    """A lost update written in no shape of tests/quality: the scheduler reads a counter
    under the lock and zeroes it after releasing it; a worker's increment in between is
    lost (found in a third hold-out set: ``poll_ready`` counting its ready chunks). With
    *pause* the worker sleeps that long between its increments: a timer due, so the
    scheduler thread at its race point may be preempted ("time passes") and, still at
    that point, be offered the next choice alone."""
    from chunk_adapter.explore.runtime.watch import watch_state

    box, lock = _Box(), rt.Lock()
    assert watch_state(box, rt.ctl)

    def worker() -> None:
        for i in range(2):
            if i and pause:
                rt.sleep(pause)
            with lock:
                box.n += 1

    with lock:
        box.n = 0
    thread = rt.start_thread(worker, "worker")
    with lock:
        taken = box.n
    box.n = 0  # BUG: outside the lock
    thread.join()
    lost.append(taken + box.n < 2)


@pytest.mark.rule("R14", "R15")
@pytest.mark.parametrize("races", [False, True], ids=["without", "with"])
def test_a_write_to_lock_guarded_state_made_without_the_lock_is_a_race_point(
    races: bool,
) -> None:
    """Race points (``Controller.access``; on under the section strategy): touching, holding
    no lock, an attribute another task touched and some task wrote holding one is a
    switch point (and a gap). Without them the release and the unlocked write are one
    step, and no schedule can lose the increment: 300 uniform random executions each."""
    lost: list[bool] = []
    ctls = every_execution(
        lambda rt: _reset_after_the_lock(rt, lost), RandomStrategy(0, 300), races=races
    )
    points = [s.label for c in ctls for s in c.trace if s.label.startswith("unlocked")]
    if races:
        assert any(lost) and "unlocked write n" in points, (sum(lost), points[:3])
    else:
        assert not any(lost) and not points


@pytest.mark.rule("R14", "R15")
def test_a_schedule_found_at_race_points_replays_to_the_same_end() -> None:
    """A section strategy's schedule replays step for step: its string says race points
    were switch points (``1r:``), so the replay makes them switch points too, and a choice
    the strategy was asked for at a race point after "time passes" (one task offered) is
    a recorded decision. Before both, such schedules diverged on replay, and ``verify``
    reported a found bug as inconclusive (``TwoSaveThreads`` at simulate seed 1)."""
    from chunk_adapter.explore.strategies import ReplayStrategy
    from chunk_adapter.explore.strategies.schedule import encode
    from tests.explore._programs import run_program

    lost: list[bool] = []
    program = lambda rt: _reset_after_the_lock(rt, lost, pause=0.002)  # noqa: E731
    found = every_execution(program, SectionStrategy(seed=0, executions=200), early_timers=0.01)
    schedules = [encode(c.decisions, races=c.races) for c in found]
    assert all(s.startswith("1r:") for s in schedules), schedules[:1]
    assert any(lost) and not all(lost), sum(lost)
    first = list(lost)
    passes = [s for s in schedules if "_" in s.split(":", 2)[2]]
    assert passes, "no schedule let time pass at a race point"
    for i, schedule in enumerate(schedules):
        lost.clear()
        again = run_program(program, ReplayStrategy(schedule), early_timers=0.01)
        assert not again.failures, (schedule, [f.message for f in again.failures])
        assert lost == [first[i]], schedule
