"""Shape: the SAVE thread takes its work from a ``queue.Queue`` with ``get(timeout=0.1)``.

``make`` is correct; ``make_no_token_check`` carries one seeded race bug: the
RECV thread commits a value without checking the registration's token (R16).
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

from ._parts import RecvPart, SendPart

__all__ = ["Adapter", "NoTokenCheck", "make", "make_no_token_check"]


class Adapter(SendPart, RecvPart):
    def __init__(self, connector: Any, *, stage_id: int, src_stage_id: int | None = None,
                 build_payload: Any = None, **options: Any) -> None:  # fmt: skip
        self.set_options(connector, stage_id, src_stage_id, build_payload, **options)
        self.init_send()
        self.init_recv()
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
            with self._send_lock:
                cancelled = request_id in self._cancelled
            self.send_one(request_id, snap, is_final, cancelled)

    def stop(self) -> None:
        self._stop.set()
        with self._recv_cond:
            self._recv_cond.notify_all()
        deadline = time.monotonic() + self.join_timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))


class NoTokenCheck(Adapter):
    CHECK_TOKEN = False


def make(connector: Any, **kwargs: Any) -> Adapter:
    return Adapter(connector, **kwargs)


def make_no_token_check(connector: Any, **kwargs: Any) -> Adapter:
    return NoTokenCheck(connector, **kwargs)
