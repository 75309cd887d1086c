"""Every stateful counterexample of the quality catalogue shrinks to at most 8 steps.

Each broken adapter of tests/quality/broken_stateful.py goes through the
stateful stage with the ci profile and the share of the ci budget the stage
gets in a full verify (about 95 s). The counterexample must be confirmed, be
at most :data:`MAX_STEPS` steps long and come as a pytest test with its
replay command. The step count and time of each are printed (run with -s).
"""

from __future__ import annotations

import time

import pytest

from chunk_adapter.factory import load_factory
from chunk_adapter.outcome import StageContext
from chunk_adapter.stateful.stage import run_stage
from tests.quality.broken_stateful import EXPECTED

MAX_STEPS = 8
SHARE = 95.0  # seconds: the stateful stage's share of the ci profile's 240 s


@pytest.mark.slow
@pytest.mark.timeout(SHARE + 120)
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_counterexample_is_short_and_pasteable(name: str) -> None:
    spec = f"tests.quality.broken_stateful:{name}"
    ctx = StageContext(
        spec, "ci", 0, SHARE, f"chunk-adapter verify --adapter {spec}",
        deadline=time.monotonic() + SHARE,
    )  # fmt: skip
    start = time.monotonic()
    (result,) = list(run_stage(load_factory(spec), ctx))
    took = time.monotonic() - start
    steps = [
        line.strip()
        for line in result.detail.splitlines()
        if line.startswith("        state.") and "teardown" not in line
    ]
    print(f"{name}: {result.verdict} {list(result.rules)} {len(steps)} steps in {took:.1f} s")
    assert result.verdict == "fail", result.evidence
    assert set(result.rules[:1]) & EXPECTED[name], result.rules
    assert 1 <= len(steps) <= MAX_STEPS, result.detail
    assert "def test_counterexample() -> None:" in result.detail
    assert result.replay is not None and result.replay.startswith(
        "chunk-adapter replay 'stateful:ci:steps."
    ), result.replay
