"""The reference adapter rewritten against plain ``threading``/``time``, no runtime seam.

This is what a third-party adapter typically looks like: it imports
``threading`` and ``time`` and takes no ``runtime=``. ``PlainChunkAdapter``
carries one bug — the RECV thread commits without the token check (R16) — and
the explorer must find it in *substitution mode*
(``explore(..., substitute=[this_module])``). ``PlainChunkAdapterFixed`` has the
check and must come out clean, so substitution itself adds no false alarms.
Polling only (no ``subscribe``), no stats: the parts that matter for threading.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["PlainChunkAdapter", "PlainChunkAdapterFixed"]


class PlainChunkAdapter:
    """Sender and receiver on two daemon threads, synchronised with ``threading`` directly."""

    CHECK_TOKEN = False  # the bug: a stale get's value is committed to a new registration

    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Callable[[str, Any, bool], Any] | None = None,
        wait_timeout: float = 0.1,
        idle_backoff: float = 0.001,
        join_timeout: float = 1.0,
        put_tries: int = 3,
        put_backoff: float = 0.005,
        logger: logging.Logger | None = None,
    ) -> None:
        self.connector = connector
        self.stage_id = stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self.build_payload = build_payload or (lambda rid, snap, final: snap)
        self.wait_timeout = wait_timeout
        self.idle_backoff = idle_backoff
        self.join_timeout = join_timeout
        self.put_tries = put_tries
        self.put_backoff = put_backoff
        self.log = logger or logging.getLogger("plain_adapter")
        # Set once by stop(); every loop checks it; its wait() is the interruptible sleep.
        self._stop = threading.Event()
        # Guards _fifo, _next_send_id, _cancelled. The SAVE thread waits on _send_cond
        # for a non-empty FIFO or stop; save_async notifies, stop() notifies all.
        self._send_lock = threading.Lock()
        self._send_cond = threading.Condition(self._send_lock)
        self._fifo: deque[tuple[str, Any, bool]] = deque()
        self._next_send_id: dict[str, int] = {}
        self._cancelled: set[str] = set()
        # Guards _tokens, _next_recv_id, _ready, _queue. The RECV thread waits on
        # _recv_cond for a non-empty queue or stop; load_async notifies, stop() all.
        self._recv_lock = threading.Lock()
        self._recv_cond = threading.Condition(self._recv_lock)
        self._tokens: dict[str, object] = {}
        self._next_recv_id: dict[str, int] = {}
        self._ready: dict[str, list[dict[str, Any]]] = {}
        self._queue: deque[tuple[str, object]] = deque()
        self._threads = [
            threading.Thread(target=self._save_loop, name="chunk-adapter-save", daemon=True),
            threading.Thread(target=self._recv_loop, name="chunk-adapter-recv", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    # sender
    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        if not isinstance(request_id, str) or not isinstance(is_final, bool):
            raise TypeError(f"save_async({request_id!r}, ..., {is_final!r}): str and bool please")
        if self._stop.is_set():
            raise RuntimeError("save_async after stop()")
        snap = copy.deepcopy(obj)
        with self._send_cond:
            self._fifo.append((request_id, snap, is_final))
            self._send_cond.notify()

    def cancel_sender(self, request_id: str) -> None:
        _check_id(request_id, "cancel_sender")
        with self._send_lock:
            if self._stop.is_set():
                raise RuntimeError("cancel_sender after stop()")
            self._cancelled.add(request_id)

    def _save_loop(self) -> None:
        while True:
            with self._send_cond:
                while not self._fifo and not self._stop.is_set():
                    self._send_cond.wait(self.wait_timeout)
                if self._stop.is_set():
                    return
                request_id, snap, is_final = self._fifo.popleft()
                cancelled = request_id in self._cancelled
            if cancelled and not is_final:
                continue
            payload: Any = None
            if not cancelled:
                try:
                    payload = self.build_payload(request_id, snap, is_final)
                except Exception:
                    self.log.exception("build failed for %r", request_id)
                    if not is_final:
                        continue
                if payload is None and not is_final:
                    continue
            self._put(request_id, {"data": payload, "finished": is_final}, is_final)

    def _put(self, request_id: str, value: dict[str, Any], is_final: bool) -> None:
        tries = 0
        while True:
            with self._send_lock:
                chunk_id = self._next_send_id.get(request_id, 0)
            if self._stop.is_set():
                return
            key = f"{request_id}_{self.stage_id}_{chunk_id}"
            try:
                self.connector.put(key, value)
            except Exception:
                tries += 1
                if not is_final and tries >= self.put_tries:
                    return
                if self._stop.wait(min(self.put_backoff * 2 ** (tries - 1), 0.1)):
                    return
                continue
            with self._send_lock:
                if is_final:
                    self._next_send_id.pop(request_id, None)
                    self._cancelled.discard(request_id)
                else:
                    self._next_send_id[request_id] = chunk_id + 1
            return

    # receiver
    def load_async(self, request_id: str) -> None:
        _check_id(request_id, "load_async")
        with self._recv_cond:
            if self._stop.is_set():
                raise RuntimeError("load_async after stop()")
            if request_id in self._tokens:
                return
            token = object()
            self._tokens[request_id] = token
            self._next_recv_id[request_id] = 0
            self._queue.append((request_id, token))
            self._recv_cond.notify()

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        with self._recv_lock:
            ready, self._ready = self._ready, {}
        return ready

    def cleanup_receiver(self, request_id: str) -> None:
        _check_id(request_id, "cleanup_receiver")
        with self._recv_lock:
            self._tokens.pop(request_id, None)
            self._next_recv_id.pop(request_id, None)
            self._ready.pop(request_id, None)

    def _recv_loop(self) -> None:
        while True:
            with self._recv_cond:
                while not self._queue and not self._stop.is_set():
                    self._recv_cond.wait(self.wait_timeout)
                if self._stop.is_set():
                    return
                entries = len(self._queue)
            progress = False
            for _ in range(entries):
                with self._recv_lock:
                    if not self._queue:
                        break
                    request_id, token = self._queue.popleft()
                    if self._tokens.get(request_id) is not token:
                        continue
                    chunk_id = self._next_recv_id[request_id]
                key = f"{request_id}_{self.src_stage_id}_{chunk_id}"
                progress = self._poll_one(request_id, token, key, chunk_id) or progress
            if not progress and self._stop.wait(self.idle_backoff):
                return

    def _poll_one(self, request_id: str, token: object, key: str, chunk_id: int) -> bool:
        try:
            value = self.connector.get(key)
        except Exception:
            value = None
        with self._recv_lock:
            current = self._tokens.get(request_id) is token
            if value is None:
                if current:
                    self._queue.append((request_id, token))
                return False
            if self.CHECK_TOKEN and not current:
                return False
            self._ready.setdefault(request_id, []).append(value)
            self._next_recv_id[request_id] = chunk_id + 1
            if not value.get("finished"):
                self._queue.append((request_id, token))
            return True

    # lifecycle
    def stop(self) -> None:
        self._stop.set()
        for cond in (self._send_cond, self._recv_cond):
            with cond:
                cond.notify_all()
        deadline = time.monotonic() + self.join_timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def threads(self) -> list[threading.Thread]:
        return list(self._threads)

    def __enter__(self) -> PlainChunkAdapter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _check_id(request_id: object, call: str) -> None:
    if not isinstance(request_id, str):
        raise TypeError(f"{call}({request_id!r}): the request id must be a str")


class PlainChunkAdapterFixed(PlainChunkAdapter):
    """The same adapter with the token check: the control case."""

    CHECK_TOKEN = True
