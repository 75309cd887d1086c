"""A shared, append-only log with one global sequence counter.

Recording wrappers (connector operations, ``build_payload`` calls) and test
harnesses (scheduler calls, ``poll_ready`` results) append to the same
:class:`History`, so one ordering relates everything that happened: a record's
``begin`` and ``end`` are sequence numbers taken when the operation started and
when it returned. ``a.end < b.begin`` means *a* finished before *b* started.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

__all__ = ["BuildCall", "ConnectorOp", "History", "Outcome"]

Outcome = Literal["ok", "none", "error"]
T = TypeVar("T")


@dataclass(frozen=True)
class ConnectorOp:
    """One ``put`` or ``get`` as the connector saw it.

    ``value`` is the value passed to ``put``, or what ``get`` returned (``None``
    when nothing was there or the call raised). ``outcome`` is ``"ok"``,
    ``"none"`` (a get that found nothing) or ``"error"`` (the call raised;
    ``error`` holds its repr).
    """

    op: Literal["put", "get"]
    key: str
    value: Any
    outcome: Outcome
    error: str | None
    begin: int
    end: int
    thread: str


@dataclass(frozen=True)
class BuildCall:
    """One ``build_payload(request_id, snapshot, is_final)`` call."""

    request_id: str
    snapshot: Any
    is_final: bool
    result: Any
    outcome: Outcome
    error: str | None
    begin: int
    end: int
    thread: str


class History:
    """Thread-safe append-only log; every record carries global sequence numbers."""

    def __init__(self) -> None:
        # Guards _seq and _records. Held only for an increment or an append,
        # never while calling out; nobody waits on it.
        self._lock = threading.Lock()
        self._seq = 0
        self._records: list[Any] = []

    def tick(self) -> int:
        """Take the next sequence number."""
        with self._lock:
            self._seq += 1
            return self._seq

    def append(self, record: Any) -> None:
        with self._lock:
            self._records.append(record)

    def records(self, kind: type[T] | None = None) -> list[Any]:
        """A copy of the records in append order, optionally only those of *kind*."""
        with self._lock:
            if kind is None:
                return list(self._records)
            return [r for r in self._records if isinstance(r, kind)]

    def timed(self, fn: Callable[[], T]) -> tuple[int, T | None, BaseException | None, int]:
        """Run *fn* between two ticks: ``(begin, result, exception, end)``.

        The exception is returned, not raised, so callers can record it first.
        """
        begin = self.tick()
        try:
            result = fn()
        except Exception as exc:  # recorded, then re-raised by the caller
            return begin, None, exc, self.tick()
        return begin, result, None, self.tick()

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)
