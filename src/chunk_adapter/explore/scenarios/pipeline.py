"""The adapters a scenario drives, and which of them each scheduler call goes to.

A scenario's ``topology`` names its adapters (*members*), each built by the
factory with its own ``stage_id`` and ``src_stage_id`` over one shared connector:

``pipeline`` (the default)
    ``sender`` (stage *s*) gets ``save``/``cancel``; ``receiver`` (stage *s+1*,
    source *s*) gets ``load``/``poll``/``cleanup``. Keys are ``r_<s>_n``.
``three-stage``
    ``sender`` (*s*) → ``middle`` (*s+1*, source *s*) → ``receiver`` (*s+2*,
    source *s+1*). ``relay()`` makes the middle poll and re-send what it got
    under the same request ids (``save_async(rid, chunk["data"], chunk["finished"])``).
``loopback``
    one ``adapter`` whose receiver reads its own sender (``src_stage_id ==
    stage_id``): every call goes to it.

``stop()`` stops every member, the last receiver first, unless ``on=`` names
one. :func:`apply` is the one interpreter of a script's ops, for the explorer
and for the real-thread baseline alike (each passes its own ``settle()``).
Each link from a sending member to the one that receives from it is a *hop*:
the oracles judge each hop's records on their own (:mod:`.checks`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ...connectors import FaultyConnector, GatedBuilder
from ...connectors.timed import stream_of
from ...oracles.inputs import METHODS, wrong_call
from .scenario import TOPOLOGIES, Op

__all__ = [
    "DRAIN_ROUNDS",
    "Hop",
    "Member",
    "apply",
    "call",
    "drain_round",
    "hops",
    "members",
    "roles_for",
    "sends",
]


@dataclass(frozen=True)
class Member:
    """One adapter of the scenario: its role and the stage ids the factory gets."""

    role: str
    stage_id: int
    src_stage_id: int | None  # None: the factory's default (a pure sender never receives)


@dataclass(frozen=True)
class Hop:
    """One link: *sender* puts keys of *stage_id*; *receiver* gets them."""

    sender: str
    receiver: str
    stage_id: int

    @property
    def label(self) -> str:
        return f"{self.sender}->{self.receiver}"


def members(
    topology: str, first_stage: int, stage_ids: tuple[int, ...] = (), default_src: bool = False
) -> list[Member]:
    """The members of *topology*: stages *stage_ids* if given, else from *first_stage* on.

    A receiving member is given its ``src_stage_id``, unless *default_src* asks to leave it
    to the factory's default where that reads the same stage (``stage_id - 1``).
    """
    roles = TOPOLOGIES[topology]
    stages = stage_ids or tuple(first_stage + i for i in range(len(roles)))
    if topology == "loopback":
        return [Member(roles[0], stages[0], stages[0])]
    out = []
    for i, role in enumerate(roles):
        src = None if i == 0 else stages[i - 1]
        if src is not None and src == stages[i] - 1 and default_src:
            src = None  # the default reads it
        out.append(Member(role, stages[i], src))
    return out


def hops(
    topology: str, first_stage: int, stage_ids: tuple[int, ...] = (), default_src: bool = False
) -> list[Hop]:
    ms = members(topology, first_stage, stage_ids, default_src)
    if len(ms) == 1:
        return [Hop(ms[0].role, ms[0].role, ms[0].stage_id)]
    return [Hop(a.role, b.role, a.stage_id) for a, b in itertools.pairwise(ms)]


def sends(op: Op) -> bool:
    """Whether *op* is a sending call (or a fault of one): made on a hop's sender."""
    return op.kind in ("save", "cancel", "fail_build") or (
        op.kind == "reject" and METHODS[str(op.what)] in ("save_async", "cancel_sender")
    )


def roles_for(op: Op, roles: tuple[str, ...]) -> tuple[str, ...]:
    """The members *op* is called on, in order."""
    if op.on is not None:
        return (op.on,)
    if sends(op):
        return roles[:1]
    if op.kind == "relay":
        return ("middle",)
    if op.kind == "stop":
        return tuple(reversed(roles))
    return roles[-1:]


def apply(
    op: Op,
    adapters: Mapping[str, Any],
    faulty: FaultyConnector,
    builders: Mapping[str, GatedBuilder],
    *,
    settle: Callable[[], object],
    note: Callable[[str], None],
) -> int:
    """Carry out *op*: arm a fault on *faulty* or on the member's builder, ``settle()``,
    or make the scheduler call it stands for (:func:`call`). Returns the chunks a
    ``poll``/``relay`` was handed (else 0)."""
    kind = op.kind
    if kind == "fail_put" or kind == "fail_get":
        which: Literal["put", "get"] = "put" if kind == "fail_put" else "get"
        stream = stream_of(op.key)  # a stream's keys, or one key (or any)
        key = None if stream is not None else op.key
        faulty.fail_next(which, key, op.times, stream=stream, raises=op.what)
    elif kind == "fail_build":
        for role in roles_for(op, tuple(adapters)):
            builders[role].fail(op.request_id, times=op.times, raises=op.what)
    elif kind == "settle":
        settle()
    else:
        return call(op, adapters, note)
    return 0


DRAIN_ROUNDS = 32
"""At most this many rounds in a ``drain()``: a correct adapter needs one per hop plus
one, or one per chunk if it hands out one chunk a poll."""


def drain_round(roles: tuple[str, ...]) -> tuple[Op, ...]:
    """One round of a ``drain()``: ``settle()``, then every receiving member polled in
    pipeline order, a middle relaying what it got."""
    polls = (Op("relay"), Op("poll")) if "middle" in roles else (Op("poll"),)
    return (Op("settle"), *polls)


def call(op: Op, adapters: Mapping[str, Any], note: Callable[[str], None]) -> int:
    """Make the scheduler call *op* stands for on its member(s); a ``RuntimeError`` (a call
    after ``stop()``, which the contract says raises) is noted, not raised. Returns the
    chunks a ``poll``/``relay`` was handed."""
    roles = tuple(adapters)
    handed = 0
    for role in roles_for(op, roles):
        target = adapters[role]
        who = "" if len(roles) == 1 else f"{role}."
        try:
            handed += _one(op, target, who, note)
        except RuntimeError as exc:
            note(f"  {who}{op} raised {exc!r}")
    return handed


def _one(op: Op, target: Any, who: str, note: Callable[[str], None]) -> int:
    """Make *op*'s call on *target*; the chunks a ``poll``/``relay`` got handed (else 0)."""
    kind = op.kind
    if kind == "save":
        target.save_async(op.request_id, op.obj, op.final)
    elif kind == "cancel":
        target.cancel_sender(op.request_id)
    elif kind == "load":
        target.load_async(op.request_id)
    elif kind == "cleanup":
        target.cleanup_receiver(op.request_id)
    elif kind in ("poll", "relay"):
        ready = target.poll_ready()
        note(f"  {who}poll_ready() -> {ready!r}")
        if kind == "relay":  # the middle re-sends what it got under the same request ids
            for request_id, chunks in dict(ready).items():
                for chunk in chunks if isinstance(chunks, list) else []:
                    if isinstance(chunk, dict):
                        data, final = chunk.get("data"), bool(chunk.get("finished"))
                        target.save_async(request_id, data, final)
        return _count(ready)
    elif kind == "stop":
        target.stop()
    elif kind == "reject":
        _reject(op, target, who, note)
    else:  # pragma: no cover - the runners handle faults and settle themselves
        raise ValueError(f"{op} is not an adapter call")
    return 0


def _reject(op: Op, target: Any, who: str, note: Callable[[str], None]) -> None:
    """Make *op*'s call with its wrong value. It must raise at the call and change nothing
    (R21): the call is recorded, raised or not, and the oracles judge both
    (:mod:`chunk_adapter.oracles.inputs`; an object no snapshot of ours takes may be one
    the adapter's own snapshot takes: then it is a save like any other)."""
    method, args, shown = wrong_call(str(op.what), str(op.request_id), str(op.obj))
    try:
        getattr(target, method)(*args)
    except Exception as exc:
        note(f"  {who}{shown} raised {exc!r}")
        return
    note(f"  {who}{shown} returned")


def _count(ready: Any) -> int:
    """The chunks in a ``poll_ready()`` result (whatever its shape: the oracles judge that)."""
    try:
        values = dict(ready).values()
        return sum(len(chunks) if isinstance(chunks, list) else 1 for chunks in values)
    except (TypeError, ValueError):
        return 1 if ready else 0
