"""The explorer against plain real threads, on the same scenarios and the same bugs.

For each broken adapter of tests/quality/broken_explore.py and the library
scenario that exposes it: how many of N plain real-thread runs (OS scheduling,
real time, same connector stack and oracles) see the bug, and how long the
explorer takes to find it.

    python benchmarks/explorer_vs_threads.py            # 200 real-thread tries each
    python benchmarks/explorer_vs_threads.py --tries 50 --only NoTokenCheck
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "quality"))

import broken_explore as broken

from chunk_adapter.explore import (
    LIBRARY,
    DfsStrategy,
    PctStrategy,
    RandomStrategy,
    Strategy,
    explore,
)
from chunk_adapter.explore.engine.threads import run_threads

CASES: list[tuple[str, str, Any]] = [
    ("NoTokenCheck", "q5-cleanup-inflight-get", lambda: RandomStrategy(seed=0)),
    (
        "NoTokenCheck",
        "q5-cleanup-inflight-get-live",
        lambda: RandomStrategy(seed=0, executions=5000),
    ),
    ("SplitPoll", "q4-receiver-finished", lambda: PctStrategy(seed=0)),
    ("LostWakeup", "q7-stop-wakes-save", lambda: DfsStrategy(preemption_bound=2)),
    ("LostWakeup", "q1-save-snapshot-enqueue", lambda: PctStrategy(seed=0)),
    ("WaitNotInLoop", "q7-stop-idle", lambda: DfsStrategy(preemption_bound=2)),
    ("TwoSaveThreads", "q1-save-snapshot-enqueue", lambda: RandomStrategy(seed=0)),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tries", type=int, default=200, help="real-thread runs per case")
    parser.add_argument("--only", default=None, help="one broken adapter by class name")
    args = parser.parse_args()
    print(f"{'bug':16} {'scenario':30} {'real threads':>22} {'explorer':>40}")
    for name, scenario_name, make in CASES:
        if args.only and name != args.only:
            continue
        factory = broken.BROKEN[name]
        scenario = LIBRARY[scenario_name]
        start = time.perf_counter()
        seen = sum(not run_threads(scenario, factory=factory).ok for _ in range(args.tries))
        real = time.perf_counter() - start
        strategy: Strategy = make()
        report = explore(scenario, strategy, factory=factory)
        verdict = (
            f"found at execution {report.executions} in {report.seconds:.2f} s"
            if report.failure
            else f"NOT found in {report.executions} ({report.seconds:.1f} s)"
        )
        print(
            f"{name:16} {scenario_name:30} {seen:>4}/{args.tries} in {real:6.1f} s   "
            f"{verdict:>40}  [{strategy.describe()}]",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
