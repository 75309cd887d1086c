"""Command line: ``python -m chunk_adapter.explore {list,run,replay}``.

    python -m chunk_adapter.explore list
    python -m chunk_adapter.explore run q5-cleanup-inflight-get --strategy dfs --bound 2
    python -m chunk_adapter.explore run q7-stop-idle --prove     # every trace, or a counterexample
    python -m chunk_adapter.explore run q5-cleanup-inflight-get-2 --strategy dpor --bound 2
    python -m chunk_adapter.explore replay q5-cleanup-inflight-get '1:9:a3b2c4' \\
        --adapter mypkg.adapter:make
    python -m chunk_adapter.explore run pipeline/q5-cleanup-inflight-get \\
        --adapter mypkg.adapter:Adapter --substitute mypkg.vendored

Adapters are controlled as ``chunk-adapter verify`` controls them: white-box
when they use the ``runtime=`` they are given, else every thread they start
through ``threading`` (``--substitute`` adds modules the explorer must watch).

Exit status 0: no failure (``--prove``: "verified: N traces, complete" when the
proof finished, else "not proved"); 1: a failure (printed with its trace and
replay string); 2: bad arguments.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from ..factory import REFERENCE, load_factory
from .engine.explorer import describe, explore, replay
from .engine.trace import format_trace
from .scenarios.library import LIBRARY, scenario
from .strategies import (
    DfsStrategy,
    DporStrategy,
    PctStrategy,
    ProofStrategy,
    RandomStrategy,
    Strategy,
)

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m chunk_adapter.explore",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the library scenarios and the question each one asks")
    for name in ("run", "replay"):
        p = sub.add_parser(name)
        p.add_argument("scenario", help="a library scenario name (see 'list')")
        if name == "replay":
            p.add_argument("schedule", help="the replay string from a failure report")
        else:
            p.add_argument("--strategy", choices=("dfs", "dpor", "pct", "random"), default="dfs")
            p.add_argument(
                "--prove",
                action="store_true",
                help="explore every Mazurkiewicz trace (DPOR, no preemption bound) and say "
                "'verified: N traces, complete', or show the counterexample",
            )
            p.add_argument(
                "--bound",
                type=int,
                default=None,
                help="preemption bound (dfs: 2 unless given; dpor: none unless given)",
            )
            p.add_argument("--seed", type=int, default=0, help="PCT/random seed")
            p.add_argument("--depth", type=int, default=3, help="PCT depth")
            p.add_argument("--executions", type=int, default=1000, help="PCT/random runs")
            p.add_argument("--budget", type=float, default=None, help="stop after S seconds")
        p.add_argument(
            "--runtime",
            choices=("auto", "greenlet", "thread"),
            default="auto",
            help="what carries the tasks: greenlets on one thread (fast), real threads, or "
            "auto (greenlets unless the adapter needs real threads); a schedule replays the "
            "same on both",
        )
        p.add_argument("--adapter", default=REFERENCE, help=f"factory spec (default {REFERENCE})")
        p.add_argument(
            "--substitute",
            action="append",
            default=[],
            metavar="MODULE",
            help="a module or package whose threads the explorer must also control",
        )
    return parser


def _strategy(args: argparse.Namespace) -> Strategy:
    if args.prove:
        return ProofStrategy()
    if args.strategy == "dpor":
        return DporStrategy(preemption_bound=args.bound)
    if args.strategy == "dfs":
        return DfsStrategy(preemption_bound=2 if args.bound is None else args.bound)
    if args.strategy == "pct":
        return PctStrategy(seed=args.seed, depth=args.depth, executions=args.executions)
    return RandomStrategy(seed=args.seed, executions=args.executions)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    bound = getattr(args, "bound", None)
    if bound is not None and bound < 0:
        parser.error(f"--bound is a number of preemptions, 0 or more; got {bound}")
    if bound is not None and getattr(args, "prove", False):
        parser.error(
            "--prove explores every trace, with no preemption bound: drop --bound, or use "
            f"--strategy dpor --bound {bound} for every trace within {bound} preemptions"
        )
    if args.command == "list":
        for name, sc in LIBRARY.items():
            print(f"{name:38} {sc.question}")
        return 0
    try:
        chosen = scenario(args.scenario)
        factory = load_factory(args.adapter)
        for name in args.substitute:
            importlib.import_module(name)
    except (KeyError, ValueError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    extra: dict[str, Any] = {
        "factory": factory,
        "substitute": tuple(args.substitute) or "auto",
        "runtime": args.runtime,
    }
    if args.command == "replay":
        execution = replay(chosen, args.schedule, **extra)
        if execution.ok:
            print(format_trace(execution.trace, execution.task_names))
            print(f"no failure: {execution.steps} steps, schedule {execution.schedule}")
            return 0
        print(describe(execution, "replay", 1, args.adapter))
        return 1
    report = explore(chosen, _strategy(args), time_budget=args.budget, **extra)
    print(report.describe_failure() if report.failure else report.summary())
    return 1 if report.failure else 0


if __name__ == "__main__":
    sys.exit(main())
