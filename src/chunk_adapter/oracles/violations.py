"""What an oracle reports: a :class:`Violation` of one numbered contract rule."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["ContractViolation", "Violation"]


@dataclass(frozen=True)
class Violation:
    """One broken rule: ``rule`` ("R9"), what was expected and what happened.

    ``str(v)`` starts with the rule number, so a failure message can be grepped
    for the rule it is about.
    """

    rule: str
    message: str
    request_id: str | None = None
    key: str | None = None

    def __str__(self) -> str:
        where = []
        if self.request_id is not None:
            where.append(f"request {self.request_id!r}")
        if self.key is not None:
            where.append(f"key {self.key!r}")
        suffix = f" [{', '.join(where)}]" if where else ""
        return f"{self.rule}: {self.message}{suffix}"


class ContractViolation(AssertionError):
    """Raised by ``assert_ok``: the history breaks one or more contract rules."""

    def __init__(self, violations: Iterable[Violation], context: str = "") -> None:
        self.violations = list(violations)
        rules = sorted({v.rule for v in self.violations}, key=_rule_order)
        lines = [f"contract rules broken: {', '.join(rules)}"]
        lines += [f"  - {v}" for v in self.violations]
        if context:
            lines.append(context)
        super().__init__("\n".join(lines))

    @property
    def rules(self) -> list[str]:
        return sorted({v.rule for v in self.violations}, key=_rule_order)


def _rule_order(rule: str) -> tuple[int, str]:
    digits = rule[1:]
    return (int(digits), rule) if digits.isdigit() else (10**6, rule)
