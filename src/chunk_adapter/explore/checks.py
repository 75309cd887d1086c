"""What judges an execution: the contract oracles, through a pluggable checker.

The explorer writes no contract checks of its own. After every execution the
default checker hands the recorded history to :func:`chunk_adapter.oracles.check`
(``quiescent`` when the script settled before stopping) and reports each
violation as ``"R16: ..."``. The scheduler calls are recorded by
:class:`chunk_adapter.oracles.RecordedAdapter`. On top of that the explorer
itself reports deadlocks, livelocks, hangs after ``stop()`` and crashed threads.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from ..history import History
from .execution import Execution

__all__ = ["default_checker", "default_wrap"]


def _oracles() -> Any:
    try:
        return importlib.import_module("chunk_adapter.oracles")
    except ImportError:  # pragma: no cover - only while the oracles are being written
        return None


def default_wrap() -> Callable[[Any, History], Any] | None:
    """``RecordedAdapter`` from the oracles, so scheduler calls land in the history."""
    oracles = _oracles()
    if oracles is None:  # pragma: no cover
        return None
    wrap: Callable[[Any, History], Any] = oracles.RecordedAdapter
    return wrap


def default_checker(execution: Execution) -> list[str]:
    """Every contract violation the oracles find, as ``"R<n>: ..."`` strings.

    The whole history is checked for safety (``quiescent=False``: it ends with
    ``stop()``, after which liveness is not owed). If the script settled and
    polled before its final ``stop()``, the history up to that point is also
    checked with ``quiescent=True``, so lost and stuck chunks are found too.
    """
    oracles = _oracles()
    if oracles is None:  # pragma: no cover
        return []
    put_tries = execution.put_tries
    found = [str(v) for v in oracles.check(execution.history, quiescent=False, put_tries=put_tries)]
    if execution.cut is not None:
        prefix = _prefix(execution.history, execution.cut)
        for v in oracles.check(prefix, quiescent=True, put_tries=put_tries):
            if str(v) not in found:
                found.append(str(v))
    return found


def _prefix(history: History, cut: int) -> History:
    """A new history holding the records that ended before sequence number *cut*."""
    prefix = History()
    for record in history.records():
        if getattr(record, "end", cut) < cut:
            prefix.append(record)
    return prefix
