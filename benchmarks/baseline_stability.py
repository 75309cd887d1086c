"""Judge saved verify reports against a baseline file: is the baseline stable?

    python benchmarks/baseline_stability.py BASELINE.toml REPORT.json [REPORT.json ...]

Each REPORT is a ``verify --json`` file of a run with ``--baseline`` (or without);
its findings are judged again against BASELINE with this checkout's matching (so a
change of the matching is measured on the same runs), using the histories the run's
judge set aside (``baseline.set_aside`` in the report). One row per report: the
run's seed and exit code as judged now, the new root causes (each would fail the
gate), and the stale entries.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from chunk_adapter.outcome import CheckResult
from chunk_adapter.verify.baseline import load_baseline
from chunk_adapter.verify.report import VerifyReport


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    baseline = load_baseline(argv[0])
    clean = 0
    for path in argv[1:]:
        data = json.loads(Path(path).read_text())
        report = VerifyReport(
            data["adapter"], data["profile"], data["seed"], data["max_seconds"],
            [CheckResult.from_json(c) for c in data["checks"]], run_all=True,
            baseline=baseline,
        )  # fmt: skip
        report.accepted_seen = dict((data.get("baseline") or {}).get("set_aside") or {})
        judgement = report.judgement
        assert judgement is not None
        new = [f"{g.rule}: {g.cause}" for g in judgement.new]
        clean += not new
        print(f"{Path(path).name}: seed {report.seed} exit {report.exit_code}; "
              f"new {len(new)} {new}; stale {len(judgement.stale)}")  # fmt: skip
    print(f"{clean} of {len(argv) - 1} runs without a new root cause")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
