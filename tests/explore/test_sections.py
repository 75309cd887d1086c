"""Atomicity-directed schedules (``strategies.sections``): a preemption between two
critical sections of one lock, for any lock, found where uniform random rarely looks.

The program is a toy, not an adapter: two threads each add one to a counter in two
critical sections of the same lock (read, then write), the shape of every "copy then
clear", "check then commit" split. A lost update needs a preemption exactly in the
gap and the other thread's whole operation before the first resumes.
"""

from __future__ import annotations

from typing import Any

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
