"""A connector wrapper that records every put and get into a :class:`History`."""

from __future__ import annotations

import threading
from typing import Any

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
        self.history.append(
            ConnectorOp(
                op="put",
                key=key,
                value=value,
                outcome="error" if exc is not None else "ok",
                error=None if exc is None else repr(exc),
                begin=begin,
                end=end,
                thread=threading.current_thread().name,
            )
        )
        if exc is not None:
            raise exc

    def get(self, key: str) -> dict[str, Any] | None:
        begin, result, exc, end = self.history.timed(lambda: self.inner.get(key))
        outcome: Outcome
        if exc is not None:
            outcome = "error"
        elif result is None:
            outcome = "none"
        else:
            outcome = "ok"
        self.history.append(
            ConnectorOp(
                op="get",
                key=key,
                value=result,
                outcome=outcome,
                error=None if exc is None else repr(exc),
                begin=begin,
                end=end,
                thread=threading.current_thread().name,
            )
        )
        if exc is not None:
            raise exc
        return result

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
