"""Confirming a finding before it is a red: one procedure for every stage.

A red must mean a bug (docs/verify.md, "Exit status"). Whatever found it, an
example, a probe, a stress scenario, a state machine's shrunk example, an
explorer schedule or a generated world, a finding becomes ``fail`` by the same
steps, here:

1. **run again**: the stage's ``rerun`` runs the finding's reproducer on a fresh
   adapter, up to ``tries`` times while its budget allows (it returns ``None``
   when it could not run or decide: no budget, a thread it could not control);
   the finding is *reproduced* when a re-run shows :func:`the same failure
   <same_failure>`;
2. **calibrate**: a reproduced finding is run once on the reference adapter
   (:func:`chunk_adapter.factory.calibration_reference`), when the stage has
   one to give; the reference failing it at all (any rule: it keeps the
   contract) means the suite, or a machine too loaded for a time bound, judged
   wrongly;
3. **verdict**: reproduced and not failed by the reference is ``fail``;
   anything else is ``inconclusive``, and :attr:`Confirmed.why` says which step
   said no, for the stage to word its evidence.

A finding is a :class:`~chunk_adapter.finding.Finding` whatever found it, and a
run (the first, a re-run, the reference's) shows a :data:`Run`: the findings it
saw, root cause first, ``()`` when it saw none. "The same failure" means one
thing everywhere: the rule the finding is reported under (its root, the first
rule it names) is among the rules the re-run's findings break; for a finding
that names no rule (a hang without one, the adapter raising), a finding of the
same kind. A race may show more or fewer symptoms on a re-run; the root must be
one of them. The two tests lean the safe way each: reproducing asks for the root
again, calibrating gives up on any failure of the reference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .finding import Finding, kinds_of, rules_of

__all__ = ["PASSED", "Confirmed", "Run", "confirm", "same_failure"]

Run = tuple[Finding, ...]
"""What one run of a check showed: its findings, root cause first (``()``: none)."""

PASSED: Run = ()
"""A run that saw no failure."""


def same_failure(first: Finding, again: Run | None) -> bool:
    """*again* shows the failure *first* is reported as (module doc)."""
    if not again:
        return False
    if first.rules:
        return first.rules[0] in rules_of(again)
    return bool(first.kind) and first.kind in kinds_of(again)


Why = Literal["reproduced", "not reproduced", "not re-run", "reference failed"]


@dataclass(frozen=True)
class Confirmed:
    """The verdict on one finding and how it was reached (module doc)."""

    verdict: Literal["fail", "inconclusive"]
    why: Why
    reruns: int  # re-runs that ran to a decision
    reproduced: int  # of them, those that showed the same failure
    again: Run | None  # the last re-run that showed it, else the last re-run (None: none ran)
    reference: Run | None  # the reference adapter's run (None: not run, or undecided)

    @property
    def reference_passed(self) -> bool:
        return self.reference is not None and not self.reference


def confirm(
    first: Finding,
    rerun: Callable[[], Run | None],
    reference: Callable[[], Run | None] | None = None,
    *,
    tries: int = 1,
) -> Confirmed:
    """Run *first*'s reproducer again (*rerun*, up to *tries* times; all of them, so the
    count says how often it reproduced) and calibrate it on the reference (module doc)."""
    if tries < 1:
        raise ValueError(f"confirm: tries must be 1 or more, got {tries!r}")
    reruns, reproduced = 0, 0
    again: Run | None = None
    while reruns < tries:
        seen = rerun()
        if seen is None:  # could not run or decide (the budget): it proves nothing
            break
        reruns += 1
        if same_failure(first, seen):
            reproduced += 1
            again = seen
        elif again is None or not same_failure(first, again):
            again = seen
    if not reproduced:
        why: Why = "not re-run" if not reruns else "not reproduced"
        return Confirmed("inconclusive", why, reruns, 0, again, None)
    calibration = reference() if reference is not None else None
    if calibration:  # the reference showed a finding
        return Confirmed("inconclusive", "reference failed", reruns, reproduced, again, calibration)
    return Confirmed("fail", "reproduced", reruns, reproduced, again, calibration)
