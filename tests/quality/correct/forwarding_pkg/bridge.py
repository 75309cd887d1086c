"""Event-driven bridge: a deque + Semaphore FIFO for SAVE, Event wake-ups for RECV."""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

from .worker import Worker

log = logging.getLogger(__name__)


class _Reg:
    __slots__ = ("done", "next_id", "rid")

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.next_id = 0
        self.done = False


class StreamBridge:
    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Callable[[str, Any, bool], Any] | None = None,
        join_timeout: float = 0.5,
    ) -> None:
        self._conn = connector
        self._stage = stage_id
        self._src = stage_id - 1 if src_stage_id is None else src_stage_id
        self._build = build_payload if build_payload is not None else (lambda r, s, f: s)
        self._join_timeout = join_timeout
        self._stopped = threading.Event()
        # _mu guards _fifo, _ids, _cancelled, _regs, _ready and each _Reg; nobody waits on it
        # (SAVE waits on the _items semaphore, released per queued item and by stop; RECV on
        # the _wake event, set by load_async and stop).
        self._mu = threading.Lock()
        self._fifo: deque[tuple[str, Any, bool]] = deque()
        self._items = threading.Semaphore(0)  # one release per queued item (and on stop)
        self._ids: dict[str, int] = {}
        self._cancelled: set[str] = set()
        self._regs: OrderedDict[str, _Reg] = OrderedDict()
        self._ready: dict[str, list[dict[str, Any]]] = {}
        self._wake = threading.Event()  # set by load_async and stop
        self._workers = [
            Worker("bridge-save", self._save_step, self._stopped),
            Worker("bridge-recv", self._recv_step, self._stopped),
        ]
        for w in self._workers:
            w.start()

    @classmethod
    def create(cls, connector: Any, **kw: Any) -> StreamBridge:
        return cls(connector, **kw)

    @staticmethod
    def _check(rid: Any) -> None:
        if type(rid) is not str:
            raise TypeError(f"request_id must be str, got {type(rid).__name__}")

    def _alive(self) -> None:
        if self._stopped.is_set():
            raise RuntimeError("bridge stopped")

    # sender
    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._check(request_id)
        if type(is_final) is not bool:
            raise TypeError("is_final must be bool")
        self._alive()
        snap = copy.deepcopy(obj)
        with self._mu:
            self._fifo.append((request_id, snap, is_final))
        self._items.release()

    def cancel_sender(self, request_id: str) -> None:
        self._check(request_id)
        self._alive()
        with self._mu:
            self._cancelled.add(request_id)

    def _save_step(self) -> None:
        if not self._items.acquire(timeout=0.1):
            return
        with self._mu:
            if not self._fifo:
                return
            rid, snap, final = self._fifo.popleft()
            cancelled = rid in self._cancelled
        if cancelled and not final:
            return
        payload = None
        if not cancelled:
            try:
                payload = self._build(rid, snap, final)
            except Exception:
                log.warning("build failed for %s", rid, exc_info=True)
                if not final:
                    return
                payload = None
        if payload is None and not final:
            return
        value = {"data": payload, "finished": final}
        tries = 0
        while not self._stopped.is_set():
            with self._mu:
                cid = self._ids.get(rid, 0)
            try:
                self._conn.put(f"{rid}_{self._stage}_{cid}", value)
            except Exception:
                tries += 1
                log.info("put failed (%d) for %s", tries, rid)
                if not final and tries >= 3:
                    return
                self._stopped.wait(min(0.05, 0.002 * tries))
                continue
            with self._mu:
                if final:
                    self._ids.pop(rid, None)
                    self._cancelled.discard(rid)
                else:
                    self._ids[rid] = cid + 1
            return

    # receiver
    def load_async(self, request_id: str) -> None:
        self._check(request_id)
        self._alive()
        with self._mu:
            if request_id not in self._regs:
                self._regs[request_id] = _Reg(request_id)
        self._wake.set()

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        with self._mu:
            out, self._ready = self._ready, {}
        return out

    def cleanup_receiver(self, request_id: str) -> None:
        self._check(request_id)
        with self._mu:
            self._regs.pop(request_id, None)
            self._ready.pop(request_id, None)

    def _recv_step(self) -> None:
        with self._mu:
            todo = [(r.rid, r, r.next_id) for r in self._regs.values() if not r.done]
        if not todo:
            self._wake.wait(0.1)
            self._wake.clear()
            return
        progress = False
        for rid, reg, cid in todo:
            if self._stopped.is_set():
                return
            if not self._still_current(rid, reg, cid):
                continue
            try:
                got = self._conn.get(f"{rid}_{self._src}_{cid}")
            except Exception:
                log.info("get failed for %s", rid)
                continue
            if got is None:
                continue
            with self._mu:
                if self._regs.get(rid) is not reg:
                    continue  # cleaned up meanwhile: discard
                self._ready.setdefault(rid, []).append(got)
                reg.next_id = cid + 1
                if got.get("finished") is True:
                    reg.done = True
                progress = True
        if not progress:
            time.sleep(0.001)

    def _still_current(self, rid: str, reg: _Reg, cid: int) -> bool:
        """Still this registration, at this id? (A cleanup and a new load may have come
        since the round began: its get would take the new registration's chunk.)"""
        with self._mu:
            return self._regs.get(rid) is reg and reg.next_id == cid

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        self._items.release()
        end = time.monotonic() + self._join_timeout
        for w in self._workers:
            if w is not threading.current_thread():
                w.join(max(0.0, end - time.monotonic()))

    def __enter__(self) -> StreamBridge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
