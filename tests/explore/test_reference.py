"""The explorer on the reference adapter: no schedule breaks the contract (issue 5).

Default tier: the done-when check — bounded DFS (preemption bound 2) over the
cleanup-vs-in-flight-get race *completes* with no violation — plus PCT and
random runs over the whole scenario library and Hypothesis-generated
scenarios with Hypothesis-drawn schedules. ``-m slow`` goes deeper: DFS to
completion over every library scenario, and many more examples.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings

from chunk_adapter.explore import (
    LIBRARY,
    DfsStrategy,
    DrawnStrategy,
    PctStrategy,
    RandomStrategy,
    Report,
    explore,
)
from chunk_adapter.explore.scenarios.generate import scenarios, schedules


def _ok(report: Report) -> None:
    assert report.ok, report.describe_failure()


@pytest.mark.slow  # a complete DFS (~35 s): CI stays under 15 minutes
@pytest.mark.rule("R16", "R12", "R14")
def test_dfs_completes_on_cleanup_vs_inflight_get() -> None:
    report = explore(LIBRARY["q5-cleanup-inflight-get"], DfsStrategy(preemption_bound=2))
    _ok(report)
    assert report.complete, f"DFS did not exhaust the bounded tree: {report.summary()}"
    assert report.executions > 1000  # the race needs two preemptions; all were tried
    print(report.summary())


@pytest.mark.rule("R3", "R5", "R6", "R9", "R11", "R13", "R14", "R15", "R16", "R17", "R18")
@pytest.mark.parametrize("name", list(LIBRARY))
def test_library_under_pct(name: str) -> None:
    _ok(explore(LIBRARY[name], PctStrategy(seed=0, depth=3, executions=60)))


@pytest.mark.rule("R3", "R5", "R6", "R9", "R11", "R13", "R14", "R15", "R16", "R17", "R18")
@pytest.mark.parametrize("name", list(LIBRARY))
def test_library_under_random(name: str) -> None:
    _ok(explore(LIBRARY[name], RandomStrategy(seed=0, executions=60)))


@pytest.mark.rule("R2", "R6", "R7", "R8", "R9", "R10", "R11", "R12", "R14", "R16", "R23")
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,  # the same 40 examples every run; the slow tier draws at random
    suppress_health_check=[HealthCheck.too_slow],
)
@given(scenario=scenarios(), choices=schedules())
def test_generated_scenarios_under_drawn_schedules(scenario: object, choices: list[int]) -> None:
    """A failure here shrinks to a minimal (scenario, schedule) pair."""
    _ok(explore(scenario, DrawnStrategy(choices)))  # type: ignore[arg-type]


@pytest.mark.rule("R2", "R6", "R9", "R11", "R14", "R16", "R23")
@settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(scenario=scenarios(topology="pipeline"), choices=schedules())
def test_generated_pipeline_scenarios_under_drawn_schedules(
    scenario: object, choices: list[int]
) -> None:
    """The same on a sender and a receiver (five threads)."""
    _ok(explore(scenario, DrawnStrategy(choices)))  # type: ignore[arg-type]


# ---------------------------------------------------------------- thorough (slow)
BUDGET = float(os.environ.get("CHUNK_ADAPTER_EXPLORE_BUDGET", "120"))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LIBRARY))
def test_library_dfs_thorough(name: str) -> None:
    report = explore(LIBRARY[name], DfsStrategy(preemption_bound=2), time_budget=BUDGET)
    _ok(report)
    print(report.summary())


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LIBRARY))
def test_library_pct_thorough(name: str) -> None:
    for seed in range(5):
        _ok(explore(LIBRARY[name], PctStrategy(seed=seed, depth=3, executions=400)))


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios(max_ops=9), choices=schedules(max_choices=120))
def test_generated_scenarios_thorough(scenario: object, choices: list[int]) -> None:
    _ok(explore(scenario, DrawnStrategy(choices)))  # type: ignore[arg-type]
