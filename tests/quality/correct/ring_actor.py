"""A correct ChunkAdapter: a ring-buffer SAVE FIFO, and an actor-style RECV thread fed by commands.

Design (keeps R1-R24 of the contract):

- Sender. The FIFO is a growable ring buffer (a list of slots with a head index and a
  count) under ``_tx_lock``; it doubles when full and halves when a quarter full, and
  a slot is cleared as soon as its item is taken (no snapshot outlives its send).
  The SAVE thread waits on a ``Condition`` over ``_tx_lock``. It reads the cancel
  mark in the critical section that takes the item, builds outside every lock, and
  puts with the id read under the lock; the id is advanced (or, after a final, the
  counter and the cancel mark forgotten) right after the put succeeded. A failed put
  is retried in place with a doubling pause.
- Receiver. The scheduler side owns the registration table (request id -> token
  ``object()``) and the ready chunks, under ``_rx_lock``. ``load_async`` registers and
  sends the RECV thread an ``("add", request_id, token)`` command through a
  ``queue.Queue``; ``cleanup_receiver`` only forgets, under the lock. The RECV thread
  owns its cursors (request id, token, next id) privately: each round it takes the
  commands waiting, then visits every cursor once. A cursor whose token is no
  longer the registered one is dropped on its visit; a commit re-checks the token
  under ``_rx_lock``. It sleeps in ``inbox.get(timeout=...)`` (``wait_timeout`` with
  no cursors, ``idle_backoff`` after a round without progress), so a new
  registration or ``stop()`` wakes it at once.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

# What a build, put or get may raise without killing a thread (R22): an asyncio
# CancelledError from the callee is that call's failure too.
_CALL_ERRORS = (Exception, asyncio.CancelledError)

_STOP = ("stop", "", None)


class _Ring:
    """A FIFO in a growable ring buffer (not thread-safe: guarded by the adapter's lock)."""

    def __init__(self, capacity: int = 16) -> None:
        self.slots: list[Any] = [None] * capacity
        self.head = 0
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def push(self, item: Any) -> None:
        if self.size == len(self.slots):
            self._resize(len(self.slots) * 2)
        self.slots[(self.head + self.size) % len(self.slots)] = item
        self.size += 1

    def pop(self) -> Any:
        item = self.slots[self.head]
        self.slots[self.head] = None
        self.head = (self.head + 1) % len(self.slots)
        self.size -= 1
        if len(self.slots) > 16 and self.size < len(self.slots) // 4:
            self._resize(len(self.slots) // 2)
        return item

    def _resize(self, capacity: int) -> None:
        n = len(self.slots)
        items = [self.slots[(self.head + i) % n] for i in range(self.size)]
        self.slots = items + [None] * (capacity - self.size)
        self.head = 0


class _Cursor:
    __slots__ = ("next", "rid", "token")

    def __init__(self, rid: str, token: object) -> None:
        self.rid = rid
        self.token = token
        self.next = 0


class RingActorAdapter:
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
        if isinstance(put_tries, bool) or not isinstance(put_tries, int) or put_tries < 1:
            raise ValueError(f"put_tries must be an int >= 1, got {put_tries!r:.40}")
        for name, value in (("put_backoff", put_backoff), ("put_backoff_max", put_backoff_max),
                            ("wait_timeout", wait_timeout), ("idle_backoff", idle_backoff),
                            ("join_timeout", join_timeout)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a number of seconds")
            if not (0 <= float(value) < 3600):
                raise ValueError(f"{name} must be a finite number of seconds in [0, 3600)")
        self.connector = connector
        self.stage_id = stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self.build_payload = build_payload
        self.snapshot = snapshot or copy.deepcopy
        self.put_tries = put_tries
        self.put_backoff = float(put_backoff)
        self.put_backoff_max = float(put_backoff_max)
        self.wait_timeout = max(0.001, float(wait_timeout))
        self.idle_backoff = float(idle_backoff)
        self.join_timeout = float(join_timeout)
        self._halt = threading.Event()
        self._counts_lock = threading.Lock()
        self._counts: dict[str, int] = {}

        self._tx_lock = threading.Lock()
        self._tx_cond = threading.Condition(self._tx_lock)
        self._ring = _Ring()
        self._next_ids: dict[str, int] = {}
        self._cancels: set[str] = set()

        self._rx_lock = threading.Lock()
        self._regs: dict[str, object] = {}
        self._ready: dict[str, list[Any]] = {}
        self._inbox: queue.Queue[tuple[str, str, object]] = queue.Queue()

        self._save_thread = threading.Thread(target=self._save_main, name=f"ring-save-{stage_id}",
                                             daemon=True)  # fmt: skip
        self._recv_thread = threading.Thread(target=self._recv_main, name=f"ring-recv-{stage_id}",
                                             daemon=True)  # fmt: skip
        self._save_thread.start()
        self._recv_thread.start()

    # ------------------------------------------------------------------ helpers

    def _count(self, name: str) -> None:
        with self._counts_lock:
            self._counts[name] = self._counts.get(name, 0) + 1

    def stats(self) -> dict[str, int]:
        with self._counts_lock:
            out = dict(self._counts)
        with self._tx_lock:
            out["open_streams"] = len(self._next_ids)
            out["cancel_marks"] = len(self._cancels)
            out["save_queue_depth"] = len(self._ring)
        with self._rx_lock:
            out["registered"] = len(self._regs)
            out["ready_chunks"] = sum(len(v) for v in self._ready.values())
        return out

    @staticmethod
    def _check_rid(request_id: Any) -> None:
        if not isinstance(request_id, str):
            raise TypeError(f"request_id must be a str, got {type(request_id).__name__}")

    def _check_running(self, call: str) -> None:
        if self._halt.is_set():
            raise RuntimeError(f"{call}() after stop()")

    # ------------------------------------------------------------------ sender

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._check_rid(request_id)
        if not isinstance(is_final, bool):
            raise TypeError(f"is_final must be a bool, got {type(is_final).__name__}")
        self._check_running("save_async")
        snap = self.snapshot(obj)
        with self._tx_cond:
            self._check_running("save_async")
            self._ring.push((request_id, snap, is_final))
            self._tx_cond.notify()

    def cancel_sender(self, request_id: str) -> None:
        self._check_rid(request_id)
        with self._tx_lock:
            self._check_running("cancel_sender")
            self._cancels.add(request_id)

    def _save_main(self) -> None:
        while True:
            with self._tx_cond:
                while not len(self._ring) and not self._halt.is_set():
                    self._tx_cond.wait(self.wait_timeout)
                if self._halt.is_set():
                    return
                rid, snap, final = self._ring.pop()
                cancelled = rid in self._cancels
            try:
                self._send_one(rid, snap, final, cancelled)
            except _CALL_ERRORS:  # defensive
                log.exception("SAVE: a chunk of %r was lost", rid)
            del snap

    def _send_one(self, rid: str, snap: Any, final: bool, cancelled: bool) -> None:
        if cancelled:
            if not final:
                self._count("dropped_cancelled")
                return
            payload = None
        else:
            try:
                payload = (
                    snap if self.build_payload is None else self.build_payload(rid, snap, final)
                )
            except _CALL_ERRORS:
                self._count("build_failed")
                log.warning("build_payload(%r) raised", rid, exc_info=True)
                if not final:
                    return
                payload = None
            if payload is None and not final:
                self._count("skipped")
                return
        wire = {"data": payload, "finished": final}
        tries = 0
        while True:
            with self._tx_lock:
                chunk_id = self._next_ids.get(rid, 0)
            if self._halt.is_set():
                return
            key = f"{rid}_{self.stage_id}_{chunk_id}"
            try:
                self.connector.put(key, wire)
            except _CALL_ERRORS:
                tries += 1
                self._count("put_failed")
                if not final and tries >= self.put_tries:
                    self._count("dropped_put")
                    log.warning("dropping %s after %d failed puts", key, tries)
                    return
                pause = min(self.put_backoff * 2 ** min(tries - 1, 20), self.put_backoff_max)
                if self._halt.wait(pause):
                    return
                continue
            self._count("put")
            with self._tx_lock:
                if final:
                    self._next_ids.pop(rid, None)
                    self._cancels.discard(rid)
                else:
                    self._next_ids[rid] = chunk_id + 1
            return

    # ------------------------------------------------------------------ receiver

    def load_async(self, request_id: str) -> None:
        self._check_rid(request_id)
        with self._rx_lock:
            self._check_running("load_async")
            if request_id in self._regs:
                return
            token = object()
            self._regs[request_id] = token
        self._inbox.put(("add", request_id, token))

    def poll_ready(self) -> dict[str, list[Any]]:
        with self._rx_lock:
            out, self._ready = self._ready, {}
        return out

    def cleanup_receiver(self, request_id: str) -> None:
        self._check_rid(request_id)
        with self._rx_lock:
            self._regs.pop(request_id, None)
            self._ready.pop(request_id, None)

    def _recv_main(self) -> None:
        cursors: list[_Cursor] = []
        timeout = self.wait_timeout
        while True:
            try:
                command = self._inbox.get(timeout=timeout)
            except queue.Empty:
                command = None
            while command is not None:
                if command[0] == "stop" or self._halt.is_set():
                    return
                cursors.append(_Cursor(command[1], command[2]))
                try:
                    command = self._inbox.get_nowait()
                except queue.Empty:
                    command = None
            if self._halt.is_set():
                return
            progress = False
            keep: list[_Cursor] = []
            for cursor in cursors:
                if self._halt.is_set():
                    return
                state = self._visit(cursor)
                if state != "drop":
                    keep.append(cursor)
                if state == "progress":
                    progress = True
            cursors = keep
            timeout = self.wait_timeout if not cursors else (0.0 if progress else self.idle_backoff)

    def _visit(self, cursor: _Cursor) -> str:
        """One poll of one cursor: "drop" (stale or done), "progress" or "idle"."""
        with self._rx_lock:
            if self._regs.get(cursor.rid) is not cursor.token:
                return "drop"
        key = f"{cursor.rid}_{self.src_stage_id}_{cursor.next}"
        try:
            value = self.connector.get(key)
        except _CALL_ERRORS:
            self._count("get_failed")
            log.debug("get(%s) raised", key, exc_info=True)
            return "idle"
        if value is None:
            return "idle"
        with self._rx_lock:
            if self._regs.get(cursor.rid) is not cursor.token:
                return "drop"  # cleaned up while the get was in flight: discarded
            self._ready.setdefault(cursor.rid, []).append(value)
        cursor.next += 1
        self._count("committed")
        if isinstance(value, dict) and value.get("finished") is True:
            return "drop"  # done: never polled again (the registration stays until cleanup)
        return "progress"

    # ------------------------------------------------------------------ lifecycle

    def stop(self) -> None:
        first = not self._halt.is_set()
        self._halt.set()
        with self._tx_cond:
            self._tx_cond.notify_all()
        self._inbox.put(_STOP)
        deadline = time.monotonic() + (self.join_timeout if first else 0.0)
        me = threading.current_thread()
        for thread in (self._save_thread, self._recv_thread):
            if thread is not me:
                thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> RingActorAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


OPTIONS = ("put_tries", "put_backoff", "put_backoff_max", "wait_timeout", "idle_backoff",
           "join_timeout", "snapshot")  # fmt: skip


def make(connector: Any, *, stage_id: int, src_stage_id: int | None = None,
         build_payload: Callable[[str, Any, bool], Any] | None = None,
         **options: Any) -> RingActorAdapter:  # fmt: skip
    return RingActorAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **{k: v for k, v in options.items() if k in OPTIONS and v is not None},
    )
