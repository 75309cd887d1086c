"""A correct ChunkAdapter built from ``from threading import ...`` names and RLocks.

No ``import threading`` / ``import time`` here: the primitives and the clock
(``perf_counter``) are imported by name. Each side has its own RLock and a
Condition over it; helpers re-acquire the lock they may already hold.
"""

from __future__ import annotations

from collections import deque
from copy import deepcopy
from logging import getLogger
from threading import Condition, Event, RLock, Thread, current_thread
from time import perf_counter, sleep
from typing import Any

_logger = getLogger(__name__)


class Relay:
    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Any = None,
        wait_timeout: float = 0.1,
        idle_backoff: float = 0.001,
    ) -> None:
        self._conn = connector
        self._sid = stage_id
        self._src = (stage_id - 1) if src_stage_id is None else src_stage_id
        self._builder = build_payload
        self._wait_timeout = wait_timeout
        self._idle_backoff = idle_backoff
        self._join_timeout = 1.0
        self._put_attempts = 3
        self._closing = Event()

        # _tx (reentrant) guards _pending, _ids and _cancelled. _tx_cv (over _tx) is
        # notified by save_async and stop(); the SAVE thread waits on it.
        self._tx = RLock()
        self._tx_cv = Condition(self._tx)
        self._pending: deque[tuple[str, Any, bool]] = deque()
        self._ids: dict[str, int] = {}
        self._cancelled: set[str] = set()

        # _rx (reentrant) guards _regs, _rotation and _done_chunks. _rx_cv (over _rx) is
        # notified by load_async and stop(); the RECV thread waits on it.
        self._rx = RLock()
        self._rx_cv = Condition(self._rx)
        self._regs: dict[str, tuple[object, int]] = {}  # rid -> (token, next chunk id)
        self._rotation: deque[tuple[str, object]] = deque()
        self._done_chunks: dict[str, list[Any]] = {}

        self.failures = {"build": 0, "put": 0, "get": 0, "dropped": 0}
        self._threads = (
            Thread(target=self._sender, name="relay-save", daemon=True),
            Thread(target=self._receiver, name="relay-recv", daemon=True),
        )
        for t in self._threads:
            t.start()

    # ---- helpers (may be called with the lock already held: RLock) ----

    def _ensure_open(self, lock: RLock, call: str) -> None:
        with lock:
            if self._closing.is_set():
                raise RuntimeError(f"{call}: adapter has been stopped")

    @staticmethod
    def _ensure_rid(request_id: Any) -> None:
        if not isinstance(request_id, str):
            raise TypeError("request_id must be a string")

    def _is_cancelled(self, rid: str) -> bool:
        with self._tx:
            return rid in self._cancelled

    def _current_id(self, rid: str) -> int:
        with self._tx:
            return self._ids.get(rid, 0)

    # ---- public API ----

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._ensure_rid(request_id)
        if not isinstance(is_final, bool):
            raise TypeError("is_final must be a bool")
        self._ensure_open(self._tx, "save_async")
        frozen = deepcopy(obj)
        with self._tx_cv:
            self._ensure_open(self._tx, "save_async")
            self._pending.append((request_id, frozen, is_final))
            self._tx_cv.notify()

    def cancel_sender(self, request_id: str) -> None:
        self._ensure_rid(request_id)
        with self._tx:
            self._ensure_open(self._tx, "cancel_sender")
            self._cancelled.add(request_id)

    def load_async(self, request_id: str) -> None:
        self._ensure_rid(request_id)
        with self._rx_cv:
            self._ensure_open(self._rx, "load_async")
            if request_id in self._regs:
                return
            token = object()
            self._regs[request_id] = (token, 0)
            self._rotation.append((request_id, token))
            self._rx_cv.notify()

    def poll_ready(self) -> dict[str, list[Any]]:
        with self._rx:
            taken, self._done_chunks = self._done_chunks, {}
        return taken

    def cleanup_receiver(self, request_id: str) -> None:
        self._ensure_rid(request_id)
        with self._rx:
            self._regs.pop(request_id, None)
            self._done_chunks.pop(request_id, None)

    def stop(self) -> None:
        self._closing.set()
        with self._tx_cv:
            self._tx_cv.notify_all()
        with self._rx_cv:
            self._rx_cv.notify_all()
        until = perf_counter() + self._join_timeout
        for t in self._threads:
            if t is not current_thread():
                t.join(max(0.0, until - perf_counter()))

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *_: object) -> bool:
        self.stop()
        return False

    # ---- SAVE thread ----

    def _sender(self) -> None:
        while not self._closing.is_set():
            with self._tx_cv:
                while not self._pending and not self._closing.is_set():
                    self._tx_cv.wait(self._wait_timeout)
                if self._closing.is_set():
                    break
                rid, frozen, final = self._pending.popleft()
            try:
                self._ship(rid, frozen, final)
            except Exception:
                _logger.exception("relay SAVE: unexpected failure")

    def _ship(self, rid: str, frozen: Any, final: bool) -> None:
        if self._is_cancelled(rid):
            if not final:
                self.failures["dropped"] += 1
                return
            payload = None
        elif self._builder is None:
            payload = frozen
        else:
            try:
                payload = self._builder(rid, frozen, final)
            except Exception:
                self.failures["build"] += 1
                _logger.info("build_payload raised for %s", rid, exc_info=True)
                if not final:
                    self.failures["dropped"] += 1
                    return
                payload = None
        if payload is None and not final:
            return
        record = {"data": payload, "finished": final}
        attempt = 1
        while not self._closing.is_set():
            cid = self._current_id(rid)
            try:
                self._conn.put(f"{rid}_{self._sid}_{cid}", record)
            except Exception:
                self.failures["put"] += 1
                if not final and attempt >= self._put_attempts:
                    self.failures["dropped"] += 1
                    _logger.info("dropping %s chunk %s after %s tries", rid, cid, attempt)
                    return
                self._closing.wait(min(0.001 * 2 ** min(attempt - 1, 16), 0.05))
                attempt += 1
                continue
            with self._tx:
                if final:
                    self._ids.pop(rid, None)
                    self._cancelled.discard(rid)
                else:
                    self._ids[rid] = cid + 1
            return

    # ---- RECV thread ----

    def _receiver(self) -> None:
        while not self._closing.is_set():
            with self._rx_cv:
                while not self._rotation and not self._closing.is_set():
                    self._rx_cv.wait(self._wait_timeout)
                todo = list(self._rotation)
                self._rotation.clear()
            advanced = False
            for rid, token in todo:
                if self._closing.is_set():
                    return
                if self._poll_one(rid, token):
                    advanced = True
            if todo and not advanced:
                sleep(self._idle_backoff)

    def _poll_one(self, rid: str, token: object) -> bool:
        with self._rx:
            reg = self._regs.get(rid)
            if reg is None or reg[0] is not token:
                return False
            cid = reg[1]
        try:
            got = self._conn.get(f"{rid}_{self._src}_{cid}")
        except Exception:
            self.failures["get"] += 1
            got = None
        with self._rx:
            reg = self._regs.get(rid)
            if reg is None or reg[0] is not token:
                return False
            if got is None:
                self._rotation.append((rid, token))
                return False
            self._done_chunks.setdefault(rid, []).append(got)
            self._regs[rid] = (token, cid + 1)
            if not (isinstance(got, dict) and got.get("finished")):
                self._rotation.append((rid, token))
            return True


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Any = None,
    **options: Any,
) -> Relay:
    tuning = {k: float(options[k]) for k in ("wait_timeout", "idle_backoff") if k in options}
    return Relay(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **tuning,
    )
