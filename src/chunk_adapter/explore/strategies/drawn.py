"""Choices drawn up front (from Hypothesis), so a failing schedule shrinks.

``DrawnStrategy(choices)`` reads one number per choice point: ``0`` keeps the
running thread (no preemption), ``k`` picks the k-th alternative (modulo how
many there are; see :func:`~.base.ordered`). When the list runs out every
later choice is 0. Hypothesis shrinks a list of numbers towards fewer, smaller
ones: towards the schedule with the fewest preemptions that still fails.
"""

from __future__ import annotations

from collections.abc import Sequence

from .base import OneExecution, ordered

__all__ = ["DrawnStrategy"]


class DrawnStrategy(OneExecution):
    """One execution whose choices come from a list of non-negative ints."""

    def __init__(self, choices: Sequence[int]) -> None:
        self.choices = list(choices)

    def next_task(self, runnable: Sequence[int], current: int | None) -> int:
        alternatives = ordered(runnable, current)
        pick = self.choices[self._pos] if self._pos < len(self.choices) else 0
        self._pos += 1
        return alternatives[pick % len(alternatives)]

    def describe(self) -> str:
        return f"DrawnStrategy({self.choices!r})"
