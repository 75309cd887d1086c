"""An adapter that starts a thread per receive round, under the explorer.

``tests.quality.correct.sixth_pkg.timer_rounds`` (a correct design of the sixth hold-out
set) runs every receive round on a new ``threading.Timer``: polling every millisecond, an
execution starts thousands of threads. Two defects of the controller showed only there,
each a false verdict on a correct adapter: the thousandth thread's id was the value of
``TIME_PASSES`` (999), so its turns read as "time passes" (a recursion that hit Python's
limit, reported as an uncontrolled thread; with the recursion a loop, a livelock reported
as R17); and every step scanned every thread ever started (7x slower at 1,000 threads).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest

from chunk_adapter.explore.engine.execution import prepared
from chunk_adapter.explore.engine.simulate import run_world, sim_setup
from chunk_adapter.explore.scenarios.scenario import Scenario, load, pause, poll, save, settle
from chunk_adapter.explore.scenarios.worlds import PREEMPT
from chunk_adapter.explore.strategies import EffectStrategy, RandomStrategy, SectionStrategy
from chunk_adapter.factory import load_factory

TIMER_ROUNDS = "tests.quality.correct.sixth_pkg.timer_rounds:make"

WORLD = Scenario(
    "a thread per round",
    # a registration polled through a long idle (a round every 5 ms of virtual time: the
    # coarse timer), then its stream
    (load("a"), pause(12.0), save("a", [1]), save("a", [2], True), settle(), poll()),
    preempt=PREEMPT,  # time may pass for a preempted thread: TIME_PASSES is offered
    latency=0.001,
    settle_limit=30.0,
)


@pytest.mark.rule("R17", "R23")
@pytest.mark.parametrize(
    "make",
    [
        lambda: SectionStrategy(seed=0, executions=3),
        lambda: EffectStrategy(seed=0, executions=3),
        lambda: RandomStrategy(seed=0, executions=3),
    ],
)
def test_a_thread_per_timer_round_passes_past_a_thousand_threads(make: Any) -> None:
    """Over a thousand threads in one execution, under the strategies that may let time
    pass: no failure (the correct adapter keeps the contract), every round's thread ran."""
    setup = sim_setup(load_factory(TIMER_ROUNDS), wall_timeout=30.0, max_steps=400_000)
    with prepared(setup):
        runs = run_world(WORLD, make(), setup)
    assert len(runs) == 3
    for execution in runs:
        assert not execution.failures, [f.message for f in execution.failures]
        assert len(execution.task_names) > 1_000, len(execution.task_names)


def _cost_per_step(seconds_idle: float) -> tuple[float, int]:
    """Wall seconds per step of WORLD with *seconds_idle* of polling, and its threads."""
    setup = sim_setup(load_factory(TIMER_ROUNDS), wall_timeout=30.0, max_steps=900_000)
    world = replace(WORLD, ops=(load("a"), pause(seconds_idle), *WORLD.ops[2:]))
    with prepared(setup):
        start = time.perf_counter()
        [execution] = run_world(world, RandomStrategy(seed=0, executions=1), setup)
        took = time.perf_counter() - start
    assert not execution.failures, [f.message for f in execution.failures]
    return took / execution.steps, len(execution.task_names)


def test_finished_threads_cost_a_step_nothing() -> None:
    """A step's cost must not grow with the threads already gone: per step, a world of
    48 s of polling (~8,000 threads) against one of 2 s (~350), measured in the same run.
    Scanning every thread ever started made it ~10x (20 -> 300 us a step); now ~1.2x,
    asserted under 6x (5x the expected)."""
    short, few = _cost_per_step(2.0)
    long, many = _cost_per_step(48.0)
    assert many > 20 * few, (few, many)
    assert long < 6 * short, f"{long * 1e6:.1f} us a step against {short * 1e6:.1f}"
