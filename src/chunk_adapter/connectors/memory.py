"""An in-process, thread-safe connector: the embedded default and the test bed."""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["MemoryConnector"]


class MemoryConnector:
    """A dict behind a lock.

    ``consume_on_get=True`` makes ``get`` remove what it returns, as a
    shared-memory connector does. ``puts`` lists the keys of successful puts in
    order (what the contract's examples call ``conn.puts``).
    """

    def __init__(self, *, consume_on_get: bool = False) -> None:
        self.consume_on_get = consume_on_get
        # Guards _store and _puts; taken by every put/get, never held while
        # calling out. Nobody waits on it.
        self._lock = threading.Lock()
        self._store: dict[str, dict[str, Any]] = {}
        self._puts: list[str] = []

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._store[key] = value
            self._puts.append(key)

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            if self.consume_on_get:
                return self._store.pop(key, None)
            return self._store.get(key)

    @property
    def puts(self) -> list[str]:
        """Keys put successfully, in the order they were put (a copy)."""
        with self._lock:
            return list(self._puts)

    def keys(self) -> list[str]:
        """Keys stored now (consumed keys are gone)."""
        with self._lock:
            return list(self._store)

    def __len__(self) -> int:
        with self._lock:
            return len(self._store)

    def __repr__(self) -> str:
        return f"MemoryConnector(consume_on_get={self.consume_on_get}, stored={len(self)})"
