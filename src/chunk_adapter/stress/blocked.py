"""The scheduler never waits, even while the background work is stuck (R3, R6, R9, R11).

The contract's Example 3 at scale: while many requests stream, the adapter
goes through *episodes*, in turn a ``build_payload``, a ``put`` and a ``get``
held at a gate. During each episode the scheduler keeps saving, cancelling,
saving finals, registering and polling; every call is timed and must return
within *call_bound* (default 50 ms; a correct adapter takes microseconds). In
a build episode the held request also gets more chunks, its final, and
(seeded) a cancel while its first build is stuck. After the gate opens,
everything must flow: ids contiguous, every final handed out (the oracles).

A call that waits for the held work would block the very thread that opens
the gate, so each episode has a :class:`~chunk_adapter.stress.rig.Watchdog`
that opens it after *episode_limit* seconds: the stuck call then returns late
and is reported. Calls over the bound but under 10x it are taken for the
operating system preempting the process (two verifies on two cores do that),
and only measured; one over 10x, or a watchdog that had to open a gate, fails
R3. After the gates open, streams still missing once nothing at all was
handed out for *deadline* seconds fail R23; the stage's budget (``until``)
ends the scenario as incomplete instead.
"""

from __future__ import annotations

import random
import time

from ..bed.crashes import thread_crashes
from ..connectors import Gate
from ..factory import AdapterFactory
from ..rules import R3, R23
from .report import DEFAULT_SEED, StressReport
from .rig import Rig, Watchdog
from .scheduler import SchedulerLoop
from .streams import FAST_OPTIONS
from .verdicts import judge_delivery, judge_shutdown, switch_interval

__all__ = ["blocked_work"]

KINDS = ("build", "put", "get")
_SETUP = 5.0  # seconds for the adapter to reach a gate


def _arm(rig: Rig, kind: str, rid: str) -> Gate:
    if kind == "build":
        return rig.builder.hold(rid)
    prefix = f"{rid}_{rig.stage}_"
    if kind == "put":
        return rig.bed.gated.hold_put(predicate=lambda k: k.startswith(prefix))
    return rig.bed.gated.hold_get(predicate=lambda k: k.startswith(prefix))


def blocked_work(
    factory: AdapterFactory,
    *,
    seed: int = DEFAULT_SEED,
    requests: int = 80,
    chunks: int = 6,
    episodes: int = 6,
    calls_while_blocked: int = 40,
    cancel_rate: float = 0.3,
    call_bound: float = 0.05,
    episode_limit: float = 3.0,
    notify: bool = False,
    deadline: float = 20.0,
    switch_interval_s: float | None = None,
    until: float | None = None,
) -> StressReport:
    """Run the plan with gate episodes (module doc) and judge it."""
    params = {k: v for k, v in locals().items() if k not in ("factory", "until")}
    report = StressReport("blocked_work", params)
    rng = random.Random(seed)
    plan: dict[str, int] = {f"s{i}": rng.randint(1, chunks) for i in range(requests)}
    steps = sum(plan.values()) + len(plan)
    window = steps // max(1, episodes)  # one episode starts somewhere in each window
    starts = [
        e * window + rng.randrange(max(1, window - calls_while_blocked)) for e in range(episodes)
    ]
    rig = Rig.build(seed=seed, notify=notify)
    blocked_calls = 0
    mark = 0
    with switch_interval(switch_interval_s), thread_crashes(chain=True) as crashes:
        adapter = rig.adapter(factory, **FAST_OPTIONS)
        sched = SchedulerLoop(adapter, rig.history, call_bound)
        nonfinal_saves = 0
        held: list[str] = []
        complete = False
        try:
            for rid in plan:
                sched.load(rid)
            cancel_at = {
                rid: rng.randint(0, n) for rid, n in plan.items() if rng.random() < cancel_rate
            }
            nxt = dict.fromkeys(plan, 0)
            active = list(plan)
            gate: Gate | None = None
            dog: Watchdog | None = None  # opens the current gate if the scheduler gets stuck
            left = 0  # calls still to make in the current episode
            step = 0
            while active:
                if gate is None and starts and step >= starts[0]:
                    starts.pop(0)
                    kind = KINDS[len(held) % len(KINDS)]
                    rid = f"blk{len(held)}-{kind}"
                    held.append(rid)
                    gate = _arm(rig, kind, rid)
                    dog = Watchdog(gate.release, episode_limit)
                    sched.load(rid)
                    sched.save(rid, {"rid": rid, "n": 0}, False)
                    nonfinal_saves += 1
                    if not gate.wait_started(_SETUP):
                        report.fail(R23, f"setup: the {kind} of {rid!r} never reached its gate")
                    if kind == "build":  # Example 3: queue more, the final, maybe cancel
                        for n in (1, 2, 3):
                            sched.save(rid, {"rid": rid, "n": n}, False)
                        sched.save(rid, {"rid": rid, "n": 4}, True)
                        nonfinal_saves += 3
                        if rng.random() < 0.5:
                            sched.cancel(rid)
                    left = calls_while_blocked
                    mark = sched.timing.calls
                rid = active[rng.randrange(len(active))]
                n = nxt[rid]
                if cancel_at.get(rid) == n:
                    sched.cancel(rid)
                final = n == plan[rid]
                sched.save(rid, {"rid": rid, "n": n}, final)
                nonfinal_saves += not final
                nxt[rid] = n + 1
                if final:
                    active.remove(rid)
                if rng.random() < 0.1:
                    sched.drain()
                step += 1
                if gate is not None:
                    left -= 1
                    if left <= 0 or not active:
                        blocked_calls += sched.timing.calls - mark
                        if dog is not None and dog.cancel():
                            report.fail(
                                R3,
                                f"while the {held[-1]!r} work was held, the scheduler did not get "
                                f"through {calls_while_blocked} calls in {episode_limit}s: the "
                                "watchdog had to open the gate (a call waited for held work)",
                            )
                        gate.release()
                        gate = None
            for rid in held:
                if not rid.endswith("build"):
                    sched.save(rid, {"rid": rid, "n": 1}, True)
            everyone = set(plan) | set(held)
            t0 = time.monotonic()
            complete = judge_delivery(
                report,
                sched,
                rig,
                crashes,
                everyone,
                since=t0,
                deadline=deadline,
                until=until,
                when=" after the gates opened",
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
    slow = sorted(sched.timing.slow, reverse=True)
    if R3 in report.rules or (slow and slow[0][0] > 10 * call_bound):
        for elapsed, name, call_rid in slow[:10]:
            report.fail(
                R3,
                f"{name}({call_rid!r}) took {elapsed * 1000:.1f} ms on the scheduler thread "
                f"(bound {call_bound * 1000:.0f} ms; {len(slow)} calls over it; builds, puts "
                "and gets were held at times)",
            )
    elif slow:  # outliers under 10x the bound: the OS preempting us, not the adapter
        report.measure("slow_calls", len(slow))
        report.measure("slowest_slow_call_seconds", slow[0][0])
    report.measure("episodes", len(held))
    report.measure("calls_while_blocked", blocked_calls)
    report.measure("slowest_call_seconds", sched.timing.worst)
    return report
