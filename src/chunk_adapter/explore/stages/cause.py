"""The root rule of a confirmed failure, asked of its counterfactual scripts.

:mod:`..scenarios.counterfactual` says why: an oracle names where a break shows; a
script that fails while the same script without a call's freedom passes every
execution of the same budget failed because of that call. Both stages that run
scripts (``explore``, ``simulate``) ask here after a failure is confirmed; the answer
only reorders the failure's rules (the counterfactual's first, the oracle's after
it) and adds a line saying what passed. A counterfactual that fails too, or that
cannot be run to the end of its budget, changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..scenarios.counterfactual import COUNTERFACTUALS
from ..scenarios.scenario import Scenario

__all__ = ["Root", "root_of"]


@dataclass(frozen=True)
class Root:
    """A failure's rules, root first, and what showed the root (empty: the oracle's)."""

    rules: tuple[str, ...]
    why: str = ""


def root_of(
    scenario: Scenario, rules: tuple[str, ...], passes: Callable[[Scenario], str | None]
) -> Root:
    """*rules* (root first, as the oracles gave them) with the root a counterfactual shows.

    ``passes(script)`` runs *script* on the same adapter with the same budget as the
    failing run and returns how it passed ("60 of 60 executions under pct"), or
    ``None`` when it failed or could not be run to its end.
    """
    if not rules:
        return Root(rules)
    named = [c for c in COUNTERFACTUALS if c.rule in rules[1:]]  # the oracle saw the call
    for counterfactual in named or COUNTERFACTUALS:
        if rules[0] == counterfactual.rule or rules[0] not in counterfactual.symptoms:
            continue
        changed = counterfactual.of(scenario)
        if changed is None:
            continue
        passed = passes(changed)
        if passed is None:
            continue
        rule = counterfactual.rule
        why = (
            f"root {rule} ({rule.name}), not {rules[0]}: the same script with "
            f"{counterfactual.without} passes ({passed}), so the failure needs that call "
            f"where it was; {', '.join(rules)} is what it caused"
        )
        return Root((rule, *(r for r in rules if r != rule)), why)
    return Root(rules)
