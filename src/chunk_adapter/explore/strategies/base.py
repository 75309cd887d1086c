"""The one small interface every strategy implements (after awslabs/shuttle).

Three calls: :meth:`Strategy.start_execution` before each execution (``False``
ends the exploration), :meth:`Strategy.next_task` at each point where the
controller must pick which thread runs, and :meth:`Strategy.next_u64` when the
code under test asks for a random number. A strategy that sets :attr:`Strategy.observes`
(DPOR) also hears, through :meth:`Strategy.observe` and :meth:`Strategy.waiting`, what each
step touched; the others keep their no-op defaults and the controller tracks nothing.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from ..runtime.footprint import Footprint

__all__ = ["OneExecution", "SeededExecutions", "Strategy", "ordered"]


class Strategy:
    """Base class: subclasses override the three calls and set ``every_step`` if needed."""

    every_step = False
    """``True``: be asked at every step, even when only one thread can run (PCT counts steps)."""
    watches_sections = False
    """``True``: the controller sets :attr:`gap` before each :meth:`next_task`."""
    gap = False
    """The running thread is about to take again a lock it released a few switch points
    ago (between two critical sections of one lock: :mod:`.sections`)."""
    watches_effects = False
    """``True``: the controller sets :attr:`effect` before each :meth:`next_task`."""
    effect = False
    """The running task is an adapter thread about to put, get or build (:mod:`.effects`)."""
    observes = False
    """``True``: the controller tracks what each step touches (its footprint) and calls
    :meth:`observe` and :meth:`waiting` (:mod:`.dpor`); ``False``: it never calls them."""
    complete = False
    """Set by a systematic strategy (DFS, DPOR) once it has run every execution it has."""
    proof = False
    """``True``: :attr:`complete` means every trace was checked (:class:`.dpor.ProofStrategy`)."""

    @property
    def traces(self) -> int | None:
        """DPOR: executions run to their end, one per Mazurkiewicz trace; ``None`` for others."""
        return None

    def start_execution(self) -> bool:
        raise NotImplementedError

    def next_task(self, runnable: Sequence[int], current: int | None) -> int:
        raise NotImplementedError

    def next_u64(self) -> int:
        return 0

    def observe(self, tid: int, footprint: Footprint, held: dict[Any, int] | None = None) -> None:
        """Task *tid* ended a step that touched *footprint*, after which *held* says who
        holds each lock the step touched (-1: nobody). Called only when :attr:`observes`."""

    def waiting(self, tid: int, lock: Any, holder: int) -> None:
        """At this choice point task *tid* is not offered: its next step takes *lock*,
        which task *holder* holds. Called only when :attr:`observes`."""

    def describe(self) -> str:
        """How to build this strategy again, as Python (shown in failure reports)."""
        return f"{type(self).__name__}()"


class OneExecution(Strategy):
    """A strategy of exactly one execution, read from recorded choices at ``_pos``."""

    _pos = 0
    _started = False

    def start_execution(self) -> bool:
        if self._started:
            return False
        self._started = True
        self._pos = 0
        return True


class SeededExecutions(Strategy):
    """``executions`` executions, execution *i* drawing from ``random.Random(seed *
    1_000_003 + i)``: each is reproducible from its own seed, and its replay string
    reproduces it without the seed. Subclasses reset their own per-execution state in
    :meth:`_begin` and pick with ``self._rng``."""

    def __init__(self, seed: int = 0, executions: int = 100) -> None:
        self.seed = seed
        self.executions = executions
        self.done = 0
        self._rng = random.Random(seed)
        self._begin()

    def _begin(self) -> None:
        """Reset what one execution keeps (called before each)."""

    def start_execution(self) -> bool:
        if self.done >= self.executions:
            return False
        self._rng = random.Random(self.seed * 1_000_003 + self.done)
        self._begin()
        self.done += 1
        return True

    def next_u64(self) -> int:
        return self._rng.getrandbits(64)

    def describe(self) -> str:
        return f"{type(self).__name__}(seed={self.seed}, executions={self.executions})"


def ordered(runnable: Sequence[int], current: int | None) -> list[int]:
    """The alternatives at a choice point: the running thread first (no preemption), then
    the others by id. Index 0 therefore always means "do not preempt"."""
    if current is not None and current in runnable:
        return [current, *(t for t in runnable if t != current)]
    return list(runnable)
