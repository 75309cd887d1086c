"""The stateful stage plans inside its deadline and confirms a finding before reporting it.

``run_stage`` is driven directly with a :class:`StageContext` whose deadline
is set by the test. A red must mean a bug: a slow adapter that runs out of
budget is ``inconclusive`` with its coverage, a finding is re-run from its
reproducer and is ``fail`` only if it fails again, with the same first rule.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest

from chunk_adapter.outcome import CheckResult, StageContext
from chunk_adapter.stateful import Budget, OutOfBudget, replay_example
from chunk_adapter.stateful.stage import run_stage
from tests.stateful import pipeline_adapters as pa

SPEC = "tests.stateful.pipeline_adapters:shared_state"


def _run(factory: Any, seconds: float, profile: str = "ci") -> tuple[list[CheckResult], float]:
    ctx = StageContext(
        SPEC, profile, 0, seconds, "chunk-adapter verify --adapter X",
        deadline=time.monotonic() + seconds,
    )  # fmt: skip
    start = time.monotonic()
    results = list(run_stage(factory, ctx))
    return results, time.monotonic() - start


class _NoSnapshot(pa.SharedStateAdapter):
    """Queues the caller's object itself, not a copy (R4)."""

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._running("save_async")
        with self._lock:
            self._fifo.append((request_id, obj, is_final))
            self._save_cond.notify()


def no_snapshot(connector: Any, **kwargs: Any) -> pa.SharedStateAdapter:
    return _NoSnapshot(connector, **kwargs)


class _OddWire(pa.SharedStateAdapter):
    """Puts ``{"data", "finished", "extra"}``: not the wire value (R2)."""

    def _put(self, request_id: str, value: dict[str, Any], is_final: bool) -> None:
        super()._put(request_id, {**value, "extra": 0}, is_final)


class _BrokenAtFirst:
    """A factory whose first *broken* adapters put a malformed wire value, the rest are
    correct: its finding does not reproduce."""

    def __init__(self, broken: int) -> None:
        self.left = broken
        self._lock = threading.Lock()

    def __call__(self, connector: Any, **kwargs: Any) -> pa.SharedStateAdapter:
        with self._lock:
            bad, self.left = self.left > 0, self.left - 1
        cls = _OddWire if bad else pa.SharedStateAdapter
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
    assert "budget" in result.evidence and "--max-seconds" in result.evidence
    assert took < 4.0, f"the stage took {took:.1f} s of its 4 s"


def test_a_pipeline_adapter_sharing_state_between_its_sides_passes() -> None:
    """vllm-omni's pattern: one record per request for both sides, wiped when the request
    ends. Correct in a pipeline (a loopback would wipe the registration awaiting the final)."""
    results, _ = _run(pa.shared_state, 120.0)
    assert [r.verdict for r in results] == ["pass"], results[0].detail if results else results
    assert results[0].coverage == "150 of 150 examples"


@pytest.mark.rule("R4")
def test_a_finding_is_re_run_from_its_reproducer_and_confirmed() -> None:
    results, _ = _run(no_snapshot, 60.0)
    (result,) = results
    assert result.verdict == "fail", result
    assert result.rules[0] == "R4", result.rules
    assert result.confirmation == "re-ran the shrunk example: failed again"
    assert result.replay is not None
    match = re.fullmatch(r"chunk-adapter replay 'stateful:ci:([^']+)' --adapter \S+", result.replay)
    assert match, result.replay
    assert "state." in result.detail, result.detail
    again, printed = replay_example(no_snapshot, match.group(1), profile="ci")
    assert again is not None and str(again).startswith("contract rules broken: R4"), printed


@pytest.mark.rule("R2")
def test_a_finding_that_does_not_reproduce_is_inconclusive() -> None:
    """Only the first example's adapters are broken: the re-run passes, so no red."""
    results, _ = _run(_BrokenAtFirst(broken=2), 60.0)
    (result,) = results
    assert result.verdict == "inconclusive", result
    assert result.evidence.startswith("did not reproduce:"), result.evidence
    assert "R2" in result.evidence and result.replay is not None


def test_the_budget_stops_new_work_and_keeps_a_reserve() -> None:
    now = time.monotonic()
    budget = Budget(now + 100.0, seconds=100.0, liveness=10.0)
    assert budget.reserve() == pytest.approx(12.0)  # liveness + margin, nothing slow yet
    budget.start_example()
    budget.example_passed()
    assert budget.done == 1 and not budget.aborted
    tight = Budget(now + 1.0, seconds=1.0, liveness=10.0)
    assert tight.reserve() == pytest.approx(0.3)  # at most 30 % of the share
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
