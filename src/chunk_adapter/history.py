"""A shared, append-only log with one global sequence counter.

Recording wrappers (connector operations, ``build_payload`` calls) and test
harnesses (scheduler calls, ``poll_ready`` results) append to the same
:class:`History`, so one ordering relates everything that happened: a record's
``begin`` and ``end`` are sequence numbers taken when the operation started and
when it returned. ``a.end < b.begin`` means *a* finished before *b* started.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
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
    ident: int = field(default=0, compare=False, repr=False)
    """``threading.get_ident()`` of the calling thread: two threads given one name are still
    two (left out of equality and repr: it differs from run to run)."""
    permanent: bool = field(default=False, compare=False, repr=False)
    """The call raised an error no retry can fix (the exception's ``permanent`` attribute is
    true, or a ``PermissionError``: R25), so a put refused so is not tried again."""


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
        # Guards _seq, _records and _open. Held only for an increment, an
        # append or a set update, never while calling out.
        self._lock = threading.Lock()
        # On _lock. Notified (notify_all) by timed() each time a call's record
        # is in, when a settle() waits on it (_settling counts those, on _lock).
        self._closed = threading.Condition(self._lock)
        self._settling = 0
        self._seq = 0
        self._records: list[Any] = []
        # One token per timed() call whose record is not appended yet.
        self._open: set[object] = set()
        self.clock: Callable[[], float] | None = None
        """When set (the explorer's virtual clock), each tick's time goes into :attr:`times`."""
        self.times: dict[int, float] = {}
        """``sequence number -> clock()`` at that tick, while :attr:`clock` is set."""

    def tick(self) -> int:
        """Take the next sequence number (and note its time, with a :attr:`clock`)."""
        with self._lock:
            self._seq += 1
            if self.clock is not None:
                self.times[self._seq] = self.clock()
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

    def records_from(self, start: int) -> list[Any]:
        """A copy of the records appended after the first *start*, in append order."""
        with self._lock:
            return self._records[start:]

    def timed(
        self,
        fn: Callable[[], T],
        to_record: Callable[[int, T | None, BaseException | None, int], Any],
    ) -> tuple[T | None, BaseException | None]:
        """Run *fn* between two ticks and append ``to_record(begin, result, exception, end)``.

        Returns ``(result, exception)``: the exception is returned, not raised,
        so the caller re-raises it after it is on record. The call counts as
        open from before its first tick until its record is appended; see
        :meth:`settle`.
        """
        token = object()
        with self._lock:
            self._open.add(token)
        try:
            begin = self.tick()
            error: BaseException | None = None
            try:
                result: T | None = fn()
            except Exception as exc:  # recorded, then re-raised by the caller
                result, error = None, exc
            except BaseException as exc:  # only a fault injected so (R30) is on record
                if not getattr(exc, "injected_fatal", False):
                    raise
                result, error = None, exc
            self.append(to_record(begin, result, error, self.tick()))
        finally:
            with self._closed:
                self._open.discard(token)
                if self._settling:
                    self._closed.notify_all()
        return result, error

    def settle(self, timeout: float) -> bool:
        """Wait until every :meth:`timed` call open now has its record in the history.

        A call's effect can be seen before its record is appended (a put the
        receiver already got back); judge a history as complete only after
        this. Calls that start meanwhile are not waited for. ``False`` when
        some call was still open after *timeout* seconds (a call blocked
        in the adapter or the connector).
        """
        deadline = time.monotonic() + timeout
        with self._closed:
            waiting = set(self._open)
            self._settling += 1
            try:
                while waiting & self._open:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._closed.wait(remaining)
            finally:
                self._settling -= 1
        return True

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)
