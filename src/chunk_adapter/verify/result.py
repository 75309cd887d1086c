"""What a verification check reports: :class:`CheckResult`, and the rule table."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["RULES", "CheckResult", "Verdict", "rule_table"]

Verdict = Literal["pass", "fail", "skip"]

RULES: tuple[str, ...] = tuple(f"R{i}" for i in range(1, 24))
"""The contract's rules, R1–R23 (docs/contract.md)."""


@dataclass(frozen=True)
class CheckResult:
    """One check of one stage against one adapter.

    ``evidence`` is one line (what was run, or what broke); ``detail`` the
    counterexample (shrunk steps, trace); ``replay`` the one command that
    reproduces a failure.
    """

    stage: str
    name: str
    rules: tuple[str, ...]
    verdict: Verdict
    evidence: str
    detail: str = ""
    replay: str | None = None
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["rules"] = list(self.rules)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CheckResult:
        data = dict(data)
        data["rules"] = tuple(data.get("rules", ()))
        return cls(**data)


def rules_named_in(text: str) -> tuple[str, ...]:
    """The rule numbers (R1..R23) a message names, in order, without repeats."""
    seen: dict[str, None] = {}
    for match in re.finditer(r"\bR(\d{1,2})\b", text):
        rule = f"R{int(match.group(1))}"
        if rule in RULES:
            seen.setdefault(rule, None)
    return tuple(seen)


def rule_table(results: Iterable[CheckResult]) -> list[tuple[str, str, str]]:
    """``(rule, verdict, evidence)`` per rule: FAIL beats pass beats not checked."""
    by_rule: dict[str, list[CheckResult]] = {rule: [] for rule in RULES}
    for result in results:
        for rule in result.rules:
            by_rule.setdefault(rule, []).append(result)
    table = []
    for rule, results_for in by_rule.items():
        failed = [r for r in results_for if r.verdict == "fail"]
        passed = [r for r in results_for if r.verdict == "pass"]
        if failed:
            table.append((rule, "FAIL", "; ".join(f"{r.stage}/{r.name}" for r in failed)))
        elif passed:
            names = sorted({f"{r.stage}/{r.name}" for r in passed})
            shown = ", ".join(names[:3]) + (f" (+{len(names) - 3})" if len(names) > 3 else "")
            table.append((rule, "pass", shown))
        else:
            table.append((rule, "not checked", "no check in the stages run"))
    return table
