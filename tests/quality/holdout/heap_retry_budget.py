"""BUG: put retries of non-final chunks draw on a retry budget shared by every adapter in
the process (a token bucket, 10 tokens, 5 per second); when many puts fail the bucket is
empty and a non-final chunk is dropped after its first failed put instead of after
put_tries tries (R10).

"Retry throttling", as gRPC clients do it, so that a sick store is not hammered by every
stage at once. Finals do not use the budget: they are retried until they succeed.

Otherwise a copy of holdout.due_heap.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

_log = logging.getLogger(__name__)

_STALE, _EMPTY, _MORE, _DONE = range(4)


class _RetryBudget:
    """A token bucket shared by every adapter of the process."""

    def __init__(self, capacity: float = 10.0, per_second: float = 5.0) -> None:
        self._lock = threading.Lock()
        self._capacity = capacity
        self._rate = per_second
        self._tokens = capacity
        self._stamp = time.monotonic()

    def take(self) -> bool:
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self._capacity, self._tokens + (now - self._stamp) * self._rate)
            self._stamp = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False


_RETRY_BUDGET = _RetryBudget()


def _key(request_id: str, stage: int, chunk_id: int) -> str:
    return f"{request_id}_{stage}_{chunk_id}"


class DueHeapAdapter:
    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Callable[[str, Any, bool], Any] | None = None,
        put_tries: int = 3,
        put_backoff: float = 0.005,
        put_backoff_max: float = 0.1,
        wait_timeout: float = 0.1,
        idle_backoff: float = 0.001,
        join_timeout: float = 1.0,
        snapshot: Callable[[Any], Any] | None = None,
    ) -> None:
        if int(put_tries) < 1:
            raise ValueError("put_tries must be >= 1")
        self._conn = connector
        self._stage = stage_id
        self._src = stage_id - 1 if src_stage_id is None else src_stage_id
        self._build_fn = build_payload
        self._snap_fn = snapshot or copy.deepcopy
        self._tries = int(put_tries)
        self._backoff = float(put_backoff)
        self._backoff_max = float(put_backoff_max)
        self._wait = float(wait_timeout)
        self._idle = float(idle_backoff)
        self.join_timeout = float(join_timeout)
        self._halt = threading.Event()
        self.tally = {"put": 0, "put_error": 0, "drop": 0, "skip": 0, "get_error": 0, "commit": 0}

        self._tx_lock = threading.Lock()
        self._tx_cv = threading.Condition(self._tx_lock)
        self._fifo: deque[tuple[str, Any, bool]] = deque()
        self._next_id: dict[str, int] = {}
        self._cancel_marks: set[str] = set()

        self._rx_lock = threading.Lock()
        self._rx_cv = threading.Condition(self._rx_lock)
        self._tokens: dict[str, object] = {}
        self._cursor: dict[object, int] = {}
        self._heap: list[tuple[float, int, str, object]] = []
        self._tick = itertools.count()
        self._ready: dict[str, list[Any]] = {}

        self._tx_thread = threading.Thread(target=self._tx_main, name="heap-save", daemon=True)
        self._rx_thread = threading.Thread(target=self._rx_main, name="heap-recv", daemon=True)
        self._tx_thread.start()
        self._rx_thread.start()

    @property
    def stage_id(self) -> int:
        return self._stage

    @property
    def src_stage_id(self) -> int:
        return self._src

    def stats(self) -> dict[str, int]:
        return dict(self.tally)

    # -------------------------------------------------------------- checks

    def _assert_rid(self, request_id: Any) -> None:
        if not isinstance(request_id, str):
            raise TypeError("request_id must be a str")

    def _assert_live(self, what: str) -> None:
        if self._halt.is_set():
            raise RuntimeError(f"{what} after stop()")

    # -------------------------------------------------------------- sender

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._assert_rid(request_id)
        if type(is_final) is not bool:
            raise TypeError("is_final must be a bool")
        self._assert_live("save_async")
        snap = self._snap_fn(obj)
        with self._tx_cv:
            self._assert_live("save_async")
            self._fifo.append((request_id, snap, is_final))
            self._tx_cv.notify()

    def cancel_sender(self, request_id: str) -> None:
        self._assert_rid(request_id)
        with self._tx_lock:
            self._assert_live("cancel_sender")
            self._cancel_marks.add(request_id)

    def _has_work(self) -> bool:
        return bool(self._fifo) or self._halt.is_set()

    def _tx_main(self) -> None:
        while True:
            with self._tx_cv:
                while not self._has_work():
                    self._tx_cv.wait_for(self._has_work, timeout=self._wait)
                if self._halt.is_set():
                    return
                rid, snap, final = self._fifo.popleft()
                cancelled = rid in self._cancel_marks
            try:
                self._ship(rid, snap, final, cancelled)
            except Exception:
                _log.exception("SAVE thread: unexpected error")

    def _ship(self, rid: str, snap: Any, final: bool, cancelled: bool) -> None:
        if cancelled:
            if not final:
                self.tally["drop"] += 1
                return
            data = None
        else:
            try:
                data = snap if self._build_fn is None else self._build_fn(rid, snap, final)
            except Exception:
                _log.warning("build_payload failed for %r", rid, exc_info=True)
                if not final:
                    self.tally["drop"] += 1
                    return
                data = None
            if data is None and not final:
                self.tally["skip"] += 1
                return
        wire = {"data": data, "finished": final}
        pause = self._backoff
        failed = 0
        while not self._halt.is_set():
            with self._tx_lock:
                chunk_id = self._next_id.get(rid, 0)
            key = _key(rid, self._stage, chunk_id)
            try:
                self._conn.put(key, wire)
            except Exception:
                failed += 1
                self.tally["put_error"] += 1
                if not final and (failed >= self._tries or not _RETRY_BUDGET.take()):
                    self.tally["drop"] += 1
                    _log.warning("dropping %s after %d failed puts", key, failed)
                    return
                if self._halt.wait(pause):
                    return
                pause = min(max(2 * pause, 0.001), self._backoff_max)
                continue
            self.tally["put"] += 1
            with self._tx_lock:
                if final:
                    self._next_id.pop(rid, None)
                    self._cancel_marks.discard(rid)
                else:
                    self._next_id[rid] = chunk_id + 1
            return

    # -------------------------------------------------------------- receiver

    def load_async(self, request_id: str) -> None:
        self._assert_rid(request_id)
        with self._rx_cv:
            self._assert_live("load_async")
            if request_id in self._tokens:
                return
            token = object()
            self._tokens[request_id] = token
            self._cursor[token] = 0
            heapq.heappush(self._heap, (0.0, next(self._tick), request_id, token))
            self._rx_cv.notify()

    def poll_ready(self) -> dict[str, list[Any]]:
        with self._rx_lock:
            out = self._ready
            self._ready = {}
        return out

    def cleanup_receiver(self, request_id: str) -> None:
        self._assert_rid(request_id)
        with self._rx_lock:
            token = self._tokens.pop(request_id, None)
            if token is not None:
                self._cursor.pop(token, None)
            self._ready.pop(request_id, None)

    def _due_entries(self) -> list[tuple[str, object]] | None:
        """Wait until some entry is due; take every due entry. None once stopped."""
        with self._rx_cv:
            while not self._halt.is_set():
                now = time.monotonic()
                if self._heap and self._heap[0][0] <= now:
                    batch = []
                    while self._heap and self._heap[0][0] <= now:
                        _, _, rid, token = heapq.heappop(self._heap)
                        batch.append((rid, token))
                    return batch
                timeout = self._wait if not self._heap else min(self._wait, self._heap[0][0] - now)
                self._rx_cv.wait(timeout)
            return None

    def _rx_main(self) -> None:
        while True:
            batch = self._due_entries()
            if batch is None:
                return
            idle: list[tuple[str, object]] = []
            for rid, token in batch:
                if self._halt.is_set():
                    return
                outcome = self._fetch(rid, token)
                if outcome == _EMPTY:
                    idle.append((rid, token))
            if idle:
                due = time.monotonic() + self._idle
                with self._rx_lock:
                    for rid, token in idle:
                        heapq.heappush(self._heap, (due, next(self._tick), rid, token))

    def _fetch(self, rid: str, token: object) -> int:
        with self._rx_lock:
            if self._tokens.get(rid) is not token:
                return _STALE
            chunk_id = self._cursor[token]
        key = _key(rid, self._src, chunk_id)
        try:
            value = self._conn.get(key)
        except Exception:
            self.tally["get_error"] += 1
            _log.info("get(%s) raised", key, exc_info=True)
            value = None
        with self._rx_lock:
            if self._tokens.get(rid) is not token:
                return _STALE  # cleaned up while the get was in flight: discard
            if value is None:
                return _EMPTY
            self._ready.setdefault(rid, []).append(value)
            self._cursor[token] = chunk_id + 1
            self.tally["commit"] += 1
            if isinstance(value, dict) and value.get("finished"):
                return _DONE
            heapq.heappush(self._heap, (0.0, next(self._tick), rid, token))
            return _MORE

    # -------------------------------------------------------------- lifecycle

    def stop(self) -> None:
        self._halt.set()
        with self._tx_cv:
            self._tx_cv.notify_all()
        with self._rx_cv:
            self._rx_cv.notify_all()
        deadline = time.monotonic() + self.join_timeout
        current = threading.current_thread()
        for thread in (self._tx_thread, self._rx_thread):
            if thread is not current:
                thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> DueHeapAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Callable[[str, Any, bool], Any] | None = None,
    **options: Any,
) -> DueHeapAdapter:
    names = ("put_tries", "put_backoff", "put_backoff_max", "wait_timeout", "idle_backoff",
             "join_timeout", "snapshot")  # fmt: skip
    return DueHeapAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **{name: options[name] for name in names if options.get(name) is not None},
    )
