"""What a verification check reports: :class:`CheckResult`, and the rule table."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..outcome import RULES, CheckResult, Verdict

__all__ = ["RULES", "CheckResult", "Verdict", "rule_checks", "rule_table"]


ORDER = (
    ("fail", "FAIL"),
    ("accepted", "accepted"),
    ("inconclusive", "inconclusive"),
    ("skip", "not reached"),
    ("pass", "pass"),
)
"""The verdicts a rule can take from its checks, strongest first, as the table shows them."""
PARTLY = "passed partly"
"""Some checks of the rule passed and others were not reached: never "not reached" for a
rule one of whose checks ran and passed."""


def rule_checks(
    results: Iterable[CheckResult],
    planned: Mapping[str, Sequence[str]] | None = None,
    accepted: Iterable[CheckResult] = (),
) -> list[tuple[str, str, list[str]]]:
    """``(rule, verdict, ["stage/check", ...])`` per rule, the checks behind the verdict.

    FAIL (a confirmed violation) beats accepted (a confirmed violation of a root
    cause the baseline accepts: one of *accepted*) beats inconclusive (a check of the rule could
    not decide) beats not reached (a check of the rule was planned but did not
    run: an earlier violation ended its stage, or no budget was left; "passed
    partly", with the checks that passed, when some others did run and pass)
    beats pass (every check of the rule that was planned ran and saw no
    violation) beats not checked (no stage run checks the rule).

    *planned* maps ``"stage/check"`` to the rules the check was planned to
    cover: a check that failed names the rules it found broken, and stopped
    there, so for its other planned rules it counts as not reached.
    """
    by_rule: dict[str, list[tuple[str, str]]] = {rule: [] for rule in RULES}
    known = {id(result) for result in accepted}
    for result in results:
        key = f"{result.stage}/{result.name}"
        verdict: str = "accepted" if id(result) in known else result.verdict
        for rule in result.rules:
            by_rule.setdefault(rule, []).append((verdict, key))
        if result.verdict == "fail":
            for rule in (planned or {}).get(key, ()):
                if rule not in result.rules:
                    by_rule.setdefault(rule, []).append(("skip", key))
    table = []
    for rule, seen in by_rule.items():
        for verdict, label in ORDER:
            chosen = [key for v, key in seen if v == verdict]
            if chosen:
                passed = [key for v, key in seen if v == "pass"]
                if verdict == "skip" and passed:  # some checks passed, others never ran
                    label, chosen = PARTLY, passed
                table.append((rule, label, list(dict.fromkeys(chosen))))
                break
        else:
            table.append((rule, "not checked", []))
    return table


def rule_table(
    results: Iterable[CheckResult],
    planned: Mapping[str, Sequence[str]] | None = None,
    accepted: Iterable[CheckResult] = (),
) -> list[tuple[str, str, str]]:
    """:func:`rule_checks` as one line of evidence per rule (the terminal table)."""
    table = []
    for rule, verdict, checks in rule_checks(results, planned, accepted):
        if not checks:
            text = "no check in the stages run"
        elif verdict in ("pass", "not reached", PARTLY):
            names = sorted(checks)
            text = ", ".join(names[:3]) + (f" (+{len(names) - 3})" if len(names) > 3 else "")
        else:
            text = "; ".join(checks)
        table.append((rule, verdict, text))
    return table
