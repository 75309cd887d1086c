"""BUG: the sender writes keys under stage `src_stage_id + 1` instead of its own
`stage_id`; right with the default src_stage_id (stage_id - 1), wrong whenever
src_stage_id is given explicitly (a loopback, a stage that skips one) (R1).

A refactor kept one stage number per adapter ("the stage we read from") and derived the
stage we write as the next one.

Otherwise a copy of holdout.pq_sequenced.
"""

from __future__ import annotations

import copy
import itertools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


@dataclass(order=True)
class _Job:
    seq: int
    request_id: str = field(default="", compare=False)
    snapshot: Any = field(default=None, compare=False)
    is_final: bool = field(default=False, compare=False)
    wake_up: bool = field(default=False, compare=False)


def _same(request_id: str, snapshot: Any, is_final: bool) -> Any:
    return snapshot


def _is_final_value(value: Any) -> bool:
    return isinstance(value, dict) and bool(value.get("finished"))


def _require_rid(request_id: Any) -> None:
    if not isinstance(request_id, str):
        raise TypeError(f"request_id must be a str, not {type(request_id).__name__}")


class PQSequencedAdapter:
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
            raise ValueError("put_tries must be at least 1")
        self._conn = connector
        self.stage_id = stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self._out_stage = self.src_stage_id + 1  # we write the stage after the one we read
        self._build = build_payload if build_payload is not None else _same
        self._snapshot = snapshot if snapshot is not None else copy.deepcopy
        self._put_tries = int(put_tries)
        self._put_backoff = float(put_backoff)
        self._put_backoff_max = float(put_backoff_max)
        self._wait_timeout = float(wait_timeout)
        self._idle_backoff = float(idle_backoff)
        self.join_timeout = float(join_timeout)
        self._stop = threading.Event()
        self._counts = dict.fromkeys(
            ("puts", "put_errors", "dropped_cancel", "dropped_build", "dropped_put",
             "skipped", "build_errors", "gets", "get_errors", "commits", "stale"),
            0,
        )  # fmt: skip

        # sender: _send_lock guards _seq draws + enqueue, _next_put and _cancelled.
        self._jobs: queue.PriorityQueue[_Job] = queue.PriorityQueue()
        self._seq = itertools.count()
        self._send_lock = threading.Lock()
        self._next_put: dict[str, int] = {}
        self._cancelled: set[str] = set()

        # receiver: _recv_lock guards everything below; _recv_cond is waited on by RECV.
        self._recv_lock = threading.Lock()
        self._recv_cond = threading.Condition(self._recv_lock)
        self._tokens: dict[str, object] = {}
        self._next_get: dict[object, int] = {}  # token -> next chunk id
        self._polling: deque[tuple[str, object]] = deque()
        self._ready: dict[str, list[Any]] = {}
        self._generation = 0

        self._save_thread = threading.Thread(
            target=self._save_loop, name=f"pq-save-{stage_id}", daemon=True
        )
        self._recv_thread = threading.Thread(
            target=self._recv_loop, name=f"pq-recv-{stage_id}", daemon=True
        )
        self._save_thread.start()
        self._recv_thread.start()

    # ------------------------------------------------------------------ helpers

    def _running(self, call: str) -> None:
        if self._stop.is_set():
            raise RuntimeError(f"{call}() called after stop()")

    def stats(self) -> dict[str, int]:
        return dict(self._counts)

    # ------------------------------------------------------------------ sender API

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        _require_rid(request_id)
        if not isinstance(is_final, bool):
            raise TypeError(f"is_final must be a bool, not {type(is_final).__name__}")
        self._running("save_async")
        snap = self._snapshot(obj)
        with self._send_lock:
            self._running("save_async")
            self._jobs.put_nowait(_Job(next(self._seq), request_id, snap, is_final))

    def cancel_sender(self, request_id: str) -> None:
        _require_rid(request_id)
        with self._send_lock:
            self._running("cancel_sender")
            self._cancelled.add(request_id)

    # ------------------------------------------------------------------ SAVE thread

    def _save_loop(self) -> None:
        while not self._stop.is_set():
            try:
                job = self._jobs.get(timeout=self._wait_timeout)
            except queue.Empty:
                continue
            if job.wake_up or self._stop.is_set():
                continue
            try:
                self._send(job)
            except Exception:
                log.exception("SAVE thread: unexpected error")

    def _send(self, job: _Job) -> None:
        rid, final = job.request_id, job.is_final
        with self._send_lock:
            cancelled = rid in self._cancelled
        if cancelled:
            if not final:
                self._counts["dropped_cancel"] += 1
                return
            payload = None
        else:
            try:
                payload = self._build(rid, job.snapshot, final)
            except Exception:
                self._counts["build_errors"] += 1
                log.warning("build_payload failed for %r", rid, exc_info=True)
                if not final:
                    self._counts["dropped_build"] += 1
                    return
                payload = None
            if payload is None and not final:
                self._counts["skipped"] += 1
                return
        self._put(rid, {"data": payload, "finished": final}, final)

    def _put(self, rid: str, value: dict[str, Any], final: bool) -> None:
        failures = 0
        delay = self._put_backoff
        while not self._stop.is_set():
            with self._send_lock:
                chunk_id = self._next_put.get(rid, 0)
            key = f"{rid}_{self._out_stage}_{chunk_id}"
            try:
                self._conn.put(key, value)
            except Exception:
                failures += 1
                self._counts["put_errors"] += 1
                if not final and failures >= self._put_tries:
                    self._counts["dropped_put"] += 1
                    log.warning("put of %s failed %d times; chunk dropped", key, failures)
                    return
                if self._stop.wait(delay):
                    return
                delay = min(max(delay * 2, 0.001), self._put_backoff_max)
                continue
            self._counts["puts"] += 1
            with self._send_lock:
                if final:
                    self._next_put.pop(rid, None)
                    self._cancelled.discard(rid)
                else:
                    self._next_put[rid] = chunk_id + 1
            return

    # ------------------------------------------------------------------ receiver API

    def load_async(self, request_id: str) -> None:
        _require_rid(request_id)
        with self._recv_cond:
            self._running("load_async")
            if request_id in self._tokens:
                return
            token = object()
            self._tokens[request_id] = token
            self._next_get[token] = 0
            self._polling.append((request_id, token))
            self._generation += 1
            self._recv_cond.notify_all()

    def poll_ready(self) -> dict[str, list[Any]]:
        with self._recv_lock:
            handed, self._ready = self._ready, {}
        return handed

    def cleanup_receiver(self, request_id: str) -> None:
        _require_rid(request_id)
        with self._recv_lock:
            token = self._tokens.pop(request_id, None)
            if token is not None:
                self._next_get.pop(token, None)
            self._ready.pop(request_id, None)

    # ------------------------------------------------------------------ RECV thread

    def _recv_loop(self) -> None:
        while True:
            with self._recv_cond:
                while not self._polling and not self._stop.is_set():
                    self._recv_cond.wait(self._wait_timeout)
                if self._stop.is_set():
                    return
                generation = self._generation
                batch = len(self._polling)
            progress = False
            for _ in range(batch):
                if self._stop.is_set():
                    return
                if self._poll_one():
                    progress = True
            if not progress:
                self._pause(generation)

    def _pause(self, generation: int) -> None:
        """About idle_backoff, cut short by a new registration or stop()."""
        deadline = time.monotonic() + self._idle_backoff
        with self._recv_cond:
            while self._generation == generation and not self._stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._recv_cond.wait(left)

    def _poll_one(self) -> bool:
        with self._recv_lock:
            rid, token = self._polling.popleft()
            if self._tokens.get(rid) is not token:
                return False
            chunk_id = self._next_get[token]
        key = f"{rid}_{self.src_stage_id}_{chunk_id}"
        try:
            self._counts["gets"] += 1
            value = self._conn.get(key)
        except Exception:
            self._counts["get_errors"] += 1
            log.info("get(%s) failed", key, exc_info=True)
            value = None
        with self._recv_lock:
            if self._tokens.get(rid) is not token:
                if value is not None:
                    self._counts["stale"] += 1
                return False
            if value is None:
                self._polling.append((rid, token))
                return False
            self._ready.setdefault(rid, []).append(value)
            self._next_get[token] = chunk_id + 1
            self._counts["commits"] += 1
            if not _is_final_value(value):
                self._polling.append((rid, token))
            return True

    # ------------------------------------------------------------------ lifecycle

    def stop(self) -> None:
        self._stop.set()
        self._jobs.put_nowait(_Job(-1, wake_up=True))
        with self._recv_cond:
            self._recv_cond.notify_all()
        deadline = time.monotonic() + self.join_timeout
        me = threading.current_thread()
        for thread in (self._save_thread, self._recv_thread):
            if thread is not me:
                thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> PQSequencedAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_OPTIONS = ("put_tries", "put_backoff", "put_backoff_max", "wait_timeout", "idle_backoff",
            "join_timeout", "snapshot")  # fmt: skip


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Callable[[str, Any, bool], Any] | None = None,
    **options: Any,
) -> PQSequencedAdapter:
    known = {k: v for k, v in options.items() if k in _OPTIONS and v is not None}
    return PQSequencedAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **known,
    )
