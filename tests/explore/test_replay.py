"""A schedule string replays its execution step for step (issue 5). Never skipped.

awslabs/shuttle switched its replay round-trip test off once, and replay broke.
These tests have no skip and no slow mark: every run of the suite proves that
the string printed with a failure reproduces that very execution.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunk_adapter.errors import InvalidValue
from chunk_adapter.explore import (
    LIBRARY,
    DfsStrategy,
    Execution,
    PctStrategy,
    RandomStrategy,
    Strategy,
    explore,
    replay,
)
from chunk_adapter.explore.engine.execution import Setup, run_once
from chunk_adapter.explore.runtime.tasks import TIME_PASSES
from chunk_adapter.explore.scenarios.worlds import schedules_for_worlds, worlds
from chunk_adapter.explore.strategies.schedule import (
    decode,
    encode,
    with_effect_points,
    with_race_points,
)
from chunk_adapter.factory import reference_factory
from tests.quality import broken_explore

_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def fingerprint(execution: Execution) -> tuple[Any, ...]:
    """Everything an execution did, in order: its trace, its history, its verdict (an
    object's address in a repr, such as a generator passed to ``save_async``, left out)."""
    trace = [(s.tid, s.time, _ADDRESS.sub("", s.label)) for s in execution.trace]
    history = [_ADDRESS.sub("", repr(r)) for r in execution.history.records()]
    # A poll_ready result holds fresh dicts; repr compares their contents.
    failures = [(f.kind, _ADDRESS.sub("", f.message)) for f in execution.failures]
    return (execution.schedule, trace, history, failures)


def executions(name: str, strategy: Strategy, count: int, factory: Any = None) -> list[Execution]:
    setup = Setup(factory=factory or reference_factory)
    from chunk_adapter.explore.engine.checks import default_checker, default_wrap

    setup.checker, setup.wrap = default_checker, default_wrap()
    out = []
    while len(out) < count and strategy.start_execution():
        out.append(run_once(LIBRARY[name], strategy, setup, every_step=strategy.every_step))
    return out


@pytest.mark.parametrize(
    "name",
    [
        "q5-cleanup-inflight-get",
        "q3-none-and-cancelled-final",
        "q7-stop-wakes-save",
        "pipeline/q5-cleanup-inflight-get",
        "pipeline/three-stage",
    ],
)
@pytest.mark.parametrize("make", [lambda: RandomStrategy(seed=3), lambda: PctStrategy(seed=3)])
def test_replay_reproduces_each_execution_step_for_step(name: str, make: Any) -> None:
    runs = executions(name, make(), 8)
    assert len({r.schedule for r in runs}) > 1, "the strategy produced only one schedule"
    for run in runs:
        again = replay(LIBRARY[name], run.schedule)
        assert fingerprint(again) == fingerprint(run), (
            f"replay of {run.schedule!r} on {name} diverged"
        )


def test_replay_reproduces_dfs_executions() -> None:
    runs = executions("q7-stop-wakes-save", DfsStrategy(preemption_bound=1), 25)
    for run in runs:
        assert fingerprint(replay(LIBRARY["q7-stop-wakes-save"], run.schedule)) == fingerprint(run)


@pytest.mark.rule("R16")
def test_a_failure_replays_to_the_same_failure_and_report() -> None:
    scenario = LIBRARY["q5-cleanup-inflight-get"]
    factory = broken_explore.NoTokenCheck
    report = explore(scenario, RandomStrategy(seed=0), factory=factory)
    assert report.failure is not None
    text = report.describe_failure()
    assert f"Replay string: {report.failure.schedule}" in text
    assert "python -m chunk_adapter.explore replay q5-cleanup-inflight-get" in text
    again = replay(scenario, report.failure.schedule, factory=factory)
    assert fingerprint(again) == fingerprint(report.failure)
    assert any(f.message.startswith("R16") for f in again.failures)


def test_failure_reports_go_to_new_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHUNK_ADAPTER_EXPLORE_DIR", str(tmp_path))
    paths = []
    for _ in range(2):
        report = explore(
            LIBRARY["q5-cleanup-inflight-get"],
            RandomStrategy(seed=0),
            factory=broken_explore.NoTokenCheck,
            save_failure=True,
        )
        assert report.failure is not None and report.saved_to is not None
        paths.append(Path(report.saved_to))
    assert paths[0] != paths[1] and all(p.parent == tmp_path for p in paths)
    assert f"Replay string: {report.failure.schedule}" in paths[1].read_text()


@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("t"), st.integers(0, 25)),
            st.tuples(st.just("t"), st.integers(26, 5_000)),  # a thread per timer round
            st.tuples(st.just("t"), st.just(TIME_PASSES)),
            st.tuples(st.just("r"), st.integers(0, 2**64 - 1)),
        )
    )
)
def test_schedule_strings_round_trip(decisions: list[tuple[str, int]]) -> None:
    text = encode(decisions)
    assert decode(text) == decisions
    assert text.startswith(f"1:{len(decisions)}:")
    assert not with_race_points(text)
    marked = encode(decisions, races=True)
    assert decode(marked) == decisions
    assert marked.startswith(f"1r:{len(decisions)}:") and with_race_points(marked)
    assert not with_effect_points(marked)
    effects = encode(decisions, effects=True)
    assert decode(effects) == decisions
    assert effects.startswith(f"1e:{len(decisions)}:") and with_effect_points(effects)
    assert not with_race_points(effects) and not with_effect_points(text)


def test_schedule_strings_are_short() -> None:
    assert encode([("t", 0)] * 40 + [("t", 2)] * 3 + [("t", 0)]) == "1:44:a40c3a"


def test_time_passing_is_never_read_as_a_thread() -> None:
    """The thousandth thread (an adapter that starts one per ``threading.Timer`` round gets
    there in a second of virtual time) and the choice that lets time pass are told apart:
    ``TIME_PASSES`` was 999, so that thread's turns read as "time passes"."""
    decisions = [("t", 999), ("t", TIME_PASSES), ("t", TIME_PASSES), ("t", 1000)]
    text = encode(decisions)
    assert text == "1:4:{999}_2{1000}"
    assert decode(text) == decisions
    assert TIME_PASSES > 10**9  # no execution starts that many threads


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("a3b", "not a version-1 schedule"),
        ("1:5:a3b", "declares 5 decisions but holds 4"),
        ("1:2:a?", "bad schedule body at character 1"),
        ("2:1:a", "not a version-1 schedule"),
        ("1x:1:a", "not a version-1 schedule"),
    ],
)
def test_malformed_schedule_strings_are_rejected_clearly(text: str, match: str) -> None:
    with pytest.raises(InvalidValue, match=match):
        decode(text)


def test_a_schedule_for_another_scenario_is_reported_as_diverged() -> None:
    run = executions("q5-cleanup-inflight-get", RandomStrategy(seed=1), 1)[0]
    other = replay(LIBRARY["q7-stop-wakes-save"], run.schedule)
    assert [f.kind for f in other.failures] == ["diverged"], other.failures
    assert "changed since the schedule was recorded" in other.failures[0].message


@pytest.mark.parametrize("kind", ["drawn", "pct", "random", "sections", "effects"])
@settings(max_examples=4, derandomize=True, deadline=None, database=None)
@given(world=worlds(), data=st.data())
def test_every_schedule_the_simulate_stage_draws_replays_step_for_step(
    kind: str, world: Any, data: st.DataObject
) -> None:
    """Every kind of schedule the ``simulate`` stage draws for a generated world (drawn
    preemptions, PCT, uniform random, sections, effects), run as the stage runs it
    (:func:`~chunk_adapter.explore.engine.simulate.strategy_for`), replays step for step,
    on an adapter with unlocked state another thread writes under a lock (race points:
    ``TwoSaveThreads``'s second SAVE thread) and on the reference: the stage confirms a
    failure by replaying its string. The section strategy's schedules once diverged
    wherever a race point had been a switch point, and ``verify`` called a found bug
    inconclusive. (Greenlets here: that a schedule replays the same on both runtimes is
    ``test_controlled_runtime``'s.)"""
    from chunk_adapter.explore.engine.execution import prepared
    from chunk_adapter.explore.engine.simulate import (
        replay_world,
        run_world,
        sim_setup,
        strategy_for,
    )

    picks = schedules_for_worlds().filter(lambda p: p[0] == kind)
    pick = data.draw(picks, label="pick")
    for factory in (broken_explore.TwoSaveThreads, reference_factory):
        setup = sim_setup(factory, wall_timeout=10.0, max_steps=20_000, runtime="greenlet")
        with prepared(setup):
            runs = run_world(world, strategy_for(pick, world), setup)
        for run in runs[-2:]:
            if any(f.kind == "too_long" for f in run.failures):
                continue  # cut at the step budget: a replay's budget is its own
            again = replay_world(world, run.schedule, factory, runtime="greenlet", max_steps=20_000)
            assert fingerprint(again) == fingerprint(run), (pick[:2], run.schedule)


def test_a_replay_that_diverges_is_not_a_verdict() -> None:
    """``chunk-adapter replay`` of a schedule recorded elsewhere (another scenario here; a
    string from an older version, an edited one) exits 3, not 1: the replay did not run as
    recorded, which says nothing about the adapter. The same string on its own scenario
    replays (0: the reference passes)."""
    import io

    from chunk_adapter.verify.replay import replay_string

    run = executions("q5-cleanup-inflight-get", RandomStrategy(seed=1), 1)[0]
    out = io.StringIO()
    spec = "chunk_adapter.factory:reference_factory"
    assert replay_string(f"explore:q7-stop-wakes-save:{run.schedule}", spec, out) == 3
    assert "diverged" in out.getvalue() and "not a verdict" in out.getvalue()
    assert replay_string(f"explore:q5-cleanup-inflight-get:{run.schedule}", spec, out) == 0
