"""The stage functions themselves (imported only inside a worker process)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from ..factory import AdapterFactory
from .probes import run_probes
from .result import CheckResult, rules_named_in
from .stages import StageContext

__all__ = ["examples", "explore", "stateful", "stress"]


def examples(factory: AdapterFactory, ctx: StageContext) -> Iterator[CheckResult]:
    yield from run_probes(factory, f"{ctx.replay_prefix} --stage examples", ctx.announce)


def stateful(factory: AdapterFactory, ctx: StageContext) -> Iterator[CheckResult]:
    """The Hypothesis state machines under the profile's settings.

    First without shrinking, so a violation is known fast; then, within what is
    left of the stage's budget, again with shrinking for a minimal example
    (shrinking a liveness failure costs a full wait per try, and may not fit).
    """
    import threading

    from hypothesis import Phase, settings

    from ..profiles import current_profile, hypothesis_settings

    profile = current_profile(ctx.profile)
    name = (
        f"machines ({profile.name}: {profile.max_examples} examples x {profile.step_count} steps)"
    )
    ctx.announce(name)
    start = time.monotonic()
    full = hypothesis_settings(profile)
    search = settings(full, phases=[Phase.explicit, Phase.reuse, Phase.generate])
    found = _run_machines(factory, search, ctx)
    if found is None:
        yield CheckResult(
            "stateful", name, STATEFUL_RULES, "pass", f"{name}: no violation",
            seconds=time.monotonic() - start,
        )  # fmt: skip
        return
    shrunk: list[tuple[BaseException, str] | None] = []
    worker = threading.Thread(
        target=lambda: shrunk.append(_run_machines(factory, full, ctx)), daemon=True
    )
    worker.start()
    worker.join(max(0.0, ctx.seconds - (time.monotonic() - start) - 3.0))
    exc, printed = shrunk[0] if shrunk and shrunk[0] is not None else found
    if not shrunk:
        printed += "\n(shrinking did not finish within the stage's budget: steps not minimal)"
    text = str(exc)
    blob = _reproduce_blob(printed)
    yield CheckResult(
        "stateful",
        name,
        rules_named_in(text.splitlines()[0] if text else "") or rules_named_in(text),
        "fail",
        text.splitlines()[0] if text else repr(exc),
        detail=f"{text}\n{printed}",
        replay=(
            f"chunk-adapter replay 'stateful:{profile.name}:{blob}' --adapter {ctx.adapter_spec}"
            if blob
            else f"{ctx.replay_prefix} --stage stateful"
        ),
        seconds=time.monotonic() - start,
    )


def _run_machines(
    factory: AdapterFactory, hypothesis_settings: Any, ctx: StageContext
) -> tuple[BaseException, str] | None:
    """Run the machines once; the failure and what Hypothesis printed, or ``None``."""
    import contextlib
    import io

    from ..stateful import run_conformance

    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            run_conformance(
                factory, hypothesis_settings, reproduce=f"{ctx.replay_prefix} --stage stateful"
            )
    except Exception as exc:  # a violation (AssertionError) or the adapter raising
        # Hypothesis attaches the shrunk steps and the blob as notes to the exception.
        return exc, printed.getvalue() + "\n".join(getattr(exc, "__notes__", []))
    return None


# What the machines check (docs/stateful.md: not timing, not bad input).
STATEFUL_RULES = tuple(f"R{i}" for i in (2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 19, 23))


def _reproduce_blob(printed: str) -> str | None:
    """The blob of Hypothesis's ``@reproduce_failure('version', b'blob')`` line, if printed."""
    import re

    match = re.search(r"@reproduce_failure\('[^']+', b'([^']+)'\)", printed)
    return match.group(1) if match else None


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
            replay=f"chunk-adapter replay 'stress:{name}:{ctx.seed}' --adapter {ctx.adapter_spec}"
            if failed
            else None,
            seconds=time.monotonic() - start,
        )
        if failed:
            return


# Executions per library scenario and strategy, by profile: fixed counts, not
# time, so the same input gets the same verdict (a time cap only guards hangs).
EXPLORE_RUNS = {"quick": 25, "ci": 120, "hunt": 2000}
# Rules for explorer failures that are not oracle violations (those name theirs).
KIND_RULES = {"deadlock": "R20", "hang": "R18", "livelock": "R17", "crash": "R22"}


def explore(factory: AdapterFactory, ctx: StageContext) -> Iterator[CheckResult]:
    """Every library scenario under PCT and uniform random schedules, seeded.

    White-box when the factory takes ``runtime=``; otherwise the factory's
    module is explored in substitution mode (its ``threading``/``time`` names
    are replaced while it runs; see docs/explorer.md for the limits).
    """
    import importlib

    from ..explore import LIBRARY, PctStrategy, RandomStrategy
    from ..explore import explore as run_explore
    from ..factory import accepts_runtime

    substitute: tuple[ModuleType, ...] = ()
    if not accepts_runtime(factory):
        substitute = (importlib.import_module(factory.__module__),)
    runs = EXPLORE_RUNS.get(ctx.profile, EXPLORE_RUNS["ci"])
    budget = ctx.seconds / (2 * len(LIBRARY))
    for name, scenario in LIBRARY.items():
        for strategy in (
            PctStrategy(seed=ctx.seed, depth=3, executions=runs),
            RandomStrategy(seed=ctx.seed, executions=runs),
        ):
            label = f"{name} / {strategy.describe()}"
            ctx.announce(label)
            report = run_explore(
                scenario,
                strategy,
                factory=factory,
                substitute=substitute,
                time_budget=budget,
            )
            if report.failure is None:
                yield CheckResult(
                    "explore", label, _scenario_rules(scenario.question), "pass",
                    report.summary(), seconds=report.seconds,
                )  # fmt: skip
                continue
            failures = report.failure.failures
            text = " ".join(f.message for f in failures)
            rules = rules_named_in(text) or tuple(
                dict.fromkeys(KIND_RULES[f.kind] for f in failures if f.kind in KIND_RULES)
            )
            yield CheckResult(
                "explore",
                label,
                rules,
                "fail",
                f"[{failures[0].kind}] {failures[0].message.splitlines()[0]}",
                detail=report.describe_failure(),
                replay=(
                    f"chunk-adapter replay 'explore:{name}:{report.failure.schedule}' "
                    f"--adapter {ctx.adapter_spec}"
                ),
                seconds=report.seconds,
            )
            return


def _scenario_rules(question: str) -> tuple[str, ...]:
    """The rules a library scenario is about, from the key question it asks."""
    by_question = {
        "1": ("R3", "R4", "R5"),
        "2": ("R9", "R10"),
        "3": ("R6", "R7", "R8"),
        "4": ("R13", "R15"),
        "5": ("R16",),
        "6": ("R17",),
        "7": ("R18", "R20"),
    }
    return by_question.get(question.split(":", 1)[0], ("R14", "R17"))
