"""A ChunkAdapter written from scratch around a ``queue.Queue`` FIFO and ONE lock.

The SAVE worker blocks in ``Queue.get(timeout=0.1)``; ``stop()`` wakes it with a
``None``. Every dict of both sides sits behind one lock, with one condition over it
for the RECV worker. Keys, checks and pauses are module-level helpers. Its own
option is ``retries`` (tries after the first); the factory maps ``put_tries`` onto it.

BUG (R10): ``retries or DEFAULT_RETRIES`` reads ``retries=0`` as "not given". With
``put_tries=1`` (``retries=0``) a non-final chunk whose put fails is tried three times
instead of once, so a chunk that must be dropped reaches the connector and takes the
id of the chunk after it. Any other ``put_tries`` is kept.
"""

from __future__ import annotations

import copy
import logging
import queue
import threading
import time
from collections import deque
from typing import Any

__all__ = ["QueueWorkerAdapter", "make"]

LOG = logging.getLogger(__name__)
DEFAULT_RETRIES = 2  # tries after the first: put_tries=3


def _key(request_id: str, stage: int, chunk_id: int) -> str:
    return f"{request_id}_{stage}_{chunk_id}"


def _need_str(request_id: object, call: str) -> None:
    if not isinstance(request_id, str):
        raise TypeError(f"{call}: request_id must be a str, got {type(request_id).__name__}")


def _pause(base: float, failures: int) -> float:
    return min(0.1, base * 2 ** min(failures - 1, 16))


class QueueWorkerAdapter:
    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Any = None,
        retries: int | None = None,
        backoff: float = 0.005,
        idle: float = 0.001,
        join_timeout: float = 1.0,
    ) -> None:
        self.connector = connector
        self.stage_id = stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self.build_payload = build_payload or (lambda rid, snapshot, final: snapshot)
        self.retries = retries or DEFAULT_RETRIES  # BUG: retries=0 (put_tries=1) is "not given"
        self.backoff, self.idle, self.join_timeout = backoff, idle, join_timeout
        self._stopped = threading.Event()
        self._fifo: queue.Queue[tuple[str, Any, bool] | None] = queue.Queue()
        # _mutex guards every dict, set and deque below, of both sides; never held while
        # building, putting or getting. _has_work (over it): the RECV worker waits for a
        # registration; load_async notifies, stop() notifies all.
        self._mutex = threading.Lock()
        self._has_work = threading.Condition(self._mutex)
        self._send_ids: dict[str, int] = {}
        self._cancelled: set[str] = set()
        self._tokens: dict[str, object] = {}
        self._recv_ids: dict[str, int] = {}
        self._turns: deque[tuple[str, object]] = deque()
        self._ready: dict[str, list[dict[str, Any]]] = {}
        self._workers = [
            threading.Thread(target=self._save_worker, name="qw-save", daemon=True),
            threading.Thread(target=self._recv_worker, name="qw-recv", daemon=True),
        ]
        for worker in self._workers:
            worker.start()

    def _running(self, call: str) -> None:
        if self._stopped.is_set():
            raise RuntimeError(f"{call}: the adapter is stopped")

    # ------------------------------------------------------------------ sender
    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        _need_str(request_id, "save_async")
        if not isinstance(is_final, bool):
            raise TypeError(f"save_async: is_final must be a bool, got {is_final!r}")
        self._running("save_async")
        self._fifo.put((request_id, copy.deepcopy(obj), is_final))

    def cancel_sender(self, request_id: str) -> None:
        _need_str(request_id, "cancel_sender")
        with self._mutex:
            self._running("cancel_sender")
            self._cancelled.add(request_id)

    def _save_worker(self) -> None:
        while not self._stopped.is_set():
            try:
                item = self._fifo.get(timeout=0.1)
            except queue.Empty:
                continue
            if item is None or self._stopped.is_set():
                continue
            try:
                self._send(*item)
            except Exception:
                LOG.exception("SAVE worker: unexpected error; going on")

    def _send(self, request_id: str, snapshot: Any, final: bool) -> None:
        with self._mutex:
            cancelled = request_id in self._cancelled
        if cancelled and not final:
            return
        payload = None
        if not cancelled:
            try:
                payload = self.build_payload(request_id, snapshot, final)
            except Exception:
                LOG.warning("build_payload(%r) failed", request_id, exc_info=True)
                if not final:
                    return
            if payload is None and not final:
                return
        value = {"data": payload, "finished": final}
        failures = 0
        while not self._stopped.is_set():
            with self._mutex:
                chunk_id = self._send_ids.get(request_id, 0)
            key = _key(request_id, self.stage_id, chunk_id)
            try:
                self.connector.put(key, value)
            except Exception as exc:
                failures += 1
                if not final and failures > self.retries:
                    LOG.warning("dropping %s after %d tries: %r", key, failures, exc)
                    return
                self._stopped.wait(_pause(self.backoff, failures))
                continue
            with self._mutex:
                if final:
                    self._send_ids.pop(request_id, None)
                    self._cancelled.discard(request_id)
                else:
                    self._send_ids[request_id] = chunk_id + 1
            return

    # ------------------------------------------------------------------ receiver
    def load_async(self, request_id: str) -> None:
        _need_str(request_id, "load_async")
        with self._has_work:
            self._running("load_async")
            if request_id not in self._tokens:
                token = self._tokens[request_id] = object()
                self._recv_ids[request_id] = 0
                self._turns.append((request_id, token))
                self._has_work.notify()

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        with self._mutex:
            ready, self._ready = self._ready, {}
        return ready

    def cleanup_receiver(self, request_id: str) -> None:
        _need_str(request_id, "cleanup_receiver")
        with self._mutex:
            self._tokens.pop(request_id, None)
            self._recv_ids.pop(request_id, None)
            self._ready.pop(request_id, None)

    def _recv_worker(self) -> None:
        while True:
            with self._has_work:
                while not self._turns and not self._stopped.is_set():
                    self._has_work.wait(0.1)
                if self._stopped.is_set():
                    return
                turns = len(self._turns)
            moved = False
            for _ in range(turns):
                moved = self._poll_next() or moved
            if not moved and self._stopped.wait(self.idle):
                return

    def _poll_next(self) -> bool:
        with self._mutex:
            if not self._turns:
                return False
            request_id, token = self._turns.popleft()
            if self._tokens.get(request_id) is not token:
                return False
            chunk_id = self._recv_ids[request_id]
        try:
            value = self.connector.get(_key(request_id, self.src_stage_id, chunk_id))
        except Exception as exc:
            LOG.info("get failed: %r; retrying", exc)
            value = None
        with self._mutex:
            if self._tokens.get(request_id) is not token:
                return False  # cleaned up while the get was in flight
            if not isinstance(value, dict):
                self._turns.append((request_id, token))
                return False
            self._ready.setdefault(request_id, []).append(value)
            self._recv_ids[request_id] = chunk_id + 1
            if not value.get("finished"):
                self._turns.append((request_id, token))
            return True

    # ------------------------------------------------------------------ lifecycle
    def stop(self) -> None:
        self._stopped.set()
        self._fifo.put(None)
        with self._has_work:
            self._has_work.notify_all()
        deadline = time.monotonic() + self.join_timeout
        for worker in self._workers:
            if worker is not threading.current_thread():
                worker.join(max(0.0, deadline - time.monotonic()))


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Any = None,
    **options: Any,
) -> QueueWorkerAdapter:
    """The queue-worker adapter; takes put_tries, put_backoff, idle_backoff, join_timeout."""
    return QueueWorkerAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        retries=int(options.get("put_tries", 3)) - 1,
        backoff=float(options.get("put_backoff", 0.005)),
        idle=float(options.get("idle_backoff", 0.001)),
        join_timeout=float(options.get("join_timeout", 1.0)),
    )
