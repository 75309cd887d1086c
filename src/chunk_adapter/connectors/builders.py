"""A ``build_payload`` for tests: records, holds at gates, and fails on request.

``GatedBuilder(fn)`` behaves like *fn* (default: return the snapshot) and can

* hold a chosen build at a :class:`~chunk_adapter.connectors.gates.Gate`
  (``hold``) — the contract's Example 3 blocks the build of ``"p0"`` this way;
* raise :class:`~chunk_adapter.errors.InjectedFault` for chosen builds
  (``fail``);
* record every call as a :class:`~chunk_adapter.history.BuildCall` in a shared
  :class:`~chunk_adapter.history.History`.

Holding happens before failing, and both before *fn* runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..errors import InjectedFault, InvalidValue
from ..history import BuildCall, History
from .fatal import check_raises, injected
from .gates import Gate, GateSet
from .timed import TimedFaults

__all__ = ["BuildFn", "GatedBuilder", "identity_build"]

BuildFn = Callable[[str, Any, bool], Any]
BuildMatch = Callable[[str, Any, bool], bool]


def identity_build(request_id: str, snapshot: Any, is_final: bool) -> Any:
    """The contract's default ``build_payload``: the snapshot, unchanged."""
    return snapshot


def _build_match(request_id: str | None, predicate: BuildMatch | None) -> BuildMatch:
    if request_id is not None and predicate is not None:
        raise ValueError("pass request_id= or predicate=, not both")

    def match(rid: str, snapshot: Any, is_final: bool) -> bool:
        if request_id is not None:
            return rid == request_id
        return predicate(rid, snapshot, is_final) if predicate is not None else True

    return match


class GatedBuilder:
    """A callable ``build_payload(request_id, snapshot, is_final)`` with gates and faults."""

    def __init__(self, fn: BuildFn = identity_build, history: History | None = None) -> None:
        self.fn = fn
        self.history = history
        self.gates = GateSet()
        # Guards _failures (scripted build failures) and calls; never held while
        # building; nobody waits on it.
        self._lock = threading.Lock()
        self._failures: list[list[Any]] = []  # [match, remaining, raises]
        self.calls = 0
        self.timed = TimedFaults()
        """Build outages and slow builds by request id (:mod:`.timed`)."""

    def hold(
        self, request_id: str | None = None, *, predicate: BuildMatch | None = None, count: int = 1
    ) -> Gate:
        """Hold the next *count* builds of *request_id* (or matching *predicate*)."""
        return self.gates.arm(
            "build", _build_match(request_id, predicate), f"request_id={request_id!r}", count
        )

    def fail(
        self,
        request_id: str | None = None,
        *,
        predicate: BuildMatch | None = None,
        times: int = 1,
        raises: str | None = None,
    ) -> None:
        """Make the next *times* matching builds raise ``InjectedFault``, or what *raises*
        names (:data:`~.fatal.RAISES`: a ``SystemExit``..., for R30)."""
        check_raises(raises)
        if isinstance(times, bool) or not isinstance(times, int) or times < 1:
            raise InvalidValue(f"fail(): times counts builds from 1, got times={times!r}")
        with self._lock:
            self._failures.append([_build_match(request_id, predicate), times, raises])

    def release_all(self) -> None:
        self.gates.release_all()

    def _take_failure(self, request_id: str, snapshot: Any, is_final: bool) -> list[Any] | None:
        """The scripted failure this build meets (``[match, remaining, raises]``), if any."""
        with self._lock:
            self.calls += 1
            for entry in self._failures:
                if entry[0](request_id, snapshot, is_final):
                    entry[1] -= 1
                    if entry[1] == 0:  # used up: later builds need not ask it
                        self._failures.remove(entry)
                    return entry
            return None

    def _build(self, request_id: str, snapshot: Any, is_final: bool) -> Any:
        self.gates.passage("build", request_id, snapshot, is_final)
        failed = self.timed.before("build", request_id)
        scripted = self._take_failure(request_id, snapshot, is_final)
        if scripted is None and not failed:
            return self.fn(request_id, snapshot, is_final)
        message = f"injected build failure for request {request_id!r}"
        if scripted is not None and scripted[2] is not None:
            raise injected(scripted[2], message)
        raise InjectedFault(message)

    def __call__(self, request_id: str, snapshot: Any, is_final: bool) -> Any:
        if self.history is None:
            return self._build(request_id, snapshot, is_final)
        history = self.history

        def record(begin: int, result: Any, exc: BaseException | None, end: int) -> BuildCall:
            return BuildCall(
                request_id=request_id,
                snapshot=snapshot,
                is_final=is_final,
                result=result,
                outcome="error" if exc is not None else "ok",
                error=None if exc is None else repr(exc),
                begin=begin,
                end=end,
                thread=threading.current_thread().name,
            )

        result, exc = history.timed(lambda: self._build(request_id, snapshot, is_final), record)
        if exc is not None:
            raise exc
        return result
