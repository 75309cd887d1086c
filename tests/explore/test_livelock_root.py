"""A busy loop whose history already shows a violation reports that violation first: the
livelock is its consequence (a registration polled past its final, forever). Under a
verify baseline that accepts the violation, the livelock is set aside with it. So is an
execution cut at its step budget while time kept moving ("too long", no verdict by
itself): the violation its history shows is the verdict, or, accepted, it is set aside.

The adapter spins in its RECV thread (``broken_stress:busy_spinning_recv``, R17); the
checkers stand for oracles that do (or, accepted, do not) find a root in the history
the livelock left.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.explore import LIBRARY, RandomStrategy, explore
from chunk_adapter.explore.engine import execution as execution_module
from chunk_adapter.explore.engine.execution import Execution
from chunk_adapter.explore.runtime.controller import CHECKPOINT_EVERY
from chunk_adapter.explore.runtime.tasks import Failure
from chunk_adapter.oracles import Violation, accepted
from chunk_adapter.rules import R13
from tests.quality.broken_stress import busy_spinning_recv

SCENARIO = LIBRARY["q6-idle-polling"]
ROOT = Violation(R13, "get of 'r_0_2' after the get of 'r_0_1' returned the final chunk")


def kinds(
    checker: object, factory: Callable[..., Any] = busy_spinning_recv, max_steps: int = 50_000
) -> list[str] | None:
    report = explore(SCENARIO, RandomStrategy(seed=0, executions=3), factory=factory,
                     checker=checker, max_steps=max_steps)  # fmt: skip
    return None if report.failure is None else [f.kind for f in report.failure.failures]


def judge_root(execution: Execution) -> list[str]:
    """A checker that finds ROOT in every history, unless a baseline accepts it."""
    return [] if accepted.covers([ROOT]) else [str(ROOT)]


@pytest.fixture
def accepting_r13() -> Iterator[None]:
    accepted.install(accepted.Accepted.of([R13]))
    yield
    accepted.install(accepted.Accepted())


@pytest.mark.rule("R17")
def test_the_violation_a_livelocked_history_shows_comes_first() -> None:
    assert kinds(lambda execution: []) == ["livelock"]
    assert kinds(lambda execution: [str(ROOT)]) == ["violation", "livelock"]


@pytest.mark.rule("R17")
def test_a_livelock_whose_history_has_an_accepted_violation_is_set_aside(
    accepting_r13: None,
) -> None:
    assert kinds(judge_root) is None


# The reference adapter polling at its pace past a small step budget: time keeps moving,
# so the execution is "too long" (no verdict), not a livelock.
CUT = 300


@pytest.mark.rule("R13")
def test_a_long_execution_whose_history_shows_a_violation_is_that_violation() -> None:
    assert kinds(lambda execution: [], ChunkAdapter, CUT) == ["too long"]
    assert kinds(lambda execution: [str(ROOT)], ChunkAdapter, CUT) == ["violation"]


@pytest.mark.rule("R13")
def test_a_long_execution_whose_history_has_an_accepted_violation_is_set_aside(
    accepting_r13: None,
) -> None:
    assert kinds(judge_root, ChunkAdapter, CUT) is None


@pytest.mark.rule("R13")
def test_under_a_baseline_an_execution_is_cut_once_its_history_shows_an_accepted_root(
    accepting_r13: None,
) -> None:
    """Each execution of the spinning adapter would run to its 50,000-step budget; once
    the history so far shows a violation the baseline accepts, the rest decides nothing,
    so it ends at the next checkpoint and is set aside."""

    report = explore(SCENARIO, RandomStrategy(seed=0, executions=3), factory=busy_spinning_recv,
                     checker=judge_root)  # fmt: skip
    assert report.failure is None and report.executions == 3
    assert report.steps <= 3 * CHECKPOINT_EVERY, report.steps  # not 3 x 50,000


KEPT = Failure("violation", "R24: the receiver still holds 1000 closed requests", ("R24",))


@pytest.mark.rule("R24")
def test_what_else_a_history_with_an_accepted_violation_shows_is_set_aside_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The world judges R24 (and R17's count) after the oracles, on the premise that the
    history passed them: its closed requests' finals were put. Under a baseline a history
    showing an accepted violation passes them only by being set aside, and a cancelled
    final the accepted bug dropped keeps its cancel mark for good: that read as a new R24
    (five_bugs, seed 6, exit 1). Now the whole execution is set aside with it."""
    monkeypatch.setattr(execution_module, "retained_failures", lambda execution: [KEPT])
    assert kinds(lambda execution: [], ChunkAdapter, 50_000) == ["violation"]  # R24 alone
    accepted.install(accepted.Accepted.of([R13]))
    try:
        assert kinds(judge_root, ChunkAdapter, 50_000) is None
    finally:
        accepted.install(accepted.Accepted())
