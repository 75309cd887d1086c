"""The machines' time budget: when to stop starting examples, and what was found meanwhile.

A :class:`Budget` rides along with every example of one Hypothesis run. The
machine asks it before each example and each step (:meth:`Budget.check`);
past its limit that raises :class:`OutOfBudget`, a ``BaseException`` that
Hypothesis does not catch, so the run ends at once instead of being killed at
the stage's deadline. The limit moves with what the run has seen:

* searching (nothing failed yet): stop when what is left would no longer
  cover the **reserve** — one confirming re-run of a failure (a failing
  example can wait out the liveness bound) plus the shrinker's share
  (:data:`SHRINK_SHARE` of the stage), so a failure found late still shrinks;
* shrinking (a failure was seen): stop when only the time for Hypothesis's
  final replay, the stage's confirming re-run of the shrunk example and its
  own shrinking of the steps (:data:`MINIMIZE_SHARE`, :mod:`.minimize`) is left.

While shrinking, every wait of a new example is bounded by
:data:`SHRINK_WAIT` instead of the profile's liveness bound: a candidate that
loses a chunk costs seconds, not the full bound, so a lost-final bug shrinks
within the budget. The stage re-runs the shrunk example with the full bound
before reporting it, so a shorter wait can never make a red on its own.

Every failure an example raises is recorded with its reproducer — the
Hypothesis choices so far, encoded as the blob ``@reproduce_failure`` and
``chunk-adapter replay 'stateful:PROFILE:BLOB'`` take — so a run cut short
while shrinking still has a replayable example: the smallest seen.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..finding import Finding, first_line

__all__ = [
    "Budget",
    "Enough",
    "FailingExample",
    "OutOfBudget",
    "finding_of",
    "first_rules",
    "headline",
]

MARGIN = 2.0
"""Seconds kept besides the measured re-runs: starting a worker thread, reporting."""
SHRINK_SHARE = 0.1
"""Share of the stage's seconds the search leaves to the shrinker (module doc)."""
HYPOTHESIS_SHRINK_SHARE = 0.15
"""Share of the stage's seconds Hypothesis's shrinker may take after the first failure
(unless ``split_by_rule``): the stage's own shrinking of the steps (:mod:`.minimize`)
removes steps far faster than Hypothesis's one-candidate-example-per-try passes."""
MINIMIZE_SHARE = 0.15
"""Share of the stage's seconds kept from Hypothesis's shrinker for shrinking the steps."""
RESERVE_CAP = 0.3
"""The search keeps at most this share of the stage's seconds back (the rest is searched)."""
SHRINK_WAIT = 2.0
"""Seconds each wait of an example may take while shrinking (module doc): still
hundreds of times what a settle takes on a loaded machine."""


class OutOfBudget(BaseException):
    """Ends a machines run at the budget (not an ``Exception``: Hypothesis lets it through)."""


class Enough(OutOfBudget):
    """Ends a machines run once the planned examples ran, those a verify baseline set aside
    counted (:meth:`Budget.set_aside_example`): Hypothesis does not count a rejected
    example, and would search on for as many that are not."""


@dataclass(frozen=True)
class FailingExample:
    """One failing example: the exception, its reproducer blob, how long it ran."""

    error: Exception
    blob: str | None
    choices: int  # how many Hypothesis choices the example made: the smaller, the shorter
    seconds: float

    @property
    def rules(self) -> tuple[str, ...]:
        return first_rules(self.error)

    @property
    def finding(self) -> Finding:
        """The example's failure (:func:`finding_of`), its blob as the reproducer."""
        return finding_of(self.error, self.blob)


def first_rules(error: BaseException) -> tuple[str, ...]:
    """The rules an exception carries, root cause first: ``ContractViolation.rules`` (the
    machines raise every violation so); none for any other exception (the adapter or
    Hypothesis raising), whatever its message says."""
    rules = getattr(error, "rules", None)
    if isinstance(rules, list) and all(isinstance(r, str) for r in rules):
        return tuple(rules)
    return ()


def headline(error: BaseException) -> str:
    """One line for the report: the root-cause violation, else the error's first line."""
    violations = getattr(error, "violations", None)
    if isinstance(violations, list) and violations:
        return str(violations[0])
    text = str(error)
    return text.splitlines()[0] if text else repr(error)


def finding_of(error: BaseException, reproducer: str | None = None) -> Finding:
    """The failure a machine ended with, as a :class:`~chunk_adapter.finding.Finding`: the
    rules it carries (:func:`first_rules`), its exception type as its kind (a failure that
    names no rule is the same failure as the same exception again), its :func:`headline`
    and its whole text."""
    kind = f"{type(error).__module__}.{type(error).__qualname__}"
    return Finding(first_rules(error), kind, first_line(headline(error)), str(error), reproducer)


class Budget:
    """Limits and records of one machines run (module doc).

    *deadline* is a ``time.monotonic()`` value by which the stage must have
    finished everything, confirmation included; *seconds* the stage's whole
    share (the reserve is at most 30 % of it); *liveness* the machines' wait
    bound, which a failing example may spend once more when re-run.
    """

    def __init__(
        self,
        deadline: float,
        *,
        seconds: float,
        liveness: float,
        split_by_rule: bool = False,
        planned: int | None = None,
    ) -> None:
        """*split_by_rule* (``verify --all``): the machines raise a distinct exception type
        per root rule, so Hypothesis keeps and shrinks one failure per rule. *planned*:
        the examples to run, set-aside ones included (:class:`Enough`); ``None``: as
        many as Hypothesis runs."""
        self.deadline = deadline
        self.split_by_rule = split_by_rule
        self.seconds = seconds
        self.liveness = liveness
        self.started = 0  # examples begun
        self.done = 0  # examples that ran to the end and passed, before any failure
        self.planned = planned
        self.set_aside = 0  # examples ended by a root cause a verify baseline accepts
        self.enough = False  # the planned examples ran (Enough ended the run)
        self._example_set_aside = False
        self.slowest = 0.0  # seconds, of a passing example
        self.findings: list[FailingExample] = []
        self.aborted = False
        self.shrink_until: float | None = None
        self._example_start = 0.0
        self._example_failed = False

    # ------------------------------------------------------------------ limits
    def reserve(self) -> float:
        """Seconds kept back while searching: a confirming re-run and the shrinker's share."""
        wanted = self.liveness + 2 * self.slowest + MARGIN + SHRINK_SHARE * self.seconds
        return min(wanted, RESERVE_CAP * self.seconds)

    def wait_bound(self, liveness: float) -> float:
        """The bound on each wait of the example starting now: *liveness* while searching,
        at most :data:`SHRINK_WAIT` once a failure was seen (module doc)."""
        return min(liveness, SHRINK_WAIT) if self.findings else liveness

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
        planned = self.planned
        # Only once one was set aside: else Hypothesis ends the run itself, as it always did.
        enough = planned is not None and self.done + self.set_aside >= planned
        if enough and self.set_aside and not self.findings:
            self.enough = True
            raise Enough(f"{self.done} example(s) passed, {self.set_aside} set aside")
        self.started += 1
        self._example_start = time.monotonic()
        self._example_failed = False
        self._example_set_aside = False

    def set_aside_example(self) -> None:
        """The running example showed a root cause a verify baseline accepts and ends
        (``reject()``): it ran, and told nothing new. Counted once."""
        if not self._example_set_aside and not self._example_failed:
            self._example_set_aside = True
            self.set_aside += 1

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
        self.findings.append(FailingExample(error, blob, choices, seconds))
        if self.shrink_until is None:
            # Leave room for Hypothesis's final replay of the shrunk example and
            # the stage's own confirming re-run, each about as long as this one,
            # and for the stage's shrinking of the steps.
            self.shrink_until = self.deadline - 2 * seconds - MARGIN - MINIMIZE_SHARE * self.seconds
            if not self.split_by_rule:  # --all: Hypothesis searches on for other rules
                self.shrink_until = min(
                    self.shrink_until, time.monotonic() + HYPOTHESIS_SHRINK_SHARE * self.seconds
                )

    def smallest(self, rule: str | None = None) -> FailingExample | None:
        """The shortest failing example with a reproducer (the one shrinking got to); with
        *rule*, the shortest whose root rule it is."""
        replayable = [
            f
            for f in self.findings
            if f.blob is not None and (rule is None or f.rules[:1] == (rule,))
        ]
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
