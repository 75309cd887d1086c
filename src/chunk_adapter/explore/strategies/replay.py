"""Replay: run exactly the decisions of a schedule string, once."""

from __future__ import annotations

from collections.abc import Sequence

from .base import OneExecution
from .schedule import Decision, decode, with_effect_points, with_race_points

__all__ = ["ReplayStrategy", "ScheduleDiverged"]


class ScheduleDiverged(AssertionError):
    """The execution being replayed did not reach the same choice as the recorded one."""


class ReplayStrategy(OneExecution):
    """Replays ``schedule`` (a string from a failure report) for one execution.

    After the recorded decisions run out, it keeps the running thread (no
    preemption) — so a prefix of a schedule is a valid schedule too.
    """

    def __init__(self, schedule: str) -> None:
        self.schedule = schedule
        self.decisions: list[Decision] = decode(schedule)
        # recorded with race points as switch points (a sections strategy): the replay's
        # controller makes them switch points too, so each decision lands on its step
        self.watches_sections = with_race_points(schedule)
        # recorded where time may pass at an effect point (an effects strategy): the same
        self.watches_effects = with_effect_points(schedule)

    def _next(self, kind: str) -> int | None:
        if self._pos >= len(self.decisions):
            return None
        got_kind, value = self.decisions[self._pos]
        if got_kind != kind:
            raise ScheduleDiverged(
                f"decision {self._pos} of {self.schedule!r} is a "
                f"{'thread choice' if got_kind == 't' else 'random number'}, but the "
                "execution asked for the other kind: the scenario, the adapter or the "
                "explorer changed since the schedule was recorded"
            )
        self._pos += 1
        return value

    def next_task(self, runnable: Sequence[int], current: int | None) -> int:
        tid = self._next("t")
        if tid is None:
            return current if current is not None else runnable[0]
        if tid not in runnable:
            raise ScheduleDiverged(
                f"decision {self._pos - 1} of {self.schedule!r} runs thread {tid}, but only "
                f"threads {list(runnable)} can run: the scenario, the adapter or the "
                "explorer changed since the schedule was recorded"
            )
        return tid

    def next_u64(self) -> int:
        value = self._next("r")
        return 0 if value is None else value

    @property
    def exhausted(self) -> bool:
        return self._pos >= len(self.decisions)

    def describe(self) -> str:
        return f"ReplayStrategy({self.schedule!r})"
