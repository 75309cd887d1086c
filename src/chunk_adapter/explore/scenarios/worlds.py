"""Whole worlds, drawn by Hypothesis: topology, configuration, program and faults.

A *world* is a :class:`~.scenario.Scenario` with everything drawn:

* **topology and configuration**: a 2-stage pipeline, a 3-stage one or a
  loopback; stage ids from 0-7, consecutive or not; ``src_stage_id`` given or
  left to the factory's default where that reads the right stage; a consuming
  or a keeping connector, with put notifications or polled; adapter options
  (:data:`OPTIONS`, passed where the factory takes them);
* **the scheduler's program**: saves of nested objects over two or three
  request ids (some spelled like keys: ``"r_0_1"``), mutated in place after the
  save at any depth, cancels, loads, polls, cleanups, reuse of a request id
  after its final, pauses, relays through the middle stage, and a ``stop()``
  that may come before the end, with calls after it;
* **the scheduler's pace**: it sleeps a drawn think time after a call (the adapter's
  threads finish first) or works on for a drawn number of its own steps (its next call
  lands in the middle of their work), or calls again at once;
* **faults in virtual time**: single put/get/build failures and bursts,
  outages from 1 ms to 60 s, slow calls, calls that hang (60 s; one, or a build
  and a get at once) while the scheduler stops the adapter; an outage that lasts the whole
  rest of the run is a permanent error (60 s is longer than any run's work).

The one usage rule of the contract is kept: a request that was cancelled gets
its final chunk saved. Every strategy here shrinks towards the simplest world
(a 2-stage pipeline at stages 0 and 1, no options, few ops, short faults), so a
failing world shrinks as far as the bug lets it.

Over 400 lines, and one module because the world is one Hypothesis composite: topology,
program, pace and faults are drawn in one order that shrinking depends on, so the draws
stay in one file.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TypeVar

from hypothesis import strategies as st

from ...connectors.fatal import BASE
from ...oracles.inputs import REJECTS
from .scenario import (
    TOPOLOGIES,
    Op,
    Scenario,
    cancel,
    cleanup,
    fail_build,
    fail_get,
    fail_put,
    load,
    mutate,
    outage,
    pause,
    poll,
    reject,
    relay,
    save,
    settle,
    slow,
    stop,
)

__all__ = ["DURATIONS", "OPTIONS", "REQUEST_IDS", "schedules_for_worlds", "usage", "worlds"]

DURATIONS: tuple[float, ...] = (0.001, 0.01, 0.1, 0.5, 2.0, 10.0, 30.0, 60.0)
"""How long an outage or a slow call lasts (virtual seconds), shortest first."""

OPTIONS: dict[str, tuple[Any, ...]] = {
    "put_tries": (3, 1, 2, 5),
    "idle_backoff": (0.001, 0.01, 0.05),
    "wait_timeout": (0.1, 0.02, 1.0),
    "put_backoff": (0.005, 0.05),
    "join_timeout": (1.0, 0.5, 2.0),
}
"""The adapter options a world may pass (first value: the contract's default)."""

REQUEST_IDS: tuple[tuple[str, ...], ...] = (
    ("a",),
    ("a", "b"),
    ("a", "b", "c"),
    ("r_0", "r_0_1"),
    ("x", "x_1", "1"),
)
"""The request-id pools a program draws from (ids spelled like keys among them)."""

BUSY: tuple[int, ...] = (0, 6, 24)
"""How many of its own steps the scheduler may work between two calls (``Scenario.busy``):
its next call lands at a drawn point of the adapter threads' work, not only after it."""

LONG = 10.0
"""A fault this long or longer makes the world event-driven (see :func:`worlds`)."""

PREEMPT = 0.01
"""Virtual seconds a thread preempted at a section gap may stay off the CPU
(``Scenario.preempt``): a RECV thread in its 1 ms polling pause or a call's latency, a
scheduler in its think time, gets into the gap. Small beside every timing bound the
oracles use (R3's 0.5 s), so no call looks slow for it."""

LIVENESS = 2.0
"""Virtual seconds after the faults end by which everything owed must have happened."""

_leaf = st.one_of(st.integers(0, 9), st.text("abc", max_size=2), st.binary(max_size=3))
_nested = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from("kvw"), inner, max_size=2),
        st.binary(max_size=3).map(bytearray),
        st.lists(inner, min_size=1, max_size=3).map(tuple),  # immutable, holding what may not be
    ),
    max_leaves=6,
)
_records = st.tuples(_leaf, _nested)  # a record: immutable, what it holds need not be
_payloads = st.one_of(st.integers(0, 9), _nested, st.none(), _records)

# Every draw below goes through a strategy built once: a strategy made afresh for each
# draw (``st.sampled_from(a_list)``, ``st.one_of(...)``) is validated and has its
# emptiness worked out every time, which made drawing a world (and every step of
# shrinking one) cost more than running it.
_int = functools.cache(st.integers)
_BOOL = st.booleans()
T = TypeVar("T")


def _pick(draw: Any, items: Sequence[T]) -> T:
    """One of *items* (shrinks towards the first)."""
    index: int = draw(_int(0, len(items) - 1))
    return items[index]


@functools.cache
def _distinct_ids(count: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, 7), min_size=count, max_size=count, unique=True)


@functools.cache
def _left_out(usable: tuple[str, ...]) -> st.SearchStrategy[set[str]]:
    return st.sets(st.sampled_from(usable[1:]), max_size=len(usable) - 2)


def _stages(draw: Any, topology: str) -> tuple[tuple[int, ...], bool]:
    """Stage ids per member, and whether receivers may take the default source."""
    count = len(TOPOLOGIES[topology])
    if topology == "loopback":
        return (draw(_int(0, 7)),), False
    default_src = draw(_BOOL)
    if default_src:  # consecutive, so the default src_stage_id reads the right stage
        first = draw(_int(0, 8 - count))
        return tuple(first + i for i in range(count)), True
    ids = draw(_distinct_ids(count))
    return tuple(ids), False


KINDS: tuple[str, ...] = (
    "save", "save_final", "load", "poll", "cleanup", "cancel", "settle", "mutate", "pause",
    "fail_put", "fail_get", "fail_build", "outage", "slow", "relay",
)  # fmt: skip
"""The kinds of op a program is drawn from (``relay`` only where there is a middle)."""


def _kinds(draw: Any, topology: str) -> tuple[str, ...]:
    """The kinds this world's program uses: swarm testing (Groce et al., 2012) — each
    world leaves some kinds out, so some programs are all saves, loads and cleanups and
    others all faults, instead of every program being the same even mix."""
    usable = [k for k in KINDS if k != "relay" or topology == "three-stage"]
    left_out = draw(_left_out(tuple(usable)))
    return tuple(k for k in usable if k not in left_out)


def _op(
    draw: Any,
    rids: tuple[str, ...],
    sending: tuple[int, ...],
    topology: str,
    kinds: tuple[str, ...],
) -> Op:
    """One op of the program (see module doc), of one of *kinds*."""
    rid = _pick(draw, rids)
    receivers = ("middle", None) if topology == "three-stage" else (None,)
    kind = _pick(draw, kinds)
    if kind in ("save", "save_final"):
        return save(rid, draw(_payloads), kind == "save_final")
    if kind in ("load", "cleanup"):
        on = _pick(draw, receivers)
        return load(rid, on=on) if kind == "load" else cleanup(rid, on=on)
    if kind == "poll":
        return poll(on=_pick(draw, receivers))
    if kind == "cancel":
        return cancel(rid)
    if kind == "settle":
        return settle()
    if kind == "relay":
        return relay()
    if kind == "mutate":
        return mutate(draw(_int(0, 2)), draw(_int(0, 3)))
    if kind == "pause":
        return pause(_pick(draw, DURATIONS[:5]))
    return _fault(draw, rid, sending, kind)


FAULTS: tuple[str, ...] = ("fail_put", "fail_get", "fail_build", "outage", "slow")
"""The kinds of op that are faults (a lifecycle draws one of these while it runs)."""


def _fault(draw: Any, rid: str, sending: tuple[int, ...], kind: str) -> Op:
    """A fault of *kind* on a call of request *rid* (a key of it, or every key)."""
    key = f"{rid}_{_pick(draw, sending)}_{draw(_int(0, 2))}" if draw(_BOOL) else None
    if kind == "fail_put":
        return fail_put(key, draw(_int(1, 4)))
    if kind == "fail_get":
        return fail_get(key, draw(_int(1, 4)))
    if kind == "fail_build":
        return fail_build(rid, draw(_int(1, 3)))
    what = _pick(draw, ("put", "get", "build"))
    target = rid if what == "build" else key
    seconds = _pick(draw, DURATIONS)
    if kind == "outage":
        return outage(what, target, seconds)
    return slow(what, target, seconds, draw(_int(1, 2)))


def _lifecycle(draw: Any, rid: str, topology: str, sending: tuple[int, ...]) -> list[Op]:
    """What a scheduler does with one request: the sender's side (one or two streams of
    chunks, some a while after the one before, some objects changed after the save,
    some streams cancelled at any point, most ended by a final) and the receiver's side
    (a registration, sometimes cleaned up and registered again, sometimes cleaned up
    for good), one side now and then meeting a fault on the request's calls, merged in
    any order: a receiver may register before the first chunk, mid-stream or once the
    stream is all there, and give up at any point of it. Now and then the scheduler lets
    everything settle between two of its calls."""
    on = _pick(draw, ("middle", None)) if topology == "three-stage" else None
    sender: list[Op] = []
    for _ in range(draw(_int(1, 2))):
        # a few chunks, and now and then a long stream (ids past 9: two-digit keys)
        chunks = draw(_int(0, 3)) if draw(_int(0, 7)) else draw(_int(4, 13))
        cancel_at = draw(_int(0, chunks)) if draw(_int(0, 3)) == 0 else -1
        for n in range(chunks + 1):
            if n == cancel_at:
                sender.append(cancel(rid))
            if n == chunks:
                break
            if draw(_int(0, 2)) == 0:  # the model takes a while to make a chunk
                sender.append(pause(_pick(draw, DURATIONS[:4])))
            sender.append(save(rid, draw(_payloads)))
            if draw(_int(0, 3)) == 0:
                sender.append(mutate(0, draw(_int(0, 3))))
        if draw(_int(0, 4)) > 0:
            sender.append(save(rid, draw(_payloads), True))
    receiver = [load(rid, on=on)]
    for _ in range(draw(_int(0, 2))):
        receiver += [cleanup(rid, on=on), load(rid, on=on)]
    if draw(_BOOL):
        receiver.append(cleanup(rid, on=on))
    if draw(_int(0, 2)) == 0:
        # a fault while the request is in flight (a failed get while the receiver waits, an
        # outage mid-stream): faults drawn apart from the lifecycles rarely meet one
        side = _pick(draw, (sender, receiver))
        fault = _fault(draw, rid, sending, _pick(draw, FAULTS))
        side.insert(draw(_int(0, len(side))), fault)
    ops: list[Op] = []
    while sender or receiver:
        pick = draw(_int(0, len(sender) + len(receiver) - 1))
        side = sender if pick < len(sender) else receiver  # a uniform merge of the two
        ops.append(side.pop(0))
        if draw(_int(0, 4)) == 0:
            ops.append(settle())
    return ops


def _program(
    draw: Any, rids: tuple[str, ...], sending: tuple[int, ...], topology: str, lulls: bool
) -> list[Op]:
    """The scheduler's program: half of the worlds interleave request lifecycles
    (:func:`_lifecycle`) with a few free ops; the other half are free ops only, of a
    few kinds (:func:`_kinds`). With *lulls* (the event-driven worlds: in a polling one a
    receiver polling every 1 ms takes ~6 000 steps a virtual second) the scheduler now
    and then has nothing to do for a second or two."""
    kinds = _kinds(draw, topology)
    if draw(_BOOL):
        return [_op(draw, rids, sending, topology, kinds) for _ in range(draw(_int(1, 12)))]
    lanes = [_lifecycle(draw, rid, topology, sending) for rid in rids[: draw(_int(1, len(rids)))]]
    extra = [_op(draw, rids, sending, topology, kinds) for _ in range(draw(_int(0, 3)))]
    lanes.append(extra)
    receivers = ("middle", None) if topology == "three-stage" else (None,)
    ops: list[Op] = []
    while any(lanes):
        lane = _pick(draw, [i for i, lane in enumerate(lanes) if lane])
        ops.append(lanes[lane].pop(0))
        # Between two calls the scheduler polls, now and then lets everything settle,
        # does other work for a while or (event-driven worlds) has nothing to do for a
        # second or two; now and then a call of the adapter's threads is slow, which
        # holds it in flight across the scheduler's next calls (a race window held open,
        # as delay injection does); a middle stage relays now and then.
        between = draw(_int(0, 19))
        if between < 4:
            ops.append(poll(on=_pick(draw, receivers)))
        elif between < 6:
            ops.append(settle())
        elif between < 8:
            ops.append(pause(_pick(draw, DURATIONS[:3])))
        elif between == 8:
            what = _pick(draw, ("get", "put", "build"))
            seconds = _pick(draw, DURATIONS[1:5])
            ops.append(slow(what, None, seconds, draw(_int(1, 2))))
        elif between == 9 and topology == "three-stage":
            ops.append(relay())  # the middle hands on what it has while the program runs
        elif between == 10 and lulls:
            # a lull: no request for a while (an adapter that slows its polling when idle
            # shows it only after one)
            ops.append(pause(_pick(draw, DURATIONS[3:5])))
    return ops


@st.composite
def worlds(draw: Any, reliable: bool = False) -> Scenario:
    """A whole world (module doc) as a :class:`Scenario` named ``"world"``; *reliable*:
    judged for R25, R30 and R31 too, with the faults that try them (:func:`_reliability`)."""
    topology = _pick(draw, ("pipeline", "three-stage", "loopback"))
    stage_ids, default_src = _stages(draw, topology)
    sending = stage_ids[:-1] if topology != "loopback" else stage_ids
    rids = _pick(draw, REQUEST_IDS)
    notify = draw(_BOOL)
    ops = _program(draw, rids, sending, topology, lulls=notify)
    hang = False  # calls hang while the adapter is stopped
    if draw(_BOOL) and draw(_BOOL):  # a stop() before the end, a quarter
        kinds = _kinds(draw, topology)
        if draw(_BOOL):
            # shutting down while calls hang (the contract: stop() returns within its
            # join timeout even then, one deadline for all its threads); the hung call is
            # the next one of its kind, and now and then one of another kind hangs too,
            # so an adapter that both sends and receives (a loopback, a middle stage)
            # may have both its threads stuck at once
            first = _pick(draw, ("build", "put", "get"))
            hung = [first, *(w for w in ("build", "put", "get") if w != first and draw(_BOOL))]
            if draw(_BOOL):  # somewhere in the program: the next such call hangs
                for what in hung:
                    ops.insert(draw(_int(0, len(ops))), slow(what, None, DURATIONS[-1]))
            else:  # right before stop(), each with a call in flight: a get polled for a
                # registration, a build and a put for a save, on a member drawn
                on = _pick(draw, ("middle", None)) if topology == "three-stage" else None
                rid = _pick(draw, rids)
                ops += [slow(what, None, DURATIONS[-1]) for what in hung]
                ops += [load(rid, on=on)] if "get" in hung else []
                ops += [save(rid, draw(_payloads), on=on)] if {"build", "put"} & set(hung) else []
                ops.append(pause(DURATIONS[1]))  # the threads reach their calls
            hang = True
        ops.append(stop())
        ops += [_op(draw, rids, sending, topology, kinds) for _ in range(draw(_int(0, 2)))]
    ops = usage(ops)
    ops = _numbered(ops)
    if reliable:
        ops = _reliability(draw, ops, rids, sending)
    options = {name: _pick(draw, values) for name, values in OPTIONS.items() if draw(_BOOL)}
    if hang and "join_timeout" not in options:
        # passed, so stop()'s bound is the contract's for that join timeout (R18), where
        # the adapter surely takes it, not the 5 s allowed one whose timeout is unknown
        options["join_timeout"] = _pick(draw, OPTIONS["join_timeout"])
    longest = max((op.seconds for op in ops if op.kind in ("outage", "slow")), default=0.0)
    if longest >= LONG:
        # A receiver polling every 1 ms takes ~9 000 steps a virtual second: through a long
        # outage, such a world outgrows any step budget. Event-driven, and polling at 50 ms
        # where the adapter takes idle_backoff, it stays affordable.
        notify = True
        options["idle_backoff"] = 0.05
    world = Scenario(
        "world",
        tuple(ops),
        options=options,
        consume_on_get=draw(_BOOL),
        notify=notify,
        topology=topology,
        stage_id=stage_ids[0],
        stage_ids=stage_ids,
        default_src=default_src,
        latency=_pick(draw, (0.0, 0.001, 0.01, 0.05)),
        think=_pick(draw, (0.0, 0.001, 0.01)),
        busy=_pick(draw, BUSY),
        settle_limit=20.0 + longest,
        liveness=LIVENESS + longest,  # an adapter backing off through an outage
        preempt=PREEMPT,
        timing_seed=draw(_int(0, 2**16)),
        reliable=reliable,
    )
    return replace(world, ops=_with_rejects(draw, world.ops, rids))


def _reliability(
    draw: Any, ops: list[Op], rids: tuple[str, ...], sending: tuple[int, ...]
) -> list[Op]:
    """The faults the reliability rules are about, at drawn points before any ``stop()``
    (drawn after the program, so the rest of the world is the one the same draws make
    without them): in three worlds of four one request's stream whose puts all fail for 2 to
    60 s (R31: other requests' chunks go on meanwhile); in a third, one put refused for
    good (R25: never retried); in a third, a build, put or get that raises
    ``SystemExit``, ``asyncio.CancelledError`` or a bare ``BaseException`` (R30: survived,
    or the adapter says it died at its next call)."""
    end = next((i for i, op in enumerate(ops) if op.kind == "stop"), len(ops))
    out = list(ops)
    if draw(_int(0, 3)) != 3:
        stream = f"{_pick(draw, rids)}_{_pick(draw, sending)}_*"
        out.insert(draw(_int(0, end)), outage("put", stream, _pick(draw, DURATIONS[4:])))
        end += 1
    if draw(_int(0, 2)) == 0:  # one put refused for good (once: its degraded final lands)
        key = f"{_pick(draw, rids)}_{_pick(draw, sending)}_*" if draw(_BOOL) else None
        out.insert(draw(_int(0, end)), fail_put(key, raises="permanent"))
        end += 1
    if draw(_int(0, 2)) == 0:
        rid, raises = _pick(draw, rids), _pick(draw, BASE)
        kind = _pick(draw, ("fail_build", "fail_put", "fail_get"))
        if kind == "fail_build":
            fault = fail_build(rid, raises=raises)
        else:
            key = f"{rid}_{_pick(draw, sending)}_*" if draw(_BOOL) else None
            fault = (fail_put if kind == "fail_put" else fail_get)(key, raises=raises)
        out.insert(draw(_int(0, end)), fault)
    return out


def _with_rejects(draw: Any, ops: tuple[Op, ...], rids: tuple[str, ...]) -> tuple[Op, ...]:
    """In a world of four, one or two calls with a wrong argument (:func:`.scenario.reject`:
    a bad id, a bad ``is_final``, an object no snapshot takes) at drawn points before any
    ``stop()``: each must raise at the call and change nothing (R21) — mid-stream, with a
    cancel mark set, with the request registered or not. Drawn after everything else, so
    the rest of the world is the one the same draws made before rejects were added."""
    if draw(_int(0, 3)) != 0:
        return ops
    end = next((i for i, op in enumerate(ops) if op.kind == "stop"), len(ops))
    out = list(ops)
    for _ in range(draw(_int(1, 2))):
        call = _pick(draw, tuple(REJECTS))
        bad = _pick(draw, REJECTS[call])
        at = draw(_int(0, end))
        out.insert(at, reject(call, _pick(draw, rids), bad))
        end += 1
    return tuple(out)


def usage(ops: list[Op]) -> list[Op]:
    """*ops* as a well-behaved scheduler issues them (the contract's usage rules): a
    ``cancel_sender`` only for a stream that is open or not begun, and never while an
    earlier stream's final of the same request may still be unsent (no ``settle()``
    since it was saved): the mark would go to whichever final is put first (R6, R27);
    and every cancelled stream's final saved (appended at the end if missing)."""
    out: list[Op] = []
    ended: set[str] = set()  # requests whose last save was a final
    unsent: set[str] = set()  # requests with a final saved since the last settle()
    open_cancel: set[str] = set()
    for op in ops:
        rid = op.request_id
        if op.kind == "cancel" and rid is not None:
            if rid in ended or rid in unsent:
                continue
            open_cancel.add(rid)
        elif op.kind == "save" and rid is not None:
            (ended.add if op.final else ended.discard)(rid)
            if op.final:
                open_cancel.discard(rid)
                unsent.add(rid)
        elif op.kind == "settle":
            unsent.clear()
        out.append(op)
    return out + [save(rid, "end", True) for rid in sorted(open_cancel)]


def _numbered(ops: list[Op]) -> list[Op]:
    """Each saved payload made unique (``[n, payload]``, a record ``(n, *record)``: it stays
    a tuple; ``None`` stays ``None``, R8): the oracles tell chunks apart by value, so two
    equal payloads of one request would let a retried chunk pass for another."""
    out = []
    for n, op in enumerate(ops):
        if op.kind == "save" and op.obj is not None:
            obj = (n, *op.obj) if isinstance(op.obj, tuple) else [n, op.obj]
            op = save(str(op.request_id), obj, op.final, on=op.on)
        out.append(op)
    return out


def schedules_for_worlds() -> st.SearchStrategy[tuple[str, int, tuple[int, ...]]]:
    """How a world's interleavings are chosen: ``("drawn", 0, choices)`` — a few sparse
    preemptions that shrink (:class:`~.strategies.DrawnStrategy`) — or ``("pct", seed,
    ())``, ``("random", seed, ())``, ``("sections", seed, ())`` and ``("effects", seed,
    ())``: a few PCT (depth 3), uniform random, atomicity-directed
    (:class:`~.strategies.SectionStrategy`: a preemption between two critical sections of
    one lock) or effect-delaying (:class:`~.strategies.EffectStrategy`: an adapter thread
    held just before a put, get or build while the scheduler calls) schedules from that
    seed, the first that fails counting (:mod:`.simulate`)."""
    from .generate import schedules

    drawn = schedules(max_choices=400, max_pick=4, max_preemptions=8).map(
        lambda c: ("drawn", 0, tuple(c))
    )
    seeded = st.tuples(
        st.sampled_from(("random", "pct", "sections", "effects")),
        st.integers(0, 2**32 - 1),
        st.just(()),
    )
    return st.one_of(drawn, seeded)
