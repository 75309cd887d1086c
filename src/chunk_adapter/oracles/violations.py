"""What the suite reports: a :class:`Violation` of a numbered contract rule, and the one
:class:`ContractViolation` exception that carries violations (or a verify report).

Rules travel as data, from where a violation is found to the report: a
``Violation`` names its ``rule`` (and the rules the same event ``also``
breaks), and every driver reads ``Violation.rules`` / ``ContractViolation.rules``
rather than finding rule numbers in a message.

Violations are ordered **root cause first**: ``at`` is the history sequence
number of the earliest recorded event that breaks the rule (the put, get or
call that should not have happened), and ``None`` for a liveness violation —
something that never happened, which is almost always the consequence of an
earlier fault. :func:`root_first` sorts by it, so the first violation of a
list is the one to fix.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..finding import Finding, first_line

__all__ = ["ContractViolation", "Violation", "root_first", "rules_in_order"]


@dataclass(frozen=True)
class Violation:
    """One broken rule: ``rule`` ("R9"), what was expected and what happened.

    ``at`` is the sequence number (:class:`~chunk_adapter.history.History`)
    of the earliest event that breaks it, ``None`` when nothing that happened
    breaks it but something that should have happened never did (liveness).
    ``str(v)`` starts with the rule number, so a failure message can be
    grepped for the rule it is about. ``also`` lists the rules the same
    event breaks besides ``rule`` (its consequences), which the message
    names too: ``rules`` is ``(rule, *also)``.
    """

    rule: str
    message: str
    request_id: str | None = None
    key: str | None = None
    at: int | None = None
    also: tuple[str, ...] = ()

    @property
    def rules(self) -> tuple[str, ...]:
        """``rule``, then ``also``: the rules this violation is about, root first."""
        return (self.rule, *self.also)

    @property
    def finding(self) -> Finding:
        """This violation as every driver reports a failure: its :attr:`rules` and its text."""
        text = str(self)
        return Finding(self.rules, "", first_line(text), text.partition("\n")[2])

    def __str__(self) -> str:
        where = []
        if self.request_id is not None:
            where.append(f"request {self.request_id!r}")
        if self.key is not None:
            where.append(f"key {self.key!r}")
        suffix = f" [{', '.join(where)}]" if where else ""
        return f"{self.rule}: {self.message}{suffix}"


def root_first(violations: Iterable[Violation]) -> list[Violation]:
    """*violations* ordered by ``at`` (liveness last), equal ones kept once; stable otherwise."""
    seen: set[Violation] = set()
    unique = []
    for v in violations:
        if v not in seen:
            seen.add(v)
            unique.append(v)
    return sorted(unique, key=lambda v: (v.at is None, v.at if v.at is not None else 0))


def rules_in_order(violations: Iterable[Violation], *, also: bool = False) -> list[str]:
    """The rules *violations* name, in order of first appearance (root cause first);
    with *also*, each violation's consequences (``Violation.also``) after its rule."""
    return list(dict.fromkeys(r for v in violations for r in (v.rules if also else (v.rule,))))


class ContractViolation(AssertionError):
    """The adapter broke the contract: the one exception for it, wherever it is raised.

    Raised by ``assert_ok`` and the state machines with the *violations* of a
    history (kept in the order given, root cause first; *context* is appended
    to the message), and by ``chunk_adapter.verify.check_adapter`` for a
    confirmed violation, with the verify *report* (``report``: every check's
    result) and its summary as *message*. ``rules`` lists each rule once,
    root cause first. An ``AssertionError``, so a test fails on it.
    """

    def __init__(
        self,
        violations: Iterable[Violation],
        context: str = "",
        *,
        message: str | None = None,
        report: Any = None,
    ) -> None:
        self.violations = list(violations)
        self.report = report
        if message is None:
            lines = [f"contract rules broken: {', '.join(rules_in_order(self.violations))}"]
            lines += [f"  - {v}" for v in self.violations]
            if context:
                lines.append(context)
            message = "\n".join(lines)
        super().__init__(message)

    @classmethod
    def of(cls, rule: str, message: str, *, also: tuple[str, ...] = ()) -> ContractViolation:
        """One violation of *rule* seen by a scripted check (the examples stage's probes),
        not in a recorded history: its message is the violation's, ``"R16: ..."``."""
        violation = Violation(rule, message, also=also)
        return cls([violation], message=str(violation))

    @property
    def rules(self) -> list[str]:
        """Each rule once, the root cause's first."""
        return rules_in_order(self.violations)

    @property
    def finding(self) -> Finding:
        """This exception as every driver reports a failure: :attr:`rules`, the root-cause
        violation as the message (else the message's first line), the whole message as
        the evidence."""
        text = str(self)
        head = str(self.violations[0]) if self.violations else text
        return Finding(tuple(self.rules), "", first_line(head), text)
