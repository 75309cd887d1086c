"""A connector wrapper that plays a store outage: every put fails while ``down`` is set.

Shared by the retry-window tests (tests/connectors/test_retry_window.py) and the
adapter's put-retry tests (tests/unit/test_reliability_permanent.py).
"""

from __future__ import annotations

import threading
from typing import Any

from chunk_adapter.connectors.base import ConnectorWrapper
from chunk_adapter.errors import ConnectorError

__all__ = ["Outage"]


class Outage(ConnectorWrapper):
    """Puts raise a transient error while ``down`` is set; the first failure sets ``hit``."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.down = threading.Event()  # set by the test: the store is unreachable
        self.hit = threading.Event()  # set by the first put refused during the outage
        # Guards failures; taken by every refused put. Nobody waits on it.
        self._lock = threading.Lock()
        self.failures = 0

    def put(self, key: str, value: dict[str, Any]) -> None:
        if self.down.is_set():
            with self._lock:
                self.failures += 1
            self.hit.set()
            raise ConnectorError(f"put({key!r}): the store is down (an outage)")
        self.inner.put(key, value)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.inner.get(key)
