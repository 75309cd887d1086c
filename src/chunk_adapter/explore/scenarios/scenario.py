"""Scenarios: a short scheduler-thread script the explorer runs under every schedule.

A :class:`Scenario` is a list of :class:`Op` s the scheduler thread performs on
the adapters of its ``topology`` (:mod:`.pipeline`): by default a *sender*
(``stage_id``) that gets ``save``/``cancel`` and a *receiver* (``stage_id + 1``,
reading ``stage_id``) that gets ``load``/``poll``/``cleanup``; ``"three-stage"``
adds a *middle* adapter that ``relay()`` re-sends through; ``"loopback"`` is one
adapter reading its own stage. Unless the script ends with ``stop()`` itself,
the runner appends ``settle()``, ``poll()`` and ``stop()``, so every execution
ends quiescent and stopped and can be checked in full.

Ops (``str(op)`` is how the trace and failure reports print them)::

    save(rid, obj, final=False)   cancel(rid)   load(rid)   poll()   cleanup(rid)
    fail_put(key=None, times=1)   fail_get(key=None, times=1)   fail_build(rid, times=1)
    settle()                      stop()        relay()
    mutate(back=0, depth=0)       pause(seconds)
    outage(what, key, seconds)    slow(what, key, seconds, times=1)
    reject(call, rid, bad)

Any adapter call takes ``on="sender" | "middle" | "receiver"`` to go to another
member than its default (``load("r", on="middle")``).

``fail_*`` are fault decisions taken at that point of the script: the next
*times* matching connector calls (or builds) raise ``InjectedFault``.
``settle()`` lets the background threads run, in virtual time, until every
outage has ended and nothing has happened for ``Scenario.idle`` seconds after it.

``outage(what, key, seconds)`` fails every ``what`` (``"put"``, ``"get"`` or
``"build"``) on *key* (a request id for builds; ``None``: any) for *seconds* of
virtual time from that point; ``slow(...)`` makes the next *times* such calls
take *seconds* longer (:mod:`chunk_adapter.connectors.timed`). ``mutate(back,
depth)`` changes, in place, the object of the latest save but *back*, at nesting
*depth* (R4: what was sent must not change). ``pause(seconds)`` is the
scheduler doing other work for *seconds* of virtual time. ``reject(call, rid, bad)``
makes a call with a wrong argument (:data:`REJECTS`), which must raise and change
nothing (R21).

Over 400 lines, and one module because the ops' kinds, their checks, their printed form
and their constructors are one vocabulary that every runner, the codec and the shrinker
read together; split, each op kind would be spelt in three files.
"""

from __future__ import annotations

from dataclasses import MISSING, Field, dataclass, field, fields, replace
from typing import Any

from ...connectors import chunk_key
from ...connectors.fatal import RAISES
from ...connectors.timed import stream_of
from ...errors import InvalidValue
from ...oracles import split_key
from ...oracles.inputs import REJECTS

__all__ = [
    "PROBE",
    "TOPOLOGIES",
    "Op",
    "Scenario",
    "cancel",
    "cleanup",
    "drain",
    "fail_build",
    "fail_get",
    "fail_put",
    "load",
    "mutate",
    "outage",
    "pause",
    "poll",
    "reject",
    "relay",
    "renamed",
    "request_of",
    "save",
    "settle",
    "slow",
    "stop",
]

_KINDS = (
    "save",
    "cancel",
    "load",
    "poll",
    "cleanup",
    "fail_put",
    "fail_get",
    "fail_build",
    "settle",
    "stop",
    "relay",
    "mutate",
    "pause",
    "outage",
    "slow",
    "drain",
    "reject",
)
FAILS = ("fail_put", "fail_get", "fail_build")
TIMED = ("put", "get", "build")
"""What ``outage`` and ``slow`` apply to."""
PROBE = "probe"
"""The request a :attr:`Scenario.reliable` script ends with (:attr:`Scenario.probe`)."""
TOPOLOGIES: dict[str, tuple[str, ...]] = {
    "pipeline": ("sender", "receiver"),
    "three-stage": ("sender", "middle", "receiver"),
    "loopback": ("adapter",),
}


@dataclass(frozen=True)
class Op:
    """One scheduler-thread call of a scenario script."""

    kind: str
    request_id: str | None = None
    obj: Any = None
    final: bool = False
    key: str | None = None
    times: int = 1
    on: str | None = None
    """The member the call goes to (``"sender"``, ``"middle"``...); ``None``: the default."""
    what: str | None = None
    """``outage``/``slow``: ``"put"``, ``"get"`` or ``"build"``."""
    seconds: float = 0.0
    """``outage``/``slow``/``pause``: virtual seconds."""
    back: int = 0
    depth: int = 0
    """``mutate``: the latest save but *back*, at nesting *depth*."""

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise InvalidValue(f"unknown scenario op {self.kind!r}; use one of {_KINDS}")
        if isinstance(self.times, bool) or not isinstance(self.times, int) or self.times < 1:
            raise InvalidValue(
                f"{self.kind}(): times counts calls from 1, got times={self.times!r}; pass "
                "an int >= 1 (leave the op out for none)"
            )
        if self.kind == "reject" and self.obj not in REJECTS.get(str(self.what), ()):
            raise InvalidValue(
                f"reject() takes a call of {tuple(REJECTS)} and one of its wrong values, "
                f"got {self.what!r} with {self.obj!r}"
            )
        if self.kind in FAILS and self.what is not None and self.what not in RAISES:
            raise InvalidValue(
                f"{self.kind}() raises InjectedFault (raises=None) or one of {RAISES}, "
                f"got raises={self.what!r}"
            )
        if self.kind in ("outage", "slow") and self.what not in TIMED:
            raise InvalidValue(f"{self.kind}() is for one of {TIMED}, got what={self.what!r}")
        if self.kind in ("outage", "slow", "pause") and not 0 < self.seconds < float("inf"):
            raise InvalidValue(
                f"{self.kind}() lasts a finite time > 0 virtual seconds, got {self.seconds!r}"
            )

    def __str__(self) -> str:
        k, rid = self.kind, self.request_id
        on = "" if self.on is None else f", on={self.on!r}"
        if k == "save":
            return f"save({rid!r}, {self.obj!r}, final={self.final}{on})"
        if k in ("cancel", "load", "cleanup"):
            return f"{k}({rid!r}{on})"
        raises = "" if self.what is None else f", raises={self.what!r}"
        if k in ("fail_put", "fail_get"):
            return f"{k}(key={self.key!r}, times={self.times}{raises})"
        if k == "fail_build":
            return f"fail_build({rid!r}, times={self.times}{on}{raises})"
        if k == "outage":
            return f"outage({self.what!r}, {self.key!r}, {self.seconds!r})"
        if k == "slow":
            return f"slow({self.what!r}, {self.key!r}, {self.seconds!r}, times={self.times})"
        if k == "pause":
            return f"pause({self.seconds!r})"
        if k == "reject":
            return f"reject({self.what!r}, {rid!r}, {self.obj!r}{on})"
        if k == "mutate":
            return f"mutate(back={self.back}, depth={self.depth})"
        return f"{k}({on[2:]})"


def save(request_id: str, obj: Any, final: bool = False, on: str | None = None) -> Op:
    return Op("save", request_id, obj, final, on=on)


def cancel(request_id: str, on: str | None = None) -> Op:
    return Op("cancel", request_id, on=on)


def load(request_id: str, on: str | None = None) -> Op:
    return Op("load", request_id, on=on)


def poll(on: str | None = None) -> Op:
    return Op("poll", on=on)


def cleanup(request_id: str, on: str | None = None) -> Op:
    return Op("cleanup", request_id, on=on)


def reject(call: str, request_id: str, bad: str, on: str | None = None) -> Op:
    """A call of request *request_id* with a wrong argument, which must raise at the call
    and change nothing (R21): *call* and *bad* from :data:`REJECTS`."""
    return Op("reject", request_id, bad, what=call, on=on)


def relay() -> Op:
    """The middle adapter of a three-stage scenario polls and re-sends what it got."""
    return Op("relay")


def fail_put(key: str | None = None, times: int = 1, raises: str | None = None) -> Op:
    """The next *times* puts on *key* (a stream's keys: ``"r_0_*"``; None: any) raise
    ``InjectedFault``, or what *raises* names (:data:`~...connectors.fatal.RAISES`)."""
    return Op("fail_put", key=key, times=times, what=raises)


def fail_get(key: str | None = None, times: int = 1, raises: str | None = None) -> Op:
    """As :func:`fail_put`, for gets."""
    return Op("fail_get", key=key, times=times, what=raises)


def fail_build(
    request_id: str, times: int = 1, on: str | None = None, raises: str | None = None
) -> Op:
    """The next *times* builds of *request_id* fail, as :func:`fail_put` says."""
    return Op("fail_build", request_id, times=times, on=on, what=raises)


def settle() -> Op:
    return Op("settle")


def drain() -> Op:
    """Settle, then poll every receiving member in pipeline order (a middle relays what
    it got), again until one round hands out nothing: what every script ends with
    before its ``stop()``, so "got but never handed out" (R14) is judged only after
    every receiver was asked while nothing more was on its way."""
    return Op("drain")


def mutate(back: int = 0, depth: int = 0) -> Op:
    """Change the object of the latest save but *back* in place, at nesting *depth*."""
    return Op("mutate", back=back, depth=depth)


def pause(seconds: float) -> Op:
    """The scheduler thread does other work for *seconds* of virtual time."""
    return Op("pause", seconds=seconds)


def outage(what: str, key: str | None, seconds: float) -> Op:
    """Every *what* (put/get/build) on *key* (a stream's keys: ``"r_0_*"``; None: any)
    fails for *seconds* from here."""
    return Op("outage", key=key, what=what, seconds=seconds)


def slow(what: str, key: str | None, seconds: float, times: int = 1) -> Op:
    """The next *times* *what* calls on *key* (None: any) take *seconds* longer."""
    return Op("slow", key=key, what=what, seconds=seconds, times=times)


def stop(on: str | None = None) -> Op:
    return Op("stop", on=on)


def renamed(op: Op, suffix: str) -> Op:
    """*op* on request ``rid + suffix``: its request id, chunk key or build key renamed."""
    if op.request_id is not None:
        op = replace(op, request_id=op.request_id + suffix)
    if op.key is not None:
        if op.what == "build":  # a build fault names a request
            return replace(op, key=op.key + suffix)
        stream = stream_of(op.key)
        if stream is not None:  # a stream's keys: rid_stage_*
            head, stream_stage = stream.rsplit("_", 1)
            return replace(op, key=f"{head}{suffix}_{stream_stage}_*")
        parts = split_key(op.key)
        if parts is not None:  # a chunk key: rid_stage_chunk
            rid, stage, chunk = parts
            op = replace(op, key=chunk_key(rid + suffix, stage, chunk))
    return op


def request_of(op: Op) -> str | None:
    """The request *op* names: its request id, or the request of the build key or chunk key
    its fault is on (as :func:`renamed` reads them); ``None`` for an op on no one request."""
    if op.request_id is not None:
        return op.request_id
    if op.key is None:
        return None
    if op.what == "build":  # a build fault names a request
        return op.key
    stream = stream_of(op.key)
    if stream is not None:  # a stream's keys: rid_stage_*
        return stream.rsplit("_", 1)[0]
    parts = split_key(op.key)
    return parts[0] if parts is not None else None


def _default(f: Field[Any]) -> Any:
    """A dataclass field's default value."""
    return f.default_factory() if f.default_factory is not MISSING else f.default


@dataclass(frozen=True)
class Scenario:
    """A named script plus how to build the adapter for it.

    ``options`` are extra keyword arguments for the adapter factory (e.g.
    ``{"put_tries": 2}``); ``consume_on_get`` and ``notify`` configure the
    embedded :class:`~chunk_adapter.connectors.MemoryConnector` (``notify``
    offers ``subscribe``, which switches the reference adapter to event-driven
    receive). ``idle`` is how long (virtual seconds) ``settle()`` waits with
    nothing happening; ``settle_limit`` caps a single settle. ``topology`` and
    ``stage_id`` (the first member's stage) lay out the adapters (:mod:`.pipeline`).
    """

    name: str
    ops: tuple[Op, ...]
    question: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    consume_on_get: bool = True
    notify: bool = False
    stage_id: int = 0
    idle: float = 0.25
    settle_limit: float = 20.0
    topology: str = "pipeline"
    stage_ids: tuple[int, ...] = ()
    """Each member's ``stage_id`` in topology order (``()``: ``stage_id``, ``stage_id + 1``...)."""
    default_src: bool = False
    """Leave a receiving member's ``src_stage_id`` to the factory's default where that reads
    the stage before it (``False``: always given)."""
    latency: float = 0.0
    """Every put, get and build takes a random time up to this many virtual seconds."""
    think: float = 0.0
    """The scheduler does other work for a random time up to this many virtual seconds
    after each call of the script (with ``latency``, calls overlap as they do for real)."""
    busy: int = 0
    """The scheduler works on for up to this many of its own steps after each call, with no
    virtual time passing: the adapter's runnable threads run beside it, so its next call
    may land in the middle of one of their operations (``think`` sleeps, and a sleep lets
    every runnable thread finish first; a real scheduler does not wait for them)."""
    timing_seed: int = 0
    """What every drawn time of the world is keyed on, with the call it is for: each
    call's latency, each op's think time and busy steps
    (:func:`~chunk_adapter.connectors.timed.keyed_random`). Keyed, not drawn from one
    stream, so an op removed while the world shrinks leaves every other call's times
    as they were; seeded per world, so worlds that share a call do not share its times."""
    liveness: float = 0.0
    """Virtual seconds ``settle()`` goes on, after the faults ended, while something is still
    owed (0: it stops once quiet, as the library's scenarios always did)."""
    preempt: float = 0.0
    """A thread preempted between two critical sections of one lock may stay off the CPU
    until a timer due within this many virtual seconds fires (a strategy's choice, as a
    loaded machine preempts a thread for a few milliseconds): a thread asleep then gets
    into the gap (:attr:`~..runtime.controller.Controller.early_timers`). 0: timers fire
    only when no thread can run (the library's scenarios, DPOR, the proofs)."""
    repeat: int = 1
    """The program runs this many times in one execution, copy *k* with its own request
    ids (``rid`` becomes ``rid~k``, and its chunk keys and faults with it), one copy right
    after the other. R24 is judged so (:mod:`..engine.retained`): the few requests one
    copy closes decide nothing, as R24 allows a record of 500 recent ones."""
    reliable: bool = False
    """Judged for the reliability rules too (``verify --reliability``: R25, R30, R31,
    :mod:`..engine.reliability`), and, unless the program stops itself, ended by two
    probe requests (:attr:`probe`): after a thread died, sending and registering calls
    show whether the adapter says so (R30)."""

    def __post_init__(self) -> None:
        if not isinstance(self.ops, tuple) or not all(isinstance(o, Op) for o in self.ops):
            raise InvalidValue(
                f"Scenario {self.name!r}: ops must be a tuple of Op (made with save(), "
                f"load(), ...), got {self.ops!r}"
            )
        roles = TOPOLOGIES.get(self.topology)
        if roles is None:
            raise InvalidValue(
                f"Scenario {self.name!r}: unknown topology {self.topology!r}; "
                f"use one of {sorted(TOPOLOGIES)}"
            )
        for op in self.ops:
            if op.on is not None and op.on not in roles:
                raise InvalidValue(
                    f"Scenario {self.name!r}: {op} names {op.on!r}, but a {self.topology} "
                    f"has only {list(roles)}"
                )
            if op.kind == "relay" and "middle" not in roles:
                raise InvalidValue(
                    f"Scenario {self.name!r}: relay() needs a middle adapter; "
                    "use topology='three-stage'"
                )
        if isinstance(self.repeat, bool) or not isinstance(self.repeat, int) or self.repeat < 1:
            raise InvalidValue(
                f"Scenario {self.name!r}: repeat={self.repeat!r} must be an int >= 1 (the "
                "copies of the program one execution runs)"
            )
        if isinstance(self.timing_seed, bool) or not isinstance(self.timing_seed, int):
            raise InvalidValue(
                f"Scenario {self.name!r}: timing_seed={self.timing_seed!r} must be an int "
                "(what the world's latencies and think times are drawn from)"
            )
        if self.repeat > 1 and any(op.kind == "stop" for op in self.ops):
            raise InvalidValue(
                f"Scenario {self.name!r}: a program that calls stop() cannot be repeated "
                f"(repeat={self.repeat}); leave the stop() out, the runner adds it at the end"
            )
        if self.stage_ids and (
            len(self.stage_ids) != len(roles)
            or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in self.stage_ids)
        ):
            raise InvalidValue(
                f"Scenario {self.name!r}: stage_ids={self.stage_ids!r} must give one stage id "
                f"(an int >= 0) per member of a {self.topology}: {list(roles)}"
            )

    @property
    def script(self) -> tuple[Op, ...]:
        """The ops as run: the given ones plus ``drain(), stop()`` unless it stops itself."""
        ops = self.ops
        if self.repeat > 1:
            ops = tuple(renamed(op, f"~{k}") for k in range(self.repeat) for op in self.ops)
        if ops and ops[-1].kind == "stop":
            return ops
        return (*ops, *self.probe, drain(), stop())

    @property
    def probe(self) -> tuple[Op, ...]:
        """What a :attr:`reliable` script does before its ``drain(), stop()``: once all is
        quiet and drained (a middle has relayed what it got, so its own puts are done),
        every receiving member registers :data:`PROBE` and the first sender saves
        its one final chunk (the drain relays it on), then the same for a second probe
        request, after a fault that fired in the first one's calls (none when not
        reliable, or when the program stops the adapters itself)."""
        if not self.reliable or any(op.kind == "stop" for op in self.ops):
            return ()  # after a stop() of its own, nothing is owed and every call raises
        receivers = {"pipeline": (None,), "three-stage": ("middle", None)}
        ops: list[Op] = []
        for rid in (PROBE, PROBE + "2"):  # a fault that fires in the first asks the second
            ops += [drain(), *(load(rid, on=on) for on in receivers.get(self.topology, (None,)))]
            ops.append(save(rid, rid, True))
        return tuple(ops)

    @property
    def layout(self) -> tuple[str, int, tuple[int, ...], bool]:
        """``(topology, stage_id, stage_ids, default_src)``: what :func:`.pipeline.members`
        lays the adapters out from."""
        return (self.topology, self.stage_id, self.stage_ids, self.default_src)

    @property
    def quiescent(self) -> bool:
        """Whether the script ends ``drain(), stop()`` (the ones it adds itself) and stops
        nowhere else: everything that must have arrived has, and every receiver was asked
        for it, when ``stop()`` begins. A script that stops itself is judged for safety
        only (its last receiver may never have been polled after the last arrival)."""
        script = self.script
        # a stop() before the end may abandon queued work: nothing is owed after it
        ends = [op.kind for op in script[-2:]] == ["drain", "stop"]
        return ends and all(op.kind != "stop" for op in script[:-1])

    def to_python(self) -> str:
        """The scenario as Python (after ``from chunk_adapter.explore.scenarios.scenario
        import *``)."""
        ops = ",\n        ".join(str(op) for op in self.ops)
        extra = "".join(
            f", {f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if f.name not in ("name", "ops") and getattr(self, f.name) != _default(f)
        )
        program = f"(\n        {ops},\n    )" if self.ops else "()"
        return f"Scenario(\n    {self.name!r},\n    {program}{extra},\n)"

    def __str__(self) -> str:
        return f"{self.name}: " + "; ".join(str(op) for op in self.ops)
