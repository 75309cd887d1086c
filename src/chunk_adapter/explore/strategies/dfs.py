"""Bounded exhaustive DFS with a preemption bound (after CHESS and loom).

Every execution is one path through the tree of choice points. The first
execution always keeps the running thread; each later one backtracks to the
deepest choice point that still has an untried alternative, replays the path
up to it, and takes that alternative. A choice that switches away from a thread
that could have kept running is a *preemption*; paths with more than
``preemption_bound`` preemptions are not explored (CHESS found every bug it
found within 2). Switches when the running thread blocks or ends are free, and
all their alternatives are explored. ``complete`` says whether the bounded tree
was exhausted.

Exploration is stateless: it relies on executions being deterministic given the
choices; a difference is reported as :class:`~.replay.ScheduleDiverged`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .base import Strategy, ordered
from .replay import ScheduleDiverged

__all__ = ["DfsStrategy"]


@dataclass
class _Point:
    runnable: tuple[int, ...]
    alternatives: list[int]
    index: int
    preemptions_before: int
    can_continue: bool  # the running thread was one of the alternatives (index 0)

    def preemptions_after(self) -> int:
        return self.preemptions_before + (1 if self.can_continue and self.index > 0 else 0)


class DfsStrategy(Strategy):
    """Exhaustive over schedules with at most ``preemption_bound`` preemptions."""

    def __init__(self, preemption_bound: int = 2, max_executions: int | None = None) -> None:
        self.preemption_bound = preemption_bound
        self.max_executions = max_executions
        self.executions = 0
        self.complete = False
        self._stack: list[_Point] = []
        self._pos = 0

    def start_execution(self) -> bool:
        if self.max_executions is not None and self.executions >= self.max_executions:
            return False
        if self.executions > 0 and not self._backtrack():
            self.complete = True
            return False
        self.executions += 1
        self._pos = 0
        return True

    def _backtrack(self) -> bool:
        while self._stack:
            point = self._stack[-1]
            nxt = point.index + 1
            if nxt < len(point.alternatives) and (
                not point.can_continue or point.preemptions_before < self.preemption_bound
            ):
                point.index = nxt
                return True
            self._stack.pop()
        return False

    def next_task(self, runnable: Sequence[int], current: int | None) -> int:
        if self._pos < len(self._stack):
            point = self._stack[self._pos]
            if point.runnable != tuple(runnable):
                raise ScheduleDiverged(
                    f"DFS choice point {self._pos}: threads {list(runnable)} can run, but "
                    f"{list(point.runnable)} could when this path was first taken; the "
                    "execution is not deterministic (real time, randomness or a real "
                    "threading primitive outside the explorer's control?)"
                )
        else:
            before = self._stack[-1].preemptions_after() if self._stack else 0
            can_continue = current is not None and current in runnable
            point = _Point(tuple(runnable), ordered(runnable, current), 0, before, can_continue)
            self._stack.append(point)
        self._pos += 1
        return point.alternatives[point.index]

    def describe(self) -> str:
        return f"DfsStrategy(preemption_bound={self.preemption_bound})"
