"""A correct ChunkAdapter whose SAVE and RECV workers subclass ``threading.Thread``.

Retry backoff and stop() use ``time.monotonic`` deadlines.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import deque
from typing import Any

log = logging.getLogger(__name__)


def _ensure_str(request_id: Any) -> None:
    if not isinstance(request_id, str):
        raise TypeError("request_id must be str")


class _Outbound:
    """Sender state shared by the adapter (scheduler side) and its SaveWorker."""

    def __init__(self) -> None:
        # lock guards items, next_id and cancelled. cond (over lock) is notified by
        # save_async and stop(); the SaveWorker waits on it.
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.items: deque[tuple[str, Any, bool]] = deque()
        self.next_id: dict[str, int] = {}
        self.cancelled: set[str] = set()


class _Inbound:
    """Receiver state shared by the adapter (scheduler side) and its RecvWorker."""

    def __init__(self) -> None:
        # lock guards registered, rounds and ready. cond (over lock) is notified by
        # load_async and stop(); the RecvWorker waits on it.
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.registered: dict[str, tuple[object, int]] = {}  # rid -> (token, next id)
        self.rounds: deque[tuple[str, object]] = deque()
        self.ready: dict[str, list[Any]] = {}


class SaveWorker(threading.Thread):
    MAX_TRIES = 3

    def __init__(self, out: _Outbound, connector: Any, stage_id: int, build: Any,
                 halt: threading.Event) -> None:  # fmt: skip
        super().__init__(name=f"save-worker-{stage_id}", daemon=True)
        self.out, self.connector, self.stage_id = out, connector, stage_id
        self.build, self.halt = build, halt
        self.drops = 0

    def run(self) -> None:
        while not self.halt.is_set():
            with self.out.cond:
                while not self.out.items and not self.halt.is_set():
                    self.out.cond.wait(0.1)
                if self.halt.is_set():
                    break
                rid, snapshot, final = self.out.items.popleft()
                cancelled = rid in self.out.cancelled
            try:
                self.handle(rid, snapshot, final, cancelled)
            except Exception:
                log.exception("SaveWorker: unexpected error")

    def handle(self, rid: str, snapshot: Any, final: bool, cancelled: bool) -> None:
        if cancelled:
            if not final:
                self.drops += 1
                return
            payload = None
        else:
            try:
                payload = self.build(rid, snapshot, final) if self.build else snapshot
            except Exception:
                log.info("build_payload raised (%s)", rid, exc_info=True)
                if not final:
                    self.drops += 1
                    return
                payload = None
            if payload is None and not final:
                return
        self.deliver(rid, {"data": payload, "finished": final}, final)

    def pause_until(self, deadline: float) -> None:
        """Back off until *deadline* (monotonic), or until stop."""
        while not self.halt.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.halt.wait(left)

    def deliver(self, rid: str, value: dict[str, Any], final: bool) -> None:
        failures = 0
        while not self.halt.is_set():
            with self.out.lock:
                chunk_id = self.out.next_id.get(rid, 0)
            try:
                self.connector.put(f"{rid}_{self.stage_id}_{chunk_id}", value)
            except Exception:
                failures += 1
                if not final and failures >= self.MAX_TRIES:
                    self.drops += 1
                    log.info("put %s_%s_%s: dropped after %d tries", rid, self.stage_id,
                             chunk_id, failures)  # fmt: skip
                    return
                self.pause_until(time.monotonic() + min(0.05, 0.001 * 2 ** min(failures - 1, 16)))
                continue
            with self.out.lock:
                if final:
                    self.out.next_id.pop(rid, None)
                    self.out.cancelled.discard(rid)
                else:
                    self.out.next_id[rid] = chunk_id + 1
            return


class RecvWorker(threading.Thread):
    def __init__(self, inb: _Inbound, connector: Any, src_stage_id: int,
                 halt: threading.Event) -> None:  # fmt: skip
        super().__init__(name=f"recv-worker-{src_stage_id}", daemon=True)
        self.inb, self.connector, self.src_stage_id, self.halt = inb, connector, src_stage_id, halt
        self.get_errors = 0

    def run(self) -> None:
        while not self.halt.is_set():
            with self.inb.cond:
                while not self.inb.rounds and not self.halt.is_set():
                    self.inb.cond.wait(0.1)
                entries = list(self.inb.rounds)
                self.inb.rounds.clear()
            if not entries:
                continue
            if not self.one_round(entries):
                time.sleep(0.001)

    def one_round(self, entries: list[tuple[str, object]]) -> bool:
        progress = False
        for rid, token in entries:
            if self.halt.is_set():
                return True
            with self.inb.lock:
                current = self.inb.registered.get(rid)
                if current is None or current[0] is not token:
                    continue
                chunk_id = current[1]
            try:
                value = self.connector.get(f"{rid}_{self.src_stage_id}_{chunk_id}")
            except Exception:
                self.get_errors += 1
                value = None
            with self.inb.lock:
                current = self.inb.registered.get(rid)
                if current is None or current[0] is not token:
                    continue
                if value is None:
                    self.inb.rounds.append((rid, token))
                    continue
                self.inb.ready.setdefault(rid, []).append(value)
                self.inb.registered[rid] = (token, chunk_id + 1)
                progress = True
                if not (isinstance(value, dict) and value.get("finished")):
                    self.inb.rounds.append((rid, token))
        return progress


class ThreadedChunkAdapter:
    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Any = None,
        join_timeout: float = 1.0,
    ) -> None:
        self.join_timeout = join_timeout
        self._halt = threading.Event()
        self._out = _Outbound()
        self._in = _Inbound()
        src = stage_id - 1 if src_stage_id is None else src_stage_id
        self._saver = SaveWorker(self._out, connector, stage_id, build_payload, self._halt)
        self._receiver = RecvWorker(self._in, connector, src, self._halt)
        self._saver.start()
        self._receiver.start()

    def _check_running(self) -> None:
        if self._halt.is_set():
            raise RuntimeError("stopped")

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        _ensure_str(request_id)
        if not isinstance(is_final, bool):
            raise TypeError("is_final must be bool")
        self._check_running()
        snapshot = copy.deepcopy(obj)
        with self._out.cond:
            self._check_running()
            self._out.items.append((request_id, snapshot, is_final))
            self._out.cond.notify()

    def cancel_sender(self, request_id: str) -> None:
        _ensure_str(request_id)
        with self._out.lock:
            self._check_running()
            self._out.cancelled.add(request_id)

    def load_async(self, request_id: str) -> None:
        _ensure_str(request_id)
        with self._in.cond:
            self._check_running()
            if request_id in self._in.registered:
                return
            token = object()
            self._in.registered[request_id] = (token, 0)
            self._in.rounds.append((request_id, token))
            self._in.cond.notify()

    def poll_ready(self) -> dict[str, list[Any]]:
        with self._in.lock:
            ready, self._in.ready = self._in.ready, {}
        return ready

    def cleanup_receiver(self, request_id: str) -> None:
        _ensure_str(request_id)
        with self._in.lock:
            self._in.registered.pop(request_id, None)
            self._in.ready.pop(request_id, None)

    def stop(self) -> None:
        deadline = time.monotonic() + self.join_timeout
        self._halt.set()
        with self._out.cond:
            self._out.cond.notify_all()
        with self._in.cond:
            self._in.cond.notify_all()
        for worker in (self._saver, self._receiver):
            if worker is threading.current_thread():
                continue
            worker.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> ThreadedChunkAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Any = None,
    join_timeout: float = 1.0,
    **_: Any,
) -> ThreadedChunkAdapter:
    return ThreadedChunkAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        join_timeout=join_timeout,
    )
