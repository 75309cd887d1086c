"""Prompt ``stop()`` from every state (R18, R19, R20).

States:

``idle``            nothing registered, nothing saved;
``mid_stream``      streams being put and received at full speed;
``build_blocked``   ``build_payload`` held forever at a gate;
``put_blocked``     a ``put`` held forever;
``get_blocked``     a ``get`` held forever;
``final_retrying``  every put of a final fails, so it is being retried;
``all_blocked``     one adapter that both sends and receives (a loopback: a middle
                    stage's shape) with a build *and* a get held forever at once —
                    every thread it has stuck in a call.

In each, ``stop()`` of each adapter — the sender, then the receiver — (called
on a helper thread, so one that never returns is a finding, not a hang) must
return within a bound derived from its ``join_timeout`` when its work is
blocked (the sender's build or put, the receiver's get; in ``all_blocked`` the one
deadline holds for all its stuck threads together, not one per thread), and within
:data:`~chunk_adapter.stress.verdicts.FREE_STOP_BOUND` otherwise. Afterwards
no adapter thread may be alive except the one blocked at the gate (an
abandoned daemon), once the others had that bound again to end (a pool worker
told to go as ``stop()`` returns gets there a moment later); a second
``stop()`` returns just as promptly; once the gate is opened the abandoned
thread ends, and no put starts after the sender's ``stop()`` returned (the
oracles check that on the recording).
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable

from ..bed.waiting import shown_stop_bound
from ..connectors import FaultRule
from ..factory import AdapterFactory
from ..rules import R3, R18, R23
from .report import DEFAULT_SEED, StressReport
from .rig import LOOPBACK_STAGE, STAGE, Rig, Watchdog, setting
from .scheduler import SchedulerLoop, StopOutcome, timed_stop
from .verdicts import (
    FREE_STOP_BOUND,
    blocked_stop_bound,
    judge_history,
    judge_stop,
    switch_interval,
)

__all__ = ["STATES", "prompt_stop"]

STATES = (
    "idle", "mid_stream", "build_blocked", "put_blocked", "get_blocked", "final_retrying",
    "all_blocked",
)  # fmt: skip
BLOCKED = {
    "build_blocked": "sender",
    "put_blocked": "sender",
    "get_blocked": "receiver",
    "all_blocked": "adapter",
}
"""The blocked states, and the side whose thread is blocked in each (``adapter``: the one
loopback adapter, every thread of it)."""
_SETUP = 5.0  # seconds for the adapter to reach the state (a gate, N failed puts)
_EXIT = 2.0  # seconds for an abandoned thread to end once its gate is opened


def prompt_stop(
    factory: AdapterFactory,
    *,
    state: str,
    seed: int = DEFAULT_SEED,
    join_timeout: float = 0.3,
    requests: int = 20,
    notify: bool = False,
    switch_interval_s: float | None = None,
    until: float | None = None,
) -> StressReport:
    """Bring the adapters to *state* (module doc), stop them, and judge the stops.

    (*until*, the stage's budget, is accepted like every scenario's; this one
    has no open-ended wait: every wait has its own bound.)
    """
    if state not in STATES:
        raise ValueError(f"state must be one of {STATES}, got state={state!r}")
    report = StressReport(
        "prompt_stop",
        {
            "state": state,
            "seed": seed,
            "join_timeout": join_timeout,
            "requests": requests,
            "notify": notify,
            "switch_interval_s": switch_interval_s,
        },
    )
    rng = random.Random(seed)
    loopback = state == "all_blocked"  # one adapter, both sides: every thread can be stuck
    key = f"held_{LOOPBACK_STAGE if loopback else STAGE}_0"
    rules = [FaultRule("put", key, times=10**9)] if state == "final_retrying" else []
    rig = Rig.build(seed=seed, rules=rules, notify=notify, loopback=loopback)
    with switch_interval(switch_interval_s):
        adapter = rig.adapter(factory, join_timeout=join_timeout)
        sched = SchedulerLoop(adapter, rig.history)
        blocked = state in BLOCKED
        # The join_timeout= passed above when the adapter surely got it (rig.known); else
        # an attribute of that name only ever loosens the bound (it may mean something
        # else: milliseconds, one thread's share), and the reference's 1 s is not assumed.
        known = rig.known.get("join_timeout")
        shown = setting(adapter, "join_timeout", math.nan)
        if isinstance(known, (int, float)):
            slow = blocked_stop_bound(float(known))
        else:
            slow = shown_stop_bound(None if math.isnan(shown) else shown)

        def bound(side: str) -> float:
            return slow if blocked and side in (BLOCKED[state], "adapter") else FREE_STOP_BOUND

        try:
            dog = Watchdog(rig.release_all, _SETUP)
            reached = _reach(state, rig, sched, rng, requests, key)
            if dog.cancel():
                report.fail(
                    R3,
                    f"setting up state {state!r}: a scheduler call waited for held work until "
                    f"the watchdog opened the gates after {_SETUP}s",
                )
            if not reached:
                report.fail(R23, f"setup: the adapter never reached state {state!r} in {_SETUP}s")
            first = _stop_each(report, sched, bound, "stop()")
            allowed = (2 if state == "all_blocked" else 1) if blocked else 0
            alive = _still_alive(rig.new_threads(), allowed)
            if first and (len(alive) > allowed or any(not t.daemon for t in alive)):
                report.fail(
                    R18,
                    f"after stop() in state {state!r}, threads still alive: "
                    f"{[(t.name, 'daemon' if t.daemon else 'NOT daemon') for t in alive]}; "
                    f"at most {allowed} (the one blocked at the gate, a daemon) may be",
                )
            report.measure("threads_alive_after_stop", len(alive))
            if first:
                _stop_each(report, sched, bound, "second stop()")
        finally:
            rig.release_all()
        leftover = _join_all(rig.new_threads(), _EXIT)
        if leftover:
            report.fail(
                R18,
                f"threads {leftover} still alive {_EXIT}s after every gate was opened, "
                f"following stop() in state {state!r}",
            )
        judge_history(report, rig.history, quiescent=False, put_tries=None)
    return report


def _stop_each(
    report: StressReport, sched: SchedulerLoop, bound: Callable[[str], float], what: str
) -> bool:
    """``stop()`` each adapter, the sender first, each judged against its own bound (R18).

    ``True`` if every one returned. After a hung ``stop()`` the sides left are
    still stopped (bounded, not judged: the hung one is the finding), so no
    adapter goes on running behind the verdict.
    """
    hung = False
    for side in sched.recorded.sides:
        limit = bound(side.name)
        outcome: StopOutcome = timed_stop(side.stop, 2 * limit + 1.0, sched.history)
        if hung:
            continue
        judge_stop(
            report, outcome, limit, what if side.name == "adapter" else f"{side.name} {what}"
        )
        hung = not outcome.returned
    return not hung


def _reach(
    state: str, rig: Rig, sched: SchedulerLoop, rng: random.Random, requests: int, key: str
) -> bool:
    """Drive the adapter into *state*; ``False`` if it did not get there in time."""
    if state == "idle":
        return True
    for i in range(requests):  # background polling in every non-idle state
        sched.load(f"idle-{i}")
    if state == "mid_stream":
        rids = [f"m{i}" for i in range(requests)]
        for rid in rids:
            sched.load(rid)
        for n in range(40):
            for rid in rng.sample(rids, len(rids)):
                sched.save(rid, {"rid": rid, "n": n}, n == 39)
        target = rig.watch.ops + 10 * requests
        return rig.watch.wait_for(lambda: rig.watch.ops >= target, _SETUP)
    if state == "build_blocked":
        gate = rig.builder.hold("held")
        sched.save("held", {"rid": "held", "n": 0}, False)
        return gate.wait_started(_SETUP)
    if state == "put_blocked":
        gate = rig.bed.gated.hold_put(key)
        sched.save("held", {"rid": "held", "n": 0}, False)
        return gate.wait_started(_SETUP)
    if state == "get_blocked":
        gate = rig.bed.gated.hold_get(key)
        sched.load("held")
        return gate.wait_started(_SETUP)
    if state == "all_blocked":  # the receiving side's get first, then the sending side's build
        got = rig.bed.gated.hold_get(key)
        sched.load("held")
        built = rig.builder.hold("built")
        sched.save("built", {"rid": "built", "n": 0}, False)
        return got.wait_started(_SETUP) and built.wait_started(_SETUP)
    # final_retrying: every put of the lone final fails; wait for a few tries
    sched.save("held", {"rid": "held", "n": 0}, True)
    return rig.watch.wait_for(lambda: rig.bed.faulty.injected["put"] >= 3, _SETUP)


def _still_alive(alive: list[threading.Thread], allowed: int) -> list[threading.Thread]:
    """The threads of *alive* (those left when ``stop()`` returned) still alive once any
    more than *allowed*, or not daemons, had :data:`FREE_STOP_BOUND` to end: a pool
    worker told to go as ``stop()`` returns may take a moment to get there, which harms
    nothing (a put after ``stop()`` returned is the oracles' finding, R18). A thread that
    is still there is judged."""
    if len(alive) <= allowed and all(t.daemon for t in alive):
        return alive
    deadline = time.monotonic() + FREE_STOP_BOUND
    for t in alive:
        t.join(max(0.0, deadline - time.monotonic()))
    return [t for t in alive if t.is_alive()]


def _join_all(threads: list[threading.Thread], timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return [t.name for t in threads if t.is_alive()]
