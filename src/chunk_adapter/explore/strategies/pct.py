"""PCT: probabilistic concurrency testing (Burckhardt, Kothari, Musuvathi, Nagarakatte 2010).

Each thread gets a random priority when it first appears; the highest-priority
runnable thread always runs. ``depth - 1`` change points, drawn uniformly over
the expected length of an execution, each lower the priority of the thread
running there below every other. A bug that needs ``d`` ordering constraints is
found by one execution with probability at least ``1 / (n * k ** (d - 1))``
(``n`` threads, ``k`` steps); in practice far more often.

Here a step is a *choice point* (more than one thread can run), not every
switch point: the long single-thread stretches (a settle, a polling loop that
runs alone) would otherwise soak up the change points. The expected length
``k`` starts at ``steps_hint`` and then follows the longest execution seen.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from .base import Strategy

__all__ = ["PctStrategy"]


class PctStrategy(Strategy):
    """``executions`` runs; run *i* draws from ``random.Random(seed * 1_000_003 + i)``."""

    def __init__(
        self, seed: int = 0, depth: int = 3, executions: int = 100, steps_hint: int = 50
    ) -> None:
        if depth < 1:
            raise ValueError(f"PCT depth counts ordering constraints and is >= 1, got {depth!r}")
        self.seed = seed
        self.depth = depth
        self.executions = executions
        self.done = 0
        self.max_seen = steps_hint
        self._rng = random.Random(seed)
        self._priority: dict[int, float] = {}
        self._changes: list[int] = []
        self._step = 0

    def start_execution(self) -> bool:
        if self.done >= self.executions:
            return False
        self.max_seen = max(self.max_seen, self._step)
        self._rng = random.Random(self.seed * 1_000_003 + self.done)
        self.done += 1
        self._priority = {}
        points = range(1, max(self.max_seen, self.depth))
        self._changes = sorted(self._rng.sample(points, min(self.depth - 1, len(points))))
        self._step = 0
        return True

    def next_task(self, runnable: Sequence[int], current: int | None) -> int:
        self._step += 1
        for tid in runnable:
            if tid not in self._priority:
                self._priority[tid] = self.depth + self._rng.random()
        if current is not None:
            self._priority.setdefault(current, self.depth + self._rng.random())
        while self._changes and self._changes[0] <= self._step:
            self._changes.pop(0)
            if current is not None:
                # Lower than every initial priority, and than earlier changes.
                self._priority[current] = self.depth - 1 - len(self._changes) - self._rng.random()
        return max(runnable, key=lambda tid: self._priority[tid])

    def next_u64(self) -> int:
        return self._rng.getrandbits(64)

    def describe(self) -> str:
        return f"PctStrategy(seed={self.seed}, depth={self.depth}, executions={self.executions})"
