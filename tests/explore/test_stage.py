"""The explore stage of ``verify``: pass, confirmed fail, or inconclusive — a red is a bug.

``run_stage`` is called in-process with a :class:`StageContext`, as the verify
worker calls it. A violation is reported only after its replay string failed
again the same way on fresh adapters; a thread or a block the explorer cannot
control, or a failure that does not replay, is *inconclusive* with the fix;
the deadline is kept, with the coverage said.
"""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from chunk_adapter.explore.stages.explore import run_stage  # noqa: E402
from chunk_adapter.factory import load_factory  # noqa: E402
from chunk_adapter.outcome import CheckResult, StageContext  # noqa: E402
from chunk_adapter.profiles import PROFILES  # noqa: E402
from chunk_adapter.verify.replay import replay_string  # noqa: E402


def stage(spec: str, seconds: float = 60.0, profile: str = "quick") -> list[CheckResult]:
    ctx = StageContext(
        spec, profile, 0, seconds, f"chunk-adapter verify --adapter {spec}",
        deadline=time.monotonic() + seconds,
    )  # fmt: skip
    return list(run_stage(load_factory(spec), ctx))


def verdicts(results: list[CheckResult]) -> set[str]:
    return {r.verdict for r in results}


@pytest.mark.rule("R16")
def test_a_violation_is_confirmed_by_replay_and_the_printed_command_replays_it() -> None:
    spec = "tests.quality.broken_explore:NoTokenCheck"
    sys.path.insert(0, str(ROOT / "tests" / "quality"))
    results = stage(spec)
    failed = [r for r in results if r.verdict == "fail"]
    assert len(failed) == 1 and results[-1] is failed[0], [(r.name, r.verdict) for r in results]
    fail = failed[0]
    # The stale value crosses the fence (R16); when the new registration also fetched
    # it, the oracles name the duplicate it makes (R15, R14), and the counterfactual
    # (every cleanup made once settled passes) names the fence first.
    assert fail.rules[0] == "R16", fail
    assert fail.confirmation == "replayed once on threads: failed again"
    assert fail.coverage.endswith("(stopped at the first failure)")  # a verdict: it failed
    assert fail.replay is not None and fail.replay.startswith("chunk-adapter replay 'explore:")
    string = fail.replay.split("'")[1]
    out = io.StringIO()
    assert replay_string(string, spec, out) == 1, out.getvalue()
    assert fail.evidence.split("] ", 1)[1].split(" (root R")[0] in out.getvalue()


def test_a_thread_the_explorer_cannot_control_makes_it_inconclusive() -> None:
    results = stage("tests.explore.shapes.uncontrolled:make_hidden")
    assert "fail" not in verdicts(results)
    first = next(r for r in results if r.verdict == "inconclusive")
    assert "[uncontrolled]" in first.evidence, first
    # the RECV loop the hidden thread runs: the shared one (tests/_adapters/plain.py's,
    # taken from tests.quality.plain_threading_adapter)
    assert "plain_threading_adapter._recv_loop" in first.evidence, first
    assert "--substitute" in first.evidence and "runtime=" in first.evidence
    assert first.coverage.endswith("(stopped at an execution it could not control)"), first
    assert results[-1].name == "scenarios not run", results[-1]


def test_a_block_on_a_real_primitive_makes_it_inconclusive_not_a_violation() -> None:
    results = stage("tests.explore.shapes.uncontrolled:make_real_gate", seconds=8.0)
    assert "fail" not in verdicts(results)
    first = next(r for r in results if r.verdict == "inconclusive")
    assert "did not come back to the explorer" in first.evidence, first


def test_a_factory_that_refuses_the_explorers_keywords_is_inconclusive_not_a_violation() -> None:
    results = stage("tests.explore.shapes.strict_options:make_refusing", seconds=8.0)
    assert "fail" not in verdicts(results), [(r.name, r.evidence) for r in results]
    first = next(r for r in results if r.verdict == "inconclusive")
    assert first.evidence.startswith("[factory] not a verdict on the adapter"), first
    assert "ValueError" in first.evidence and "runtime" in first.evidence, first


@pytest.mark.slow  # ~35 s; the default tier keeps the refusing factory and test_refused_keywords
def test_a_forwarding_factory_gets_only_the_keywords_its_constructor_takes() -> None:
    results = stage("tests.explore.shapes.strict_options:make_forwarding", seconds=60.0)
    assert "pass" in verdicts(results), results  # built, driven and judged
    undecided = [r for r in results if r.verdict != "pass"]
    # only the budget may leave scenarios undecided: never the factory, never a violation
    assert all(r.verdict == "inconclusive" for r in undecided), undecided
    assert all("time budget" in r.coverage or r.coverage.startswith("0 of") for r in undecided)


def test_a_failure_that_does_not_replay_is_inconclusive() -> None:
    from tests.explore.shapes import flaky

    flaky.DROPS[0] = 1  # the next non-final chunk any flaky adapter sends is dropped, once
    results = stage("tests.explore.shapes.flaky:make", seconds=10.0)
    assert "fail" not in verdicts(results), [(r.name, r.evidence) for r in results]
    odd = next(r for r in results if r.verdict == "inconclusive")
    assert "did not reproduce on replay" in odd.evidence, odd
    assert odd.confirmation == "replayed once on threads: did not fail the same way"
    assert odd.replay is not None and "explore:pipeline/q1-save-snapshot-enqueue:" in odd.replay
    rest = [r for r in results if r is not odd and r.verdict != "pass"]
    assert all("time budget" in r.coverage or r.coverage.startswith("0 of") for r in rest), rest


def test_the_deadline_is_kept_and_what_did_not_run_is_said() -> None:
    start = time.monotonic()
    results = stage("chunk_adapter.adapter:ChunkAdapter", seconds=4.0, profile="ci")
    took = time.monotonic() - start
    assert took < 4.0 + 1.5, f"the stage overran its 4 s by {took - 4.0:.1f} s"
    assert "fail" not in verdicts(results)
    assert results[-1].verdict == "inconclusive" and results[-1].name == "scenarios not run"
    assert results[-1].coverage.startswith("0 of ")
    assert "--max-seconds" in results[-1].evidence
    runs = PROFILES["ci"].explore_runs
    for r in results:
        if r.verdict == "pass":
            assert r.coverage == f"{runs} of {runs} executions", r
        elif r.name != "scenarios not run":
            assert r.coverage.endswith("executions (time budget)"), r


def test_the_reference_adapter_passes_every_scenario_run() -> None:
    results = stage("chunk_adapter.adapter:ChunkAdapter")
    assert verdicts(results) == {"pass"}, [(r.name, r.verdict, r.evidence) for r in results]
    runs = PROFILES["quick"].explore_runs
    assert all(r.coverage == f"{runs} of {runs} executions" for r in results)
    assert all("white-box" in r.evidence for r in results)


def test_a_run_that_spends_its_step_budget_stops_there_the_same_every_time() -> None:
    from chunk_adapter.explore.engine.explorer import explore
    from chunk_adapter.explore.scenarios.library import LIBRARY
    from chunk_adapter.explore.strategies import RandomStrategy

    scenario = LIBRARY["pipeline/q6-idle-polling"]  # ~1,000 switch points an execution
    whole = explore(scenario, RandomStrategy(seed=0, executions=6))
    assert whole.executions == 6 and not whole.out_of_steps
    per_execution = whole.steps / whole.executions
    cut = [
        explore(scenario, RandomStrategy(seed=0, executions=6), step_budget=int(2 * per_execution))
        for _ in range(2)
    ]
    # the budget is checked before each execution: it stops after the one that spent it
    assert cut[0].executions == cut[1].executions in (2, 3), [r.summary() for r in cut]
    assert all(r.out_of_steps and r.ok and r.steps >= 2 * per_execution - 1 for r in cut)


def test_a_stage_run_cut_by_its_step_budget_passes_and_says_how_far_it_went(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from chunk_adapter.explore.stages import explore as explore_stage

    monkeypatch.setattr(explore_stage, "STEPS_PER_EXECUTION", 20)  # below any execution's
    results = stage("chunk_adapter.adapter:ChunkAdapter")
    assert verdicts(results) == {"pass"}, [(r.name, r.verdict, r.evidence) for r in results]
    runs = PROFILES["quick"].explore_runs
    for r in results:
        done = int(r.coverage.split(" of ")[0])
        assert done < runs and "step budget" in r.coverage, r.coverage
