"""What every driver reports when the adapter fails a check: one :class:`Finding`.

An example's problem, a probe's exception, a stress scenario's failure, a state
machine's shrunk example and an explorer's failing execution each have a record of
their own, shaped for the driver that made it (``Violation``, ``Hang``,
``StressReport``, ``FailingExample``, explore's ``Failure``...). Each of them gives
its ``Finding``, so what happens after a check failed is written once, over one
type: confirming it (:func:`chunk_adapter.confirm.confirm` re-runs it and compares
the findings of the re-run with it) and reporting it
(:meth:`chunk_adapter.outcome.CheckResult.of_finding`).

Rules are data here as everywhere (:mod:`.rules`): a finding names the rules it
breaks, root cause first, and nothing reads them back out of its message.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .errors import InvalidValue

__all__ = ["Finding", "first_line", "kinds_of", "rules_of"]


def first_line(text: str) -> str:
    """The first line of *text* (``""`` for none): what a one-line message keeps of it."""
    return text.splitlines()[0] if text else ""


@dataclass(frozen=True)
class Finding:
    """One failure of a check, as every driver reports it.

    ``rules``: the contract rules it breaks, root cause first (``()``: it names none).
    ``kind``: what failed, in the driver's terms, for when no rule names it: an
    explorer failure class (``"deadlock"``, ``"crash"``), an exception type, the
    scripted check itself (any failure of it is the same one); a driver may set it
    beside rules too, and it is compared only for a finding without rules
    (:func:`chunk_adapter.confirm.same_failure`); ``""``: nothing beyond the rules.
    ``message``: one line, what broke (the report's evidence). ``evidence``: the
    detail (a trace, the shrunk steps, the whole report; may be ``""``).
    ``reproducer``: what replays it (a command, a replay string, a Python call;
    ``None``: nothing does).
    """

    rules: tuple[str, ...] = ()
    kind: str = ""
    message: str = ""
    evidence: str = ""
    reproducer: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.rules, tuple) or not all(isinstance(r, str) for r in self.rules):
            raise InvalidValue(
                f"Finding.rules must be a tuple of rule names (str), got {self.rules!r}"
            )
        if "\n" in self.message:
            raise InvalidValue(
                f"Finding.message must be one line (the detail goes in evidence), got "
                f"{self.message!r}"
            )

    @property
    def root(self) -> str:
        """The root cause's rule (``""``: the finding names none)."""
        return self.rules[0] if self.rules else ""


def rules_of(findings: Iterable[Finding]) -> tuple[str, ...]:
    """Every rule *findings* name, each once, in order (root causes first)."""
    return tuple(dict.fromkeys(rule for finding in findings for rule in finding.rules))


def kinds_of(findings: Iterable[Finding]) -> tuple[str, ...]:
    """Every kind *findings* name (``""`` left out), each once, in order."""
    return tuple(dict.fromkeys(f.kind for f in findings if f.kind))
