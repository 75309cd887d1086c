"""Findings grouped by root cause: one group per (root rule, first violated check).

Under ``verify --all`` every check runs to the budget, so one bug is usually
seen by several checks (a stale token breaks R16 in the machines and in two
explorer scenarios). :func:`group_findings` folds the confirmed violations
into root causes: two findings are one group when they name the same **root
rule** (the first of ``CheckResult.rules``) and the same **cause** — the first
violated check's message with its particulars (chunk ids, keys, values,
request names) taken out, so the oracle that fired is what is compared, not
the data it fired on. Each group keeps the checks that saw it and the
reproducer of the first (cheapest stage first, as verify runs them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..oracles.causes import cause_of, causes_of, signature
from ..outcome import CheckResult

__all__ = ["Group", "cause_of", "group_findings"]


@dataclass
class Group:
    """One root cause: its rule, its cause, the checks that saw it and how to replay it."""

    rule: str  # the root rule ("" when the finding names none: the adapter raised)
    cause: str
    evidence: str  # the first finding's evidence, as reported
    checks: list[str] = field(default_factory=list)  # "stage/check", in the order run
    replays: list[str] = field(default_factory=list)  # distinct reproducers, cheapest first
    findings: list[CheckResult] = field(default_factory=list, repr=False)  # the results, in order
    signatures: list[str] = field(default_factory=list)
    """Of every violation its findings name (a finding may name several, ``"R4: ...; R15:
    ..."``), the root cause's first: what a baseline entry may match (:mod:`.baseline`)."""

    @property
    def replay(self) -> str | None:
        """The reproducer to try first: the first stage's."""
        return self.replays[0] if self.replays else None

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "cause": self.cause,
            "evidence": self.evidence,
            "checks": list(self.checks),
            "replay": self.replay,
            "replays": list(self.replays),
        }


def group_findings(results: Iterable[CheckResult]) -> list[Group]:
    """The confirmed violations among *results*, one :class:`Group` per root cause, in the
    order their first finding was reported."""
    groups: dict[tuple[str, str], Group] = {}
    for result in results:
        if result.verdict != "fail":
            continue
        rule = result.rules[0] if result.rules else ""
        cause = cause_of(result.evidence)
        group = groups.get((rule, cause))
        if group is None:
            group = groups[(rule, cause)] = Group(rule, cause, result.evidence)
            group.signatures.append(signature(rule, cause))
        group.findings.append(result)
        for named in causes_of(result.evidence):
            key = signature(*named)
            if key not in group.signatures:
                group.signatures.append(key)
        check = f"{result.stage}/{result.name}"
        if check not in group.checks:
            group.checks.append(check)
        if result.replay and result.replay not in group.replays:
            group.replays.append(result.replay)
    return list(groups.values())
