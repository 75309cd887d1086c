"""Shape: the SAVE thread takes its work from a ``queue.Queue`` with ``get(timeout=0.1)``.

``make`` is correct; ``make_no_token_check`` carries one seeded race bug: the
RECV thread commits a value without checking the registration's token (R16).
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

from tests._adapters.plain import RecvPart, SendPart

__all__ = ["Adapter", "NoTokenCheck", "make", "make_no_token_check"]


class Adapter(SendPart, RecvPart):
    def make_threads(self) -> None:
        # The work for the SAVE thread, in save order (the queue has its own lock).
        self._work: queue.Queue[tuple[str, Any, bool]] = queue.Queue()
        # Set once by stop(); every loop checks it.
        self._stop = threading.Event()
        # Guards the send ids and cancels; nobody waits on it.
        self._send_lock = threading.Lock()
        # Guards tokens, recv ids, ready lists and the queue; the RECV thread waits on it.
        self._recv_lock = threading.Lock()
        self._recv_cond = threading.Condition(self._recv_lock)
        self._threads = [
            threading.Thread(target=self._save_from_queue, name="chunk-adapter-save", daemon=True),
            threading.Thread(target=self.recv_loop, name="chunk-adapter-recv", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        import copy

        if not isinstance(request_id, str) or not isinstance(is_final, bool):
            raise TypeError(f"save_async({request_id!r}, ..., {is_final!r}): str and bool please")
        if self._stop.is_set():
            raise RuntimeError("save_async after stop()")
        self._work.put((request_id, copy.deepcopy(obj), is_final))

    def _save_from_queue(self) -> None:
        while not self._stop.is_set():
            try:
                request_id, snap, is_final = self._work.get(timeout=self.wait_timeout)
            except queue.Empty:
                continue
            if self._stop.is_set():
                return
            self.send_taken(request_id, snap, is_final)

    def stop(self) -> None:
        self._stop.set()
        self.wake(self._recv_cond)
        self.join_all(self._threads, time.monotonic)


class NoTokenCheck(Adapter):
    CHECK_TOKEN = False


def make(connector: Any, **kwargs: Any) -> Adapter:
    return Adapter(connector, **kwargs)


def make_no_token_check(connector: Any, **kwargs: Any) -> Adapter:
    return NoTokenCheck(connector, **kwargs)
