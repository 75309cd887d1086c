"""The conformance suite as pytest tests: one test per verify stage.

Run it against any adapter with::

    pytest --adapter my_pkg.adapters:make_adapter --pyargs chunk_adapter.conformance

Each stage runs in its own worker process with a deadline (as ``chunk-adapter
verify`` does); a failing stage fails its test with the rule table, the shrunk
counterexample and the command that replays it. A stage that could not decide
(inconclusive) is reported as skipped with the reason, and the pytest run then
exits 3 unless something failed, as ``chunk-adapter verify`` does.
"""

from __future__ import annotations

import pytest

from .pytest_plugin import mark_inconclusive
from .verify.api import ContractViolation
from .verify.runner import PROFILES, verify
from .verify.stages import STAGES

__all__ = ["test_stage"]


@pytest.mark.parametrize("stage", [s.name for s in STAGES])
def test_stage(
    stage: str,
    adapter_spec: str,
    chunk_profile: str,
    chunk_seed: int,
    chunk_max_seconds: float | None,
    request: pytest.FixtureRequest,
) -> None:
    """The adapter passes this verify stage (rules named in the failure)."""
    share = next(s.share for s in STAGES if s.name == stage)
    report = verify(
        adapter_spec,
        profile=chunk_profile,
        max_seconds=chunk_max_seconds or PROFILES[chunk_profile] * min(share, 0.45),
        seed=chunk_seed,
        stages=[stage],
    )
    if report.failures:
        raise ContractViolation(report)
    if report.inconclusive:
        mark_inconclusive(request.config)
        first = report.inconclusive[0]
        pytest.skip(f"INCONCLUSIVE {first.stage}/{first.name}: {first.evidence}")
