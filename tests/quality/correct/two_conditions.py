"""A correct ChunkAdapter with one Lock shared by two Conditions (send side, receive side)."""

from __future__ import annotations

import copy
import itertools
import logging
import threading
import time
from collections import deque
from typing import Any

_LOG = logging.getLogger(__name__)
_BACKOFF = (0.001, 0.002, 0.004, 0.008, 0.016, 0.032)  # then the last one, repeated


def _key(request_id: str, stage: int, index: int) -> str:
    return f"{request_id}_{stage}_{index}"


class TwoConditionAdapter:
    __slots__ = (
        "_build", "_cancelled", "_conn", "_fifo", "_halted", "_lock", "_next_get", "_next_put",
        "_polling", "_ready", "_recv_cv", "_recv_thread", "_save_thread", "_send_cv",
        "_src", "_stage", "_tokens", "counters",
    )  # fmt: skip

    def __init__(
        self, connector: Any, stage_id: int, src_stage_id: int | None, build_payload: Any
    ) -> None:
        self._conn = connector
        self._stage = stage_id
        self._src = stage_id - 1 if src_stage_id is None else src_stage_id
        self._build = build_payload
        self._halted = threading.Event()
        # _lock guards ALL mutable state below, both sides.
        # _send_cv: notified by save_async and stop(); waited on by the SAVE thread.
        # _recv_cv: notified by load_async and stop(); waited on by the RECV thread.
        self._lock = threading.Lock()
        self._send_cv = threading.Condition(self._lock)
        self._recv_cv = threading.Condition(self._lock)
        self._fifo: deque[tuple[str, Any, bool]] = deque()
        self._next_put: dict[str, int] = {}
        self._cancelled: dict[str, bool] = {}
        self._tokens: dict[str, object] = {}
        self._next_get: dict[str, int] = {}
        self._polling: deque[tuple[str, object]] = deque()
        self._ready: dict[str, list[Any]] = {}
        self.counters = dict.fromkeys(
            ("cancel_drop", "build_drop", "skip", "put_drop", "get_err"), 0
        )
        self._save_thread = threading.Thread(target=self._save_worker, daemon=True)
        self._recv_thread = threading.Thread(target=self._recv_worker, daemon=True)
        self._save_thread.start()
        self._recv_thread.start()

    def __enter__(self) -> TwoConditionAdapter:
        return self

    def __exit__(self, *args: object) -> None:
        self.stop()

    # -- input checks --
    def _guard(self, request_id: object, name: str) -> None:
        if not isinstance(request_id, str):
            raise TypeError(f"{name}: request_id must be str")

    def _open(self, name: str) -> None:
        if self._halted.is_set():
            raise RuntimeError(f"{name}: stopped")

    # -- sender API --
    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._guard(request_id, "save_async")
        if type(is_final) is not bool:
            raise TypeError("save_async: is_final must be bool")
        self._open("save_async")
        snapshot = copy.deepcopy(obj)
        with self._send_cv:
            self._open("save_async")
            self._fifo.append((request_id, snapshot, is_final))
            self._send_cv.notify()

    def cancel_sender(self, request_id: str) -> None:
        self._guard(request_id, "cancel_sender")
        with self._lock:
            self._open("cancel_sender")
            self._cancelled[request_id] = True

    # -- receiver API --
    def load_async(self, request_id: str) -> None:
        self._guard(request_id, "load_async")
        with self._recv_cv:
            self._open("load_async")
            if request_id in self._tokens:
                return
            token = object()
            self._tokens[request_id] = token
            self._next_get[request_id] = 0
            self._polling.append((request_id, token))
            self._recv_cv.notify()

    def poll_ready(self) -> dict[str, list[Any]]:
        with self._lock:
            ready = self._ready
            self._ready = {}
        return ready

    def cleanup_receiver(self, request_id: str) -> None:
        self._guard(request_id, "cleanup_receiver")
        with self._lock:
            self._tokens.pop(request_id, None)
            self._next_get.pop(request_id, None)
            self._ready.pop(request_id, None)

    def stop(self) -> None:
        self._halted.set()
        with self._send_cv:
            self._send_cv.notify_all()
        with self._recv_cv:
            self._recv_cv.notify_all()
        end = time.monotonic() + 1.0
        for thread in (self._save_thread, self._recv_thread):
            if thread is not threading.current_thread():
                thread.join(max(0.0, end - time.monotonic()))

    # -- SAVE --
    def _save_worker(self) -> None:
        while True:
            with self._send_cv:
                while not self._fifo and not self._halted.is_set():
                    self._send_cv.wait(0.1)
                if self._halted.is_set():
                    return
                request_id, snapshot, final = self._fifo.popleft()
                cancelled = self._cancelled.get(request_id, False)
            try:
                self._emit(request_id, snapshot, final, cancelled)
            except Exception:
                _LOG.exception("SAVE: unexpected")

    def _emit(self, rid: str, snapshot: Any, final: bool, cancelled: bool) -> None:
        if cancelled:
            if not final:
                self.counters["cancel_drop"] += 1
                return
            data = None
        elif self._build is None:
            data = snapshot
        else:
            try:
                data = self._build(rid, snapshot, final)
            except Exception:
                _LOG.info("build failed: %s", rid, exc_info=True)
                if not final:
                    self.counters["build_drop"] += 1
                    return
                data = None
        if data is None and not final:
            self.counters["skip"] += 1
            return
        for attempt in itertools.count():
            if self._halted.is_set():
                return
            with self._lock:
                index = self._next_put.get(rid, 0)
            try:
                self._conn.put(_key(rid, self._stage, index), {"data": data, "finished": final})
            except Exception:
                if not final and attempt + 1 >= 3:
                    self.counters["put_drop"] += 1
                    _LOG.info("put of %s failed 3 times; dropped", _key(rid, self._stage, index))
                    return
                self._halted.wait(_BACKOFF[min(attempt, len(_BACKOFF) - 1)])
                continue
            with self._lock:
                if final:
                    self._next_put.pop(rid, None)
                    self._cancelled.pop(rid, None)
                else:
                    self._next_put[rid] = index + 1
            return

    # -- RECV --
    def _recv_worker(self) -> None:
        while True:
            with self._recv_cv:
                while not self._polling and not self._halted.is_set():
                    self._recv_cv.wait(0.1)
                if self._halted.is_set():
                    return
                n = len(self._polling)
            committed = 0
            for _ in range(n):
                if self._halted.is_set():
                    return
                with self._lock:
                    rid, token = self._polling.popleft()
                    if self._tokens.get(rid) is not token:
                        continue
                    index = self._next_get[rid]
                try:
                    value = self._conn.get(_key(rid, self._src, index))
                except Exception:
                    self.counters["get_err"] += 1
                    value = None
                with self._lock:
                    if self._tokens.get(rid) is not token:
                        continue
                    if value is None:
                        self._polling.append((rid, token))
                        continue
                    self._ready.setdefault(rid, []).append(value)
                    self._next_get[rid] = index + 1
                    committed += 1
                    if not (isinstance(value, dict) and value.get("finished")):
                        self._polling.append((rid, token))
            if not committed:
                time.sleep(0.001)


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Any = None,
    **maybe_options: Any,
) -> TwoConditionAdapter:
    return TwoConditionAdapter(connector, stage_id, src_stage_id, build_payload)
