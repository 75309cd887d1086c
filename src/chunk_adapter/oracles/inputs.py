"""The oracle on bad input (R21): a call with a wrong argument raised at the call.

A recorded call whose request id is not a ``str``, a ``save_async`` whose ``is_final``
is not a ``bool`` (both must raise ``TypeError``), or a ``save_async`` of an object
``copy.deepcopy`` rejects (the recorder's snapshot, :data:`~.records.UNCOPYABLE`: it must
raise, any exception) breaks R21 when it returned normally, or when it raised something
else than ``TypeError`` for a wrong type. That it changed nothing is judged by the other
oracles, which take a call that raised as never made (:mod:`.timeline`). Calls made after
the adapter's ``stop()`` are the stopping oracle's (R19: they raise ``RuntimeError``).
"""

from __future__ import annotations

from collections.abc import Iterator

from ..rules import R21
from .records import UNCOPYABLE, CallRecord
from .timeline import Timeline
from .violations import Violation

__all__ = ["check_inputs", "wrong_argument"]

_TAKE_AN_ID = ("save_async", "cancel_sender", "load_async", "cleanup_receiver")


def wrong_argument(c: CallRecord) -> tuple[str, type[Exception]] | None:
    """What is wrong with *c*'s arguments, and the exception it must raise; ``None`` when
    nothing is."""
    if c.call in _TAKE_AN_ID and not isinstance(c.request_id, str):
        return f"a request id {c.request_id!r} that is not a str", TypeError
    if c.call == "save_async" and not isinstance(c.args[1], bool):
        return f"an is_final {c.args[1]!r} that is not a bool", TypeError
    if c.call == "save_async" and c.args[0] is UNCOPYABLE:
        return "an object the snapshot rejects", Exception
    return None


def check_inputs(tl: Timeline) -> Iterator[Violation]:
    """R21 for every call of *tl* made with a wrong argument (module doc)."""
    for c in tl.calls:
        wrong = wrong_argument(c)
        stopped = tl.stopped_adapters.get(c.adapter)
        if wrong is None or (stopped is not None and c.begin > stopped):
            continue
        what, must = wrong
        if isinstance(c.error, must):
            continue
        got = "returned normally" if c.error is None else f"raised {c.error!r}"
        yield Violation(
            R21,
            f"{c.call} with {what} must raise {must.__name__} at the call, but it {got}",
            c.request_id if isinstance(c.request_id, str) else None,
            at=c.begin,
        )
