"""Shape: SAVE work runs on a one-worker ``ThreadPoolExecutor``; the RECV thread is a Thread.

``make`` is correct; ``make_split_poll`` carries one seeded race bug:
``poll_ready`` copies and clears the ready lists in two critical sections, so
a chunk committed in between is cleared without being handed out (R14/R15).
"""

from __future__ import annotations

import copy
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ._parts import RecvPart, SendPart, check_id

__all__ = ["Adapter", "SplitPoll", "make", "make_split_poll"]


class Adapter(SendPart, RecvPart):
    def __init__(self, connector: Any, *, stage_id: int, src_stage_id: int | None = None,
                 build_payload: Any = None, **options: Any) -> None:  # fmt: skip
        self.set_options(connector, stage_id, src_stage_id, build_payload, **options)
        self.init_send()
        self.init_recv()
        # Set once by stop(); the SAVE job and the RECV loop check it.
        self._stop = threading.Event()
        # Guards the send ids and cancels; nobody waits on it.
        self._send_lock = threading.Lock()
        # Guards tokens, recv ids, ready lists and the queue; the RECV thread waits on it.
        self._recv_lock = threading.Lock()
        self._recv_cond = threading.Condition(self._recv_lock)
        self._workers: list[threading.Thread] = []  # the pool's thread, once it started
        # One worker: jobs run one at a time in submission order (the contract's FIFO).
        self._pool = ThreadPoolExecutor(
            max_workers=1,
            thread_name_prefix="chunk-adapter-save",
            initializer=lambda: self._workers.append(threading.current_thread()),
        )
        self._recv = threading.Thread(target=self.recv_loop, name="chunk-adapter-recv", daemon=True)
        self._recv.start()

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        check_id(request_id, "save_async")
        if not isinstance(is_final, bool):
            raise TypeError(f"save_async(..., is_final={is_final!r}): a bool please")
        snap = copy.deepcopy(obj)
        if self._stop.is_set():
            raise RuntimeError("save_async after stop()")
        self._pool.submit(self._job, request_id, snap, is_final)

    def _job(self, request_id: str, snap: Any, is_final: bool) -> None:
        if self._stop.is_set():
            return
        with self._send_lock:
            cancelled = request_id in self._cancelled
        self.send_one(request_id, snap, is_final, cancelled)

    def stop(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._recv_cond:
            self._recv_cond.notify_all()
        deadline = time.monotonic() + self.join_timeout
        for thread in [*self._workers, self._recv]:
            thread.join(max(0.0, deadline - time.monotonic()))


class SplitPoll(Adapter):
    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        with self._recv_lock:
            ready = {rid: list(values) for rid, values in self._ready.items()}
        # BUG: a chunk committed between the copy and the clear is lost.
        with self._recv_lock:
            self._ready.clear()
        return ready


def make(connector: Any, **kwargs: Any) -> Adapter:
    return Adapter(connector, **kwargs)


def make_split_poll(connector: Any, **kwargs: Any) -> Adapter:
    return SplitPoll(connector, **kwargs)
