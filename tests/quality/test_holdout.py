"""The hold-out broken adapters (tests/quality/holdout): verify (ci) finds each with a rule
of its bug named first, but for the misses ``MISSED`` explains (xfail, strict: a find is
news). Their three correct twins are in the correct catalogue (test_correct_catalogue.py,
benchmarks/false_alarms.py). Slow tier: one whole verify per adapter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.quality.holdout import HOLDOUT, MISSED

ROOT = Path(__file__).resolve().parents[2]
BUDGET = 240.0  # the ci profile's --max-seconds


@pytest.mark.slow
@pytest.mark.timeout(BUDGET + 120)
@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(
            spec,
            id=spec.split(":")[0].rsplit(".", 1)[-1],
            marks=[pytest.mark.xfail(reason=MISSED[spec], strict=True)] if spec in MISSED else [],
        )
        for spec in sorted(HOLDOUT)
    ],
)
def test_verify_finds_the_hold_out_bug(spec: str, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "chunk_adapter", "verify", "--adapter", spec, "--json",
         str(report)],
        cwd=ROOT, capture_output=True, text=True, timeout=BUDGET + 60, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, f"exit {proc.returncode}, expected 1:\n{proc.stdout}"
    first = next(c for c in json.loads(report.read_text())["checks"] if c["verdict"] == "fail")
    assert first["rules"][:1] and first["rules"][0] in HOLDOUT[spec], (
        f"verify named {first['rules']} first ({first['stage']}/{first['name']}), expected "
        f"one of {sorted(HOLDOUT[spec])}:\n{proc.stdout}"
    )
