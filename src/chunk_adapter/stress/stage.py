"""The ``stress`` stage of ``chunk-adapter verify``: the stress scenarios, seeded."""

from __future__ import annotations

import time
from collections.abc import Iterator

from ..factory import AdapterFactory
from ..outcome import CheckResult, StageContext, rules_named_in

__all__ = ["run_stage"]


def run_stage(factory: AdapterFactory, ctx: StageContext) -> Iterator[CheckResult]:
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
            replay=f"chunk-adapter replay 'stress:{name}:{ctx.seed}' --adapter {ctx.adapter_spec}"
            if failed
            else None,
            seconds=time.monotonic() - start,
        )
        if failed:
            return
