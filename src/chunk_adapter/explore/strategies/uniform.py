"""Uniform random scheduling: at every choice, any runnable thread, equally likely."""

from __future__ import annotations

from collections.abc import Sequence

from .base import SeededExecutions

__all__ = ["RandomStrategy"]


class RandomStrategy(SeededExecutions):
    """Runs ``executions`` executions; execution *i* uses ``random.Random(seed * 1_000_003 + i)``.

    Each execution is reproducible from its own seed, and its replay string
    reproduces it without the seed.
    """

    def next_task(self, runnable: Sequence[int], current: int | None) -> int:
        return self._rng.choice(list(runnable))
