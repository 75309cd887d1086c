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

from tests._adapters.plain import RecvPart, SendPart, check_id
from tests.quality import broken_explore

__all__ = ["Adapter", "SplitPoll", "make", "make_split_poll"]


class Adapter(SendPart, RecvPart):
    def make_threads(self) -> None:
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
        self.send_taken(request_id, snap, is_final)

    def stop(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.wake(self._recv_cond)
        self.join_all([*self._workers, self._recv], time.monotonic)


class SplitPoll(Adapter):
    # BUG: a chunk committed between the copy and the clear is lost: the bug of
    # tests.quality.broken_explore.SplitPoll (same attributes), seeded in this shape.
    poll_ready = broken_explore.SplitPoll.poll_ready


def make(connector: Any, **kwargs: Any) -> Adapter:
    return Adapter(connector, **kwargs)


def make_split_poll(connector: Any, **kwargs: Any) -> Adapter:
    return SplitPoll(connector, **kwargs)
