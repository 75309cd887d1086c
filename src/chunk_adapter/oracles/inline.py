"""The scheduler thread never does the slow work itself (R3).

``save_async`` only snapshots and enqueues; no scheduler call builds a payload
or touches the connector. A ``build_payload`` call or a ``put``/``get``
recorded on the thread of a scheduler call, while that call is in flight, is
work the call did inline: the scheduler waited for it. The records carry the
thread's name, so this is read off the history (:class:`InlineWork`), and
reported at the build or operation — usually the root cause of what follows
(a payload built from the caller's object, a chunk put out of order).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

from ..history import BuildCall, ConnectorOp
from ..rules import R3
from .records import CallRecord
from .violations import Violation

__all__ = ["SCHEDULER_CALLS", "InlineWork", "check_inline"]

SCHEDULER_CALLS = frozenset(
    {"save_async", "cancel_sender", "load_async", "poll_ready", "cleanup_receiver"}
)
"""The calls that must return at once (R3); ``stop()`` may wait for its join timeout."""


class InlineWork:
    """Finds the scheduler call (if any) a build or connector operation ran inside."""

    def __init__(self, calls: Iterable[CallRecord]) -> None:
        per_thread: dict[str, list[CallRecord]] = defaultdict(list)
        for c in calls:
            if c.call in SCHEDULER_CALLS:
                per_thread[c.thread].append(c)
        self._calls = {t: sorted(cs, key=lambda c: c.begin) for t, cs in per_thread.items()}
        self._begins = {t: [c.begin for c in cs] for t, cs in self._calls.items()}

    def call_around(self, record: BuildCall | ConnectorOp) -> CallRecord | None:
        """The scheduler call on *record*'s thread in flight over all of *record*, if any."""
        calls = self._calls.get(record.thread)
        if not calls:
            return None
        i = bisect.bisect_left(self._begins[record.thread], record.begin) - 1
        if i >= 0 and calls[i].end > record.end:
            return calls[i]
        return None


def check_inline(
    inline: list[tuple[CallRecord, BuildCall | ConnectorOp]],
) -> Iterator[Violation]:
    """R3, once per scheduler call that did a build, a put or a get itself."""
    seen: set[int] = set()
    for call, record in inline:
        if id(call) in seen:
            continue
        seen.add(id(call))
        what = _what(record)
        yield Violation(
            R3,
            f"{call.call}() {what} on the scheduler thread, inside the call: the scheduler "
            "must never wait for a build or the connector (save_async only snapshots and "
            "enqueues)",
            call.request_id,
            getattr(record, "key", None),
            record.begin,
        )


def _what(record: Any) -> str:
    if isinstance(record, BuildCall):
        return "called build_payload"
    return f"called the connector's {record.op}({record.key!r})"
