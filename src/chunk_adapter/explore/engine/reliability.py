"""The reliability rules in generated worlds (``Scenario.reliable``: ``verify --reliability``).

R25, R30 and R31 bind the reference adapter; an adapter that claims them too is
judged for them in the same generated worlds as every other rule, with the faults
that try them (:func:`..scenarios.worlds._reliability`). R25 (a put refused for
good is never retried) is the sender oracle's (:mod:`chunk_adapter.oracles.aligner`,
which judges every history so); R30 and R31 are judged here:

* **R31 — no head-of-line blocking** (:func:`hol_failures`): a request none of
  whose puts failed must not wait for its next build while its adapter's SAVE
  side sits idle and another request's puts keep failing: an adapter that
  retries a failing put *in place* sleeps out its backoff, or a whole outage for
  a final (R11), while the other request's chunk is ready. Judged on the virtual
  clock: a wait of :data:`HOL` or more, with failed puts of another request in it,
  during which that adapter began no build at all (of any request: a backlog of
  other requests' chunks being worked through is no blocking; a SAVE side that
  only retries one put is). Worlds with a slow call are not judged (a call that
  takes long holds any SAVE thread).
* **R30 — no silent thread death** (:func:`judge_death`): a build, put or get
  raised ``SystemExit`` or a bare ``BaseException``. The adapter may survive it
  (every other rule then applies as after any failed call), or end *loudly*: a
  later ``save_async`` or ``load_async`` of that adapter raises (a
  ``RuntimeError``, as ``AdapterFailed`` is). Then only what happened before the
  fault is judged. What it may not do is go on accepting work it never delivers:
  a world whose failures the history before the fault does not show, on an
  adapter that never said it died, is an R30 violation. An
  ``asyncio.CancelledError`` is that call's failure (R30): it must be survived.
  A reliable world ends with a probe request (``Scenario.probe``), so every such
  adapter is asked once after the fault.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from ...connectors.fatal import BASE, FATAL, raised_kind
from ...errors import AdapterStopped, SaveQueueFull
from ...history import BuildCall, ConnectorOp, History
from ...oracles import CallRecord, split_key
from ...rules import R3, R18, R30, R31
from ..runtime.tasks import Failure, as_failure
from ..scenarios.pipeline import Hop
from ..scenarios.scenario import FAILS, Scenario
from .checks import history_before
from .result import NOT_CONTROLLED, Execution
from .timing import cancelled_requests, first_stop, judged, queues_a_build, timed_records

__all__ = ["HOL", "Fired", "armed", "fired", "hol_failures", "judge_death"]

HOL = 1.5
"""Virtual seconds a request's ready chunk may wait, its adapter beginning no build, while
another request's puts fail: 15x a correct adapter's longest wait timeout here, and far
below the outages (2-60 s) the worlds put one request's stream through."""

_UNDECIDED = (*NOT_CONTROLLED, "script")
"""Failure kinds that are no verdict (:data:`.simulate.NOT_A_VERDICT`): never made one."""
_KEPT = frozenset({R3, R18})
"""What a loudly dead adapter is still held to: its calls never wait, and ``stop()``."""


class Fired:
    """The first injected ``SystemExit``/``CancelledError``/``BaseException`` of a run."""

    def __init__(self, record: BuildCall | ConnectorOp, kind: str, role: str | None) -> None:
        self.record, self.kind, self.role = record, kind, role

    @property
    def what(self) -> str:
        r = self.record
        if isinstance(r, BuildCall):
            return f"build_payload({r.request_id!r})"
        return f"{r.op}({r.key!r})"

    def __str__(self) -> str:
        return f"{self.what} raised {self.record.error}"


def armed(scenario: Scenario) -> bool:
    """Whether *scenario* arms a fault of :data:`~...connectors.fatal.BASE` at all (else
    :func:`fired` need not read its history)."""
    return any(op.kind in FAILS and op.what in BASE for op in scenario.ops)


def fired(history: History, hops: tuple[Hop, ...], build_roles: dict[int, str]) -> Fired | None:
    """The first fault of :data:`~...connectors.fatal.BASE` that fired, and the member
    whose thread it ran on (``None``: not known)."""
    for r in history.records():
        if not isinstance(r, (BuildCall, ConnectorOp)) or r.error is None:
            continue
        kind = raised_kind(r.error)
        if kind not in BASE:
            continue
        if isinstance(r, BuildCall):
            return Fired(r, kind, build_roles.get(id(r)))
        parsed = split_key(r.key)
        hop = next((h for h in hops if parsed is not None and h.stage_id == parsed[1]), None)
        role = None if hop is None else hop.sender if r.op == "put" else hop.receiver
        return Fired(r, kind, role)
    return None


def _after(history: History, fault: Fired) -> Iterator[CallRecord]:
    """The member's sending and registering calls begun after *fault* and before its first
    ``stop()`` began (after it they raise for that reason: R19)."""
    mine = [
        r for r in history.records()
        if isinstance(r, CallRecord) and (fault.role is None or r.adapter == fault.role)
    ]  # fmt: skip
    stopped = min((r.begin for r in mine if r.call == "stop"), default=None)
    for r in mine:
        if stopped is not None and r.begin >= stopped:
            continue
        if r.begin > fault.record.end and r.call in ("save_async", "load_async"):
            yield r


def _loud(calls: list[CallRecord]) -> CallRecord | None:
    """The first call that said the adapter died: it raised a ``RuntimeError`` (what the
    scenario runner lets through, as after ``stop()``) that is not the reference's refusal
    of a save for a full queue, or of a call after ``stop()``."""
    return next(
        (c for c in calls if isinstance(c.error, RuntimeError)
         and not isinstance(c.error, (SaveQueueFull, AdapterStopped))),
        None,
    )  # fmt: skip


Checker = Callable[[Execution], Sequence[str | Failure]]


def judge_death(execution: Execution, scenario: Scenario, checker: Checker) -> None:
    """R30 on *execution* (module doc): its failures rewritten in place once a fault of
    :data:`~...connectors.fatal.BASE` fired. *checker* judges the history before it."""
    if not scenario.reliable or not armed(scenario):
        return
    if any(f.kind in _UNDECIDED for f in execution.failures):
        return  # what decides nothing (over the step budget, not controlled) stays so
    fault = fired(execution.history, execution.hops, execution.build_roles)
    if fault is None:
        return
    calls = list(_after(execution.history, fault))
    loud = _loud(calls)
    whose = f"the {fault.role}" if fault.role else "the adapter"

    def before() -> list[Failure]:
        """The oracles' verdict on the history before the fault."""
        part = replace(execution, history=history_before(execution.history, fault.record.end),
                       cut=None)  # fmt: skip
        return [as_failure(found) for found in checker(part)]

    def judged_before() -> None:
        """Judge the history before the fault only; keep R3 and R18 (:data:`_KEPT`) and the
        explorer's own verdicts."""
        kept = [f for f in execution.failures if f.kind != "violation" or set(f.rules) & _KEPT]
        execution.failures = before() + kept

    if loud is not None and fault.kind in FATAL:
        judged_before()
        return
    if loud is not None:
        execution.failures = [Failure(
            "violation",
            f"R30: {fault} (injected), and {whose} ended on it: its {loud.call}"
            f"({loud.request_id!r}) raised {loud.error!r}. An asyncio.CancelledError raised "
            "by the caller's code cancels that code's own work; it is that call's failure, "
            "to be survived as an Exception is (R22)",
            (R30,),
        )]  # fmt: skip
        return
    accepted = sum(1 for c in calls if c.error is None)
    if not execution.failures:
        return  # survived
    if not accepted:  # never asked after the fault: what it did then decides nothing
        judged_before()
        return
    if before():
        return  # the failures were there before the fault
    first = execution.failures[0].message.splitlines()[0]
    execution.failures = [Failure(
        "violation",
        f"R30: {fault} (injected) on {whose}'s thread, which then kept no promise: "
        f"{accepted} save_async/load_async call(s) of it returned normally afterwards, none "
        f"raised, and then: {first} A thread must survive what the caller's code raises, "
        "or end loudly: every later save_async and load_async raises, naming the cause",
        (R30,),
    )]  # fmt: skip


def hol_failures(
    history: History, scenario: Scenario, hops: tuple[Hop, ...], build_roles: dict[int, str]
) -> list[Failure]:
    """R31 on the virtual clock (module doc): the first request that waited, on some
    sending member, :data:`HOL` virtual seconds or more for its next build, that member
    beginning no build meanwhile while another request's puts failed."""
    times = history.times
    if (not scenario.reliable or not judged(scenario) or not times
            or any(op.kind == "slow" for op in scenario.ops)
            or (armed(scenario) and fired(history, hops, build_roles) is not None)):  # fmt: skip
        return []
    role_of_stage = {h.stage_id: h.sender for h in hops}
    stopped = first_stop(history, max(times.values()))
    cancelled = cancelled_requests(history)
    built: dict[str, list[float]] = defaultdict(list)  # when a member's builds began
    own: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)  # its calls
    failing: dict[str, list[tuple[float, str]]] = defaultdict(list)  # (time, request)
    # per (member, request): (sequence number, time, +1) for a save that needs a build,
    # (..., -1) for a build begun: ordered by sequence number, as a build may begin (the
    # SAVE thread ran) before the save_async that queued it has returned
    events: dict[tuple[str, str], list[tuple[int, float, int]]] = defaultdict(list)
    for r, begin, end in timed_records(history):
        if isinstance(r, CallRecord):
            if queues_a_build(r, begin, stopped) and r.request_id is not None:
                events[(r.adapter, r.request_id)].append((r.begin, end, 1))
            continue
        if isinstance(r, BuildCall):
            role, rid = build_roles.get(id(r)), r.request_id
            if role is not None:
                events[(role, rid)].append((r.begin, begin, -1))
                built[role].append(begin)
        elif isinstance(r, ConnectorOp) and r.op == "put":
            parsed = split_key(r.key)
            if parsed is None or parsed[1] not in role_of_stage:
                continue
            role, rid = role_of_stage[parsed[1]], parsed[0]
            if r.outcome == "error":
                failing[role].append((begin, rid))
        else:
            continue
        if role is not None:
            own[(role, rid)].append((begin, end))
    troubled = {(role, rid) for role, fails in failing.items() for _, rid in fails}
    for (role, rid), happened in events.items():
        if (role, rid) in troubled or (role, rid) in cancelled:
            continue
        pending, since = 0, 0.0
        for _, at, step in [*sorted(happened), (-1, stopped, -1)]:
            if pending > 0 and step < 0:
                found = _waited(role, rid, since, min(at, stopped), built, own, failing)
                if found is not None:
                    return [found]
            pending = max(0, pending + step)
            if step < 0 or pending == 1:
                since = at
    return []


def _waited(
    role: str,
    rid: str,
    since: float,
    until: float,
    built: dict[str, list[float]],
    own: dict[tuple[str, str], list[tuple[float, float]]],
    failing: dict[str, list[tuple[float, str]]],
) -> Failure | None:
    """The R31 breach of request *rid* on *role* waiting from *since* to *until*, or
    ``None``."""
    start = max([since, *(e for b, e in own[(role, rid)] if b < until)])  # its own last call
    if until - start < HOL or any(start < at < until for at in built[role]):
        return None  # short, or the SAVE side went on with other work meanwhile
    others = sorted({other for at, other in failing[role] if start <= at <= until and other != rid})
    if not others:
        return None
    return Failure(
        "violation",
        f"R31: a chunk of {rid!r} saved on the {role} waited {until - start:.3g} s of virtual "
        f"time (t={start:.3f}..{until:.3f}) for its build, and the {role}'s SAVE side began "
        f"no build at all meanwhile, while the puts of {', '.join(map(repr, others))} kept "
        "failing: one request's failing puts must not hold back another's chunks (park the "
        "failing stream until its next try is due and go on with other requests' work)",
        (R31,),
    )
