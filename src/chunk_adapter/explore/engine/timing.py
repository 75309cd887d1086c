"""Timing rules judged on the virtual clock (generated worlds: ``Scenario.liveness`` set).

On the explorer's virtual clock nothing takes time unless somebody waits for
it (a sleep, a timed wait, a slow call), so timing rules become exact and
machine-independent:

* **R3** — a scheduler call (``save_async`` ... ``cleanup_receiver``, a relay)
  that took :data:`R3_WAIT` virtual seconds or more waited for the connector, a
  build or a background thread;
* **R18** — in a world without faults, ``stop()`` takes under
  :data:`STOP_BOUND` (the contract: well under 0.1 s when the threads are idle);
  in any world, under the bound the contract gives a ``stop()`` with work
  blocked forever (:func:`~chunk_adapter.bed.waiting.join_bound`: 1.5 x the
  adapter's ``join_timeout`` + 0.25 s, at least 5 s): it joins against a
  deadline and abandons a thread stuck in a slow build, put or get;
* **R17** — a chunk the receiver owes fetched late: :mod:`.latency`.

Each bound is 2.5x-250x what the contract asks, so an adapter that keeps the
contract in any reasonable way never meets it. Worlds with faults are judged
for R3 and that R18 bound, and for R17 when only puts and builds failed: after a
failed call an adapter may back off as long as it likes, on that call's side.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from ...bed.waiting import UNKNOWN_JOIN_STOP_BOUND
from ...history import BuildCall, ConnectorOp, History
from ...oracles import CallRecord, split_key
from ...rules import R3, R7, R17, R18
from ..runtime.tasks import Failure
from ..scenarios.pipeline import Hop
from ..scenarios.scenario import Op, Scenario

__all__ = [
    "FAULTS",
    "HELD",
    "R3_WAIT",
    "STOP_BOUND",
    "CallClock",
    "cancelled_requests",
    "first_stop",
    "held_failures",
    "hop_suffix",
    "judged",
    "queues_a_build",
    "timed_records",
]

R3_WAIT = 0.5
STOP_BOUND = 0.25
FAULTS = ("fail_put", "fail_get", "fail_build", "outage", "slow")
SCHEDULER_CALLS = ("save", "cancel", "load", "poll", "cleanup", "relay", "reject")


def judged(scenario: Scenario) -> bool:
    """Whether *scenario* is judged in time (a generated world)."""
    return scenario.liveness > 0


def quiet(scenario: Scenario) -> bool:
    """Whether *scenario* has no fault at all (its timing is the adapter's own)."""
    return not any(op.kind in FAULTS for op in scenario.ops)


class CallClock:
    """Times each op of the script on *now* and reports the R3 and R18 breaches.

    The script's ``stop()`` stops each member in turn; with a *history* whose calls carry
    virtual times, each member's ``stop()`` is held to its own bound
    (:attr:`member_bounds`), else the op as a whole to :attr:`stop_bound`."""

    def __init__(
        self, scenario: Scenario, now: Callable[[], float], history: History | None = None
    ) -> None:
        self.now = now
        self.history = history
        self._mark = 0  # the history's records before the stop() in progress
        self.member_bounds: dict[str, float] = {}
        """Each member's bound for ``stop()`` with work blocked, by the name its calls
        are recorded under (its role; ``"adapter"`` alone)."""
        self.on = judged(scenario)
        self.quiet = quiet(scenario)
        self.began = 0.0
        self.current: Op | None = None  # the op begun and not yet returned
        self.failures: list[Failure] = []
        self.stop_bound = UNKNOWN_JOIN_STOP_BOUND
        """How long the script's ``stop()`` may take with work blocked: the sum of its
        members' bounds, stopped one after the other (set as they are built: the
        contract's for the ``join_timeout`` passed when a member surely took it, else
        :func:`~chunk_adapter.bed.waiting.join_bound`)."""

    def before(self, op: Op) -> None:
        self.began = self.now()
        self.current = op
        if op.kind == "stop" and self.history is not None:  # its members' calls follow
            self._mark = len(self.history)

    def never_returned(self) -> Failure | None:
        """For an execution cut short (over the step budget, a livelock): the scheduler
        call it was stuck in, when that call had waited past its bound — the root cause."""
        op, took = self.current, self.now() - self.began
        if not self.on or op is None:
            return None
        if op.kind in SCHEDULER_CALLS and took >= R3_WAIT:
            return Failure(
                "violation",
                f"R3: the scheduler call {op} never returned ({took:.3g} s of virtual time "
                "while the adapter's threads ran on): it waits for something that does not come",
                (R3,),
            )
        if op.kind == "stop" and took > self.stop_bound:
            return Failure(
                "violation",
                f"R18: {op} never returned ({took:.3g} s of virtual time): stop() joins against "
                "a deadline and abandons a thread that is blocked",
                (R18,),
            )
        return None

    def after(self, op: Op) -> None:
        self.current = None
        if not self.on:
            return
        took = self.now() - self.began
        if op.kind in SCHEDULER_CALLS and took >= R3_WAIT:
            self.failures.append(
                Failure(
                    "violation",
                    f"R3: the scheduler call {op} took {took:.3g} s of virtual time: it waited "
                    "for the connector, a build or a background thread (it must only take a "
                    "snapshot, enqueue or swap under a short lock)",
                    (R3,),
                )
            )
        elif op.kind == "stop" and self.quiet and took >= STOP_BOUND:
            self.failures.append(
                Failure(
                    "violation",
                    f"R18: {op} took {took:.3g} s of virtual time with no build, put or get "
                    f"blocked or failing (the bound here is {STOP_BOUND} s; the contract: well "
                    "under 0.1 s when the threads are idle — notify them, do not wait out "
                    "their timeouts)",
                    (R18,),
                )
            )
        elif op.kind == "stop":
            for who, seconds, bound in self._stops(took):
                if seconds > bound:
                    self.failures.append(
                        Failure(
                            "violation",
                            f"R18: {who}stop() took {seconds:.3g} s of virtual time while a "
                            f"build, put or get was slow or failing (the bound here is "
                            f"{bound:.3g} s: 1.5 x the join timeout passed + 0.25 s, 5 s when "
                            "it is not known): stop() joins its threads against one deadline "
                            "and abandons a thread that is blocked",
                            (R18,),
                        )
                    )
                    break

    def _stops(self, took: float) -> list[tuple[str, float, float]]:
        """``(who, seconds, bound)`` of each member's ``stop()`` in the op just ended, from
        the recorded calls; the op as a whole when they are not recorded in time."""
        times = self.history.times if self.history is not None else {}
        out = []
        if self.history is not None and times and self.member_bounds:
            for r in self.history.records_from(self._mark):
                if not isinstance(r, CallRecord) or r.call != "stop":
                    continue
                if r.begin not in times or r.end not in times:
                    continue
                if r.adapter not in self.member_bounds:
                    continue
                who = "" if len(self.member_bounds) == 1 else f"{r.adapter}."
                seconds = times[r.end] - times[r.begin]
                out.append((who, seconds, self.member_bounds[r.adapter]))
        return out or [("", took, self.stop_bound)]


def hop_suffix(hops: tuple[Hop, ...], hop: Hop) -> str:
    return f" [hop {hop.label}]" if len(hops) > 1 else ""


HELD = 1.5
"""Virtual seconds a saved chunk may wait, its adapter's SAVE side idle, while another
adapter's build or put is in flight (:func:`held_failures`): above any wait timeout a
SAVE thread that is woken late (not notified) could sleep out."""


def first_stop(history: History, default: float) -> float:
    """When the first ``stop()`` of the history began (virtual time), else *default*."""
    times = history.times
    return min(
        (times[r.begin] for r in history.records()
         if isinstance(r, CallRecord) and r.call == "stop" and r.begin in times),
        default=default,
    )  # fmt: skip


def timed_records(history: History) -> Iterator[tuple[Any, float, float]]:
    """``(record, begin, end)`` in virtual time, for the history's records that have both."""
    times = history.times
    for r in history.records():
        if r.begin in times and r.end in times:
            yield r, times[r.begin], times[r.end]


def queues_a_build(r: CallRecord, begin: float, stopped: float) -> bool:
    """Whether *r* is a ``save_async`` that queued a chunk to build: it returned, began
    before the first ``stop()`` (*stopped*), and saved a payload or a final."""
    if r.call != "save_async" or r.error is not None or begin >= stopped:
        return False
    snapshot, final = r.args
    return snapshot is not None or bool(final)


def cancelled_requests(history: History) -> set[tuple[str, str | None]]:
    """``(member, request)`` of every ``cancel_sender`` in the history: an adapter may drop
    what such a request had queued (R6), so a wait judged on builds leaves them out."""
    return {
        (r.adapter, r.request_id)
        for r in history.records()
        if isinstance(r, CallRecord) and r.call == "cancel_sender"
    }


def held_failures(
    history: History, scenario: Scenario, hops: tuple[Hop, ...], build_roles: dict[int, str]
) -> list[Failure]:
    """R7 / R17 across adapters: adapters share nothing but the interpreter, so a chunk
    saved on one must not wait, its adapter's SAVE side idle (no build or put of its own
    in flight, none failed before), for :data:`HELD` virtual seconds or more while
    another adapter's build (R7: built outside every lock, shared ones too) or put (R17:
    no request waits behind another) is in flight for nearly all of that time.

    Judged from the counts: a request's saves (a payload, or a final) returned against
    its builds begun, per adapter; requests that were cancelled, and anything after a
    ``stop()``, are left out (an adapter may drop what it will not send)."""
    times = history.times
    if not judged(scenario) or not times or len({h.sender for h in hops}) < 2:
        return []
    role_of_stage = {h.stage_id: h.sender for h in hops}
    stopped = first_stop(history, float("inf"))
    cancelled = cancelled_requests(history)
    # per adapter: (time, +1) for a save that needs a build, (time, -1) for a build begun
    events: dict[str, list[tuple[float, int]]] = defaultdict(list)
    busy: dict[str, list[tuple[float, float, str]]] = defaultdict(list)  # (from, to, what)
    failed_at: dict[str, float] = {}
    for r, begin, end in timed_records(history):
        if isinstance(r, CallRecord):
            if queues_a_build(r, begin, stopped) and (r.adapter, r.request_id) not in cancelled:
                events[r.adapter].append((end, 1))
            continue
        if isinstance(r, BuildCall):
            role = build_roles.get(id(r))
            what = f"build of {r.request_id!r}"
            if role is not None and (role, r.request_id) not in cancelled and begin < stopped:
                events[role].append((begin, -1))
        elif isinstance(r, ConnectorOp) and r.op == "put":
            parsed = split_key(r.key)
            role = role_of_stage.get(parsed[1]) if parsed else None
            what = f"put {r.key}"
        else:
            continue
        if role is None:
            continue
        busy[role].append((begin, end, what))
        if r.outcome == "error":
            failed_at[role] = min(failed_at.get(role, end), end)
    for role, happened in events.items():
        pending, since = 0, 0.0
        for at, step in sorted(happened, key=lambda e: (e[0], -e[1])):
            if pending > 0 and step < 0:
                found = _held(role, since, at, busy, failed_at.get(role, float("inf")))
                if found is not None:
                    return [found]
            pending += step
            if step < 0 or pending == 1:
                since = at  # the next chunk waits from its save, or from the build before it
    return []


def _held(
    role: str,
    since: float,
    until: float,
    busy: dict[str, list[tuple[float, float, str]]],
    failed: float,
) -> Failure | None:
    """The breach of :func:`held_failures` by a chunk of *role* waiting from *since* to
    *until*, or ``None``."""
    if until >= failed:
        return None  # after a failure of its own an adapter may back off
    own = [(b, e) for b, e, _ in busy[role] if b < until and e > since]
    start = max([since, *(e for _, e in own)])  # idle since its last own call ended
    if until - start < HELD:
        return None
    for other, calls in busy.items():
        if other == role:
            continue
        for b, e, what in calls:
            covered = min(e, until) - max(b, start)
            if covered >= 0.9 * (until - start):
                rule = R7 if what.startswith("build") else R17
                return Failure(
                    "violation",
                    f"{rule}: a chunk saved on the {role} waited {until - start:.3g} s of "
                    f"virtual time (t={start:.3f}..{until:.3f}) for its build to begin, its "
                    f"SAVE side idle, while the {other}'s {what} was in flight: adapters "
                    "share nothing, so one's slow build or put must not hold up another's "
                    + ("(build_payload is called outside every lock, shared ones too)"
                       if rule == R7 else "(no request waits behind another)"),
                    (rule,),
                )  # fmt: skip
    return None
