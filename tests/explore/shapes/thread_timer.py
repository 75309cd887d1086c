"""Shape: SAVE and RECV threads are ``threading.Thread`` subclasses; ``stop()`` arms a
``threading.Timer`` that would log a slow stop, and cancels it once both threads joined."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from tests._adapters.plain import RecvPart, SendPart

__all__ = ["Adapter", "make"]

_log = logging.getLogger(__name__)


class _Worker(threading.Thread):
    """Runs one loop of its adapter; the subclass overrides ``run``."""

    def __init__(self, loop: Any, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.loop = loop

    def run(self) -> None:
        self.loop()


class Adapter(SendPart, RecvPart):
    def make_threads(self) -> None:
        # Set once by stop(); every loop checks it.
        self._stop = threading.Event()
        # Guards the FIFO, send ids and cancels; the SAVE thread waits on _send_cond.
        self._send_lock = threading.Lock()
        self._send_cond = threading.Condition(self._send_lock)
        # Guards tokens, recv ids, ready lists and the queue; the RECV thread waits on it.
        self._recv_lock = threading.Lock()
        self._recv_cond = threading.Condition(self._recv_lock)
        self._threads = [
            _Worker(self.save_loop, "chunk-adapter-save"),
            _Worker(self.recv_loop, "chunk-adapter-recv"),
        ]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        watchdog = threading.Timer(self.join_timeout / 2, self._slow_stop)
        watchdog.start()
        self._stop.set()
        self.wake(self._send_cond, self._recv_cond)
        self.join_all(self._threads, time.monotonic)
        watchdog.cancel()

    def _slow_stop(self) -> None:
        alive = [t.name for t in self._threads if t.is_alive()]
        _log.warning("stop() is slow; still running: %s", alive)


def make(connector: Any, **kwargs: Any) -> Adapter:
    return Adapter(connector, **kwargs)
