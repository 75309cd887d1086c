"""What judges an execution: the contract oracles, through a pluggable checker.

The explorer writes no contract checks of its own. After every execution the
default checker hands the recorded history to :func:`chunk_adapter.oracles.check`
(``quiescent`` when the script settled before stopping) and reports each
violation as a ``violation`` :class:`~.tasks.Failure` with the message ``"R16: ..."``
and the violation's rules as data. The scheduler calls are recorded by
:class:`chunk_adapter.oracles.RecordedAdapter`. On top of that the explorer
itself reports deadlocks, livelocks, hangs after ``stop()`` and crashed threads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, cast

from ...history import BuildCall, ConnectorOp, History
from ...oracles import CallRecord, RecordedAdapter, check, split_key
from ...rules import R14
from ..runtime.tasks import Failure
from ..scenarios.pipeline import Hop
from .result import Execution

__all__ = ["Owed", "default_checker", "default_wrap", "history_before", "owed_now"]


def default_wrap() -> Callable[[Any, History], Any]:
    """``RecordedAdapter`` from the oracles, so scheduler calls land in the history."""
    return RecordedAdapter


def default_checker(execution: Execution) -> list[Failure]:
    """Every contract violation the oracles find: ``violation`` failures whose message is
    ``"R<n>: ..."`` and whose ``rules`` are the violation's (``Violation.rules``).

    Each hop of the scenario's topology (a sending member and the member that
    receives from it) is judged on its own records, because the oracles assume
    one sending stage per history: the sender's ``save_async``/``cancel_sender``
    and builds, the receiver's ``load_async``/``poll_ready``/``cleanup_receiver``,
    both members' ``stop()``, and the puts and gets of the hop's keys. With one
    hop that is the whole history. The whole hop is checked for safety
    (``quiescent=False``: it ends with ``stop()``, after which liveness is not
    owed); if the script settled and polled before its final ``stop()``, the hop
    up to that point is also checked with ``quiescent=True``, so lost and stuck
    chunks are found too. With several hops, messages end with the hop's name.
    """
    put_tries = execution.put_tries
    found: list[Failure] = []
    seen: set[str] = set()
    for suffix, history, members in _by_hop(execution):
        checks = [(history, False)]
        if execution.cut is not None:
            checks.append((history_before(history, execution.cut), True))
        for part, quiescent in checks:
            for v in check(part, quiescent=quiescent, put_tries=put_tries):
                message = str(v) + suffix
                if message not in seen:
                    seen.add(message)
                    found.append(Failure("violation", message, v.rules, members))
    return found


SCHEDULER_OWES = frozenset({R14})
"""Liveness rules only the scheduler's next call can settle: a chunk got and not yet
handed out waits for a ``poll_ready``, which no settling of the adapter's threads makes."""


def owed_now(execution: Execution) -> bool:
    """Whether the adapter's threads owe anything in the history up to ``execution.cut``:
    a liveness violation (one with no event that breaks it) on some hop, were the run
    quiescent there, other than one that waits for the scheduler (:data:`SCHEDULER_OWES`),
    and no safety violation yet (that one fails the execution whatever arrives later).

    A settle goes on while this holds; waiting out the liveness deadline for a chunk only
    a poll can hand out cost four settles in five a full judgement of the history every
    quarter of a virtual second, and the idle steps between (measured: 5,157 of 6,429
    calls over 150 worlds)."""
    owed = False
    for _, history, _ in _by_hop(execution):
        part = history if execution.cut is None else history_before(history, execution.cut)
        for v in check(part, quiescent=True, put_tries=execution.put_tries):
            if v.at is not None:
                return False
            owed = owed or v.rule not in SCHEDULER_OWES
    return owed


_NO_END = object()  # what a record without an ``end`` has as one (never in a prefix)


class Owed:
    """:func:`owed_now` of one execution, asked again and again as its history grows.

    A settle asks it every quarter of a virtual second; rebuilding each hop's history
    up to the cut from the whole history every time was quadratic in a long world. This
    keeps each hop's records up to the cut (``_parts``, one :class:`History` per hop, or
    one for a single hop) and adds only the records appended since the last call, so
    each call judges exactly the histories :func:`owed_now` would build. A new record
    that could still change which part it belongs to — one that ends at or after the
    cut, or a build whose member is not known yet — makes that call rebuild from
    scratch (:func:`owed_now`) and the next start over; neither happens in a run (a
    record is appended once it ended, a build's member is noted as it is appended)."""

    def __init__(self, probe: Callable[[int], Execution]) -> None:
        self._probe = probe  # the execution as owed_now judges it, at a given cut
        self._first: Execution | None = None
        self._parts: list[History] = []
        self._seen = 0  # records of the history added to the parts so far

    def __call__(self, cut: int) -> bool:
        """Whether something is owed at *cut* (a sequence number just taken)."""
        if self._first is None:
            self._first = self._probe(cut)
            self._parts = [History() for _ in _hops_or_one(self._first)]
        execution = self._first
        new = execution.history.records_from(self._seen)
        hops = _hops_or_one(execution)
        roles = execution.build_roles
        for record in new:
            end = getattr(record, "end", _NO_END)
            if end is _NO_END:
                continue  # no end: never in a prefix (history_before)
            if cast(int, end) >= cut or (len(hops) > 1 and isinstance(record, BuildCall)
                              and id(record) not in roles):  # fmt: skip
                self._first, self._seen = None, 0  # start over next time
                return owed_now(self._probe(cut))
            for part, hop in zip(self._parts, hops, strict=True):
                if hop is None or _on_hop(record, hop, roles):
                    part.append(record)
        self._seen += len(new)
        owed = False
        for part in self._parts:
            for v in check(part, quiescent=True, put_tries=execution.put_tries):
                if v.at is not None:
                    return False
                owed = owed or v.rule not in SCHEDULER_OWES
        return owed


def _hops_or_one(execution: Execution) -> tuple[Hop | None, ...]:
    """The hops :func:`_by_hop` splits the history by; ``(None,)``: the whole history."""
    return execution.hops if len(execution.hops) > 1 else (None,)


def _by_hop(execution: Execution) -> Iterator[tuple[str, History, tuple[str, ...]]]:
    """``(suffix, history, members)`` per hop: the whole history when there is one hop
    (no members named), else each hop's own records, ``" [hop a->b]"`` for its messages
    and its two members."""
    hops = execution.hops
    if len(hops) <= 1:
        yield "", execution.history, ()
        return
    for hop in hops:
        yield f" [hop {hop.label}]", _hop_history(execution, hop), (hop.sender, hop.receiver)


_SENDING = ("save_async", "cancel_sender")
_RECEIVING = ("load_async", "poll_ready", "cleanup_receiver")


def _hop_history(execution: Execution, hop: Hop) -> History:
    """The records of one hop, in their original order and sequence numbers."""
    out = History()
    for record in execution.history.records():
        if _on_hop(record, hop, execution.build_roles):
            out.append(record)
    return out


def _on_hop(record: Any, hop: Hop, build_roles: dict[int, str]) -> bool:
    """Whether *record* is one of *hop*'s (:func:`_hop_history`)."""
    if isinstance(record, CallRecord):
        return (
            (record.adapter == hop.sender and record.call in _SENDING)
            or (record.adapter == hop.receiver and record.call in _RECEIVING)
            or (record.call == "stop" and record.adapter in (hop.sender, hop.receiver))
        )
    if isinstance(record, ConnectorOp):
        parsed = split_key(record.key)
        return parsed is not None and parsed[1] == hop.stage_id
    if isinstance(record, BuildCall):
        return build_roles.get(id(record)) == hop.sender
    return True


def history_before(history: History, cut: int) -> History:
    """A new history holding the records that ended before sequence number *cut*."""
    prefix = History()
    for record in history.records():
        if getattr(record, "end", cut) < cut:
            prefix.append(record)
    return prefix
