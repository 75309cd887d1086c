"""A correct ChunkAdapter whose sender is a small pool of SAVE workers, each request
pinned to one worker by a hash of its id.

Design notes (keeps R1-R24 of docs/contract.md):

- Sender. ``save_workers`` (2 by default) daemon threads, each with its own FIFO
  (a ``deque``) and its own ``Condition``; all the conditions share ONE lock,
  ``_tx_lock``, which also guards the per-request id counters and the cancel
  marks. ``save_async`` snapshots, picks the worker ``crc32(request_id) % n``
  (fixed for the adapter's life: the pool never changes size), appends
  ``(request_id, snapshot, is_final)`` to that worker's FIFO and notifies it.
  Every chunk of a request goes through the same worker, one at a time, so a
  request's chunks reach the connector in save order (R5); requests pinned to
  different workers are sent side by side.
- A worker reads the cancel mark in the critical section that takes the item;
  builds outside every lock; reads the request's next id under the lock right
  before each put, and advances it (or, after the final, forgets the request's
  id counter and cancel mark) under the lock right after the put succeeded. A
  failed put is retried in place with a capped exponential pause
  (``put_backoff`` doubling to ``put_backoff_max``), a non-final at most
  ``put_tries`` tries in all, a final until it succeeds or ``stop()``.
- Receiver. One RECV thread; registrations are ``_Reg`` objects (the object is the
  per-registration token) in ``_regs``; the polling deque holds ``_Reg`` objects,
  one entry per registration; ready chunks per request in ``_ready``. The identity
  ``_regs.get(rid) is reg`` is checked under ``_rx_lock`` before each get and again
  in the critical section that commits, so ``cleanup_receiver`` is a commit fence.
- ``stop()`` sets the stop event, notifies every condition and joins every thread
  against one deadline (``join_timeout``).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import math
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from typing import Any

_log = logging.getLogger(__name__)

# What a connector call or a build may raise without killing a thread (R22).
_CALL_ERRORS = (Exception, asyncio.CancelledError)


def _seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number of seconds >= 0")
    return value


def _pin(request_id: str, workers: int) -> int:
    return zlib.crc32(request_id.encode("utf-8", "surrogatepass")) % workers


class _Worker:
    __slots__ = ("cv", "fifo", "index", "thread")

    def __init__(self, index: int, lock: threading.Lock) -> None:
        self.index = index
        self.fifo: deque[tuple[str, Any, bool]] = deque()
        self.cv = threading.Condition(lock)
        self.thread: threading.Thread | None = None


class _Reg:
    """One registration; the object itself is the per-registration token."""

    __slots__ = ("done", "next", "rid")

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.next = 0
        self.done = False


class PinnedPoolAdapter:
    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Callable[[str, Any, bool], Any] | None = None,
        save_workers: int = 2,
        put_tries: int = 3,
        put_backoff: float = 0.005,
        put_backoff_max: float = 0.1,
        wait_timeout: float = 0.1,
        idle_backoff: float = 0.001,
        join_timeout: float = 1.0,
        snapshot: Callable[[Any], Any] | None = None,
    ) -> None:
        if isinstance(put_tries, bool) or not isinstance(put_tries, int) or put_tries < 1:
            raise ValueError(f"put_tries must be an int >= 1, got {put_tries!r}")
        if isinstance(save_workers, bool) or not isinstance(save_workers, int) or save_workers < 1:
            raise ValueError(f"save_workers must be an int >= 1, got {save_workers!r}")
        if build_payload is not None and not callable(build_payload):
            raise TypeError("build_payload must be callable or None")
        if snapshot is not None and not callable(snapshot):
            raise TypeError("snapshot must be callable or None")
        self.connector = connector
        self.stage_id = stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self._build = build_payload
        self._snapshot = snapshot or copy.deepcopy
        self.put_tries = put_tries
        self._backoff = _seconds("put_backoff", put_backoff)
        self._backoff_max = _seconds("put_backoff_max", put_backoff_max)
        self._wait = max(0.001, _seconds("wait_timeout", wait_timeout))
        self._idle = _seconds("idle_backoff", idle_backoff)
        self.join_timeout = _seconds("join_timeout", join_timeout)
        self._halt = threading.Event()
        self._stats_lock = threading.Lock()
        self._stats = {"puts": 0, "put_failures": 0, "dropped": 0, "skipped": 0,
                       "build_failures": 0, "gets": 0, "get_failures": 0,
                       "committed": 0}  # fmt: skip

        # ---- sender: every worker's FIFO, the id counters and the cancel marks
        self._tx_lock = threading.Lock()
        self._workers = [_Worker(i, self._tx_lock) for i in range(save_workers)]
        self._next_id: dict[str, int] = {}
        self._cancelled: set[str] = set()

        # ---- receiver
        self._rx_lock = threading.Lock()
        self._rx_cv = threading.Condition(self._rx_lock)
        self._regs: dict[str, _Reg] = {}
        self._polling: deque[_Reg] = deque()
        self._ready: dict[str, list[Any]] = {}

        for worker in self._workers:
            worker.thread = threading.Thread(
                target=self._worker_main, args=(worker,),
                name=f"pinned-save-{stage_id}-{worker.index}", daemon=True,
            )  # fmt: skip
        self._recv_thread = threading.Thread(
            target=self._recv_main, name=f"pinned-recv-{stage_id}", daemon=True
        )
        for worker in self._workers:
            assert worker.thread is not None
            worker.thread.start()
        self._recv_thread.start()

    # ------------------------------------------------------------------ helpers

    def _count(self, name: str, n: int = 1) -> None:
        with self._stats_lock:
            self._stats[name] += n

    def stats(self) -> dict[str, int]:
        with self._stats_lock:
            out = dict(self._stats)
        with self._tx_lock:
            out["open_streams"] = len(self._next_id)
            out["cancel_marks"] = len(self._cancelled)
            out["save_queue_depth"] = sum(len(w.fifo) for w in self._workers)
        with self._rx_lock:
            out["registered"] = len(self._regs)
            out["ready_chunks"] = sum(len(v) for v in self._ready.values())
        return out

    @staticmethod
    def _check_rid(request_id: Any) -> None:
        if not isinstance(request_id, str):
            raise TypeError(f"request_id must be a str, got {type(request_id).__name__}")

    def _check_running(self, call: str) -> None:
        if self._halt.is_set():
            raise RuntimeError(f"{call}() after stop()")

    # ------------------------------------------------------------------ sender

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._check_rid(request_id)
        if not isinstance(is_final, bool):
            raise TypeError(f"is_final must be a bool, got {type(is_final).__name__}")
        self._check_running("save_async")
        snap = self._snapshot(obj)  # may raise: nothing is queued
        worker = self._workers[_pin(request_id, len(self._workers))]
        with self._tx_lock:
            self._check_running("save_async")
            worker.fifo.append((request_id, snap, is_final))
            worker.cv.notify()

    def cancel_sender(self, request_id: str) -> None:
        self._check_rid(request_id)
        with self._tx_lock:
            self._check_running("cancel_sender")
            self._cancelled.add(request_id)

    def _worker_main(self, worker: _Worker) -> None:
        while True:
            with self._tx_lock:
                while not worker.fifo and not self._halt.is_set():
                    worker.cv.wait(self._wait)
                if self._halt.is_set():
                    return
                rid, snap, final = worker.fifo.popleft()
                cancelled = rid in self._cancelled
            try:
                self._send_one(rid, snap, final, cancelled)
            except Exception:  # defensive: _send_one catches what the calls raise
                _log.exception("SAVE worker %d: a chunk of %r was lost", worker.index, rid)

    def _send_one(self, rid: str, snap: Any, final: bool, cancelled: bool) -> None:
        if cancelled:
            if not final:
                self._count("dropped")
                return
            data = None
        else:
            if self._build is None:
                data = snap
            else:
                try:
                    data = self._build(rid, snap, final)
                except _CALL_ERRORS:
                    self._count("build_failures")
                    _log.warning("build_payload(%r) raised", rid, exc_info=True)
                    if not final:
                        self._count("dropped")
                        return
                    data = None
            if data is None and not final:
                self._count("skipped")
                return
        wire = {"data": data, "finished": final}
        self._put_with_retries(rid, wire, final)

    def _put_with_retries(self, rid: str, wire: dict[str, Any], final: bool) -> None:
        tries = 0
        while True:
            with self._tx_lock:
                chunk_id = self._next_id.get(rid, 0)
            if self._halt.is_set():
                return  # no put starts once stop() has begun
            key = f"{rid}_{self.stage_id}_{chunk_id}"
            try:
                self.connector.put(key, wire)
            except _CALL_ERRORS:
                tries += 1
                self._count("put_failures")
                if not final and tries >= self.put_tries:
                    self._count("dropped")
                    _log.warning("dropping %s after %d failed puts", key, tries)
                    return
                pause = min(self._backoff * 2 ** min(tries - 1, 30), self._backoff_max)
                if self._halt.wait(pause):
                    return
                continue
            self._count("puts")
            with self._tx_lock:
                if final:
                    self._next_id.pop(rid, None)
                    self._cancelled.discard(rid)
                else:
                    self._next_id[rid] = chunk_id + 1
            return

    # ------------------------------------------------------------------ receiver

    def load_async(self, request_id: str) -> None:
        self._check_rid(request_id)
        with self._rx_cv:
            self._check_running("load_async")
            if request_id in self._regs:
                return  # R12: idempotent while registered
            reg = _Reg(request_id)
            self._regs[request_id] = reg
            self._polling.append(reg)
            self._rx_cv.notify()

    def poll_ready(self) -> dict[str, list[Any]]:
        with self._rx_lock:
            out, self._ready = self._ready, {}
        return out

    def cleanup_receiver(self, request_id: str) -> None:
        self._check_rid(request_id)
        with self._rx_lock:
            self._regs.pop(request_id, None)
            self._ready.pop(request_id, None)

    def _recv_main(self) -> None:
        while True:
            with self._rx_cv:
                while not self._polling and not self._halt.is_set():
                    self._rx_cv.wait(self._wait)
                if self._halt.is_set():
                    return
                round_size = len(self._polling)
            progress = False
            for _ in range(round_size):
                if self._halt.is_set():
                    return
                try:
                    if self._poll_one():
                        progress = True
                except Exception:  # defensive
                    _log.exception("RECV thread: unexpected error")
            if not progress:
                self._halt.wait(self._idle)

    def _poll_one(self) -> bool:
        with self._rx_lock:
            if not self._polling:
                return False
            reg = self._polling.popleft()
            if self._regs.get(reg.rid) is not reg:
                return False  # stale entry: its registration was cleaned up
            chunk_id = reg.next
        key = f"{reg.rid}_{self.src_stage_id}_{chunk_id}"
        self._count("gets")
        try:
            value = self.connector.get(key)
        except _CALL_ERRORS:
            self._count("get_failures")
            _log.debug("get(%s) raised", key, exc_info=True)
            value = None
        with self._rx_lock:
            if self._regs.get(reg.rid) is not reg:
                return False  # cleaned up while the get was in flight: discarded
            if not isinstance(value, dict):
                self._polling.append(reg)
                return False
            self._ready.setdefault(reg.rid, []).append(value)
            reg.next = chunk_id + 1
            if value.get("finished") is True:
                reg.done = True  # R13: never polled again
            else:
                self._polling.append(reg)
        self._count("committed")
        return True

    # ------------------------------------------------------------------ lifecycle

    def stop(self) -> None:
        first = not self._halt.is_set()
        self._halt.set()
        with self._tx_lock:
            workers = list(self._workers)
            for worker in workers:
                worker.cv.notify_all()
        with self._rx_cv:
            self._rx_cv.notify_all()
        deadline = time.monotonic() + (self.join_timeout if first else 0.0)
        me = threading.current_thread()
        threads = [worker.thread for worker in workers] + [self._recv_thread]
        for thread in threads:
            if thread is not None and thread is not me:
                thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> PinnedPoolAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_OPTIONS = ("save_workers", "put_tries", "put_backoff", "put_backoff_max", "wait_timeout",
            "idle_backoff", "join_timeout", "snapshot")  # fmt: skip


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Callable[[str, Any, bool], Any] | None = None,
    **options: Any,
) -> PinnedPoolAdapter:
    """The factory: the contract's keywords plus the options in ``_OPTIONS``; any
    other option is ignored."""
    return PinnedPoolAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **{k: v for k, v in options.items() if k in _OPTIONS and v is not None},
    )
