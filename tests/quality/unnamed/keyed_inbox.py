"""A ChunkAdapter written from scratch as two ``threading.Thread`` subclasses around one
shared state object with one lock.

The RECV worker commits each chunk into an inbox keyed by its connector key (so a key
is never committed twice); ``poll_ready`` swaps the inbox out and groups it per
request.

BUG (R15): ``poll_ready`` groups the inbox by iterating ``sorted(inbox)``, meant to
bring each request's keys together in order. Keys sort as strings: ``r_0_10`` comes
before ``r_0_2``. A call that hands out chunks on both sides of a power of ten
(ids 8 and 10, or 99 and 100) hands them out out of id order; streams of up to ten
chunks, or a scheduler that polls after every chunk, never show it.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import deque
from typing import Any

__all__ = ["KeyedInboxAdapter", "make"]

LOG = logging.getLogger(__name__)


class Shared:
    """Everything the scheduler and both workers share."""

    def __init__(self, stage_id: int, src_stage_id: int, options: dict[str, Any]) -> None:
        self.stage_id, self.src_stage_id = stage_id, src_stage_id
        self.put_tries = int(options.get("put_tries", 3))
        self.put_backoff = float(options.get("put_backoff", 0.005))
        self.idle_backoff = float(options.get("idle_backoff", 0.001))
        self.stopped = threading.Event()
        # lock guards every container below. work (over it): SaveWorker waits for items;
        # wanted (over it): RecvWorker waits for registrations. stop() notifies both.
        self.lock = threading.Lock()
        self.work = threading.Condition(self.lock)
        self.wanted = threading.Condition(self.lock)
        self.items: deque[tuple[str, Any, bool]] = deque()
        self.next_out: dict[str, int] = {}
        self.cancelled: set[str] = set()
        self.tokens: dict[str, object] = {}
        self.next_in: dict[str, int] = {}
        self.turns: deque[tuple[str, object]] = deque()
        self.inbox: dict[str, tuple[str, dict[str, Any]]] = {}  # key -> (request id, value)


class SaveWorker(threading.Thread):
    def __init__(self, shared: Shared, connector: Any, build: Any) -> None:
        super().__init__(name="ki-save", daemon=True)
        self.s, self.connector, self.build = shared, connector, build

    def run(self) -> None:
        s = self.s
        while True:
            with s.work:
                while not s.items and not s.stopped.is_set():
                    s.work.wait(0.1)
                if s.stopped.is_set():
                    return
                request_id, snapshot, final = s.items.popleft()
                cancelled = request_id in s.cancelled
            try:
                self.send(request_id, snapshot, final, cancelled)
            except Exception:
                LOG.exception("SAVE worker: unexpected error")

    def send(self, request_id: str, snapshot: Any, final: bool, cancelled: bool) -> None:
        if cancelled and not final:
            return
        payload = None
        if not cancelled:
            try:
                payload = self.build(request_id, snapshot, final)
            except Exception:
                LOG.warning("build of %r failed", request_id, exc_info=True)
                if not final:
                    return
            if payload is None and not final:
                return
        value = {"data": payload, "finished": final}
        tries = 0
        while not self.s.stopped.is_set():
            with self.s.lock:
                chunk_id = self.s.next_out.get(request_id, 0)
            try:
                self.connector.put(f"{request_id}_{self.s.stage_id}_{chunk_id}", value)
            except Exception as exc:
                tries += 1
                LOG.info("put failed (try %d): %r", tries, exc)
                pause = min(0.1, self.s.put_backoff * 2 ** min(tries - 1, 16))
                if (not final and tries >= self.s.put_tries) or self.s.stopped.wait(pause):
                    return
                continue
            with self.s.lock:
                if final:
                    self.s.next_out.pop(request_id, None)
                    self.s.cancelled.discard(request_id)
                else:
                    self.s.next_out[request_id] = chunk_id + 1
            return


class RecvWorker(threading.Thread):
    def __init__(self, shared: Shared, connector: Any) -> None:
        super().__init__(name="ki-recv", daemon=True)
        self.s, self.connector = shared, connector

    def run(self) -> None:
        s = self.s
        while True:
            with s.wanted:
                while not s.turns and not s.stopped.is_set():
                    s.wanted.wait(0.1)
                if s.stopped.is_set():
                    return
                turns = len(s.turns)
            progress = False
            for _ in range(turns):
                progress = self.one() or progress
            if not progress and s.stopped.wait(s.idle_backoff):
                return

    def one(self) -> bool:
        s = self.s
        with s.lock:
            request_id, token = s.turns.popleft()
            if s.tokens.get(request_id) is not token:
                return False
            key = f"{request_id}_{s.src_stage_id}_{s.next_in[request_id]}"
        try:
            value = self.connector.get(key)
        except Exception as exc:
            LOG.info("get %s failed: %r", key, exc)
            value = None
        with s.lock:
            if s.tokens.get(request_id) is not token:
                return False
            if not isinstance(value, dict):
                s.turns.append((request_id, token))
                return False
            s.inbox[key] = (request_id, value)
            s.next_in[request_id] += 1
            if not value.get("finished"):
                s.turns.append((request_id, token))
            return True


class KeyedInboxAdapter:
    def __init__(
        self, connector: Any, stage_id: int, src_stage_id: int | None, build: Any, options: Any
    ) -> None:
        source = stage_id - 1 if src_stage_id is None else src_stage_id
        self.s = Shared(stage_id, source, options)
        self.join_timeout = float(options.get("join_timeout", 1.0))
        self.workers = [
            SaveWorker(self.s, connector, build or (lambda rid, snapshot, final: snapshot)),
            RecvWorker(self.s, connector),
        ]
        for worker in self.workers:
            worker.start()

    def _check(self, call: str, request_id: object) -> None:
        if not isinstance(request_id, str):
            raise TypeError(f"{call}: request_id must be a str, got {request_id!r}")
        if self.s.stopped.is_set():
            raise RuntimeError(f"{call}: the adapter is stopped")

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        if not isinstance(is_final, bool):
            raise TypeError(f"save_async: is_final must be a bool, got {is_final!r}")
        self._check("save_async", request_id)
        snapshot = copy.deepcopy(obj)
        with self.s.work:
            self.s.items.append((request_id, snapshot, is_final))
            self.s.work.notify()

    def cancel_sender(self, request_id: str) -> None:
        self._check("cancel_sender", request_id)
        with self.s.lock:
            self.s.cancelled.add(request_id)

    def load_async(self, request_id: str) -> None:
        self._check("load_async", request_id)
        with self.s.wanted:
            if request_id not in self.s.tokens:
                token = self.s.tokens[request_id] = object()
                self.s.next_in[request_id] = 0
                self.s.turns.append((request_id, token))
                self.s.wanted.notify()

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        with self.s.lock:
            inbox, self.s.inbox = self.s.inbox, {}
        ready: dict[str, list[dict[str, Any]]] = {}
        for key in sorted(inbox):  # BUG: string order, not chunk-id order
            request_id, value = inbox[key]
            ready.setdefault(request_id, []).append(value)
        return ready

    def cleanup_receiver(self, request_id: str) -> None:
        if not isinstance(request_id, str):
            raise TypeError(f"cleanup_receiver: request_id must be a str, got {request_id!r}")
        with self.s.lock:
            self.s.tokens.pop(request_id, None)
            self.s.next_in.pop(request_id, None)
            self.s.inbox = {k: v for k, v in self.s.inbox.items() if v[0] != request_id}

    def stop(self) -> None:
        self.s.stopped.set()
        with self.s.lock:
            self.s.work.notify_all()
            self.s.wanted.notify_all()
        deadline = time.monotonic() + self.join_timeout
        for worker in self.workers:
            worker.join(max(0.0, deadline - time.monotonic()))


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Any = None,
    **options: Any,
) -> KeyedInboxAdapter:
    """The keyed-inbox adapter; takes put_tries, put_backoff, idle_backoff, join_timeout."""
    return KeyedInboxAdapter(connector, stage_id, src_stage_id, build_payload, options)
