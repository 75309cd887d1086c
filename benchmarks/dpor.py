"""DFS (preemption bound 2) against DPOR, and the time to the first bug under each strategy.

Part 1, for each library scenario (the loopback forms; ``--pipelines`` adds the
``pipeline/`` ones) on the reference adapter: executions, seconds and whether
the exploration completed, under ``DfsStrategy(preemption_bound=2)``, under
``DporStrategy(preemption_bound=2)`` (the same schedules covered) and under
``DporStrategy()`` (no preemption bound), each cut at ``--budget`` seconds.

Part 2, for every race-only broken adapter of tests/quality/broken_explore.py
on the scenario that exposes it: the execution and the seconds at which PCT
(seed 0), random (seed 0), DFS (bound 2), DPOR (bound 2) and DPOR first fail, or "-" when the
budget ran out first. Part 3: executions per second of the controlled runtime
on one scenario under random schedules (the same run, every strategy's cost).
Part 4: each scenario of ``library.PROVE`` under ``ProofStrategy()`` (no
preemption bound) on the reference adapter: executions, traces, seconds and
whether the proof completed within ``--budget``. Part 5: the cleanup-race
variants (``q5-cleanup-inflight-get*``), DFS (bound 2), DPOR (bound 2) and DPOR each
run to the end (or ``--budget``), the ratios of their executions, and what the races DPOR
reversed had in common (by kind of shared object: which conflicts make its
branches).

    python benchmarks/dpor.py                       # 60 s per run
    python benchmarks/dpor.py --budget 20 --only q7-stop-idle
    python benchmarks/dpor.py --part 2
    python benchmarks/dpor.py --part 4              # the proofs verify's hunt profile runs
    python benchmarks/dpor.py --part 5 --budget 900 # the cleanup races to the end
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "quality"))

import broken_explore as broken

from chunk_adapter.explore import (
    LIBRARY,
    DfsStrategy,
    DporStrategy,
    PctStrategy,
    ProofStrategy,
    RandomStrategy,
    Report,
    Strategy,
    explore,
)

BUGS = broken.FOUND_BY
STRATEGIES: list[tuple[str, Callable[[], Strategy]]] = [
    ("PCT", lambda: PctStrategy(seed=0, executions=1_000_000)),
    ("random", lambda: RandomStrategy(seed=0, executions=1_000_000)),
    ("DFS pb=2", lambda: DfsStrategy(preemption_bound=2)),
    ("DPOR pb=2", lambda: DporStrategy(preemption_bound=2)),
    ("DPOR", DporStrategy),
]


def _cell(report: Report) -> str:
    state = "complete" if report.complete else ("FAILED" if report.failure else "cut")
    return f"{report.executions:>7} {report.seconds:7.1f} s {state:>8}"


def part1(budget: float, only: str | None, pipelines: bool) -> None:
    print(
        "| scenario | DFS pb=2: executions, s, complete? | DPOR pb=2: executions, s, "
        "complete? | DPOR: executions, s, complete? |"
    )
    print("|---|---|---|---|")
    for name, scenario in LIBRARY.items():
        if (only and name != only) or (name.startswith("pipeline/") and not pipelines):
            continue
        dfs = explore(scenario, DfsStrategy(preemption_bound=2), time_budget=budget)
        bounded = explore(scenario, DporStrategy(preemption_bound=2), time_budget=budget)
        dpor = explore(scenario, DporStrategy(), time_budget=budget)
        print(f"| `{name}` | {_cell(dfs)} | {_cell(bounded)} | {_cell(dpor)} |", flush=True)


def part2(budget: float) -> None:
    print("| broken adapter | scenario | " + " | ".join(n for n, _ in STRATEGIES) + " |")
    print("|---|---|" + "---|" * len(STRATEGIES))
    for adapter, name in BUGS:
        cells = []
        for _, make in STRATEGIES:
            report = explore(
                LIBRARY[name], make(), factory=broken.BROKEN[adapter], time_budget=budget
            )
            if report.failure is not None:
                cells.append(f"execution {report.executions}, {report.seconds:.2f} s")
            else:
                state = "complete, not found" if report.complete else "not found"
                cells.append(f"{state} ({report.executions}, {report.seconds:.0f} s)")
        print(f"| `{adapter}` | `{name}` | " + " | ".join(cells) + " |", flush=True)


def part3(runs: int) -> None:
    for name in ("q5-cleanup-inflight-get", "pipeline/q5-cleanup-inflight-get"):
        report = explore(LIBRARY[name], RandomStrategy(seed=0, executions=runs))
        print(f"{name}: {report.per_second:.0f} executions/s (random, {runs} executions)")


def part4(budget: float) -> None:
    from chunk_adapter.explore.scenarios.library import PROVE

    print("| scenario (`library.PROVE`) | executions | traces | seconds | verdict |")
    print("|---|---|---|---|---|")
    for name in PROVE:
        report = explore(LIBRARY[name], ProofStrategy(), time_budget=budget)
        print(
            f"| `{name}` | {report.executions} | {report.traces} | {report.seconds:.1f} | "
            f"{report.verdict} |",
            flush=True,
        )


class _CountingDpor(DporStrategy):
    """DPOR that counts, per set of shared-object kinds, the races that planned a branch."""

    def __init__(self) -> None:
        super().__init__()
        self.branches: Counter[str] = Counter()

    def _plan_reversal(self, i: int, j: int) -> None:
        node = self._nodes[i - 1]
        before = len(node.backtrack)
        super()._plan_reversal(i, j)
        if len(node.backtrack) == before:
            return
        a, b = self._events[i][1], self._events[j][1]
        shared = {
            _kind(k) for k, m in a.items() if k in b and (m == "w" or b[k] == "w" or m != b[k])
        }
        self.branches[" + ".join(sorted(shared)) or "(via a lock hand-off)"] += 1


def _kind(key: object) -> str:
    if isinstance(key, tuple) and key and key[0] == "attr":
        return "attribute"
    return str(key[0]) if isinstance(key, tuple) and key else str(key)


def _ratio(dfs: Report, other: Report) -> str:
    """DFS's executions over *other*'s; a cut run's count is a lower bound of what it needs."""
    sign = {(True, True): "", (False, True): "≥", (True, False): "≤"}
    bound = sign.get((dfs.complete, other.complete), "both cut: ")
    return f"{bound}{dfs.executions / other.executions:.1f}×"


def part5(budget: float) -> None:
    print(
        "| scenario | DFS pb=2: executions, s | DPOR pb=2: executions, s | ratio | "
        "DPOR: executions (traces), s | ratio |"
    )
    print("|---|---|---|---|---|---|")
    notes = []
    for name in LIBRARY:
        if not name.startswith("q5-cleanup-inflight-get"):
            continue
        dfs = explore(LIBRARY[name], DfsStrategy(preemption_bound=2), time_budget=budget)
        bounded = explore(LIBRARY[name], DporStrategy(preemption_bound=2), time_budget=budget)
        counting = _CountingDpor()
        dpor = explore(LIBRARY[name], counting, time_budget=budget)
        print(
            f"| `{name}` | {_cell(dfs)} | {_cell(bounded)} | {_ratio(dfs, bounded)} | "
            f"{dpor.executions} ({dpor.traces}) {dpor.seconds:.1f} s "
            f"{'complete' if dpor.complete else 'cut'} | {_ratio(dfs, dpor)} |",
            flush=True,
        )
        top = ", ".join(f"{k} {v}" for k, v in counting.branches.most_common(5))
        notes.append(f"{name}: branches planned by shared object: {top}")
    print("\n".join(notes))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per run")
    parser.add_argument("--only", default=None, help="one library scenario (part 1)")
    parser.add_argument("--pipelines", action="store_true", help="part 1: pipelines too")
    parser.add_argument("--part", type=int, choices=(1, 2, 3, 4, 5), default=None)
    parser.add_argument("--runs", type=int, default=300, help="part 3: executions")
    args = parser.parse_args()
    if args.part in (None, 1):
        part1(args.budget, args.only, args.pipelines)
    if args.part in (None, 2):
        part2(args.budget)
    if args.part in (None, 3):
        part3(args.runs)
    if args.part in (None, 4):
        part4(args.budget)
    if args.part == 5:
        part5(args.budget)
    return 0


if __name__ == "__main__":
    sys.exit(main())
