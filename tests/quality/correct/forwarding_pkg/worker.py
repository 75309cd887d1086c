"""A generic background worker: calls ``step()`` until stopped."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Worker(threading.Thread):
    def __init__(self, name: str, step: Callable[[], None], stopped: threading.Event) -> None:
        super().__init__(name=name, daemon=True)
        self._step = step
        self._stopped = stopped

    def run(self) -> None:
        while not self._stopped.is_set():
            try:
                self._step()
            except Exception:  # never die
                log.exception("%s step failed", self.name)
