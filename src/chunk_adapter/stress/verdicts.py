"""Turning what a scenario observed into report failures, the same way everywhere.

The contract checks themselves are the oracles' (:func:`chunk_adapter.oracles.check`);
this module only adds what a history cannot show: how long ``stop()`` took,
which threads are still alive, and whether the adapter's counters agree with
the recording.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..bed.crashes import Crash
from ..bed.waiting import FREE_STOP_BOUND, UNKNOWN_JOIN_STOP_BOUND, blocked_stop_bound
from ..history import History
from ..oracles import accepted, check_aside
from ..rules import R18, R22, R23
from .accounting import stats_mismatches
from .report import LIVENESS, NOTE, ORACLE, StressReport
from .rig import HELPER_PREFIX, Rig
from .scheduler import SchedulerLoop, StopOutcome

__all__ = [
    "FREE_STOP_BOUND",
    "MAX_LISTED",
    "TINY_SWITCH_INTERVAL",
    "UNKNOWN_JOIN_STOP_BOUND",
    "blocked_stop_bound",
    "judge_counters",
    "judge_delivery",
    "judge_history",
    "judge_shutdown",
    "judge_stop",
    "judge_stops",
    "judge_thread_crashes",
    "switch_interval",
]

TINY_SWITCH_INTERVAL = 1e-6
"""Seconds between forced thread switches when shaking races (CPython's default: 0.005)."""

MAX_LISTED = 25  # failures listed per check before "... and N more"


SETTLE_SECONDS = 2.0
"""How long a quiescent history waits for calls already made to be on record."""


def judge_history(
    report: StressReport, history: History, *, quiescent: bool, put_tries: int | None
) -> None:
    """Every oracle violation in *history* becomes a failure, placed root cause first.

    Under a verify baseline, a history that shows an accepted root cause has none
    (:func:`~chunk_adapter.oracles.check`); the report keeps the rules it showed
    (:attr:`~.report.StressReport.set_aside`)."""
    violations, aside = check_aside(history, quiescent=quiescent, put_tries=put_tries)
    report.accept(aside)
    for v in violations[:MAX_LISTED]:
        report.add(str(v), ORACLE if v.at is not None else LIVENESS, v.at, rule=v.rule)
    if len(violations) > MAX_LISTED:
        rule = violations[0].rule
        report.add(f"{rule}: ... and {len(violations) - MAX_LISTED} more", LIVENESS, rule=rule)


def judge_counters(report: StressReport, stats: Any, history: History, nonfinal_saves: int) -> None:
    """The adapter's ``stats()`` must agree with the recording (skipped without stats)."""
    mismatches = stats_mismatches(stats, history, nonfinal_saves)
    for m in mismatches[:MAX_LISTED]:
        report.add(f"stats: {m}", NOTE, rule="stats")
    if len(mismatches) > MAX_LISTED:
        report.add(f"stats: ... and {len(mismatches) - MAX_LISTED} more", NOTE, rule="stats")


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
        report.fail(R18, f"{what} had not returned after waiting for it well past {bound:.3f}s")
        return
    assert outcome.elapsed is not None
    report.measure(what.replace("()", "").replace(" ", "_") + "_seconds", outcome.elapsed)
    if outcome.error is not None:
        report.fail(R18, f"{what} raised {outcome.error!r}; it must return quietly")
    if outcome.elapsed > bound:
        report.fail(R18, f"{what} took {outcome.elapsed:.3f}s; the bound is {bound:.3f}s")


def judge_thread_crashes(report: StressReport, crashes: list[Crash]) -> None:
    """No background thread died of an uncaught exception while the adapter ran (R22).

    Judged by the exceptions (:func:`~chunk_adapter.bed.crashes.thread_crashes`), not by
    which threads are still alive: a thread that ends because its work is done (a
    ``Timer`` round, a short-lived worker) breaks nothing, and a side that stops
    working without an exception is what the delivery checks (R23) see. The
    scenarios' own helper threads (``stress-...``) are not the adapter's.
    """
    dead = [(name, exc) for name, exc in list(crashes) if not name.startswith(HELPER_PREFIX)]
    if dead:
        report.fail(
            R22,
            f"background thread(s) {[name for name, _ in dead]} died while the adapter was "
            f"running, of {dead[0][1]!r}"
            + (f" and {len(dead) - 1} more" if len(dead) > 1 else "")
            + " (an exception from put/get/build must never kill a thread)",
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


def judge_delivery(
    report: StressReport,
    sched: SchedulerLoop,
    rig: Rig,
    crashes: list[Crash],
    expected: set[str],
    *,
    since: float,
    deadline: float,
    until: float | None,
    when: str = "",
) -> bool:
    """Poll until every stream in *expected* had its final handed out, then judge the run.

    Streams still missing once nothing new was handed out for *deadline*
    seconds fail R23 (*when* says after what, e.g. " after the gates opened");
    reaching *until* (the stage's budget) stops the scenario as incomplete
    instead. Then the threads that must be alive and the oracles over the
    history. ``True`` when every stream arrived (the counters can be compared).
    """

    def shows_accepted() -> bool:  # the history so far, under a baseline (below)
        # its findings are the final judgement's: only what it set aside counts here
        report.accept(check_aside(rig.history, quiescent=False, put_tries=rig.put_tries)[1])
        return bool(report.set_aside)

    # Under a verify baseline the run ends as soon as its history shows an accepted root
    # cause: what follows may be its consequence (a stall of 10 s among them), so the
    # rest of the run could only spend the stage's budget (module .stage).
    progress = sched.run_until(
        lambda: sched.finished >= expected,
        deadline,
        until,
        cut=shows_accepted if accepted.active() else None,
    )
    report.measure("seconds_to_complete", time.monotonic() - since)
    missing = sorted(expected - sched.finished)
    if progress == "set aside":
        judge_thread_crashes(report, crashes)
        return False
    if progress == "stalled":
        report.fail(
            R23,
            f"{len(missing)} of {len(expected)} streams had no final handed out{when}, and "
            f"nothing new was handed out for {deadline}s: e.g. {missing[:5]} (a final not put, "
            "or not received)",
        )
    judge_thread_crashes(report, crashes)
    if progress != "budget":
        # A final can be handed out before its put's record is appended (the
        # SAVE thread is preempted between the two); wait for such calls.
        rig.history.settle(SETTLE_SECONDS)
    judge_history(
        report,
        rig.history,
        quiescent=progress != "budget",  # done, or stalled: what is missing is missing
        put_tries=rig.put_tries,
    )
    if progress == "budget":
        report.stop_at_budget(f"{len(missing)} of {len(expected)} streams still being delivered")
    return progress == "done"


def judge_shutdown(
    report: StressReport,
    sched: SchedulerLoop,
    rig: Rig,
    stopped: list[tuple[str, StopOutcome]],
    *,
    complete: bool,
    nonfinal_saves: int,
) -> None:
    """``stop()`` of each side within :data:`FREE_STOP_BOUND`; when every stream arrived and
    every side stopped, the adapters' counters against the recording."""
    judge_stops(report, stopped, FREE_STOP_BOUND)
    if all(o.returned for _, o in stopped) and complete:
        judge_counters(report, sched.stats(), rig.history, nonfinal_saves)
