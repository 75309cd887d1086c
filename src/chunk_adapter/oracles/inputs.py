"""The oracle on bad input (R21): a call with a wrong argument raised at the call.

A recorded call whose request id is not a ``str``, or a ``save_async`` whose ``is_final``
is not a ``bool``, breaks R21 unless it raised ``TypeError``. That it changed nothing is
judged by the other oracles, which take a call that raised as never made
(:mod:`.timeline`). An object ``copy.deepcopy`` rejects is not judged here: R21 asks
``save_async`` to raise for what *the adapter's* snapshot rejects, and an adapter's own
snapshot may take it (then it is a save like any other). Calls made after the adapter's
``stop()`` are the stopping oracle's (R19: they raise ``RuntimeError``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..rules import R21
from .records import CallRecord
from .timeline import Timeline
from .violations import Violation

__all__ = ["BAD_IDS", "METHODS", "REJECTS", "check_inputs", "wrong_argument", "wrong_call"]

BAD_IDS = ("int", "bytes", "none", "tuple")
"""Request ids that are not a ``str``, by name (a driver's step stays a literal): ``"int"``
is the id's digits as an int, so an adapter that coerces with ``str()`` meets a real id."""
REJECTS: dict[str, tuple[str, ...]] = {
    "save": BAD_IDS,
    "cancel": BAD_IDS,
    "load": BAD_IDS,
    "cleanup": BAD_IDS,
    "final": ("0", "1", "str", "none"),
    "object": ("generator",),
}
"""The calls a driver may make with a wrong argument (R21), and the wrong values of each:
a bad id to one of the four calls that take one, a bad ``is_final`` to ``save_async``, or
an object no ``copy.deepcopy`` takes (a generator) to ``save_async``."""

METHODS: dict[str, str] = {
    "save": "save_async",
    "final": "save_async",
    "object": "save_async",
    "cancel": "cancel_sender",
    "load": "load_async",
    "cleanup": "cleanup_receiver",
}
"""The adapter method each call of :data:`REJECTS` is made with."""


def wrong_call(call: str, request_id: str, bad: str) -> tuple[str, tuple[Any, ...], str]:
    """The adapter method, the arguments and the printed form of the call *call* of
    :data:`REJECTS` with its wrong value *bad*, about request *request_id*."""
    values: dict[str, Any] = {
        "int": int(request_id) if request_id.isdigit() else len(request_id),
        "bytes": request_id.encode(),
        "none": None,
        "tuple": (request_id,),
        "0": 0,
        "1": 1,
        "str": "True",
    }
    method, chunk = METHODS[call], [request_id, "rejected"]
    if call == "object":
        generator = (part for part in (request_id,))
        return (
            method,
            (request_id, generator, False),
            f"{method}({request_id!r}, <a generator>, False)",
        )
    value = values[bad]
    args: tuple[Any, ...] = (value,)
    if call == "save":
        args = (value, chunk, False)
    elif call == "final":
        args = (request_id, chunk, value)
    return method, args, f"{method}({', '.join(repr(a) for a in args)})"


_TAKE_AN_ID = ("save_async", "cancel_sender", "load_async", "cleanup_receiver")


def wrong_argument(c: CallRecord) -> str | None:
    """What is wrong with *c*'s arguments (it must raise ``TypeError``); ``None`` when
    nothing is."""
    if c.call in _TAKE_AN_ID and not isinstance(c.request_id, str):
        return f"a request id {c.request_id!r} that is not a str"
    if c.call == "save_async" and not isinstance(c.args[1], bool):
        return f"an is_final {c.args[1]!r} that is not a bool"
    return None


def check_inputs(tl: Timeline) -> Iterator[Violation]:
    """R21 for every call of *tl* made with a wrong argument (module doc)."""
    for c in tl.calls:
        wrong = wrong_argument(c)
        stopped = tl.stopped_adapters.get(c.adapter)
        if wrong is None or (stopped is not None and c.begin > stopped):
            continue
        if isinstance(c.error, TypeError):
            continue
        got = "returned normally" if c.error is None else f"raised {c.error!r}"
        yield Violation(
            R21,
            f"{c.call} with {wrong} must raise TypeError at the call, but it {got}",
            c.request_id if isinstance(c.request_id, str) else None,
            at=c.begin,
        )
