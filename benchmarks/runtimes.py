"""Executions per second of the explorer on the greenlet and the thread runtime.

    python benchmarks/runtimes.py [--runs 5] [--executions 500] [--proofs]

For each scenario: ``RandomStrategy(seed=0)`` for ``--executions`` runs on each
runtime, ``--runs`` times, alternating runtimes so machine load falls on both
alike; the table gives the median executions/s of each and their ratio (the
speed-up of greenlets, measured in the same run on the same machine).
``--proofs`` adds every ``library.PROVE`` proof (``ProofStrategy``: every trace),
timed to its end.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from chunk_adapter.explore import LIBRARY, ProofStrategy, RandomStrategy, explore
from chunk_adapter.explore.scenarios.library import PROVE

RANDOM = (
    "q5-cleanup-inflight-get",
    "pipeline/q5-cleanup-inflight-get",
    "pipeline/three-stage",
    "q6-idle-polling",
)
RUNTIMES = ("thread", "greenlet")


def rate(name: str, runtime: str, executions: int, proof: bool) -> float:
    strategy = ProofStrategy() if proof else RandomStrategy(seed=0, executions=executions)
    start = time.perf_counter()
    report = explore(LIBRARY[name], strategy, runtime=runtime)
    seconds = time.perf_counter() - start
    if report.failure is not None:
        raise SystemExit(f"{name} failed on the {runtime} runtime:\n{report.describe_failure()}")
    return report.executions / seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--executions", type=int, default=500)
    parser.add_argument("--proofs", action="store_true")
    parser.add_argument("--only", default=None, help="one scenario")
    args = parser.parse_args()
    work = [(name, False) for name in RANDOM]
    if args.proofs:
        work += [(name, True) for name in PROVE]
    if args.only:
        work = [(n, p) for n, p in work if n == args.only]
    print(f"{'scenario':40} {'how':6} {'thread/s':>9} {'greenlet/s':>10} {'ratio':>6}")
    for name, proof in work:
        seen: dict[str, list[float]] = {r: [] for r in RUNTIMES}
        for _ in range(args.runs):
            for runtime in RUNTIMES:
                seen[runtime].append(rate(name, runtime, args.executions, proof))
        thread, green = (statistics.median(seen[r]) for r in RUNTIMES)
        how = "prove" if proof else "random"
        print(f"{name:40} {how:6} {thread:9.0f} {green:10.0f} {green / thread:6.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
