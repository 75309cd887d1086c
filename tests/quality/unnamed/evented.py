"""A ChunkAdapter written from scratch whose loops are generators, receiving by events.

The SAVE thread is ``for item in self._items(): ...`` and the RECV thread is
``for due in self._rounds(): ...``: each generator owns its waiting. With a connector
that offers ``subscribe``, a registration is "rung" by a put notification for its
request and fetched only when rung (and every ``repoll_interval``, 0.5 s, in case a
notification was lost); without one, every open registration is fetched every round.

BUG (R17): a notification is routed to its registration by ``key.split("_")[0]``, as
if a request id could not contain ``_``. A request id like ``"job_7"`` is never rung:
on a notifying connector each of its chunks waits for the next re-poll (0.5 s; with a
long ``repoll_interval`` the stream stalls). Ids without ``_``, and any id on a polled
connector, are received at once.
"""

from __future__ import annotations

import copy
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EventedAdapter", "make"]

LOG = logging.getLogger(__name__)


@dataclass(eq=False)
class _Registration:
    next_id: int = 0
    done: bool = False
    rung: int = 1  # notifications not yet answered by a get (the first: catch up at load)
    token: object = field(default_factory=object)


class EventedAdapter:
    def __init__(
        self, connector: Any, stage_id: int, src_stage_id: int | None, build: Any, **options: Any
    ) -> None:
        self.connector, self.stage_id = connector, stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self.build = build or (lambda rid, snapshot, final: snapshot)
        self.put_tries = int(options.get("put_tries", 3))
        self.put_backoff = float(options.get("put_backoff", 0.005))
        self.idle_backoff = float(options.get("idle_backoff", 0.001))
        self.repoll_interval = float(options.get("repoll_interval", 0.5))
        self.join_timeout = float(options.get("join_timeout", 1.0))
        self._stop = threading.Event()
        # _out_lock guards _fifo, _next_out and _marks; _out_cond (over it) wakes SAVE.
        self._out_lock = threading.Lock()
        self._out_cond = threading.Condition(self._out_lock)
        self._fifo: deque[tuple[str, Any, bool]] = deque()
        self._next_out: dict[str, int] = {}
        self._marks: set[str] = set()
        # _in_lock guards _regs, _ready and each registration's fields; _in_cond (over
        # it) wakes RECV: load_async, a put notification, stop().
        self._in_lock = threading.Lock()
        self._in_cond = threading.Condition(self._in_lock)
        self._regs: dict[str, _Registration] = {}
        self._ready: dict[str, list[dict[str, Any]]] = {}
        subscribe = getattr(connector, "subscribe", None)
        self._unsubscribe = subscribe(self._on_put) if callable(subscribe) else None
        self._evented = self._unsubscribe is not None
        self._threads = [
            threading.Thread(target=self._save_thread, name="ev-save", daemon=True),
            threading.Thread(target=self._recv_thread, name="ev-recv", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _check(self, call: str, request_id: object) -> None:
        if not isinstance(request_id, str):
            raise TypeError(f"{call}: request_id must be a str, got {request_id!r}")
        if self._stop.is_set():
            raise RuntimeError(f"{call}: the adapter is stopped")

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        if not isinstance(is_final, bool):
            raise TypeError(f"save_async: is_final must be a bool, got {is_final!r}")
        self._check("save_async", request_id)
        snapshot = copy.deepcopy(obj)
        with self._out_cond:
            self._fifo.append((request_id, snapshot, is_final))
            self._out_cond.notify()

    def cancel_sender(self, request_id: str) -> None:
        self._check("cancel_sender", request_id)
        with self._out_lock:
            self._marks.add(request_id)

    def _items(self) -> Iterator[tuple[str, Any, bool, bool]]:
        """The FIFO, as (request id, snapshot, final, cancelled), until stop()."""
        while True:
            with self._out_cond:
                while not self._fifo and not self._stop.is_set():
                    self._out_cond.wait(0.1)
                if self._stop.is_set():
                    return
                request_id, snapshot, final = self._fifo.popleft()
                cancelled = request_id in self._marks
            yield request_id, snapshot, final, cancelled

    def _save_thread(self) -> None:
        for request_id, snapshot, final, cancelled in self._items():
            try:
                payload = None if cancelled else self.build(request_id, snapshot, final)
            except Exception:
                LOG.warning("build of %r failed", request_id, exc_info=True)
                payload = None
                if not final:
                    continue
            if payload is not None or final:
                self._put(request_id, {"data": payload, "finished": final}, final)

    def _put(self, request_id: str, value: dict[str, Any], final: bool) -> None:
        for tries in itertools.count(1):
            with self._out_lock:
                chunk_id = self._next_out.get(request_id, 0)
            if self._stop.is_set():
                return
            try:
                self.connector.put(f"{request_id}_{self.stage_id}_{chunk_id}", value)
            except Exception as exc:
                LOG.info("put failed (try %d): %r", tries, exc)
                if (not final and tries >= self.put_tries) or self._stop.wait(
                    min(0.1, self.put_backoff * 2 ** min(tries, 16))
                ):
                    return
                continue
            with self._out_lock:
                if final:
                    self._next_out.pop(request_id, None)
                    self._marks.discard(request_id)
                else:
                    self._next_out[request_id] = chunk_id + 1
            return

    def load_async(self, request_id: str) -> None:
        self._check("load_async", request_id)
        with self._in_cond:
            if request_id not in self._regs:
                self._regs[request_id] = _Registration()
                self._in_cond.notify()

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        with self._in_lock:
            ready, self._ready = self._ready, {}
        return ready

    def cleanup_receiver(self, request_id: str) -> None:
        if not isinstance(request_id, str):
            raise TypeError(f"cleanup_receiver: request_id must be a str, got {request_id!r}")
        with self._in_lock:
            self._regs.pop(request_id, None)
            self._ready.pop(request_id, None)

    def _on_put(self, key: str) -> None:
        """A put notification (on the putting thread): ring the key's registration."""
        request_id = key.split("_")[0]  # BUG: a request id may contain "_" itself
        with self._in_cond:
            registration = self._regs.get(request_id)
            if registration is not None and not registration.done:
                registration.rung += 1
                self._in_cond.notify()

    def _rounds(self) -> Iterator[list[tuple[str, _Registration]]]:
        """Each round's registrations to fetch from, waiting while there are none."""
        repoll_at = time.monotonic() + self.repoll_interval
        while not self._stop.is_set():
            with self._in_cond:
                now = time.monotonic()
                if now >= repoll_at:
                    repoll_at = now + self.repoll_interval
                    for registration in self._regs.values():
                        registration.rung += 1
                due = [
                    (rid, reg)
                    for rid, reg in self._regs.items()
                    if not reg.done and (reg.rung or not self._evented)
                ]
                if not due:
                    self._in_cond.wait(min(0.1, repoll_at - now))
                    continue
            yield due

    def _recv_thread(self) -> None:
        for due in self._rounds():
            progress = False
            for request_id, registration in due:
                progress = self._fetch(request_id, registration) or progress
            if not progress and self._stop.wait(self.idle_backoff):
                return

    def _fetch(self, request_id: str, reg: _Registration) -> bool:
        with self._in_lock:
            if self._regs.get(request_id) is not reg or reg.done:
                return False
            chunk_id, rung = reg.next_id, reg.rung
        try:
            value = self.connector.get(f"{request_id}_{self.src_stage_id}_{chunk_id}")
        except Exception as exc:
            LOG.info("get failed: %r", exc)
            return False  # still rung: tried again after the idle pause
        with self._in_lock:
            if self._regs.get(request_id) is not reg or not isinstance(value, dict):
                if value is None and reg.rung == rung:
                    reg.rung = 0  # nothing there yet: wait for its put's notification
                return False
            self._ready.setdefault(request_id, []).append(value)
            reg.next_id = chunk_id + 1
            reg.done = bool(value.get("finished"))
            return True

    def stop(self) -> None:
        self._stop.set()
        for cond in (self._out_cond, self._in_cond):
            with cond:
                cond.notify_all()
        deadline = time.monotonic() + self.join_timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        unsubscribe, self._unsubscribe = self._unsubscribe, None
        if unsubscribe is not None:
            unsubscribe()


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Any = None,
    **options: Any,
) -> EventedAdapter:
    """The evented adapter; takes put_tries, put_backoff, idle_backoff, repoll_interval,
    join_timeout and ignores the rest."""
    return EventedAdapter(connector, stage_id, src_stage_id, build_payload, **options)
