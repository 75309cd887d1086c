"""The ``explore`` stage of ``chunk-adapter verify``: every library scenario, seeded."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

from ..factory import AdapterFactory
from ..outcome import CheckResult, StageContext, rules_named_in

__all__ = ["EXPLORE_RUNS", "run_stage"]


# Executions per library scenario and strategy, by profile: fixed counts, not
# time, so the same input gets the same verdict (a time cap only guards hangs).
EXPLORE_RUNS = {"quick": 25, "ci": 120, "hunt": 2000}
# Rules for explorer failures that are not oracle violations (those name theirs).
KIND_RULES = {"deadlock": "R20", "hang": "R18", "livelock": "R17", "crash": "R22"}


def run_stage(factory: AdapterFactory, ctx: StageContext) -> Iterator[CheckResult]:
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
