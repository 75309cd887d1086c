"""A correct ChunkAdapter whose SAVE FIFO is a ``queue.Queue``.

The SAVE thread blocks in ``fifo.get(timeout=0.1)``; ``stop()`` wakes it at once
by putting a sentinel. Per-request state lives in plain dicts guarded by one
``threading.Lock``; the RECV thread waits on a ``Condition`` over that lock.
"""

from __future__ import annotations

import copy
import logging
import queue
import threading
import time
from collections import deque
from typing import Any

logger = logging.getLogger(__name__)

_WAKE_UP = object()  # sentinel put on the FIFO by stop()


class QueueChunkAdapter:
    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Any = None,
        put_tries: int = 3,
        join_timeout: float = 1.0,
    ) -> None:
        self.connector = connector
        self.stage_id = stage_id
        self.src_stage_id = src_stage_id if src_stage_id is not None else stage_id - 1
        self.build_payload = build_payload or (lambda rid, snapshot, final: snapshot)
        self.put_tries = max(1, int(put_tries))
        self.join_timeout = join_timeout

        self.fifo: queue.Queue[Any] = queue.Queue()  # (rid, snapshot, is_final) or _WAKE_UP
        self.stop_event = threading.Event()

        # state_lock guards every dict below (both sides). recv_cond (over state_lock) is
        # notified by load_async and by stop(); the RECV thread is its only waiter. The SAVE
        # side has no condition of ours: queue.Queue has its own, woken by put().
        self.state_lock = threading.Lock()
        self.recv_cond = threading.Condition(self.state_lock)
        self.send_next: dict[str, int] = {}
        self.cancelled: dict[str, bool] = {}
        self.reg_token: dict[str, object] = {}
        self.recv_next: dict[object, int] = {}  # token -> next chunk id of that registration
        self.to_poll: deque[tuple[str, object]] = deque()
        self.ready: dict[str, list[dict[str, Any]]] = {}
        self.counts = {"dropped": 0, "skipped": 0, "put_errors": 0, "get_errors": 0}

        self.save_thread = threading.Thread(target=self.save_main, name="SAVE", daemon=True)
        self.recv_thread = threading.Thread(target=self.recv_main, name="RECV", daemon=True)
        self.save_thread.start()
        self.recv_thread.start()

    # ------------------------------------------------------------------ checks

    def _rid(self, request_id: Any) -> None:
        if not isinstance(request_id, str):
            raise TypeError(f"request id {request_id!r} is not a str")

    def _running(self) -> None:
        if self.stop_event.is_set():
            raise RuntimeError("adapter already stopped")

    # ------------------------------------------------------------------ sender

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._rid(request_id)
        if not isinstance(is_final, bool):
            raise TypeError(f"is_final {is_final!r} is not a bool")
        self._running()
        snapshot = copy.deepcopy(obj)
        self.fifo.put((request_id, snapshot, is_final))

    def cancel_sender(self, request_id: str) -> None:
        self._rid(request_id)
        with self.state_lock:
            self._running()
            self.cancelled[request_id] = True

    def save_main(self) -> None:
        while not self.stop_event.is_set():
            try:
                item = self.fifo.get(timeout=0.1)
            except queue.Empty:
                continue
            if item is _WAKE_UP or self.stop_event.is_set():
                continue
            try:
                self.process(*item)
            except Exception:
                logger.exception("SAVE thread: unexpected error")

    def process(self, rid: str, snapshot: Any, final: bool) -> None:
        with self.state_lock:
            is_cancelled = self.cancelled.get(rid, False)
        if is_cancelled:
            if not final:
                self.counts["dropped"] += 1
                return
            payload = None
        else:
            try:
                payload = self.build_payload(rid, snapshot, final)
            except Exception:
                logger.info("build_payload(%r) raised", rid, exc_info=True)
                if not final:
                    self.counts["dropped"] += 1
                    return
                payload = None
            if payload is None and not final:
                self.counts["skipped"] += 1
                return
        message = {"data": payload, "finished": final}
        failures = 0
        pause = 0.001
        while not self.stop_event.is_set():
            with self.state_lock:
                chunk_id = self.send_next.get(rid, 0)
            try:
                self.connector.put(f"{rid}_{self.stage_id}_{chunk_id}", message)
            except Exception:
                failures += 1
                self.counts["put_errors"] += 1
                if not final and failures >= self.put_tries:
                    self.counts["dropped"] += 1
                    logger.info("giving up %s_%s_%s", rid, self.stage_id, chunk_id)
                    return
                self.stop_event.wait(pause)
                pause = min(pause * 2, 0.032)
                continue
            with self.state_lock:
                if final:
                    self.send_next.pop(rid, None)
                    self.cancelled.pop(rid, None)
                else:
                    self.send_next[rid] = chunk_id + 1
            return

    # ------------------------------------------------------------------ receiver

    def load_async(self, request_id: str) -> None:
        self._rid(request_id)
        with self.recv_cond:
            self._running()
            if request_id in self.reg_token:
                return
            token = object()
            self.reg_token[request_id] = token
            self.recv_next[token] = 0
            self.to_poll.append((request_id, token))
            self.recv_cond.notify()

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        with self.state_lock:
            handed, self.ready = self.ready, {}
        return handed

    def cleanup_receiver(self, request_id: str) -> None:
        self._rid(request_id)
        with self.state_lock:
            token = self.reg_token.pop(request_id, None)
            if token is not None:
                self.recv_next.pop(token, None)
            self.ready.pop(request_id, None)

    def recv_main(self) -> None:
        while not self.stop_event.is_set():
            with self.recv_cond:
                while not self.to_poll and not self.stop_event.is_set():
                    self.recv_cond.wait(0.1)
                batch = len(self.to_poll)
            got_any = False
            for _ in range(batch):
                if self.stop_event.is_set():
                    return
                with self.state_lock:
                    rid, token = self.to_poll.popleft()
                    if self.reg_token.get(rid) is not token:
                        continue
                    chunk_id = self.recv_next[token]
                try:
                    value = self.connector.get(f"{rid}_{self.src_stage_id}_{chunk_id}")
                except Exception:
                    self.counts["get_errors"] += 1
                    value = None
                with self.state_lock:
                    if self.reg_token.get(rid) is not token:
                        continue
                    if value is None:
                        self.to_poll.append((rid, token))
                        continue
                    self.ready.setdefault(rid, []).append(value)
                    self.recv_next[token] = chunk_id + 1
                    got_any = True
                    done = isinstance(value, dict) and value.get("finished") is True
                    if not done:
                        self.to_poll.append((rid, token))
            if batch and not got_any:
                time.sleep(0.001)

    # ------------------------------------------------------------------ lifecycle

    def stop(self) -> None:
        self.stop_event.set()
        self.fifo.put(_WAKE_UP)  # the SAVE side's "notify_all"
        with self.recv_cond:
            self.recv_cond.notify_all()
        deadline = time.monotonic() + self.join_timeout
        for t in (self.save_thread, self.recv_thread):
            if t is threading.current_thread():
                continue
            t.join(timeout=max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> QueueChunkAdapter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.stop()


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Any = None,
    put_tries: int = 3,
    join_timeout: float = 1.0,
    **_ignored: Any,
) -> QueueChunkAdapter:
    return QueueChunkAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        put_tries=put_tries,
        join_timeout=join_timeout,
    )
