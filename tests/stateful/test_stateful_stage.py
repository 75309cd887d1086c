"""The stateful stage plans inside its deadline and confirms a finding before reporting it.

``run_stage`` is driven directly with a :class:`StageContext` whose deadline
is set by the test. A red must mean a bug: a slow adapter that runs out of
budget is ``inconclusive`` with its coverage, a finding is re-run from its
reproducer and is ``fail`` only if it fails again, with the same first rule.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis.errors import UnsatisfiedAssumption

from chunk_adapter.factory import REFERENCE, load_factory
from chunk_adapter.outcome import PASTE_BEGIN, PASTE_END, CheckResult, StageContext
from chunk_adapter.stateful import Budget, OutOfBudget
from chunk_adapter.stateful.budget import MARGIN, RESERVE_CAP, SHRINK_SHARE, Enough
from chunk_adapter.stateful.settle import step
from chunk_adapter.stateful.stage import NAME, run_stage
from tests.stateful import pipeline_adapters as pa

SPEC = "tests.stateful.pipeline_adapters:shared_state"
BROKEN = "tests.quality.broken_stateful:missing_snapshot"  # R4
ROOT = Path(__file__).resolve().parents[2]


def _run(
    factory: Any, seconds: float, profile: str = "ci", spec: str = SPEC
) -> tuple[list[CheckResult], float]:
    ctx = StageContext(
        spec, profile, 0, seconds, "chunk-adapter verify --adapter X",
        deadline=time.monotonic() + seconds,
    )  # fmt: skip
    start = time.monotonic()
    results = list(run_stage(factory, ctx))
    return results, time.monotonic() - start


class _BrokenAtFirst:
    """A factory whose first *broken* adapters put a malformed wire value, the rest are
    correct: its finding does not reproduce."""

    def __init__(self, broken: int) -> None:
        self.left = broken
        self._lock = threading.Lock()

    def __call__(self, connector: Any, **kwargs: Any) -> pa.SharedStateAdapter:
        with self._lock:
            bad, self.left = self.left > 0, self.left - 1
        cls = pa.OddWire if bad else pa.SharedStateAdapter
        return cls(connector, **kwargs)


@pytest.mark.rule("R23")
def test_a_slow_correct_adapter_out_of_budget_is_inconclusive_with_coverage() -> None:
    """Every get takes 2 ms (a remote store): correct, slow. Four seconds cannot run 150
    examples of it; the stage says how many it ran, and never fails."""
    results, took = _run(pa.slow_gets, 4.0)
    assert [r.verdict for r in results] == ["inconclusive"], results
    (result,) = results
    match = re.fullmatch(r"(\d+) of 150 examples", result.coverage)
    assert match and int(match.group(1)) < 150, result.coverage
    # Out of budget between examples, or at the deadline inside one: both say what to do.
    assert "budget" in result.evidence or "deadline" in result.evidence, result.evidence
    assert "--max-seconds" in result.evidence, result.evidence
    assert took < 4.0, f"the stage took {took:.1f} s of its 4 s"


@pytest.fixture(scope="module")
def passed() -> CheckResult:
    """vllm-omni's pattern: one record per request for both sides, wiped when the request
    ends. Correct in a pipeline (a loopback would wipe the registration awaiting the final)."""
    results, _ = _run(pa.shared_state, 120.0)
    assert [r.verdict for r in results] == ["pass"], results[0].detail if results else results
    return results[0]


@pytest.fixture(scope="module")
def failed() -> CheckResult:
    """A catalogue adapter without a snapshot (R4), under its own spec (the printed test
    imports it)."""
    results, _ = _run(load_factory(BROKEN), 60.0, spec=BROKEN)
    assert len(results) == 1, results
    return results[0]


def test_a_pipeline_adapter_sharing_state_between_its_sides_passes(passed: CheckResult) -> None:
    assert passed.coverage == "150 of 150 examples"


def test_the_check_name_is_the_same_in_a_passing_and_a_failing_run(
    passed: CheckResult, failed: CheckResult
) -> None:
    """JUnit history needs one stable name per check: never the settings or the rules."""
    assert passed.verdict == "pass" and failed.verdict == "fail"
    assert passed.name == failed.name == NAME == "machines"


@pytest.mark.rule("R4")
def test_a_finding_is_re_run_from_its_reproducer_and_confirmed(failed: CheckResult) -> None:
    result = failed
    assert result.verdict == "fail", result
    assert result.rules[0] == "R4", result.rules
    assert result.confirmation.startswith("re-ran the shrunk example: failed again")
    assert "; the reference adapter passed it right after" in result.confirmation
    assert result.replay is not None
    match = re.fullmatch(r"chunk-adapter replay 'stateful:ci:([^']+)' --adapter \S+", result.replay)
    assert match, result.replay
    assert "state." in result.detail, result.detail
    from chunk_adapter.stateful.minimize import decode, run_steps

    # The replay string holds the printed steps; they fail again with the full bound.
    steps = decode(match.group(1))
    assert [str(s) for s in steps] == _steps(result.detail)
    again = run_steps(load_factory(BROKEN), steps, liveness_timeout=10.0)
    assert again is not None and str(again).startswith("contract rules broken: R4"), again
    # and the replay command runs them: 1 while the bug is there, 0 on a correct adapter
    from chunk_adapter.verify.replay import replay_string

    string = f"stateful:ci:{match.group(1)}"
    out = io.StringIO()
    assert replay_string(string, BROKEN, out) == 1, out.getvalue()
    assert "contract rules broken: R4" in out.getvalue()
    assert replay_string(string, REFERENCE, io.StringIO()) == 0


def _steps(detail: str) -> list[str]:
    return [
        line.strip()
        for line in detail.splitlines()
        if line.startswith("        state.") and "teardown" not in line
    ]


def _printed_test(detail: str) -> str:
    """The file between the report's paste markers (printed unindented)."""
    lines = detail.splitlines()
    start = lines.index(f"{PASTE_BEGIN}test_counterexample.py -----")
    end = lines.index(PASTE_END, start)
    return "\n".join(lines[start + 1 : end]) + "\n"


def _pytest(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", *map(str, paths), "-q", "-rA", "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.rule("R4")
def test_the_printed_counterexample_is_a_short_pytest_test_that_fails_until_fixed(
    failed: CheckResult, tmp_path: Path
) -> None:
    """Pasted into a file it fails on the broken adapter and passes on the reference one."""
    steps = _steps(failed.detail)
    assert 1 <= len(steps) <= 8, failed.detail
    assert "steps not minimal" not in failed.detail
    code = _printed_test(failed.detail)
    module, _, attr = BROKEN.partition(":")
    assert f"from {module} import {attr} as factory" in code, code
    broken = tmp_path / "test_counterexample.py"
    broken.write_text(code)
    ref_module, _, ref_attr = REFERENCE.partition(":")
    fixed = tmp_path / "test_counterexample_fixed.py"
    fixed.write_text(
        code.replace(f"from {module} import {attr}", f"from {ref_module} import {ref_attr}")
    )
    proc = _pytest(broken, fixed)  # one interpreter for both: the default tier's time
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert re.search(r"FAILED \S*/test_counterexample\.py::test_counterexample", out), out
    assert re.search(r"PASSED \S*/test_counterexample_fixed\.py::test_counterexample", out), out
    assert "contract rules broken: R4" in out, out


@pytest.mark.rule("R2")
def test_a_finding_that_does_not_reproduce_is_inconclusive() -> None:
    """Only the first example's adapters are broken: the re-run passes, so no red."""
    results, _ = _run(_BrokenAtFirst(broken=2), 60.0)
    (result,) = results
    assert result.verdict == "inconclusive", result
    assert result.evidence.startswith("did not reproduce:"), result.evidence
    assert "R2" in result.evidence and result.replay is not None


def test_a_failure_the_reference_adapter_shares_is_inconclusive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A wrong model (a suite bug, or a machine too slow for a bound) fails every adapter:
    the finding reproduces on the adapter and then on the reference adapter, so it is
    not a verdict on the adapter (before, a confirmed red on a correct adapter)."""
    from chunk_adapter.model import ContractModel

    save = ContractModel.save

    def misremembered(self: ContractModel, request_id: str, snapshot: Any, final: bool) -> Any:
        return save(self, request_id, ("not", snapshot), final)

    monkeypatch.setattr(ContractModel, "save", misremembered)
    (result,) = _run(pa.shared_state, 60.0)[0]
    assert result.verdict == "inconclusive", result
    assert "not a verdict on the adapter: the reference adapter" in result.evidence
    # a wrong model is the suite's error, not only a loaded machine: the evidence says both
    assert "the suite judged wrongly" in result.evidence, result.evidence
    assert result.replay is not None


def test_the_budget_stops_new_work_and_keeps_a_reserve() -> None:
    now = time.monotonic()
    budget = Budget(now + 100.0, seconds=100.0, liveness=10.0)
    # liveness + margin + the shrinker's share, nothing slow yet
    assert budget.reserve() == pytest.approx(10.0 + MARGIN + SHRINK_SHARE * 100.0)
    budget.start_example()
    budget.example_passed()
    assert budget.done == 1 and not budget.aborted
    tight = Budget(now + 1.0, seconds=1.0, liveness=10.0)
    assert tight.reserve() == pytest.approx(RESERVE_CAP * 1.0)  # at most this share
    late = Budget(now - 1.0, seconds=10.0, liveness=1.0)
    with pytest.raises(OutOfBudget):
        late.start_example()
    assert late.aborted and late.started == 0
    finding = Budget(now + 100.0, seconds=100.0, liveness=10.0)
    finding.start_example()
    finding.record_failure(AssertionError("R9: gap"))
    finding.record_failure(AssertionError("R9: again"))  # once per example
    assert len(finding.findings) == 1 and finding.shrink_until is not None
    assert finding.limit() == finding.shrink_until


class _Steps:
    """The least a harness ``step`` needs: a budget and the failed mark."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.failed = False

    @step
    def rejects(self) -> None:
        raise UnsatisfiedAssumption  # reject(), what _unless_accepted does under a baseline

    @step
    def fails(self) -> None:
        raise AssertionError("R9: gap")


def test_a_rejected_step_is_not_recorded_as_a_failure() -> None:
    """Under a baseline a step sets its example aside with reject(); the budget must not
    keep that as a failing example (the stage reported it as "found reject(), but when
    the shrunk example was re-run it passed": an inconclusive nothing could reproduce)."""
    budget = Budget(time.monotonic() + 100.0, seconds=100.0, liveness=10.0)
    budget.start_example()
    steps = _Steps(budget)
    with pytest.raises(UnsatisfiedAssumption):
        steps.rejects()
    assert steps.failed and budget.findings == []
    with pytest.raises(AssertionError):
        steps.fails()
    assert [str(f.error) for f in budget.findings] == ["R9: gap"]


def test_examples_a_baseline_set_aside_count_toward_the_planned_ones() -> None:
    """Hypothesis does not count a rejected example, so under a baseline whose bugs show in
    most examples it searched on for 150 that were not, and the machines ran out of
    budget ("141 of 150 examples": inconclusive on every five-bug run). The budget ends
    the run once the planned examples ran, set-aside ones counted, and only then."""
    budget = Budget(time.monotonic() + 100.0, seconds=100.0, liveness=10.0, planned=3)
    budget.start_example()
    budget.example_passed()
    for _ in range(2):
        budget.start_example()
        budget.set_aside_example()
        budget.set_aside_example()  # once per example
    assert (budget.done, budget.set_aside) == (1, 2)
    with pytest.raises(Enough):
        budget.start_example()
    assert budget.enough and not budget.aborted
    plain = Budget(time.monotonic() + 100.0, seconds=100.0, liveness=10.0, planned=1)
    plain.start_example()
    plain.example_passed()
    plain.start_example()  # none set aside: Hypothesis ends the run itself, as before
    assert not plain.enough
