"""Volume under faults: many streams while puts, gets or builds fail (R5–R11, R14, R22, R23).

One driver, :func:`run_streams`, plays a seeded plan on the scheduler thread:
register most requests up front and the rest late (R12: chunks put before
``load_async`` are still received), save every request's chunks interleaved
at random with the final last, cancel some requests on the way, mutate each
object right after saving it (R4), and call ``poll_ready`` now and then. Then
it polls until every stream's final was handed out — a stream missing after
*deadline* seconds in which nothing new was handed out is a finding (R23);
a slow adapter that keeps delivering is not — checks the history with the
oracles, stops the adapters and compares their counters with the recording.

:func:`put_faults`, :func:`get_faults` and :func:`build_faults` are the named
scenarios on top of it. Each takes ``until``, a ``time.monotonic()`` value:
the stage's budget. Reaching it ends the scenario as *incomplete*, never as a
violation.
"""

from __future__ import annotations

import random
import time
from typing import Any

from ..bed.crashes import thread_crashes
from ..connectors import FaultRule
from ..factory import AdapterFactory
from .report import DEFAULT_SEED, StressReport
from .rig import LOOPBACK_STAGE, STAGE, Rig
from .scheduler import SchedulerLoop
from .verdicts import judge_delivery, judge_shutdown, switch_interval

__all__ = ["build_faults", "get_faults", "put_faults", "run_streams"]

# Fast retries keep hundreds of failing puts inside a default-tier budget.
FAST_OPTIONS: dict[str, Any] = {
    "put_backoff": 0.0005,
    "put_backoff_max": 0.004,
    "join_timeout": 1.0,
    "put_tries": 3,  # the contract's default, passed so the oracles know it (Rig.put_tries)
}


def _tag(obj: Any) -> str:
    return f"{obj['rid']}#{obj['n']}" if isinstance(obj, dict) else repr(obj)


def run_streams(
    factory: AdapterFactory,
    report: StressReport,
    *,
    seed: int,
    requests: int,
    chunks: int,
    put_rate: float = 0.0,
    get_rate: float = 0.0,
    put_bursts: int = 0,
    get_bursts: int = 0,
    burst_len: int = 6,
    final_retries: int = 0,
    final_put_failures: int = 0,
    build_fail_rate: float = 0.0,
    none_rate: float = 0.0,
    cancel_rate: float = 0.0,
    late_rate: float = 0.2,
    consume_on_get: bool = False,
    notify: bool = False,
    deadline: float = 20.0,
    switch_interval_s: float | None = None,
    loopback: bool = False,
    until: float | None = None,
) -> StressReport:
    """Play one seeded plan (module doc) and judge it; see the named scenarios.

    *deadline*: seconds without any chunk handed out before the streams still
    missing are reported (R23). *loopback*: one adapter receiving its own
    chunks instead of a sender and a receiver.
    """
    rng = random.Random(seed)
    stage = LOOPBACK_STAGE if loopback else STAGE
    plan: dict[str, int] = {f"s{i}": rng.randint(0, chunks) for i in range(requests)}
    for i in range(final_retries):  # a lone final whose first puts fail
        plan[f"fr{i}"] = 0
    total = sum(plan.values()) + len(plan)
    rules = [
        FaultRule("put", f"fr{i}_{stage}_0", times=final_put_failures)
        for i in range(final_retries)
        if final_put_failures
    ]
    rules += [
        FaultRule("put", nth=rng.randint(1, total), times=burst_len) for _ in range(put_bursts)
    ]
    rules += [
        FaultRule("get", nth=rng.randint(1, 4 * total), times=burst_len) for _ in range(get_bursts)
    ]
    tags = [f"{rid}#{n}" for rid, count in plan.items() for n in range(count + 1)]
    failing = {t for t in tags if rng.random() < build_fail_rate}
    nones = {t for t in tags if t not in failing and rng.random() < none_rate}

    def build(request_id: str, snapshot: Any, is_final: bool) -> Any:
        return None if _tag(snapshot) in nones else snapshot

    rig = Rig.build(
        seed=seed,
        put_rate=put_rate,
        get_rate=get_rate,
        rules=rules,
        consume_on_get=consume_on_get,
        notify=notify,
        build_fn=build,
        loopback=loopback,
    )
    if failing:
        rig.builder.fail(predicate=lambda rid, snap, fin: _tag(snap) in failing, times=len(failing))
    with switch_interval(switch_interval_s), thread_crashes(chain=True) as crashes:
        adapter = rig.adapter(factory, **FAST_OPTIONS)
        sched = SchedulerLoop(adapter, rig.history)
        nonfinal_saves = 0
        complete = False
        try:
            late = [rid for rid in plan if rng.random() < late_rate]
            early = set(plan) - set(late)
            for rid in plan:
                if rid in early:
                    sched.load(rid)
            cancel_at = {
                rid: rng.randint(0, n) for rid, n in plan.items() if rng.random() < cancel_rate
            }
            nxt = dict.fromkeys(plan, 0)
            active = list(plan)
            t0 = time.monotonic()
            while active:
                rid = active[rng.randrange(len(active))]
                n = nxt[rid]
                if cancel_at.get(rid) == n:
                    sched.cancel(rid)
                obj = {"rid": rid, "n": n}
                final = n == plan[rid]
                sched.save(rid, obj, final)
                obj["n"] = -1  # R4: changes nothing that is sent
                nonfinal_saves += not final
                nxt[rid] = n + 1
                if final:
                    active.remove(rid)
                if late and rng.random() < 0.05:
                    sched.load(late.pop(rng.randrange(len(late))))
                if rng.random() < 0.02:
                    sched.drain()
            for rid in late:
                sched.load(rid)
            complete = judge_delivery(
                report, sched, rig, crashes, set(plan), since=t0, deadline=deadline, until=until
            )
        except Exception as exc:  # a scheduler call raised: a finding, reported with the seed
            complete = False
            report.fail("error", f"the scheduler thread's call raised {exc!r}")
        finally:
            stopped = sched.stop_each(10.0, rig.history)
            rig.release_all()
        judge_shutdown(
            report, sched, rig, stopped, complete=complete, nonfinal_saves=nonfinal_saves
        )
    report.measure("scheduler_calls", sched.timing.calls)
    report.measure("slowest_call_seconds", sched.timing.worst)
    report.measure("puts_failed", rig.bed.faulty.injected["put"])
    report.measure("gets_failed", rig.bed.faulty.injected["get"])
    report.measure("history_records", len(rig.history))
    return report


def put_faults(
    factory: AdapterFactory,
    *,
    seed: int = DEFAULT_SEED,
    requests: int = 100,
    chunks: int = 8,
    put_rate: float = 0.3,
    put_bursts: int = 3,
    final_retries: int = 3,
    final_put_failures: int = 6,
    cancel_rate: float = 0.1,
    consume_on_get: bool = False,
    notify: bool = False,
    deadline: float = 20.0,
    switch_interval_s: float | None = None,
    loopback: bool = False,
    until: float | None = None,
) -> StressReport:
    """Puts fail at *put_rate* (seeded), plus scripted bursts of consecutive failures
    and *final_retries* lone finals whose first *final_put_failures* puts fail.

    Holds if ids stay contiguous per stream, every final is put once and last
    and handed out, nothing is handed out twice or out of order (the oracles),
    dropped chunks match ``stats()``, and no thread died. *loopback*: one
    adapter receiving its own chunks (a variant; the default is a pipeline).
    """
    params = _params(locals())
    report = StressReport("put_faults", params)
    return run_streams(factory, report, until=until, **params)


def get_faults(
    factory: AdapterFactory,
    *,
    seed: int = DEFAULT_SEED,
    requests: int = 100,
    chunks: int = 8,
    get_rate: float = 0.3,
    get_bursts: int = 3,
    consume_on_get: bool = True,
    notify: bool = False,
    deadline: float = 20.0,
    switch_interval_s: float | None = None,
    until: float | None = None,
) -> StressReport:
    """Gets fail at *get_rate* (seeded) plus bursts: nothing lost, nothing twice, the
    RECV thread survives (R13, R14, R22, R23)."""
    params = _params(locals())
    report = StressReport("get_faults", params)
    return run_streams(factory, report, until=until, **params)


def build_faults(
    factory: AdapterFactory,
    *,
    seed: int = DEFAULT_SEED,
    requests: int = 100,
    chunks: int = 8,
    build_fail_rate: float = 0.2,
    none_rate: float = 0.1,
    cancel_rate: float = 0.1,
    notify: bool = False,
    deadline: float = 20.0,
    switch_interval_s: float | None = None,
    until: float | None = None,
) -> StressReport:
    """``build_payload`` raises for final and non-final chunks at *build_fail_rate* and
    returns ``None`` at *none_rate* (R7, R8, R11, R22): failed non-finals are dropped,
    failed finals go out with data ``None``."""
    params = _params(locals())
    report = StressReport("build_faults", params)
    return run_streams(factory, report, until=until, **params)


def _params(given: dict[str, Any]) -> dict[str, Any]:
    """A scenario's parameters as its report prints them: not the factory, not the budget,
    and ``loopback`` only when set."""
    params = {k: v for k, v in given.items() if k not in ("factory", "until")}
    if not params.get("loopback", True):
        del params["loopback"]
    return params
