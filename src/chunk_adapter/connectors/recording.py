"""A connector wrapper that records every put and get into a :class:`History`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal

from ..history import ConnectorOp, History, Outcome
from .base import Connector, ConnectorWrapper, is_permanent

__all__ = ["CountingConnector", "RecordingConnector"]


class RecordingConnector(ConnectorWrapper):
    """Wraps any connector; each call becomes one :class:`ConnectorOp`.

    Pass a shared ``history`` to interleave these records with others (a
    recording builder, a harness's scheduler calls); by default it makes its own.
    Exceptions from the inner connector are recorded and re-raised unchanged.
    """

    def __init__(self, inner: Connector, history: History | None = None) -> None:
        super().__init__(inner)
        self.history = history if history is not None else History()

    def put(self, key: str, value: dict[str, Any]) -> None:
        _, exc = self.history.timed(
            lambda: self.inner.put(key, value), self._recorder("put", key, value)
        )
        if exc is not None:
            raise exc

    def get(self, key: str) -> dict[str, Any] | None:
        result, exc = self.history.timed(lambda: self.inner.get(key), self._recorder("get", key))
        if exc is not None:
            raise exc
        return result

    @staticmethod
    def _recorder(
        op: Literal["put", "get"], key: str, put_value: Any = None
    ) -> Callable[[int, Any, BaseException | None, int], ConnectorOp]:
        """How one call becomes a :class:`ConnectorOp` once it returned."""

        def record(begin: int, result: Any, exc: BaseException | None, end: int) -> ConnectorOp:
            outcome: Outcome = "error" if exc is not None else "ok"
            if op == "get" and exc is None and result is None:
                outcome = "none"
            return ConnectorOp(
                op=op,
                key=key,
                value=put_value if op == "put" else result,
                outcome=outcome,
                error=None if exc is None else repr(exc),
                begin=begin,
                end=end,
                thread=threading.current_thread().name,
                ident=threading.get_ident(),
                permanent=exc is not None and is_permanent(exc),
            )

        return record

    def ops(self) -> list[ConnectorOp]:
        """Every recorded put and get, in the order they ended."""
        ops: list[ConnectorOp] = self.history.records(ConnectorOp)
        return sorted(ops, key=lambda op: op.end)

    @property
    def puts(self) -> list[str]:
        """Keys of the puts that succeeded, in order."""
        return [op.key for op in self.ops() if op.op == "put" and op.outcome == "ok"]

    def __repr__(self) -> str:
        return f"RecordingConnector({self.inner!r})"


class CountingConnector(ConnectorWrapper):
    """Counts gets and puts, nothing more: cheap enough not to skew CPU measurements
    (the idle-CPU and get-rate measurements of stress, the probes and the benchmarks)."""

    def __init__(self, inner: Connector) -> None:
        super().__init__(inner)
        # Guards gets and puts (bumped by the adapter's threads, read by the driver).
        self._lock = threading.Lock()
        self.gets = 0
        self.puts = 0

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self.puts += 1
        self.inner.put(key, value)

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            self.gets += 1
        return self.inner.get(key)
