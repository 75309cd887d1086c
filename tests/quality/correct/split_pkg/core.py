"""The split_pkg adapter's class: a sender FIFO with one SAVE thread, a polling RECV thread."""

from __future__ import annotations

import collections
import copy
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from . import util

log = logging.getLogger(__name__)


class StreamBridge:
    """One stage's end of a chunk stream (sender and receiver sides in one object)."""

    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Callable[[str, Any, bool], Any] | None = None,
        put_tries: int = 3,
        join_timeout: float = 1.0,
    ) -> None:
        if put_tries < 1:
            raise ValueError("put_tries counts every try, so it is at least 1")
        self.connector = connector
        self.stage_id = stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self.build_payload = build_payload or util.same_payload
        self.put_tries = put_tries
        self.join_timeout = join_timeout
        self._halt = threading.Event()

        # Send side. _send_lock guards _outbox, _next_ids and _cancelled.
        # _send_ready (over _send_lock) is notified by save_async (an item was queued)
        # and by stop(); only the SAVE thread waits on it.
        self._send_lock = threading.Lock()
        self._send_ready = threading.Condition(self._send_lock)
        self._outbox: collections.deque[tuple[str, Any, bool]] = collections.deque()
        self._next_ids: dict[str, int] = {}
        self._cancelled: set[str] = set()

        # Receive side. _recv_lock guards _registered, _rotation and _inbox.
        # _recv_ready (over _recv_lock) is notified by load_async (a request to poll)
        # and by stop(); only the RECV thread waits on it.
        self._recv_lock = threading.Lock()
        self._recv_ready = threading.Condition(self._recv_lock)
        self._registered: dict[str, list[Any]] = {}  # rid -> [token, next chunk id]
        self._rotation: collections.deque[tuple[str, object]] = collections.deque()
        self._inbox: dict[str, list[dict[str, Any]]] = {}

        self.dropped = collections.Counter[str]()  # SAVE thread only
        self.get_errors = 0  # RECV thread only

        self._workers = [
            threading.Thread(target=self._save_forever, name=f"save-{stage_id}", daemon=True),
            threading.Thread(target=self._recv_forever, name=f"recv-{stage_id}", daemon=True),
        ]
        for worker in self._workers:
            worker.start()

    # ---- scheduler thread -------------------------------------------------------------

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        util.need_request_id(request_id)
        util.need_flag(is_final)
        if self._halt.is_set():
            raise RuntimeError("save_async after stop()")
        snapshot = copy.deepcopy(obj)  # raises here when obj cannot be copied
        with self._send_ready:
            if self._halt.is_set():
                raise RuntimeError("save_async after stop()")
            self._outbox.append((request_id, snapshot, is_final))
            self._send_ready.notify()

    def cancel_sender(self, request_id: str) -> None:
        util.need_request_id(request_id)
        with self._send_lock:
            if self._halt.is_set():
                raise RuntimeError("cancel_sender after stop()")
            self._cancelled.add(request_id)

    def load_async(self, request_id: str) -> None:
        util.need_request_id(request_id)
        with self._recv_ready:
            if self._halt.is_set():
                raise RuntimeError("load_async after stop()")
            if request_id in self._registered:
                return
            token = object()
            self._registered[request_id] = [token, 0]
            self._rotation.append((request_id, token))
            self._recv_ready.notify()

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        with self._recv_lock:
            out, self._inbox = self._inbox, {}
        return out

    def cleanup_receiver(self, request_id: str) -> None:
        util.need_request_id(request_id)
        with self._recv_lock:
            self._registered.pop(request_id, None)
            self._inbox.pop(request_id, None)

    def stop(self) -> None:
        self._halt.set()
        with self._send_ready:
            self._send_ready.notify_all()
        with self._recv_ready:
            self._recv_ready.notify_all()
        deadline = time.monotonic() + self.join_timeout
        me = threading.current_thread()
        for worker in self._workers:
            if worker is not me:
                worker.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> StreamBridge:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ---- SAVE thread ------------------------------------------------------------------

    def _save_forever(self) -> None:
        while True:
            with self._send_ready:
                while not self._outbox and not self._halt.is_set():
                    self._send_ready.wait(0.1)
                if self._halt.is_set():
                    return
                request_id, snapshot, is_final = self._outbox.popleft()
                cancelled = request_id in self._cancelled
            try:
                self._send_one(request_id, snapshot, is_final, cancelled)
            except Exception:
                log.exception("SAVE: unexpected error on %r", request_id)

    def _send_one(self, request_id: str, snapshot: Any, is_final: bool, cancelled: bool) -> None:
        if cancelled:
            if not is_final:
                self.dropped["cancelled"] += 1
                return
            payload = None
        else:
            try:
                payload = self.build_payload(request_id, snapshot, is_final)
            except Exception:
                log.info("build_payload failed for %r", request_id, exc_info=True)
                if not is_final:
                    self.dropped["build"] += 1
                    return
                payload = None
        if payload is None and not is_final:
            self.dropped["none"] += 1
            return
        value = util.wire_value(payload, is_final)
        delays = util.backoff()
        tries = 0
        while not self._halt.is_set():
            with self._send_lock:
                chunk_id = self._next_ids.get(request_id, 0)
            try:
                self.connector.put(util.chunk_key(request_id, self.stage_id, chunk_id), value)
            except Exception:
                tries += 1
                log.debug("put of %r chunk %d failed (try %d)", request_id, chunk_id, tries)
                if not is_final and tries >= self.put_tries:
                    self.dropped["put"] += 1
                    return
                self._halt.wait(next(delays))
                continue
            with self._send_lock:
                if is_final:
                    self._next_ids.pop(request_id, None)
                    self._cancelled.discard(request_id)
                else:
                    self._next_ids[request_id] = chunk_id + 1
            return

    # ---- RECV thread ------------------------------------------------------------------

    def _recv_forever(self) -> None:
        while True:
            with self._recv_ready:
                while not self._rotation and not self._halt.is_set():
                    self._recv_ready.wait(0.1)
                if self._halt.is_set():
                    return
                this_round = list(self._rotation)
                self._rotation.clear()
            moved = False
            for request_id, token in this_round:
                if self._halt.is_set():
                    return
                moved = self._poll_once(request_id, token) or moved
            if not moved:
                time.sleep(0.001)

    def _poll_once(self, request_id: str, token: object) -> bool:
        with self._recv_lock:
            entry = self._registered.get(request_id)
            if entry is None or entry[0] is not token:
                return False  # a stale queue entry: dropped
            chunk_id = entry[1]
        try:
            value = self.connector.get(util.chunk_key(request_id, self.src_stage_id, chunk_id))
        except Exception:
            self.get_errors += 1
            log.debug("get of %r chunk %d failed", request_id, chunk_id, exc_info=True)
            value = None
        with self._recv_lock:
            entry = self._registered.get(request_id)
            if entry is None or entry[0] is not token:
                return False  # cleaned up while the get was in flight: discard
            if value is None:
                self._rotation.append((request_id, token))
                return False
            self._inbox.setdefault(request_id, []).append(value)
            entry[1] = chunk_id + 1
            if not util.is_last(value):
                self._rotation.append((request_id, token))
            return True
