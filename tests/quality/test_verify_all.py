"""``verify --all``: every check runs after violations; each bug is its own root cause.

The adapter has two independent bugs (tests/quality/broken_two_bugs.py): no
snapshot (R4) and no swap in ``poll_ready`` (R15). The default tier checks
that a stage keeps going under ``--all`` (the examples stage, in process);
the slow tier runs the real command line and expects both bugs among the
root causes, each with its reproducer, in the text and JSON reports.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from chunk_adapter.verify.probes import run_probes
from chunk_adapter.verify.stage_fns import examples_plan
from tests.quality.broken_two_bugs import ROOT_RULES, snapshot_and_swap

ROOT = Path(__file__).resolve().parents[2]
SPEC = "tests.quality.broken_two_bugs:snapshot_and_swap"
BUDGET = 240.0  # the ci profile's


@pytest.mark.rule("R4")
def test_the_examples_stage_stops_at_its_first_violation_unless_all() -> None:
    planned = [name if isinstance(name, str) else name[0] for name in examples_plan("ci")]
    first = list(run_probes(snapshot_and_swap, "x"))
    assert first[-1].verdict == "fail" and len(first) < len(planned), first
    every = list(run_probes(snapshot_and_swap, "x", keep_going=True))
    assert [r.name for r in every] == planned
    assert [r.verdict for r in every][: len(first)] == [r.verdict for r in first]


@pytest.mark.slow
@pytest.mark.timeout(BUDGET + 120)
@pytest.mark.rule("R4")
@pytest.mark.rule("R15")
def test_verify_all_reports_both_bugs_as_root_causes_through_the_cli(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "chunk_adapter", "verify", "--all", "--adapter", SPEC,
         "--json", str(report)],
        cwd=ROOT, capture_output=True, text=True, timeout=BUDGET + 60, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, f"exit {proc.returncode}:\n{proc.stdout}{proc.stderr}"
    data = json.loads(report.read_text())
    schema = json.loads(
        resources.files("chunk_adapter.verify").joinpath("report.schema.json").read_text()
    )
    jsonschema.validate(data, schema)
    assert data["all"] is True
    groups = data["groups"]
    roots = {g["rule"] for g in groups}
    for bug in ROOT_RULES:
        assert roots & bug, f"no root cause for {sorted(bug)} in {sorted(roots)}:\n{proc.stdout}"
    assert all(g["replay"] for g in groups), groups
    # every stage ran, past its first violation
    assert data["stages"] == ["examples", "simulate", "stress", "stateful", "explore"]
    stress = [c for c in data["checks"] if c["stage"] == "stress" and c["verdict"] != "skip"]
    assert len(stress) > 1 + next(i for i, c in enumerate(stress) if c["verdict"] == "fail")
    assert f"{len(groups)} root cause(s) (exit 1)" in proc.stdout
    assert proc.stdout.count("reproduce with: ") >= len(groups)
