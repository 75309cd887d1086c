"""A connector wrapper that records every put and get into a :class:`History`."""

from __future__ import annotations

import threading
from typing import Any, Literal

from ..history import ConnectorOp, History, Outcome
from .base import Connector, ConnectorWrapper

__all__ = ["RecordingConnector"]


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
        begin, _, exc, end = self.history.timed(lambda: self.inner.put(key, value))
        self._record("put", key, value, "error" if exc is not None else "ok", exc, begin, end)

    def get(self, key: str) -> dict[str, Any] | None:
        begin, result, exc, end = self.history.timed(lambda: self.inner.get(key))
        outcome: Outcome = "error" if exc is not None else "none" if result is None else "ok"
        self._record("get", key, result, outcome, exc, begin, end)
        return result

    def _record(
        self,
        op: Literal["put", "get"],
        key: str,
        value: Any,
        outcome: Outcome,
        exc: BaseException | None,
        begin: int,
        end: int,
    ) -> None:
        """Append the call as a :class:`ConnectorOp`, then re-raise what it raised."""
        self.history.append(
            ConnectorOp(
                op=op,
                key=key,
                value=value,
                outcome=outcome,
                error=None if exc is None else repr(exc),
                begin=begin,
                end=end,
                thread=threading.current_thread().name,
            )
        )
        if exc is not None:
            raise exc

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
