"""Effect-delaying scheduling: hold an adapter thread just before it puts, gets or builds.

Most of the contract relates the scheduler's calls to what the adapter's threads do
at the connector and the builder: no put starts after ``stop()`` returned (R18), no
chunk is handed out after ``cleanup_receiver`` returned (R16), a cancel cuts what is
not put yet (R6), a snapshot is taken before ``save_async`` returns (R4). The bugs are
windows in which a thread has decided to act — checked the stop flag, read the
registration's token, took a chunk from the queue — and not acted yet, while a whole
scheduler call runs. Uniform random schedules rarely keep a thread in such a window
for the length of a call (every step of the call is a fresh coin), PCT only when its
priorities happen to fall so. This strategy does it on purpose, for every adapter
alike:

* mostly it keeps the running thread (no preemption), with a rare random switch;
* when an adapter thread is about to put, get or build (:attr:`Strategy.effect`, set by
  the controller), half of the time it **holds** that thread for a stretch of choices
  (1 to :data:`LONGEST`, log-uniform: most holds short, some the length of a few calls),
  and runs the scheduler's task if it can run, else another;
* a held thread is offered only when nothing else can run (then the one held first
  goes on), so a call that waits for it — a ``stop()`` joining it — still returns, and a
  call that does not wait for it ends before it acts. One that ran because it was the
  only thread that could (the controller does not ask then) stays held for the rest of
  its stretch: at its next choice point, just after its effect, the others run again —
  the window between an effect and the bookkeeping that follows it;
* where the controller offers :data:`~chunk_adapter.explore.runtime.tasks.TIME_PASSES` at
  the effect point (generated worlds: ``Scenario.preempt``), a held thread with nothing
  else to run sleeps that little instead, so a scheduler asleep in its think time or a
  pause wakes and makes its next call while the thread is still held.

Like :class:`~.uniform.RandomStrategy`, execution *i* of a seed is reproducible on its
own, and its replay string (the decisions) reproduces it without the seed: holding adds
no switch point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..runtime.tasks import TIME_PASSES
from .base import SeededExecutions

__all__ = ["LONGEST", "EffectStrategy"]

LONGEST = 300
"""The most choices a thread is held for (a stretch is drawn log-uniform in 1..LONGEST)."""
SCHEDULER = 0
"""The scheduler's task id: the controller starts it first."""


class EffectStrategy(SeededExecutions):
    """Holds adapter threads just before their puts, gets and builds (module doc)."""

    watches_effects = True

    def _begin(self) -> None:
        self._held: dict[int, int] = {}  # task id -> choices left, in the order held

    def _stretch(self) -> int:
        return int(math.exp(self._rng.uniform(0.0, math.log(LONGEST))))

    def next_task(self, runnable: Sequence[int], current: int | None) -> int:
        rng = self._rng
        for tid in list(self._held):  # a choice passes for every held thread
            self._held[tid] -= 1
            if self._held[tid] <= 0:
                del self._held[tid]
        tasks = [t for t in runnable if t != TIME_PASSES]
        may_pass = TIME_PASSES in runnable  # the running thread may sleep a little instead
        if (
            current is not None
            and self.effect
            and current not in self._held
            and rng.random() < 0.5
            and (len(tasks) > 1 or may_pass)
        ):
            self._held[current] = self._stretch()
        free = [t for t in tasks if t not in self._held]
        if not free and may_pass and current in self._held:
            return TIME_PASSES  # held through the scheduler's think time or pause
        if not free:  # only held threads can run: the one held first goes on
            first = next(t for t in self._held if t in tasks)
            del self._held[first]
            return first
        if current in free:
            others = [t for t in free if t != current]
            if others and rng.random() < 0.05:
                return rng.choice(others)
            return current
        if SCHEDULER in free and rng.random() < 0.75:
            return SCHEDULER
        return rng.choice(free)
