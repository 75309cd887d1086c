"""What a verification check reports: :class:`CheckResult`, and the rule table."""

from __future__ import annotations

from collections.abc import Iterable

from ..outcome import RULES, CheckResult, Verdict, rules_named_in

__all__ = ["RULES", "CheckResult", "Verdict", "rule_table", "rules_named_in"]


def rule_table(results: Iterable[CheckResult]) -> list[tuple[str, str, str]]:
    """``(rule, verdict, evidence)`` per rule.

    FAIL (a confirmed violation) beats inconclusive (a check of the rule could
    not decide) beats pass beats not checked.
    """
    by_rule: dict[str, list[CheckResult]] = {rule: [] for rule in RULES}
    for result in results:
        for rule in result.rules:
            by_rule.setdefault(rule, []).append(result)
    table = []
    for rule, results_for in by_rule.items():
        failed = [r for r in results_for if r.verdict == "fail"]
        undecided = [r for r in results_for if r.verdict == "inconclusive"]
        passed = [r for r in results_for if r.verdict == "pass"]
        if failed:
            table.append((rule, "FAIL", "; ".join(f"{r.stage}/{r.name}" for r in failed)))
        elif undecided:
            table.append(
                (rule, "inconclusive", "; ".join(f"{r.stage}/{r.name}" for r in undecided))
            )
        elif passed:
            names = sorted({f"{r.stage}/{r.name}" for r in passed})
            shown = ", ".join(names[:3]) + (f" (+{len(names) - 3})" if len(names) > 3 else "")
            table.append((rule, "pass", shown))
        else:
            table.append((rule, "not checked", "no check in the stages run"))
    return table
