"""A ChunkAdapter written from scratch with its state as dicts of dataclasses.

Each request being sent is an ``Outgoing`` record, each registration an ``Incoming``
one; the connector's health is a ``Link`` record (consecutive failed puts), which the
SAVE thread uses both for the backoff pause and to decide when to give a chunk up.

BUG (R10): ``Link.failures`` is reset only by a successful put. A non-final chunk
given up after ``put_tries`` failed puts leaves it at ``put_tries``, so when an outage
outlasts one chunk's tries the NEXT chunk is given up after a single failed put
instead of being tried ``put_tries`` times. A short fault (fewer failures in a row
than ``put_tries``) never shows it.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RecordsAdapter", "make"]

LOG = logging.getLogger(__name__)


@dataclass
class Outgoing:
    next_id: int = 0
    cancelled: bool = False


@dataclass(eq=False)
class Incoming:
    next_id: int = 0
    finished: bool = False
    token: object = field(default_factory=object)


@dataclass
class Link:
    failures: int = 0  # consecutive failed puts, whatever the chunk


@dataclass
class Options:
    put_tries: int = 3
    put_backoff: float = 0.005
    idle_backoff: float = 0.001
    join_timeout: float = 1.0


class RecordsAdapter:
    def __init__(
        self, connector: Any, stage_id: int, src_stage_id: int | None, build: Any, options: Options
    ) -> None:
        self.connector, self.stage_id, self.options = connector, stage_id, options
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self.build = build or (lambda rid, snapshot, final: snapshot)
        self.join_timeout = options.join_timeout
        self._halt = threading.Event()
        # _out_lock guards _queue, _out and _link; _out_cond (over it) wakes the SAVE thread.
        self._out_lock = threading.Lock()
        self._out_cond = threading.Condition(self._out_lock)
        self._queue: deque[tuple[str, Any, bool]] = deque()
        self._out: dict[str, Outgoing] = {}
        self._link = Link()
        # _in_lock guards _in, _rota and _ready; _in_cond (over it) wakes the RECV thread.
        self._in_lock = threading.Lock()
        self._in_cond = threading.Condition(self._in_lock)
        self._in: dict[str, Incoming] = {}
        self._rota: deque[tuple[str, Incoming]] = deque()
        self._ready: dict[str, list[dict[str, Any]]] = {}
        self._threads = [
            threading.Thread(target=self._save, name="rec-save", daemon=True),
            threading.Thread(target=self._recv, name="rec-recv", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _check(self, call: str, request_id: object) -> None:
        if not isinstance(request_id, str):
            raise TypeError(f"{call}: request_id must be a str, got {request_id!r}")
        if self._halt.is_set():
            raise RuntimeError(f"{call}: the adapter is stopped")

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        if not isinstance(is_final, bool):
            raise TypeError(f"save_async: is_final must be a bool, got {is_final!r}")
        self._check("save_async", request_id)
        snapshot = copy.deepcopy(obj)
        with self._out_cond:
            self._queue.append((request_id, snapshot, is_final))
            self._out_cond.notify()

    def cancel_sender(self, request_id: str) -> None:
        self._check("cancel_sender", request_id)
        with self._out_lock:
            self._out.setdefault(request_id, Outgoing()).cancelled = True

    def _save(self) -> None:
        while True:
            with self._out_cond:
                while not self._queue and not self._halt.is_set():
                    self._out_cond.wait(0.1)
                if self._halt.is_set():
                    return
                request_id, snapshot, final = self._queue.popleft()
                record = self._out.get(request_id)
                cancelled = record is not None and record.cancelled
            try:
                payload = None if cancelled else self.build(request_id, snapshot, final)
            except Exception:
                LOG.warning("build of %r failed", request_id, exc_info=True)
                if not final:
                    continue
                payload = None
            if (cancelled or payload is None) and not final:
                continue
            try:
                self._put(request_id, {"data": payload, "finished": final}, final)
            except Exception:
                LOG.exception("SAVE thread: unexpected error")

    def _put(self, request_id: str, value: dict[str, Any], final: bool) -> None:
        while not self._halt.is_set():
            with self._out_lock:
                chunk_id = self._out.get(request_id, Outgoing()).next_id
            key = f"{request_id}_{self.stage_id}_{chunk_id}"
            try:
                self.connector.put(key, value)
            except Exception as exc:
                with self._out_lock:
                    self._link.failures += 1
                    failures = self._link.failures
                if not final and failures >= self.options.put_tries:
                    LOG.warning("giving %s up: %r", key, exc)
                    return  # BUG: the count carries over to the next chunk
                pause = self.options.put_backoff * 2 ** min(failures - 1, 16)
                self._halt.wait(min(pause, 0.1))
                continue
            with self._out_lock:
                self._link.failures = 0
                if final:
                    self._out.pop(request_id, None)
                else:
                    self._out.setdefault(request_id, Outgoing()).next_id = chunk_id + 1
            return

    def load_async(self, request_id: str) -> None:
        self._check("load_async", request_id)
        with self._in_cond:
            if request_id not in self._in:
                record = self._in[request_id] = Incoming()
                self._rota.append((request_id, record))
                self._in_cond.notify()

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        with self._in_lock:
            ready, self._ready = self._ready, {}
        return ready

    def cleanup_receiver(self, request_id: str) -> None:
        if not isinstance(request_id, str):
            raise TypeError(f"cleanup_receiver: request_id must be a str, got {request_id!r}")
        with self._in_lock:
            self._in.pop(request_id, None)
            self._ready.pop(request_id, None)

    def _recv(self) -> None:
        while True:
            with self._in_cond:
                while not self._rota and not self._halt.is_set():
                    self._in_cond.wait(0.1)
                if self._halt.is_set():
                    return
                turn = [self._rota.popleft() for _ in range(len(self._rota))]
            progress = False
            for request_id, record in turn:
                progress = self._fetch(request_id, record) or progress
            if not progress and self._halt.wait(self.options.idle_backoff):
                return

    def _fetch(self, request_id: str, record: Incoming) -> bool:
        with self._in_lock:
            if self._in.get(request_id) is not record:
                return False
            key = f"{request_id}_{self.src_stage_id}_{record.next_id}"
        try:
            value = self.connector.get(key)
        except Exception as exc:
            LOG.info("get %s failed: %r", key, exc)
            value = None
        with self._in_lock:
            if self._in.get(request_id) is not record:
                return False
            if not isinstance(value, dict):
                self._rota.append((request_id, record))
                return False
            self._ready.setdefault(request_id, []).append(value)
            record.next_id += 1
            record.finished = bool(value.get("finished"))
            if not record.finished:
                self._rota.append((request_id, record))
            return True

    def stop(self) -> None:
        self._halt.set()
        for cond in (self._out_cond, self._in_cond):
            with cond:
                cond.notify_all()
        deadline = time.monotonic() + self.join_timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Any = None,
    **options: Any,
) -> RecordsAdapter:
    """The records adapter; takes put_tries, put_backoff, idle_backoff, join_timeout."""
    names = Options.__dataclass_fields__
    known = Options(**{k: v for k, v in options.items() if k in names})
    return RecordsAdapter(connector, stage_id, src_stage_id, build_payload, known)
