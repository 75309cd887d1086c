"""How often does ``chunk-adapter verify`` raise a false alarm on a CORRECT adapter?

Runs verify (ci profile unless told) on every adapter of the correct catalogue
(tests/quality/correct/catalogue.py) N times, P at once (a loaded CI machine),
and prints per adapter: the exit codes seen, the median and worst seconds, and
for every non-zero exit the first failing check's rules and evidence.

    python benchmarks/false_alarms.py --runs 10 --parallel 2
    python benchmarks/false_alarms.py --runs 3 --adapter tests.quality.correct.queue_fifo:make
    python benchmarks/false_alarms.py --runs 5 --max-seconds 20

Exit status: 0 when every run exited 0 (or 3 with --allow-inconclusive), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.quality.correct.catalogue import CORRECT  # noqa: E402


@dataclass
class Outcome:
    spec: str
    run: int
    returncode: int
    seconds: float
    finding: str  # "" for exit 0


def _finding(report: dict[str, Any] | None, stderr: str) -> str:
    """The first failing (else inconclusive) check: stage/name [rules] evidence."""
    checks = (report or {}).get("checks", [])
    for wanted in ("fail", "inconclusive"):
        for check in checks:
            if check.get("verdict") == wanted:
                evidence = " ".join(str(check.get("evidence", "")).split())
                rules = ",".join(check.get("rules", [])) or "no rule"
                return f"{wanted}: {check.get('stage')}/{check.get('name')} [{rules}] {evidence}"
    tail = [line for line in stderr.strip().splitlines() if line.strip()][-1:]
    return f"no failing check in the JSON report; stderr: {' '.join(tail)}"


def _verify_once(spec: str, run: int, extra: list[str], folder: Path, limit: float) -> Outcome:
    json_path = folder / f"{spec.replace(':', '.')}-{run}.json"
    command = [sys.executable, "-m", "chunk_adapter", "verify", "--adapter", spec,
               "--json", str(json_path), *extra]  # fmt: skip
    start = time.monotonic()
    try:
        proc = subprocess.run(
            command, cwd=REPO, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=limit, check=False,
        )  # fmt: skip
        returncode, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        returncode = -9
        stderr = (
            (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        )
        stderr += f"\nkilled after {limit:.0f} s"
    seconds = time.monotonic() - start
    if returncode == 0:
        return Outcome(spec, run, 0, seconds, "")
    try:
        report = json.loads(json_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        report = None
    return Outcome(spec, run, returncode, seconds, _finding(report, stderr))


def _short(spec: str) -> str:
    return spec.split(":")[0].removeprefix("tests.quality.correct.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="verifies per adapter (10)")
    parser.add_argument("--parallel", type=int, default=2, help="verifies at once (2)")
    parser.add_argument(
        "--adapter", action="append", metavar="SPEC",
        help="only this adapter (repeatable; default: the whole correct catalogue)",
    )  # fmt: skip
    parser.add_argument("--max-seconds", type=float, help="passed to verify (default: profile's)")
    parser.add_argument("--profile", default="ci", help="verify profile (ci)")
    parser.add_argument("--seed", type=int, default=0, help="verify --seed (0)")
    parser.add_argument(
        "--vary-seed", action="store_true",
        help="run i verifies with --seed SEED+i: each run another derandomized sample "
        "(a false alarm that one sample of worlds or schedules reaches shows in some)",
    )  # fmt: skip
    parser.add_argument(
        "--allow-inconclusive", action="store_true", help="exit 0 even when some run exited 3"
    )
    args = parser.parse_args(argv)
    specs = args.adapter or list(CORRECT)
    extra = ["--profile", args.profile]
    if args.max_seconds is not None:
        extra += ["--max-seconds", str(args.max_seconds)]
    budget = args.max_seconds or {"quick": 60.0, "ci": 150.0, "hunt": 1800.0}.get(args.profile, 150)
    limit = 3 * budget + 60.0

    def seed_of(run: int) -> int:
        return args.seed + run if args.vary_seed else args.seed

    # Run-major order: with --parallel 2, two different adapters verify at once.
    jobs = [(spec, run) for run in range(args.runs) for spec in specs]
    outcomes: list[Outcome] = []
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="false-alarms-") as tmp,
        ThreadPoolExecutor(max_workers=args.parallel) as pool,
    ):
        futures = [
            pool.submit(_verify_once, s, r, [*extra, "--seed", str(seed_of(r))], Path(tmp), limit)
            for s, r in jobs
        ]
        for future in futures:
            outcome = future.result()
            outcomes.append(outcome)
            print(
                f"[{len(outcomes)}/{len(jobs)}] {_short(outcome.spec)} run {outcome.run}: "
                f"exit {outcome.returncode} in {outcome.seconds:.1f} s"
                # A non-zero exit names its finding now: a long run stopped early keeps it.
                + (f": {outcome.finding[:400]}" if outcome.returncode else ""),
                file=sys.stderr,
                flush=True,
            )

    print(
        f"\nchunk-adapter verify --profile {args.profile} {' '.join(extra[2:])} --seed "
        f"{f'{args.seed}+run' if args.vary_seed else args.seed}: "
        f"{args.runs} run(s) per adapter, {args.parallel} at once, "
        f"{time.monotonic() - started:.0f} s in all\n"
    )
    print(f"{'adapter':<18} {'exit codes':<22} {'median s':>8} {'worst s':>8}")
    for spec in specs:
        mine = [o for o in outcomes if o.spec == spec]
        codes = Counter(o.returncode for o in mine)
        shown = " ".join(f"{code}x{count}" for code, count in sorted(codes.items()))
        seconds = [o.seconds for o in mine]
        print(
            f"{_short(spec):<18} {shown:<22} {statistics.median(seconds):>8.1f} "
            f"{max(seconds):>8.1f}"
        )
    findings = [o for o in outcomes if o.returncode != 0]
    if findings:
        print("\nnon-zero exits (first failing check of each):")
        for o in findings:
            print(f"  {_short(o.spec)} run {o.run} exit {o.returncode}: {o.finding[:400]}")
    ok = {0, 3} if args.allow_inconclusive else {0}
    return 0 if all(o.returncode in ok for o in outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
