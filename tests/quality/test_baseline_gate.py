"""The baseline gate end to end, through the command line (the examples stage, so it is
quick; docs/quality.md has the whole-verify measurement): a baseline written on an adapter
with five bugs accepts them, fails the same adapter with a sixth bug naming only the
sixth, and calls the fixed bug's entries stale on the adapter with one fixed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUGS = "tests.quality.baseline_bugs"


def verify(tmp_path: Path, adapter: str, *flags: str) -> tuple[int, dict[str, Any]]:
    report = tmp_path / f"{adapter}.json"
    proc = subprocess.run(
        [sys.executable, "-m", "chunk_adapter", "verify", "-q", "--stage", "examples",
         "--adapter", f"{BUGS}:{adapter}", "--json", str(report), *flags],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert report.exists(), proc.stdout + proc.stderr
    return proc.returncode, json.loads(report.read_text())


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_baseline_accepts_the_known_fails_the_new_and_calls_the_fixed_stale(
    tmp_path: Path,
) -> None:
    baseline = str(tmp_path / "baseline.toml")
    code, written = verify(tmp_path, "five_bugs", "--write-baseline", baseline)
    assert code in (0, 3), written["groups"]  # every root cause it found is now accepted
    assert written["groups"] and all(g["status"] == "accepted" for g in written["groups"])
    code, six = verify(tmp_path, "six_bugs", "--baseline", baseline)
    new = [g for g in six["groups"] if g["status"] == "new"]
    assert code == 1 and new, six["groups"]
    # the sixth bug's save_async copies nothing (R4) and checks nothing (R21)
    assert {g["rule"] for g in new} <= {"R4", "R21"}, new
    code, four = verify(tmp_path, "four_bugs", "--baseline", baseline)
    stale = {s["rule"] for s in four["baseline"]["stale"]}
    # the fixed poll_ready's entries (its double hand-outs, R15/R14, and the worked
    # example's R4 reading of them) are not seen any more
    assert stale and stale <= {"R4", "R14", "R15"}, four["baseline"]
