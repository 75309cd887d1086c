"""Adapter bookkeeping shared by the shapes, with no threading or time of its own.

A shape creates the primitives and threads (in its own module, its own way) and
sets the attributes these mixins use: ``_stop`` (an Event), ``_send_lock`` /
``_send_cond`` and ``_recv_lock`` / ``_recv_cond`` (locks and conditions over
them). The SAVE and RECV loops here only call methods on those objects.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable
from typing import Any

Build = Callable[[str, Any, bool], Any]


def check_id(request_id: object, call: str) -> None:
    if not isinstance(request_id, str):
        raise TypeError(f"{call}({request_id!r}): the request id must be a str")


def identity(request_id: str, snapshot: Any, is_final: bool) -> Any:
    return snapshot


class Options:
    """The keyword options every shape takes, with the contract's defaults."""

    def set_options(
        self,
        connector: Any,
        stage_id: int,
        src_stage_id: int | None,
        build_payload: Build | None,
        wait_timeout: float = 0.1,
        idle_backoff: float = 0.001,
        join_timeout: float = 1.0,
        put_tries: int = 3,
        **ignored: Any,  # runtime=, logger=...: these adapters take their own threading
    ) -> None:
        self.connector = connector
        self.stage_id = stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self.build_payload: Build = build_payload or identity
        self.wait_timeout = wait_timeout
        self.idle_backoff = idle_backoff
        self.join_timeout = join_timeout
        self.put_tries = put_tries


class SendPart(Options):
    """The sender: a FIFO under ``_send_cond``, one SAVE loop, puts with retries."""

    _stop: Any
    _send_lock: Any
    _send_cond: Any

    def init_send(self) -> None:
        self._fifo: deque[tuple[str, Any, bool]] = deque()
        self._next_send_id: dict[str, int] = {}
        self._cancelled: set[str] = set()

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        check_id(request_id, "save_async")
        if not isinstance(is_final, bool):
            raise TypeError(f"save_async(..., is_final={is_final!r}): a bool please")
        snap = copy.deepcopy(obj)
        with self._send_cond:
            if self._stop.is_set():
                raise RuntimeError("save_async after stop()")
            self._fifo.append((request_id, snap, is_final))
            self._send_cond.notify()

    def cancel_sender(self, request_id: str) -> None:
        check_id(request_id, "cancel_sender")
        with self._send_lock:
            if self._stop.is_set():
                raise RuntimeError("cancel_sender after stop()")
            self._cancelled.add(request_id)

    def save_loop(self) -> None:
        while True:
            with self._send_cond:
                while not self._fifo and not self._stop.is_set():
                    self._send_cond.wait(self.wait_timeout)
                if self._stop.is_set():
                    return
                request_id, snap, is_final = self._fifo.popleft()
                cancelled = request_id in self._cancelled
            self.send_one(request_id, snap, is_final, cancelled)

    def send_one(self, request_id: str, snap: Any, is_final: bool, cancelled: bool) -> None:
        if cancelled and not is_final:
            return
        payload: Any = None
        if not cancelled:
            try:
                payload = self.build_payload(request_id, snap, is_final)
            except Exception:
                if not is_final:
                    return
            if payload is None and not is_final:
                return
        self.put_with_retries(request_id, {"data": payload, "finished": is_final}, is_final)

    def put_with_retries(self, request_id: str, value: dict[str, Any], is_final: bool) -> None:
        tries = 0
        while not self._stop.is_set():
            with self._send_lock:
                chunk_id = self._next_send_id.get(request_id, 0)
            try:
                self.connector.put(f"{request_id}_{self.stage_id}_{chunk_id}", value)
            except Exception:
                tries += 1
                if not is_final and tries >= self.put_tries:
                    return
                if self.backoff(min(0.005 * 2 ** (tries - 1), 0.1)):
                    return
                continue
            with self._send_lock:
                if is_final:
                    self._next_send_id.pop(request_id, None)
                    self._cancelled.discard(request_id)
                else:
                    self._next_send_id[request_id] = chunk_id + 1
            return

    def backoff(self, seconds: float) -> bool:
        """Wait *seconds* or until stop; True when stopped."""
        return bool(self._stop.wait(seconds))


class RecvPart(Options):
    """The receiver: registrations by token, one RECV loop polling round-robin."""

    CHECK_TOKEN = True  # False: the seeded bug (a stale get committed to a new registration)
    _stop: Any
    _recv_lock: Any
    _recv_cond: Any

    def init_recv(self) -> None:
        self._tokens: dict[str, object] = {}
        self._next_recv_id: dict[str, int] = {}
        self._ready: dict[str, list[dict[str, Any]]] = {}
        self._queue: deque[tuple[str, object]] = deque()

    def load_async(self, request_id: str) -> None:
        check_id(request_id, "load_async")
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
        check_id(request_id, "cleanup_receiver")
        with self._recv_lock:
            self._tokens.pop(request_id, None)
            self._next_recv_id.pop(request_id, None)
            self._ready.pop(request_id, None)

    def recv_loop(self) -> None:
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
                progress = self.poll_one(request_id, token, key, chunk_id) or progress
            if not progress and self.idle():
                return

    def idle(self) -> bool:
        """Back off after a round without progress; True when stopped."""
        return bool(self._stop.wait(self.idle_backoff))

    def poll_one(self, request_id: str, token: object, key: str, chunk_id: int) -> bool:
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

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()  # type: ignore[attr-defined]
