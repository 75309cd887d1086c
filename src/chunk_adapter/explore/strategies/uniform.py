"""Uniform random scheduling: at every choice, any runnable thread, equally likely."""

from __future__ import annotations

import random
from collections.abc import Sequence

from .base import Strategy

__all__ = ["RandomStrategy"]


class RandomStrategy(Strategy):
    """Runs ``executions`` executions; execution *i* uses ``random.Random(seed * 1_000_003 + i)``.

    Each execution is reproducible from its own seed, and its replay string
    reproduces it without the seed.
    """

    def __init__(self, seed: int = 0, executions: int = 100) -> None:
        self.seed = seed
        self.executions = executions
        self.done = 0
        self._rng = random.Random(seed)

    def start_execution(self) -> bool:
        if self.done >= self.executions:
            return False
        self._rng = random.Random(self.seed * 1_000_003 + self.done)
        self.done += 1
        return True

    def next_task(self, runnable: Sequence[int], current: int | None) -> int:
        return self._rng.choice(list(runnable))

    def next_u64(self) -> int:
        return self._rng.getrandbits(64)

    def describe(self) -> str:
        return f"RandomStrategy(seed={self.seed}, executions={self.executions})"
