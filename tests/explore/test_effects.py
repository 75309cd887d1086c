"""The effect-delaying strategy (``chunk_adapter.explore.strategies.effects``).

It holds an adapter thread just before a put, get or build while the scheduler calls
the adapter: the window between a thread's decision and its visible effect, which the
contract's rules about calls and effects (R16, R18, R6, R4) are about. Shown here: what it
chooses, that a seeded bug living in such a window is found by it within a few
executions where the reference passes, and that its schedules replay.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from chunk_adapter.adapter import ChunkAdapter  # noqa: E402
from chunk_adapter.explore.engine.execution import prepared  # noqa: E402
from chunk_adapter.explore.engine.simulate import run_world, sim_setup  # noqa: E402
from chunk_adapter.explore.runtime.tasks import TIME_PASSES  # noqa: E402
from chunk_adapter.explore.scenarios.scenario import Scenario, load, save, stop  # noqa: E402
from chunk_adapter.explore.strategies import EffectStrategy, ReplayStrategy  # noqa: E402
from chunk_adapter.explore.strategies.effects import LONGEST  # noqa: E402
from tests.quality.broken_explore import StopSkipsSaveJoin  # noqa: E402


def _started(seed: int = 0) -> EffectStrategy:
    strategy = EffectStrategy(seed=seed, executions=1)
    assert strategy.start_execution()
    return strategy


def test_a_thread_held_at_its_effect_waits_while_others_can_run() -> None:
    for seed in range(40):
        strategy = _started(seed)
        strategy.effect = True  # thread 2 is about to put
        first = strategy.next_task([0, 1, 2], 2)
        strategy.effect = False
        if first == 2:
            continue  # not held this time (half the time it is not)
        assert first in (0, 1)
        # held: never chosen while another thread can run, for its whole stretch
        for _ in range(LONGEST):
            assert strategy.next_task([0, 2], 0) == 0
            if 2 not in strategy._held:
                break
        # nothing else can run: the held thread goes on
        assert strategy.next_task([2], None) == 2
        return
    pytest.fail("no seed of 40 held the thread")


def test_a_held_thread_with_nothing_else_to_run_lets_time_pass() -> None:
    for seed in range(40):
        strategy = _started(seed)
        strategy.effect = True
        pick = strategy.next_task([2, TIME_PASSES], 2)
        if pick == TIME_PASSES:
            return  # held through the others' sleep, not run at once
        assert pick == 2
    pytest.fail("no seed of 40 let time pass for a held thread")


def test_each_execution_of_a_seed_is_the_same_alone() -> None:
    def picks(strategy: EffectStrategy) -> list[int]:
        out = []
        for step in range(200):
            strategy.effect = step % 3 == 0
            out.append(strategy.next_task([0, 1, 2, 3], out[-1] if out else None))
        return out

    whole = EffectStrategy(seed=7, executions=3)
    runs = []
    while whole.start_execution():
        runs.append(picks(whole))
    alone = EffectStrategy(seed=7, executions=3)
    alone.done = 2
    assert alone.start_execution()
    assert picks(alone) == runs[2]
    assert runs[0] != runs[1]  # executions differ from each other


# The window: the SAVE thread took the final and built it, stop() sets the flag and
# returns without joining it, and the put starts after: R18. The scheduler sleeps 1 ms
# after each call (the threads finish first), so only a thread held across that sleep
# (time passing at its effect point: ``preempt``) is still before its put at stop().
WORLD = Scenario(
    "world", (load("a"), save("a", 1), save("a", 2, True), stop()), think=0.001, preempt=0.01
)


@pytest.mark.rule("R18")
def test_a_put_held_across_stop_is_found_within_a_few_executions_and_replays() -> None:
    setup = sim_setup(StopSkipsSaveJoin, wall_timeout=10.0, max_steps=60_000)
    with prepared(setup):
        runs = run_world(WORLD, EffectStrategy(seed=0, executions=20), setup)
        failed = runs[-1]
        assert [f.rules for f in failed.failures] == [("R18",)], failed.failures
        assert failed.schedule.startswith("1e:")  # time passes at effect points on replay too
        again = run_world(WORLD, ReplayStrategy(failed.schedule), setup)[-1]
    assert [f.message for f in again.failures] == [f.message for f in failed.failures]


@pytest.mark.rule("R18")
def test_control_the_reference_passes_the_same_executions() -> None:
    setup = sim_setup(ChunkAdapter, wall_timeout=10.0, max_steps=60_000)
    with prepared(setup):
        runs = run_world(WORLD, EffectStrategy(seed=0, executions=40), setup)
    assert len(runs) == 40 and not runs[-1].failures, runs[-1].failures
