"""The root rule of a confirmed failure, asked of its counterfactual scripts.

:mod:`..scenarios.counterfactual` says why: an oracle names where a break shows; a
script that fails while the same script without a call's freedom passes every
execution of the same budget (or, where the contract says the change makes no
difference, never fails with the failure's rules) failed because of that call. Both stages that run
scripts (``explore``, ``simulate``) ask here after a failure is confirmed; the answer
only reorders the failure's rules (the counterfactual's first, the oracle's after
it) and adds a line saying what passed. A counterfactual that fails too, or that
cannot be run to the end of its budget, changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...factory import AdapterFactory
from ..engine.execution import prepared
from ..engine.explorer import explore
from ..engine.result import Execution, failure_rules
from ..engine.simulate import MAX_STEPS, NOT_A_VERDICT, run_world, sim_setup
from ..scenarios.counterfactual import COUNTERFACTUALS
from ..scenarios.scenario import Scenario
from ..strategies import RandomStrategy, Strategy

__all__ = ["WORLD_RUNS", "Passes", "Root", "in_explorer", "in_worlds", "root_of"]

Passes = Callable[[Scenario, "tuple[str, ...] | None"], "str | None"]
"""Runs a counterfactual script: how it passed ("60 of 60 executions under pct, none
failed"), or ``None`` when it failed or could not be run to its end. Given rules, only
an execution failing with one of them fails it (one failing otherwise is run past and
said); ``None``: every failure does."""


WORLD_RUNS = 20
"""Random schedules a counterfactual world runs under, and the world as found too: a
counterfactual that passes them says something only where the world fails in them."""


@dataclass(frozen=True)
class Root:
    """A failure's rules, root first, and what showed the root (empty: the oracle's)."""

    rules: tuple[str, ...]
    why: str = ""

    def evidence(self, found: str) -> str:
        """*found* (the oracle's first line), then what showed the root, if anything did."""
        return f"{found} ({self.why})" if self.why else found


class _Counts:
    """Which failing executions fail a counterfactual run (given *only*: those failing with
    one of its rules, or not judged, or with no rule), and the rules of those run past."""

    def __init__(self, only: tuple[str, ...] | None) -> None:
        self.only = only
        self.otherwise: dict[str, None] = {}

    def __call__(self, execution: Execution) -> bool:
        if self.only is None or any(f.kind in NOT_A_VERDICT for f in execution.failures):
            return True
        rules = failure_rules(execution.failures)
        if not rules or set(rules) & set(self.only):
            return True
        self.otherwise.update(dict.fromkeys(rules))
        return False

    def said(self, passed: str) -> str:
        """*passed* ("none failed") with what was asked and what failed otherwise."""
        if self.only is not None:
            passed += f" with {', '.join(self.only)}"
        if self.otherwise:
            passed += f"; some failed otherwise ({', '.join(self.otherwise)})"
        return passed


def in_explorer(
    strategy: Callable[[], Strategy],
    runs: int,
    *,
    factory: AdapterFactory,
    substitute: Any,
    time_budget: Callable[[], float],
    step_budget: int,
    wall: float,
) -> Passes:
    """The ``explore`` stage's runner: a fresh *strategy* (the failing run's), *runs*
    executions, within ``time_budget()`` seconds asked when it starts."""

    def passes(script: Scenario, only: tuple[str, ...] | None) -> str | None:
        made, counts = strategy(), _Counts(only)
        report = explore(
            script, made, factory=factory, substitute=substitute,
            time_budget=time_budget(), step_budget=step_budget, wall_timeout=wall,
            fails=counts,
        )  # fmt: skip
        if report.failure is not None or not (report.executions >= runs or report.out_of_steps):
            return None
        return counts.said(
            f"{report.executions} of {runs} executions under {report.strategy}, none failed"
        )

    return passes


def in_worlds(
    world: Scenario, factory: AdapterFactory, *, seed: int, substitute: Any, wall: float
) -> Passes:
    """The ``simulate`` stage's runner: :data:`WORLD_RUNS` random schedules from *seed*;
    nothing passes unless *world* itself fails in them as asked (asked once for each set
    of rules, on the first counterfactual that asks it)."""
    setup = sim_setup(factory, wall_timeout=wall, max_steps=MAX_STEPS, substitute=substitute)
    found: dict[tuple[str, ...] | None, bool] = {}

    def fails(script: Scenario, counts: _Counts) -> bool | None:
        """Whether *script* fails as *counts* counts in the schedules (``None``: it could
        not be decided)."""
        strategy = RandomStrategy(seed=seed, executions=WORLD_RUNS)
        with prepared(setup):
            runs = run_world(script, strategy, setup, fails=counts)
        if {f.kind for f in runs[-1].failures} & set(NOT_A_VERDICT):
            return None
        return bool(runs[-1].failures) and counts(runs[-1])

    def passes(script: Scenario, only: tuple[str, ...] | None) -> str | None:
        if only not in found:
            found[only] = fails(world, _Counts(only)) is True
        counts = _Counts(only)
        if not found[only] or fails(script, counts) is not False:
            return None
        return (
            counts.said(f"{WORLD_RUNS} random schedules, none failed") + ", where the world fails"
        )

    return passes


def root_of(
    scenario: Scenario, rules: tuple[str, ...], passes: Passes, members: tuple[str, ...] = ()
) -> Root:
    """*rules* (root first, as the oracles gave them) with the root a counterfactual shows.

    ``passes(script, only)`` runs *script* on the same adapter with the same budget as
    the failing run and returns how it passed ("60 of 60 executions under pct"), or
    ``None`` when it failed or could not be run to its end; *only* is *rules* where the
    counterfactual's change makes no difference by the contract (only a failure with one
    of them then fails it), else ``None``. *members*: the hop whose records showed the
    root (``()``: every member); a counterfactual changes only the calls made on them.
    """
    if not rules:
        return Root(rules)
    named = [c for c in COUNTERFACTUALS if c.rule in rules[1:]]  # the oracle saw the call
    for counterfactual in named or COUNTERFACTUALS:
        if rules[0] == counterfactual.rule or rules[0] not in counterfactual.symptoms:
            continue
        changed = counterfactual.of(scenario, members)
        if changed is None:
            continue
        same = counterfactual.changes_nothing(scenario)
        passed = passes(changed, rules if same else None)
        if passed is None:
            continue
        rule = counterfactual.rule
        shown = (
            f"never fails so ({passed}), a change the contract says makes no difference "
            f"here; {', '.join(rules)} is what it changed"
            if same
            else f"passes ({passed}), so the failure needs that call where it was; "
            f"{', '.join(rules)} is what it caused"
        )
        without = counterfactual.without
        why = f"root {rule} ({rule.name}), not {rules[0]}: the same script with {without} {shown}"
        return Root((rule, *(r for r in rules if r != rule)), why)
    return Root(rules)
