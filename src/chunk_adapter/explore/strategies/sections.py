"""Atomicity-directed scheduling: preempt a thread between two critical sections of one lock.

A thread that releases a lock and soon takes the same lock again has split one
piece of work in two critical sections (copy then clear, check then commit,
read the registrations then commit what was fetched); whatever another thread
does to the guarded state in between is the classic atomicity violation.
Uniform random schedules rarely preempt exactly there, and then rarely let the
other thread get through a whole critical section of its own before switching
back. This strategy does both, on purpose and for every lock alike:

* mostly it keeps the running thread (no preemption), with a rare random switch;
* when the running thread is about to take again a lock it released within its
  last :data:`~chunk_adapter.explore.runtime.tasks.SECTION_GAP` switch points
  (:attr:`Strategy.gap`, set by the controller), it switches, half of the time, to
  another runnable thread and keeps that one running for a random stretch of
  switch points, so it can do a whole operation (a commit, a cleanup, a poll)
  before the first thread resumes;
* where the controller offers :data:`~chunk_adapter.explore.runtime.tasks.TIME_PASSES`
  at the gap (generated worlds: a thread asleep for a polling pause or a call's
  latency would wake within a few milliseconds), that is one of the choices: the
  thread stays off the CPU a few virtual milliseconds while the others run.

Like :class:`~.uniform.RandomStrategy`, execution *i* of a seed is reproducible on
its own, and its replay string reproduces it without the seed.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..runtime.tasks import TIME_PASSES
from .base import SeededExecutions

__all__ = ["SectionStrategy"]

STRETCH = (1, 40)
"""How many switch points the thread switched to keeps running (uniform, inclusive)."""


class SectionStrategy(SeededExecutions):
    """Preempts between two critical sections of one lock (module doc)."""

    watches_sections = True

    def _begin(self) -> None:
        self._stick: int | None = None
        self._left = 0

    def next_task(self, runnable: Sequence[int], current: int | None) -> int:
        rng = self._rng
        others = [t for t in runnable if t != current and t != TIME_PASSES]
        if self._stick is not None and self._left > 0 and self._stick in runnable:
            self._left -= 1
            return self._stick
        self._stick = None
        if current is None or current not in runnable:
            return rng.choice([t for t in runnable if t != TIME_PASSES])
        switch = others + [TIME_PASSES] * (TIME_PASSES in runnable)
        if self.gap and switch and rng.random() < 0.5:
            chosen = rng.choice(switch)
            if chosen != TIME_PASSES:  # preempted for a while: the others run meanwhile
                self._stick, self._left = chosen, rng.randint(*STRETCH)
            return chosen
        if others and rng.random() < 0.05:
            return rng.choice(others)
        return current
