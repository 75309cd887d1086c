"""A correct ChunkAdapter whose receiver is a pool of two RECV workers, each owning a
lane of registrations, with the ready chunks behind a lock of their own.

Design (keeps R1-R24 of the contract):

- Sender. One SAVE thread over a ``deque`` FIFO; ``_tx_lock`` guards the FIFO and the
  per-request ``[next id, cancelled]`` records (``_streams``); the SAVE thread waits on
  ``_tx_cv``. The cancel mark is read in the critical section that takes the chunk;
  builds happen outside every lock; the id is read under the lock right before each put
  and advanced (after a final: the record forgotten, mark included) right after the put
  succeeded. Retries: capped doubling pause, a non-final ``put_tries`` tries in all, a
  final until it succeeds or ``stop()``.
- Receiver. ``recv_workers`` (2) RECV threads. Each registration is a ``_Reg`` object
  (its identity is the per-registration token) pinned at ``load_async`` to the lane
  (a dict used as an ordered set) of the least loaded worker. ``_reg_lock`` guards the
  registry ``_regs``, the lanes and every ``_Reg``; each worker waits on its own
  ``Condition`` over ``_reg_lock``. ``_out_lock`` guards ``_ready`` only, so
  ``poll_ready`` never waits for a worker's bookkeeping. Lock order: ``_reg_lock``, then
  ``_out_lock``.
- A worker's round: drop the lane's finished registrations, then visit every
  registration of a snapshot of the lane once: under ``_reg_lock`` check it is still
  ``_regs[request_id]`` and read its next id; get outside the locks; under
  ``_reg_lock`` check again and commit (``_out_lock`` taken inside for the ready list).
  ``cleanup_receiver`` removes the registration from the registry and its lane and
  drops its ready chunks in ONE critical section (both locks, in order): the commit
  fence (R16). A finished registration leaves its lane at its worker's next round and
  stays registered until ``cleanup_receiver``.
- Pacing (R17): an empty lane -> wait on the worker's condition (``wait_timeout``); a
  round without a commit -> ``idle_backoff`` (1 ms); a commit -> next round at once. A
  blocked get holds only its own lane.
- ``stop()`` sets ``_stop``, notifies every condition and joins every daemon thread
  against one deadline (``join_timeout``).

Factory: ``tests.quality.correct.fifth_pkg.rx_pool:make``.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from ._common import (
    check_is_final,
    check_request_id,
    chunk_key,
    factory_for,
    identity_payload,
    is_final_value,
    positive_int,
    seconds,
)

log = logging.getLogger(__name__)

BuildPayload = Callable[[str, Any, bool], Any]


class _Reg:
    __slots__ = ("done", "lane", "next_id", "request_id")

    def __init__(self, request_id: str, lane: int) -> None:
        self.request_id = request_id
        self.lane = lane
        self.next_id = 0
        self.done = False


class RxPoolAdapter:
    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: BuildPayload | None = None,
        put_tries: int = 3,
        put_backoff: float = 0.005,
        put_backoff_max: float = 0.1,
        idle_backoff: float = 0.001,
        wait_timeout: float = 0.1,
        join_timeout: float = 1.0,
        recv_workers: int = 2,
    ) -> None:
        if build_payload is not None and not callable(build_payload):
            raise TypeError("build_payload must be callable or None")
        self._conn = connector
        self.stage_id = stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self._build: BuildPayload = build_payload or identity_payload
        self.put_tries = positive_int("put_tries", put_tries)
        self.put_backoff = seconds("put_backoff", put_backoff)
        self.put_backoff_max = max(self.put_backoff, seconds("put_backoff_max", put_backoff_max))
        self.idle_backoff = seconds("idle_backoff", idle_backoff)
        self.wait_timeout = max(0.001, seconds("wait_timeout", wait_timeout))
        self.join_timeout = seconds("join_timeout", join_timeout)
        self.recv_workers = positive_int("recv_workers", recv_workers)
        self._counts: Counter[str] = Counter()
        self._stop = threading.Event()

        # -- sender
        self._tx_lock = threading.Lock()
        self._tx_cv = threading.Condition(self._tx_lock)
        self._fifo: deque[tuple[str, Any, bool]] = deque()
        self._streams: dict[str, list[Any]] = {}  # request id -> [next chunk id, cancelled]

        # -- receiver
        self._reg_lock = threading.Lock()
        self._lane_cvs = [threading.Condition(self._reg_lock) for _ in range(self.recv_workers)]
        self._lanes: list[dict[_Reg, None]] = [{} for _ in range(self.recv_workers)]
        self._regs: dict[str, _Reg] = {}
        self._out_lock = threading.Lock()
        self._ready: dict[str, list[Any]] = {}

        self._threads = [threading.Thread(target=self._save_main, name="rp-SAVE", daemon=True)]
        self._threads.extend(
            threading.Thread(target=self._recv_worker, args=(k,), name=f"rp-RECV-{k}", daemon=True)
            for k in range(self.recv_workers)
        )
        for thread in self._threads:
            thread.start()

    # ------------------------------------------------------------------ scheduler calls

    def _running(self, where: str) -> None:
        if self._stop.is_set():
            raise RuntimeError(f"{where}: the adapter is stopped")

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        check_request_id(request_id, "save_async")
        check_is_final(is_final, "save_async")
        self._running("save_async")
        snap = copy.deepcopy(obj)
        with self._tx_cv:
            self._fifo.append((request_id, snap, is_final))
            self._tx_cv.notify()

    def cancel_sender(self, request_id: str) -> None:
        check_request_id(request_id, "cancel_sender")
        with self._tx_lock:
            self._running("cancel_sender")
            self._streams.setdefault(request_id, [0, False])[1] = True

    def load_async(self, request_id: str) -> None:
        check_request_id(request_id, "load_async")
        with self._reg_lock:
            self._running("load_async")
            if request_id in self._regs:
                return
            lane = min(range(self.recv_workers), key=lambda k: len(self._lanes[k]))
            reg = _Reg(request_id, lane)
            self._regs[request_id] = reg
            self._lanes[lane][reg] = None
            self._lane_cvs[lane].notify()

    def poll_ready(self) -> dict[str, list[Any]]:
        with self._out_lock:
            handed, self._ready = self._ready, {}
        return handed

    def cleanup_receiver(self, request_id: str) -> None:
        check_request_id(request_id, "cleanup_receiver")
        with self._reg_lock:
            reg = self._regs.pop(request_id, None)
            if reg is not None:
                self._lanes[reg.lane].pop(reg, None)
            with self._out_lock:
                self._ready.pop(request_id, None)

    def stop(self) -> None:
        self._stop.set()
        with self._tx_cv:
            self._tx_cv.notify_all()
        with self._reg_lock:
            for cv in self._lane_cvs:
                cv.notify_all()
        deadline = time.monotonic() + self.join_timeout
        me = threading.current_thread()
        for thread in self._threads:
            if thread is not me:
                thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> RxPoolAdapter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ SAVE thread

    def _save_main(self) -> None:
        while True:
            with self._tx_cv:
                while not self._fifo and not self._stop.is_set():
                    self._tx_cv.wait(self.wait_timeout)
                if self._stop.is_set():
                    return
                request_id, snap, final = self._fifo.popleft()
                stream = self._streams.get(request_id)
                cancelled = stream is not None and stream[1]
            try:
                self._send(request_id, snap, final, cancelled)
            except Exception:
                log.exception("SAVE thread: chunk of %r lost to an unexpected error", request_id)

    def _send(self, request_id: str, snap: Any, final: bool, cancelled: bool) -> None:
        if cancelled:
            if not final:
                self._counts["dropped_cancelled"] += 1
                return
            payload = None
        else:
            try:
                payload = self._build(request_id, snap, final)
            except Exception:
                log.info("build_payload(%r) raised", request_id, exc_info=True)
                if not final:
                    self._counts["dropped_build"] += 1
                    return
                payload = None
            if payload is None and not final:
                self._counts["skipped"] += 1
                return
        self._put_with_retries(request_id, {"data": payload, "finished": final}, final)

    def _next_id(self, request_id: str) -> int:
        with self._tx_lock:
            stream = self._streams.get(request_id)
            return 0 if stream is None else stream[0]

    def _put_succeeded(self, request_id: str, chunk_id: int, final: bool) -> None:
        with self._tx_lock:
            if final:
                self._streams.pop(request_id, None)
            else:
                self._streams.setdefault(request_id, [0, False])[0] = chunk_id + 1

    def _put_with_retries(self, request_id: str, value: dict[str, Any], final: bool) -> None:
        pause = self.put_backoff
        failures = 0
        while not self._stop.is_set():
            chunk_id = self._next_id(request_id)
            key = chunk_key(request_id, self.stage_id, chunk_id)
            try:
                self._conn.put(key, value)
            except Exception as exc:
                failures += 1
                self._counts["put_failures"] += 1
                if not final and failures >= self.put_tries:
                    self._counts["dropped_put"] += 1
                    log.info("put %s failed %d times (%r); dropped", key, failures, exc)
                    return
                if self._stop.wait(pause):
                    return
                pause = min(max(pause * 2, 0.001), self.put_backoff_max)
                continue
            self._put_succeeded(request_id, chunk_id, final)
            return

    # ------------------------------------------------------------------ RECV workers

    def _recv_worker(self, k: int) -> None:
        lane = self._lanes[k]
        cv = self._lane_cvs[k]
        while not self._stop.is_set():
            with cv:
                for reg in [reg for reg in lane if reg.done]:
                    del lane[reg]  # finished: leaves the lane, stays registered
                while not lane and not self._stop.is_set():
                    cv.wait(self.wait_timeout)
            if self._stop.is_set():
                return
            if not self._round(k):
                self._stop.wait(self.idle_backoff)

    def _round(self, k: int) -> bool:
        """Visit every registration of lane *k* once; True if a chunk was committed."""
        with self._reg_lock:
            batch = list(self._lanes[k])
        progress = False
        for reg in batch:
            if self._stop.is_set():
                break
            if self._poll_reg(reg):
                progress = True
        return progress

    def _poll_reg(self, reg: _Reg) -> bool:
        request_id = reg.request_id
        with self._reg_lock:
            if reg.done or self._regs.get(request_id) is not reg:
                return False
            chunk_id = reg.next_id
        key = chunk_key(request_id, self.src_stage_id, chunk_id)
        try:
            value = self._conn.get(key)
        except Exception as exc:
            self._counts["get_failures"] += 1
            log.debug("get %s failed (%r)", key, exc)
            return False
        if value is None:
            return False
        with self._reg_lock:
            if self._regs.get(request_id) is not reg:
                self._counts["discarded_stale"] += 1
                return False
            reg.next_id = chunk_id + 1
            if is_final_value(value):
                reg.done = True
            with self._out_lock:
                self._ready.setdefault(request_id, []).append(value)
        return True


make = factory_for(RxPoolAdapter)
