"""A connector wrapper that counts the calls through it and wakes whoever waits on them.

A driver on real threads waits for "the adapter called the connector" or "nothing
changed for a while": :class:`Progress` counts

- :attr:`Progress.ops`: every put and get, counted when the call returned or raised;
- :attr:`Progress.changes`: the calls that change or hand out something (every
  put, counted as it starts, even one that then fails; every get that found a
  value) -- what a ``settle()`` watches go quiet;

and notifies one condition after each count, so :meth:`Progress.wait_for` and
:meth:`Progress.wait_quiet` wake on the event instead of sleeping a guessed time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..connectors.base import Connector, ConnectorWrapper

__all__ = ["Progress"]

SLICE = 0.005
"""Seconds a waiter sleeps at most between two looks (a lost wake-up costs this much)."""


class Progress(ConnectorWrapper):
    """Counts the calls through *inner* and wakes waiters after each (module doc)."""

    def __init__(self, inner: Connector) -> None:
        super().__init__(inner)
        # Guards ops and changes. Notified (all) after every count; wait_for() and
        # wait_quiet() wait on it. Held only to count or to read, never while calling out.
        self._cond = threading.Condition()
        self.ops = 0
        self.changes = 0

    def _count(self, *, op: bool, change: bool) -> None:
        with self._cond:
            self.ops += op
            self.changes += change
            self._cond.notify_all()

    def put(self, key: str, value: dict[str, Any]) -> None:
        self._count(op=False, change=True)
        try:
            self.inner.put(key, value)
        finally:
            self._count(op=True, change=False)

    def get(self, key: str) -> dict[str, Any] | None:
        value: dict[str, Any] | None = None
        try:
            value = self.inner.get(key)
            return value
        finally:
            self._count(op=True, change=value is not None)

    def wait_for(
        self, predicate: Callable[[], bool], timeout: float, slice_: float = SLICE
    ) -> bool:
        """Wait until *predicate()* is true; ``False`` if *timeout* seconds pass first.

        *predicate* is looked at after every call through the connector (and at
        least every *slice_* seconds). It runs outside the condition's lock: it
        may call the adapter, whose threads may call the connector while holding
        locks of their own.
        """
        deadline = time.monotonic() + timeout
        while True:
            with self._cond:
                seen = self.ops
            if predicate():
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with self._cond:
                if self.ops == seen:
                    self._cond.wait(min(remaining, slice_))

    def wait_quiet(self, idle: float, limit: float) -> bool:
        """Wait until no change was counted for *idle* seconds; ``False`` if the
        connector was still busy after *limit* seconds."""
        now = time.monotonic()
        deadline = now + limit
        with self._cond:
            seen, quiet_since = self.changes, now
            while True:
                now = time.monotonic()
                if self.changes != seen:
                    seen, quiet_since = self.changes, now
                if now - quiet_since >= idle:
                    return True
                if now >= deadline:
                    return False
                self._cond.wait(min(quiet_since + idle, deadline) - now)

    def __repr__(self) -> str:
        return f"Progress({self.inner!r})"
