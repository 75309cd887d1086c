"""Oracles on stopping (R19): what the scheduler's calls do after ``stop()`` returned.

Per adapter: in a pipeline the sender and the receiver are two adapters, and
each call is judged against the ``stop()`` of the adapter it was made on (a
``save_async`` after the sender stopped must raise; a ``poll_ready`` after
the receiver stopped must still hand out what was received).
"""

from __future__ import annotations

from collections.abc import Iterator

from ..rules import R19
from .timeline import Timeline
from .violations import Violation

__all__ = ["check_lifecycle"]

_MUST_RAISE = ("save_async", "cancel_sender", "load_async")
_MUST_WORK = ("poll_ready", "cleanup_receiver", "stop")


def check_lifecycle(tl: Timeline) -> Iterator[Violation]:
    for c in tl.calls:
        stopped = tl.stopped_adapters.get(c.adapter)
        if stopped is None or c.begin < stopped:
            continue
        if c.call in _MUST_RAISE and not isinstance(c.error, RuntimeError):
            got = "returned normally" if c.error is None else f"raised {c.error!r}"
            yield Violation(
                R19,
                f"{c.call} after stop() must raise RuntimeError, but it {got}",
                c.request_id,
                at=c.begin,
            )
        elif c.call in _MUST_WORK and c.error is not None:
            yield Violation(
                R19,
                f"{c.call} must keep working after stop(), but raised {c.error!r}",
                c.request_id,
                at=c.begin,
            )
