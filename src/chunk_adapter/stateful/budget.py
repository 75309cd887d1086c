"""The machines' time budget: when to stop starting examples, and what was found meanwhile.

A :class:`Budget` rides along with every example of one Hypothesis run. The
machine asks it before each example and each step (:meth:`Budget.check`);
past its limit that raises :class:`OutOfBudget`, a ``BaseException`` that
Hypothesis does not catch, so the run ends at once instead of being killed at
the stage's deadline. The limit moves with what the run has seen:

* searching (nothing failed yet): stop when what is left would no longer
  cover the **reserve** — one confirming re-run of a failure (a failing
  example can wait out the liveness bound) plus a little shrinking;
* shrinking (a failure was seen): stop when only the time for Hypothesis's
  final replay and the stage's confirming re-run of the shrunk example is left.

Every failure an example raises is recorded with its reproducer — the
Hypothesis choices so far, encoded as the blob ``@reproduce_failure`` and
``chunk-adapter replay 'stateful:PROFILE:BLOB'`` take — so a run cut short
while shrinking still has a replayable example: the smallest seen.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..outcome import rules_named_in

__all__ = ["Budget", "Finding", "OutOfBudget", "first_rules"]

MARGIN = 2.0
"""Seconds kept besides the measured re-runs: starting a worker thread, reporting."""


class OutOfBudget(BaseException):
    """Ends a machines run at the budget (not an ``Exception``: Hypothesis lets it through)."""


@dataclass(frozen=True)
class Finding:
    """One failing example: the exception, its reproducer blob, how long it ran."""

    error: Exception
    blob: str | None
    choices: int  # how many Hypothesis choices the example made: the smaller, the shorter
    seconds: float

    @property
    def rules(self) -> tuple[str, ...]:
        return first_rules(self.error)


def first_rules(error: BaseException) -> tuple[str, ...]:
    """The rules an exception names, root cause first (``ContractViolation.rules`` when it
    has them, else the rule numbers its first line names)."""
    rules = getattr(error, "rules", None)
    if isinstance(rules, list) and all(isinstance(r, str) for r in rules):
        return tuple(rules)
    text = str(error)
    return rules_named_in(text.splitlines()[0] if text else "")


class Budget:
    """Limits and records of one machines run (module doc).

    *deadline* is a ``time.monotonic()`` value by which the stage must have
    finished everything, confirmation included; *seconds* the stage's whole
    share (the reserve is at most 30 % of it); *liveness* the machines' wait
    bound, which a failing example may spend once more when re-run.
    """

    def __init__(self, deadline: float, *, seconds: float, liveness: float) -> None:
        self.deadline = deadline
        self.seconds = seconds
        self.liveness = liveness
        self.started = 0  # examples begun
        self.done = 0  # examples that ran to the end and passed, before any failure
        self.slowest = 0.0  # seconds, of a passing example
        self.findings: list[Finding] = []
        self.aborted = False
        self.shrink_until: float | None = None
        self._example_start = 0.0
        self._example_failed = False

    # ------------------------------------------------------------------ limits
    def reserve(self) -> float:
        """Seconds kept back while searching: a confirming re-run and a little shrinking."""
        wanted = self.liveness + 2 * self.slowest + MARGIN
        return min(wanted, 0.3 * self.seconds)

    def limit(self) -> float:
        """The ``monotonic()`` time past which no example or step may start."""
        if self.shrink_until is not None:
            return self.shrink_until
        return self.deadline - self.reserve()

    def check(self) -> None:
        """Raise :class:`OutOfBudget` past the limit (module doc)."""
        if time.monotonic() >= self.limit():
            self.aborted = True
            raise OutOfBudget(f"stopped at the budget after {self.done} example(s)")

    # ----------------------------------------------------------------- examples
    def start_example(self) -> None:
        self.check()
        self.started += 1
        self._example_start = time.monotonic()
        self._example_failed = False

    def example_passed(self) -> None:
        if not self.findings:
            self.done += 1
            self.slowest = max(self.slowest, time.monotonic() - self._example_start)

    def record_failure(self, error: Exception) -> None:
        """Keep the failure of the running example, once, with its reproducer."""
        if self._example_failed:
            return
        self._example_failed = True
        seconds = time.monotonic() - self._example_start
        blob, choices = _reproducer()
        self.findings.append(Finding(error, blob, choices, seconds))
        if self.shrink_until is None:
            # Leave room for Hypothesis's final replay of the shrunk example and
            # the stage's own confirming re-run, each about as long as this one.
            self.shrink_until = self.deadline - 2 * seconds - MARGIN

    def smallest(self) -> Finding | None:
        """The shortest failing example with a reproducer (the one shrinking got to)."""
        replayable = [f for f in self.findings if f.blob is not None]
        if not replayable:
            return None
        return min(replayable, key=lambda f: (f.choices, f.blob or ""))


def _reproducer() -> tuple[str | None, int]:
    """The running example's choices so far as a ``@reproduce_failure`` blob, and their count.

    Replaying exactly these choices repeats every step up to the failure. Uses
    Hypothesis's own encoding; ``(None, 0)`` outside a Hypothesis run, or if
    this Hypothesis version does not offer it.
    """
    try:
        from hypothesis.control import current_build_context
        from hypothesis.core import encode_failure

        data: Any = current_build_context().data
        choices = tuple(data.choices)
        return encode_failure(choices).decode("ascii"), len(choices)
    except Exception:  # not in a run, or an internal API that moved: no blob
        return None, 0
