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
from typing import Any

from ..history import BuildCall, ConnectorOp, History
from ..oracles import CallRecord, RecordedAdapter, check, split_key
from ..rules import R14
from .execution import Execution
from .pipeline import Hop
from .tasks import Failure

__all__ = ["default_checker", "default_wrap", "owed_now"]


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
    for suffix, history in _by_hop(execution):
        checks = [(history, False)]
        if execution.cut is not None:
            checks.append((_prefix(history, execution.cut), True))
        for part, quiescent in checks:
            for v in check(part, quiescent=quiescent, put_tries=put_tries):
                message = str(v) + suffix
                if message not in seen:
                    seen.add(message)
                    found.append(Failure("violation", message, v.rules))
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
    for _, history in _by_hop(execution):
        part = history if execution.cut is None else _prefix(history, execution.cut)
        for v in check(part, quiescent=True, put_tries=execution.put_tries):
            if v.at is not None:
                return False
            owed = owed or v.rule not in SCHEDULER_OWES
    return owed


def _by_hop(execution: Execution) -> Iterator[tuple[str, History]]:
    """``(suffix, history)`` per hop: the whole history when there is one hop, else each
    hop's own records and ``" [hop a->b]"`` for its messages."""
    hops = execution.hops
    if len(hops) <= 1:
        yield "", execution.history
        return
    for hop in hops:
        yield f" [hop {hop.label}]", _hop_history(execution, hop)


_SENDING = ("save_async", "cancel_sender")
_RECEIVING = ("load_async", "poll_ready", "cleanup_receiver")


def _hop_history(execution: Execution, hop: Hop) -> History:
    """The records of one hop, in their original order and sequence numbers."""
    out = History()
    for record in execution.history.records():
        if isinstance(record, CallRecord):
            keep = (
                (record.adapter == hop.sender and record.call in _SENDING)
                or (record.adapter == hop.receiver and record.call in _RECEIVING)
                or (record.call == "stop" and record.adapter in (hop.sender, hop.receiver))
            )
        elif isinstance(record, ConnectorOp):
            parsed = split_key(record.key)
            keep = parsed is not None and parsed[1] == hop.stage_id
        elif isinstance(record, BuildCall):
            keep = execution.build_roles.get(id(record)) == hop.sender
        else:
            keep = True
        if keep:
            out.append(record)
    return out


def _prefix(history: History, cut: int) -> History:
    """A new history holding the records that ended before sequence number *cut*."""
    prefix = History()
    for record in history.records():
        if getattr(record, "end", cut) < cut:
            prefix.append(record)
    return prefix
