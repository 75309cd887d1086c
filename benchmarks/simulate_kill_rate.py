"""Kill rate of the ``simulate`` stage alone over tests/quality (issue 24's table).

Runs ``chunk-adapter verify --stage simulate`` (ci profile: derandomized, the same
worlds every run) on every broken adapter of ``test_verify_catalogue.CATALOGUE``
and of ``tests/quality/unnamed`` (``UNNAMED``), two at a time, and prints one row
each: exit code, whether a rule of the bug (or the liveness rule its loss shows
first as) comes first, time to verdict, and the shrunk world's scheduler ops.

    python benchmarks/simulate_kill_rate.py [--jobs 2] [--only SUBSTRING] [--seeds 0,1,2]
    python benchmarks/simulate_kill_rate.py --whole   # whole verify: every stage, in order

With several seeds each seed draws another derandomized sample of worlds; a row is
printed per adapter and seed, and a summary per seed and over all of them (a bug a
few of the worlds reach is found in some samples and missed in others: one sample
does not measure the engine).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.quality.test_verify_catalogue import CATALOGUE  # noqa: E402
from tests.quality.unnamed import UNNAMED  # noqa: E402

LIVENESS = {"R11", "R23"}


def run(spec: str, expected: set[str], seed: int, whole: bool = False) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        start = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "chunk_adapter", "verify", "--adapter", spec,
             *(() if whole else ("--stage", "simulate")), "--seed", str(seed),
             "--json", str(report)],
            cwd=ROOT, capture_output=True, text=True, check=False,
        )  # fmt: skip
        seconds = time.monotonic() - start
        rules: list[str] = []
        ops = None
        if report.exists():
            for check in json.loads(report.read_text())["checks"]:
                # whole verify: the first failing check (a stage that passed lists every
                # rule it covers); the stage alone: its one check
                if (check["verdict"] == "fail") if whole else (check["stage"] == "simulate"):
                    rules = check["rules"]
                    ops = (check.get("extra") or {}).get("scheduler_ops")
                    break
    right = bool(rules) and rules[0] in expected | LIVENESS
    return {"spec": spec, "seed": seed, "exit": proc.returncode, "rules": rules, "right": right,
            "seconds": round(seconds, 1), "ops": ops}  # fmt: skip


def _summary(label: str, chosen: list[dict[str, object]]) -> None:
    found = [r for r in chosen if r["exit"] == 1]
    right = [r for r in found if r["right"]]
    small = [r for r in found if isinstance(r["ops"], int) and r["ops"] <= 8]
    times = [float(str(r["seconds"])) for r in found]
    print(
        f"{label}: exit 1 on {len(found)}/{len(chosen)}, right rule first {len(right)}, "
        f"shrunk to <= 8 ops {len(small)}/{len(found)}, median time to verdict "
        f"{statistics.median(times) if times else float('nan'):.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", default="")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds (default 0)")
    parser.add_argument("--whole", action="store_true", help="whole verify, not the stage alone")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    cases = {f"tests.quality.{name}": rules for name, rules in CATALOGUE.items()}
    cases.update(UNNAMED)
    runs = [(k, v, seed) for seed in seeds for k, v in cases.items() if args.only in k]
    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda job: run(*job, whole=args.whole), runs))
    for group in ("tests.quality.unnamed.", "tests.quality.broken", "tests.quality.plain"):
        for row in rows:
            if str(row["spec"]).startswith(group):
                print(json.dumps(row))
    for label in ("catalogue", "unnamed"):
        for seed in [*seeds, None] if len(seeds) > 1 else seeds:
            chosen = [
                r for r in rows
                if ("unnamed" in str(r["spec"])) == (label == "unnamed")
                and (seed is None or r["seed"] == seed)
            ]  # fmt: skip
            if chosen:
                _summary(f"{label} seed {'all' if seed is None else seed}", chosen)


if __name__ == "__main__":
    main()
