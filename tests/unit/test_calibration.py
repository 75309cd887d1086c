"""A confirmed failure the reference adapter shares judged the machine, not the adapter.

The examples and stress stages hold an adapter to a few tight time bounds (an
idle ``stop()``, a hand-off). On a machine too slow or loaded for a bound, a
correct adapter could fail it twice in a row and be reported as a violation.
So a confirmed failure is run once more on the reference adapter: failing
there the same way, it is *inconclusive*; passing there, the failure stands
and its confirmation says so. The bounds are made impossible here (0 s) to
stand for a machine that can meet none of them; a real bug still fails.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from chunk_adapter import ChunkAdapter
from chunk_adapter.factory import calibration_reference, load_factory
from chunk_adapter.outcome import CheckResult, StageContext
from chunk_adapter.stress import stopping
from chunk_adapter.stress.stage import run_stage
from chunk_adapter.verify import probes_handoff
from chunk_adapter.verify.probes import run_probes


class Subclassed(ChunkAdapter):
    """A correct adapter that is not the reference class itself."""


class Lax(ChunkAdapter):
    """Ignores a ``cancel_sender`` of a request id that is not a ``str`` (a seeded R21 bug:
    bad input must fail at the call)."""

    def cancel_sender(self, request_id: str) -> None:
        if isinstance(request_id, str):
            super().cancel_sender(request_id)


class SlowStop(ChunkAdapter):
    """``stop()`` lingers 0.4 s before stopping (a seeded R18 bug: idle must be well under
    0.1 s; the stress bound is 0.25 s)."""

    def stop(self, drain_timeout: float = 0.0) -> None:
        threading.Event().wait(0.4)
        super().stop(drain_timeout)


def _examples(factory: Any, check: str) -> CheckResult:
    (result,) = run_probes(factory, "verify", wants=lambda name: name == check)
    return result


def _stress(factory: Any, scenario: str) -> CheckResult:
    ctx = StageContext(
        "tests.unit.test_calibration:Subclassed", "ci", 0, 60.0, "chunk-adapter verify",
        deadline=time.monotonic() + 60.0, only=(scenario,),
    )  # fmt: skip
    (result,) = run_stage(factory, ctx)
    return result


def test_the_reference_is_never_compared_with_itself() -> None:
    assert calibration_reference(ChunkAdapter) is None
    assert calibration_reference(load_factory("chunk_adapter.adapter:ChunkAdapter")) is None
    assert calibration_reference(Subclassed) is not None


@pytest.mark.rule("R17")
def test_a_hand_off_bound_the_reference_misses_too_is_inconclusive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(probes_handoff, "HOP_BOUND", 0.0)
    result = _examples(Subclassed, "prompt hand-off")
    assert result.verdict == "inconclusive", result
    assert "the reference adapter, run on the same check right after" in result.evidence
    assert "The adapter's failure: R17: " in result.evidence


@pytest.mark.rule("R17")
def test_the_reference_itself_is_still_failed_by_a_bound_it_misses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(probes_handoff, "HOP_BOUND", 0.0)
    assert _examples(ChunkAdapter, "prompt hand-off").verdict == "fail"


@pytest.mark.rule("R21")
def test_a_real_bug_still_fails_and_says_the_reference_passed() -> None:
    result = _examples(Lax, "bad input")
    assert result.verdict == "fail", result
    assert result.rules[:1] == ("R21",)
    assert "the reference adapter passed it right after" in result.confirmation


@pytest.mark.rule("R18")
def test_a_stop_bound_the_reference_misses_too_is_inconclusive_in_stress(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(stopping, "FREE_STOP_BOUND", 0.0)
    result = _stress(Subclassed, "stop: idle")
    assert result.verdict == "inconclusive", result
    assert "not a verdict on the adapter" in result.evidence and "R18" in result.evidence
    assert result.confirmation.startswith("reproduced")
    monkeypatch.setattr(stopping, "FREE_STOP_BOUND", 0.25)
    assert _stress(Subclassed, "stop: idle").verdict == "pass"


@pytest.mark.rule("R18")
def test_a_slow_stop_fails_in_stress_with_a_reproducer_and_the_reference_passing() -> None:
    result = _stress(SlowStop, "stop: idle")
    assert result.verdict == "fail", result
    assert result.rules[:1] == ("R18",)
    assert result.replay is not None and "'stress:stop: idle:0'" in result.replay
    assert result.confirmation.endswith("the reference adapter passed it right after")
