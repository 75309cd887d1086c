"""Findings grouped by root cause: one group per root rule.

Under ``verify --all`` every check runs to the budget, so one bug is usually
seen by several checks (a stale token breaks R16 in the machines and in two
explorer scenarios), and each words what it saw its own way: the same defect
reads "the get began after cleanup_receiver" in one and "a value of a
cleaned-up registration crossed the fence" in another, and which of them fires
first changes with the seed. :func:`group_findings` folds the confirmed
violations into root causes by **what failed**: the root rule, the first of
``CheckResult.rules`` — the finest identity a check made from outside the
adapter can give a defect that every check and every seed agree on. A finding
that names no rule (the adapter raised where no call may) is a root cause of its
own check. Each group keeps the checks that saw it and the reproducer of the
first (cheapest stage first, as verify runs them).

What this costs: two defects that break the same rule are one root cause — the
report lists every check that saw it, and after the first is fixed the next run
reports the other. What it buys: a defect is one root cause whichever check,
message or seed shows it, so a baseline written on one seed holds on the next
(docs/verify.md, "Baselines").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidValue
from ..outcome import CheckResult
from ..rules import rule as rule_named

__all__ = ["Group", "cause_of", "group_findings", "signature"]


def signature(rule: str, cause: str) -> str:
    """What a root cause and a baseline entry are matched by: the rule (``"R16"``), or
    for a finding that names none, ``"no rule: <the check that saw it>"``."""
    return rule if rule else f"no rule: {cause}"


def cause_of(result: CheckResult) -> tuple[str, str]:
    """``(rule, cause)`` of the root cause *result* (a failure) is a finding of: its root
    rule and the rule's name, else ``""`` and the check that saw it."""
    if result.rules:
        root = result.rules[0]
        try:
            return root, rule_named(root).name
        except InvalidValue:  # a finding of a check outside the registry: its rule as given
            return root, root
    return "", f"{result.stage}/{result.name}"


@dataclass
class Group:
    """One root cause: its rule, its cause, the checks that saw it and how to replay it."""

    rule: str  # the root rule ("" when the finding names none: the adapter raised)
    cause: str  # the rule's name ("`cleanup_receiver` is a commit fence"), else the check
    evidence: str  # the first finding's evidence, as reported
    checks: list[str] = field(default_factory=list)  # "stage/check", in the order run
    replays: list[str] = field(default_factory=list)  # distinct reproducers, cheapest first
    findings: list[CheckResult] = field(default_factory=list, repr=False)  # the results, in order
    named: list[str] = field(default_factory=list)
    """Every rule its findings name, the root first and then the consequences (a finding
    may name several, ``"R4: ...; R15: ..."``): a baseline entry of any accepts it
    (:mod:`.baseline`; which of them a check reports first varies)."""

    @property
    def signature(self) -> str:
        return signature(self.rule, self.cause)

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
        key = cause_of(result)
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(*key, result.evidence)
        group.findings.append(result)
        for named in result.rules:
            if named not in group.named:
                group.named.append(named)
        check = f"{result.stage}/{result.name}"
        if check not in group.checks:
            group.checks.append(check)
        if result.replay and result.replay not in group.replays:
            group.replays.append(result.replay)
    return list(groups.values())
