"""The stage functions themselves (imported only inside a worker process)."""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterator

from ..factory import AdapterFactory
from .probes import run_probes
from .result import CheckResult, rules_named_in
from .stages import StageContext

__all__ = ["examples", "explore", "stateful", "stress"]


def examples(factory: AdapterFactory, ctx: StageContext) -> Iterator[CheckResult]:
    yield from run_probes(factory, f"{ctx.replay_prefix} --stage examples", ctx.announce)


def stateful(factory: AdapterFactory, ctx: StageContext) -> list[CheckResult]:
    return [CheckResult("stateful", "machines", (), "skip", "not wired yet")]


def stress(factory: AdapterFactory, ctx: StageContext) -> Iterator[CheckResult]:
    """The stress scenarios (real threads, faults, blocked work, stop, pacing)."""
    from ..stress import scenarios

    for name, rules, run in scenarios(ctx.seed, quick=ctx.profile == "quick"):
        ctx.announce(name)
        start = time.monotonic()
        report = run(factory)
        # stats() counters are the reference adapter's operator API, not the
        # contract: a mismatch is shown, but it is not a violation here.
        failed = any(not f.startswith("stats") for f in report.failures)
        yield CheckResult(
            "stress",
            name,
            (rules_named_in(" ".join(report.rules)) or rules) if failed else rules,
            "fail" if failed else "pass",
            next(f for f in report.failures if not f.startswith("stats"))
            if failed
            else f"{name}: held" + "".join(f"; note: {f}" for f in report.failures),
            detail=report.describe(ctx.adapter_spec) if failed else "",
            replay=f"python -c {shlex.quote(report.python_call(ctx.adapter_spec))}"
            if failed
            else None,
            seconds=time.monotonic() - start,
        )
        if failed:
            return


def explore(factory: AdapterFactory, ctx: StageContext) -> list[CheckResult]:
    return [CheckResult("explore", "scenarios", (), "skip", "not wired yet")]
