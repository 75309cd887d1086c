"""Turning what a scenario observed into report failures, the same way everywhere.

The contract checks themselves are the oracles' (:func:`chunk_adapter.oracles.check`);
this module only adds what a history cannot show: how long ``stop()`` took,
which threads are still alive, and whether the adapter's counters agree with
the recording.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..history import History
from ..oracles import check
from .accounting import stats_mismatches
from .report import LIVENESS, NOTE, ORACLE, StressReport
from .rig import Rig
from .scheduler import StopOutcome

__all__ = [
    "FREE_STOP_BOUND",
    "MAX_LISTED",
    "TINY_SWITCH_INTERVAL",
    "blocked_stop_bound",
    "judge_counters",
    "judge_history",
    "judge_stop",
    "judge_stops",
    "judge_threads_alive",
    "switch_interval",
]

FREE_STOP_BOUND = 0.25
"""Seconds ``stop()`` may take when nothing is blocked (the contract: well under 0.1 s)."""

TINY_SWITCH_INTERVAL = 1e-6
"""Seconds between forced thread switches when shaking races (CPython's default: 0.005)."""

MAX_LISTED = 25  # failures listed per check before "... and N more"


def blocked_stop_bound(join_timeout: float) -> float:
    """Seconds ``stop()`` may take when a build, put or get is blocked forever.

    The contract: within the join timeout. Allowed: 1.5 x that plus 0.25 s of
    scheduling slack, far above the milliseconds a correct adapter overshoots
    by, and below the 2 x of joining each thread with the full timeout.
    """
    return 1.5 * join_timeout + 0.25


def judge_history(
    report: StressReport, history: History, *, quiescent: bool, put_tries: int | None
) -> None:
    """Every oracle violation in *history* becomes a failure, placed root cause first."""
    violations = check(history, quiescent=quiescent, put_tries=put_tries)
    for v in violations[:MAX_LISTED]:
        report.add(str(v), ORACLE if v.at is not None else LIVENESS, v.at)
    if len(violations) > MAX_LISTED:
        report.add(f"{violations[0].rule}: ... and {len(violations) - MAX_LISTED} more", LIVENESS)


def judge_counters(report: StressReport, stats: Any, history: History, nonfinal_saves: int) -> None:
    """The adapter's ``stats()`` must agree with the recording (skipped without stats)."""
    mismatches = stats_mismatches(stats, history, nonfinal_saves)
    for m in mismatches[:MAX_LISTED]:
        report.add(f"stats: {m}", NOTE)
    if len(mismatches) > MAX_LISTED:
        report.add(f"stats: ... and {len(mismatches) - MAX_LISTED} more", NOTE)


def judge_stops(
    report: StressReport, outcomes: list[tuple[str, StopOutcome]], bound: float
) -> None:
    """Each adapter's ``stop()`` (sender, receiver) returned within *bound* (R18)."""
    for name, outcome in outcomes:
        judge_stop(report, outcome, bound, "stop()" if name == "adapter" else f"{name} stop()")


def judge_stop(
    report: StressReport, outcome: StopOutcome, bound: float, what: str = "stop()"
) -> None:
    """``stop()`` returned, without raising, within *bound* seconds (R18)."""
    if not outcome.returned:
        report.fail("R18", f"{what} had not returned after waiting for it well past {bound:.3f}s")
        return
    assert outcome.elapsed is not None
    report.measure(what.replace("()", "").replace(" ", "_") + "_seconds", outcome.elapsed)
    if outcome.error is not None:
        report.fail("R18", f"{what} raised {outcome.error!r}; it must return quietly")
    if outcome.elapsed > bound:
        report.fail("R18", f"{what} took {outcome.elapsed:.3f}s; the bound is {bound:.3f}s")


def judge_threads_alive(report: StressReport, rig: Rig, started: list[Any]) -> None:
    """Every background thread the adapter started is still alive while it runs (R22)."""
    dead = [t.name for t in started if not t.is_alive()]
    if dead:
        report.fail(
            "R22",
            f"background thread(s) {dead} died while the adapter was running "
            "(an exception from put/get/build must never kill a thread)",
        )


@contextmanager
def switch_interval(interval: float | None) -> Iterator[None]:
    """Run with ``sys.setswitchinterval(interval)`` (``None``: unchanged); restore after."""
    if interval is None:
        yield
        return
    old = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    try:
        yield
    finally:
        sys.setswitchinterval(old)
