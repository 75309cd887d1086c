"""Shape: ``from threading import RLock, Condition, Event, Thread`` and
``from time import perf_counter, sleep``: names bound at import, in this module.

One reentrant lock per side (helpers re-acquire it), and the put backoff is a
``perf_counter`` deadline slept in small steps.
"""

from __future__ import annotations

from threading import Condition, Event, RLock, Thread
from time import perf_counter, sleep
from typing import Any

from tests._adapters.plain import RecvPart, SendPart

__all__ = ["Adapter", "make"]


class Adapter(SendPart, RecvPart):
    def make_threads(self) -> None:
        # Set once by stop(); every loop checks it.
        self._stop = Event()
        # Reentrant: cancel_sender and the SAVE loop re-enter it through _is_cancelled.
        self._send_lock = RLock()
        self._send_cond = Condition(self._send_lock)
        # Reentrant: load_async re-enters it through _registered.
        self._recv_lock = RLock()
        self._recv_cond = Condition(self._recv_lock)
        self._threads = [
            Thread(target=self.save_loop, name="chunk-adapter-save", daemon=True),
            Thread(target=self.recv_loop, name="chunk-adapter-recv", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def cancel_sender(self, request_id: str) -> None:
        with self._send_lock:
            if not self._is_cancelled(request_id):
                super().cancel_sender(request_id)

    def _is_cancelled(self, request_id: str) -> bool:
        with self._send_lock:
            return request_id in self._cancelled

    def load_async(self, request_id: str) -> None:
        with self._recv_lock:
            if self._registered(request_id):
                return
            super().load_async(request_id)

    def _registered(self, request_id: str) -> bool:
        with self._recv_lock:
            return request_id in self._tokens

    def backoff(self, seconds: float) -> bool:
        deadline = perf_counter() + seconds
        while perf_counter() < deadline:
            if self._stop.is_set():
                return True
            sleep(min(0.002, deadline - perf_counter()))
        return self._stop.is_set()

    def stop(self) -> None:
        self._stop.set()
        self.wake(self._send_cond, self._recv_cond)
        self.join_all(self._threads, perf_counter)


def make(connector: Any, **kwargs: Any) -> Adapter:
    return Adapter(connector, **kwargs)
