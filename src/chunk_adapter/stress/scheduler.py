"""The scheduler thread's side of a scenario: timed, recorded calls and bounded stops.

:class:`SchedulerLoop` makes every scheduler call through the oracles'
:class:`~chunk_adapter.oracles.records.RecordedPipeline` (so the oracles see
them, each on the adapter it was made on) and times each one with
``perf_counter`` (R3: the scheduler never waits). :meth:`SchedulerLoop.run_until`
polls as a scheduler's loop does until the scenario is done, stops when
nothing has been handed out for a while (no progress: a finding), or at the
stage's budget (not a finding). :func:`timed_stop` runs ``stop()`` on a helper
daemon thread and waits for it with a timeout, so a ``stop()`` that never
returns is a finding, not a hang.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..bed.waiting import call_in_thread
from ..history import History
from ..oracles.records import RecordedPipeline
from .rig import HELPER_PREFIX, Pipeline

__all__ = ["CallTiming", "Progress", "SchedulerLoop", "StopOutcome", "timed_stop"]

Progress = Literal["done", "stalled", "budget", "set aside"]
"""How :meth:`SchedulerLoop.run_until` ended: done; nothing handed out for *stall*
seconds (no progress); the stage's budget ran out (no verdict); or its *cut* said the run
tells nothing new (its history shows a root cause a verify baseline accepts)."""
CUT_EVERY = 1.0
"""Seconds between two calls of :meth:`SchedulerLoop.run_until`'s *cut*."""


@dataclass
class CallTiming:
    """How long the scheduler's calls took: the slowest per call name, and every slow one."""

    bound: float
    calls: int = 0
    slowest: dict[str, float] = field(default_factory=dict)
    slow: list[tuple[float, str, str | None]] = field(default_factory=list)

    def add(self, name: str, request_id: str | None, elapsed: float) -> None:
        self.calls += 1
        if elapsed > self.slowest.get(name, 0.0):
            self.slowest[name] = elapsed
        if elapsed > self.bound:
            self.slow.append((elapsed, name, request_id))

    @property
    def worst(self) -> float:
        return max(self.slowest.values(), default=0.0)


class SchedulerLoop:
    """Drives a pipeline's adapters as a scheduler thread's loop would (see module doc).

    The pipeline's scheduler, played on a real thread; not the explorer's
    ``Scheduler`` protocol (:mod:`chunk_adapter.explore.runtime.tasks`), which picks the
    thread that runs next.

    ``received`` accumulates every ``poll_ready`` result per request;
    ``finished`` holds the requests whose final chunk was handed out;
    ``handed_out`` counts the chunks ``poll_ready`` returned, ``new_handed_out`` those
    unlike any handed out for their request before (progress: an adapter that hands the
    same chunks out again and again is not delivering).
    """

    def __init__(self, adapter: Pipeline, history: History, call_bound: float = 0.05) -> None:
        self.adapter = adapter
        self.history = history
        self.recorded = RecordedPipeline(adapter.sender, adapter.receiver, history)
        self.timing = CallTiming(call_bound)
        self.received: dict[str, list[dict[str, Any]]] = {}
        self.finished: set[str] = set()
        self.handed_out = 0
        self.new_handed_out = 0
        self._seen: dict[str, set[str]] = {}  # request -> repr of each value handed out

    def _timed(self, name: str, request_id: str | None, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        try:
            return fn()
        finally:
            self.timing.add(name, request_id, time.perf_counter() - start)

    def save(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._timed(
            "save_async", request_id, lambda: self.recorded.save_async(request_id, obj, is_final)
        )

    def cancel(self, request_id: str) -> None:
        self._timed("cancel_sender", request_id, lambda: self.recorded.cancel_sender(request_id))

    def load(self, request_id: str) -> None:
        self._timed("load_async", request_id, lambda: self.recorded.load_async(request_id))

    def cleanup(self, request_id: str) -> None:
        self._timed(
            "cleanup_receiver", request_id, lambda: self.recorded.cleanup_receiver(request_id)
        )

    def drain(self) -> int:
        """One ``poll_ready``; returns how many chunks it handed out."""
        ready: dict[str, list[dict[str, Any]]] = self._timed(
            "poll_ready", None, self.recorded.poll_ready
        )
        count = 0
        for request_id, values in ready.items():
            self.received.setdefault(request_id, []).extend(values)
            count += len(values)
            seen = self._seen.setdefault(request_id, set())
            for value in values:
                text = repr(value)
                self.new_handed_out += text not in seen
                seen.add(text)
            if any(isinstance(v, dict) and v.get("finished") is True for v in values):
                self.finished.add(request_id)
        self.handed_out += count
        return count

    def run_until(
        self,
        done: Callable[[], bool],
        stall: float,
        until: float | None = None,
        tick: float = 0.002,
        cut: Callable[[], bool] | None = None,
    ) -> Progress:
        """Call ``poll_ready`` every *tick* seconds, as a scheduler's loop does, until *done()*.

        Ends ``"stalled"`` when no new chunk was handed out for *stall* seconds —
        a slow adapter keeps handing chunks out, a stuck one does not, nor one that
        hands the same ones out again and again (``new_handed_out``) — and
        ``"budget"`` at the ``monotonic()`` time *until* (the stage's budget:
        not a verdict), and ``"set aside"`` when *cut()*, asked every :data:`CUT_EVERY`
        seconds, says so. The tick is the scheduler's own pace, not a guess at
        how long the adapter needs: the loop ends as soon as *done()* holds.
        """
        pace = threading.Event()  # never set: its wait() is the tick
        last = self.new_handed_out
        moved = asked = time.monotonic()
        while True:
            self.drain()
            if done():
                return "done"
            now = time.monotonic()
            if self.new_handed_out != last:
                last, moved = self.new_handed_out, now
            elif now - moved >= stall:
                return "stalled"
            if until is not None and now >= until:
                return "budget"
            if cut is not None and now - asked >= CUT_EVERY:
                asked = now
                if cut():
                    return "set aside"
            pace.wait(tick)

    def stats(self) -> Any | None:
        """The adapters' ``stats()`` if they have it (the reference adapter does), else None."""
        return self.adapter.stats()

    def stop_each(self, timeout: float, history: History) -> list[tuple[str, StopOutcome]]:
        """``stop()`` each adapter (sender first), each bounded by *timeout* seconds.

        A side whose ``stop()`` has not returned leaves the next side unstopped
        (its stop is not started behind a hung one) and is the last entry.
        """
        out: list[tuple[str, StopOutcome]] = []
        for side in self.recorded.sides:
            outcome = timed_stop(side.stop, timeout, history)
            out.append((side.name, outcome))
            if not outcome.returned:
                break
        return out


@dataclass
class StopOutcome:
    """What a bounded ``stop()`` did: ``elapsed`` is None when it had not returned in time."""

    elapsed: float | None
    error: BaseException | None
    thread: threading.Thread
    end_seq: int | None = None

    @property
    def returned(self) -> bool:
        return self.elapsed is not None


def timed_stop(
    stop: Callable[[], None], timeout: float, history: History | None = None
) -> StopOutcome:
    """Call *stop* on a helper daemon thread; wait at most *timeout* seconds for it.

    With a *history*, ``end_seq`` is a sequence number taken right after
    ``stop`` returned: a put whose ``begin`` is later started after ``stop()``.
    """
    outcome = call_in_thread(
        stop, timeout, f"{HELPER_PREFIX}stop", None if history is None else history.tick
    )
    return StopOutcome(outcome.elapsed, outcome.error, outcome.thread, outcome.after)
