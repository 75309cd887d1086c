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

from ..rules import R21
from .records import CallRecord
from .timeline import Timeline
from .violations import Violation

__all__ = ["check_inputs", "wrong_argument"]

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
