"""An in-process, thread-safe connector: the embedded default and the test bed."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from ..errors import InvalidValue
from .base import Subscribe

__all__ = ["MemoryConnector"]


class MemoryConnector:
    """A dict behind a lock.

    ``consume_on_get=True`` makes ``get`` remove what it returns, as a
    shared-memory connector does. ``puts`` lists the keys of successful puts in
    order (what the contract's examples call ``conn.puts``): the last
    ``history`` of them (10,000 by default, ``None`` for all), so a long-lived
    connector's log stays bounded; ``put_count`` counts every put.

    ``notify=True`` offers the optional ``subscribe`` capability: after each put,
    every subscriber is called with the key (on the putting thread, outside the
    store's lock), so an adapter receives event-driven instead of polling.
    """

    def __init__(
        self, *, consume_on_get: bool = False, notify: bool = False, history: int | None = 10_000
    ) -> None:
        if history is not None and (
            isinstance(history, bool) or not isinstance(history, int) or history < 0
        ):
            raise InvalidValue(
                f"history is how many put keys to remember, an int >= 0 or None (all), got "
                f"{history!r}"
            )
        self.consume_on_get = consume_on_get
        self.notify = notify
        self.history = history
        # Guards _store, _puts, _put_count and _subscribers; taken by every call, never held
        # while calling out (subscribers run after it is released). Nobody waits on it.
        self._lock = threading.Lock()
        self._store: dict[str, dict[str, Any]] = {}
        self._puts: deque[str] = deque(maxlen=history)
        self._put_count = 0
        self._subscribers: list[Callable[[str], None]] = []

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._store[key] = value
            self._puts.append(key)
            self._put_count += 1
            subscribers = list(self._subscribers)
        for callback in subscribers:
            callback(key)

    @property
    def subscribe(self) -> Subscribe:
        """Present only with ``notify=True`` (see the connector protocol)."""
        if not self.notify:
            raise AttributeError("MemoryConnector(notify=False) is polled; pass notify=True")
        return self._subscribe

    def _subscribe(self, callback: Callable[[str], None]) -> Callable[[], None]:
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            if self.consume_on_get:
                return self._store.pop(key, None)
            return self._store.get(key)

    @property
    def puts(self) -> list[str]:
        """The last ``history`` keys put successfully, in the order they were put (a copy)."""
        with self._lock:
            return list(self._puts)

    @property
    def put_count(self) -> int:
        """How many puts succeeded, all told."""
        with self._lock:
            return self._put_count

    def keys(self) -> list[str]:
        """Keys stored now (consumed keys are gone)."""
        with self._lock:
            return list(self._store)

    def __len__(self) -> int:
        with self._lock:
            return len(self._store)

    def __repr__(self) -> str:
        return (
            f"MemoryConnector(consume_on_get={self.consume_on_get}, notify={self.notify}, "
            f"stored={len(self)})"
        )
