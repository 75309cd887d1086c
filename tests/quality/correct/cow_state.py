"""A correct ChunkAdapter whose shared state is copy-on-write.

Design (keeps R1-R24 of the contract):

- Every piece of shared bookkeeping is an *immutable value* held in one attribute:
  the sender's next ids (a dict never mutated after it is published), its cancel
  marks (a ``frozenset``), the receiver's registrations (a dict of
  ``(token, next_id, done)`` tuples) and its ready chunks (a dict of tuples).
  Readers take the current reference without a lock (one attribute load); every
  writer builds a new value from the current one and publishes it *inside* the
  writer lock of its side (``_tx_lock`` / ``_rx_lock``), so read-copy-publish is
  one critical section and no update is lost.
- Sender: the FIFO is a ``deque``; the SAVE thread sleeps on a ``threading.Event``
  (``_work``) that ``save_async`` and ``stop()`` set. Stopping is a separate event
  (``_halt``): the put backoff waits on ``_halt`` only.
- Receiver: one RECV thread, a polling ``deque`` of ``(request_id, token)`` entries
  (one per registration), a ``Condition`` over ``_rx_lock`` for the idle wait.
  Tokens are ints from one adapter-wide counter, never reused. The token check
  before the get and the commit after it are both done under ``_rx_lock``.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

# What a build, put or get may raise without killing a thread (R22): an asyncio
# CancelledError from the callee is that call's failure too.
_CALL_ERRORS = (Exception, asyncio.CancelledError)

_EMPTY: frozenset[str] = frozenset()


class CowAdapter:
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
        self.rounds = 0  # RECV rounds run (diagnostics)

        # ---- sender (published values; replaced, never mutated)
        self._tx_lock = threading.Lock()
        self._fifo: deque[tuple[str, Any, bool]] = deque()
        self._work = threading.Event()
        self._next_ids: dict[str, int] = {}
        self._cancels: frozenset[str] = _EMPTY

        # ---- receiver (published values; replaced, never mutated)
        self._rx_lock = threading.Lock()
        self._rx_cond = threading.Condition(self._rx_lock)
        self._token_seq = itertools.count(1)
        self._regs: dict[str, tuple[int, int, bool]] = {}
        self._ready: dict[str, tuple[Any, ...]] = {}
        self._polling: deque[tuple[str, int]] = deque()

        self._save_thread = threading.Thread(target=self._save_main, name=f"cow-save-{stage_id}",
                                             daemon=True)  # fmt: skip
        self._recv_thread = threading.Thread(target=self._recv_main, name=f"cow-recv-{stage_id}",
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
        out["open_streams"] = len(self._next_ids)
        out["cancel_marks"] = len(self._cancels)
        out["save_queue_depth"] = len(self._fifo)
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

    def _take_snapshot(self, obj: Any) -> Any:
        return self.snapshot(obj)

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._check_rid(request_id)
        if not isinstance(is_final, bool):
            raise TypeError(f"is_final must be a bool, got {type(is_final).__name__}")
        self._check_running("save_async")
        snap = self._take_snapshot(obj)  # may raise: nothing queued
        with self._tx_lock:
            self._check_running("save_async")
            self._fifo.append((request_id, snap, is_final))
        self._work.set()

    def cancel_sender(self, request_id: str) -> None:
        self._check_rid(request_id)
        with self._tx_lock:
            self._check_running("cancel_sender")
            if request_id not in self._cancels:
                self._cancels = self._cancels | {request_id}

    def _save_main(self) -> None:
        while not self._halt.is_set():
            self._work.clear()
            try:
                item = self._fifo.popleft()
            except IndexError:
                self._work.wait(self.wait_timeout)  # re-checked by the loop
                continue
            try:
                self._send(*item)
            except _CALL_ERRORS:  # defensive: _send catches what the callees raise
                log.exception("SAVE: a chunk of %r was lost", item[0])

    def _send(self, rid: str, snap: Any, final: bool) -> None:
        if rid in self._cancels:  # one load of the published set
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
        self._deliver(rid, {"data": payload, "finished": final}, final)

    def _deliver(self, rid: str, wire: dict[str, Any], final: bool) -> None:
        tries = 0
        pause = self.put_backoff
        while True:
            if self._halt.is_set():
                return  # no put starts once stop() began
            chunk_id = self._next_ids.get(rid, 0)
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
                if self._halt.wait(pause):
                    return
                pause = min(max(pause * 2, 0.001), self.put_backoff_max)
                continue
            self._count("put")
            self._published(rid, chunk_id, final)
            return

    def _published(self, rid: str, chunk_id: int, final: bool) -> None:
        with self._tx_lock:
            ids = dict(self._next_ids)
            if final:
                ids.pop(rid, None)
                if rid in self._cancels:
                    self._cancels = self._cancels - {rid}
            else:
                ids[rid] = chunk_id + 1
            self._next_ids = ids

    # ------------------------------------------------------------------ receiver

    def _new_token(self, request_id: str) -> int:
        return next(self._token_seq)

    def load_async(self, request_id: str) -> None:
        self._check_rid(request_id)
        with self._rx_cond:
            self._check_running("load_async")
            if request_id in self._regs:
                return
            token = self._new_token(request_id)
            self._regs = {**self._regs, request_id: (token, 0, False)}
            self._polling.append((request_id, token))
            self._rx_cond.notify()

    def poll_ready(self) -> dict[str, list[Any]]:
        with self._rx_lock:
            out, self._ready = self._ready, {}
        return {rid: list(values) for rid, values in out.items()}

    def cleanup_receiver(self, request_id: str) -> None:
        self._check_rid(request_id)
        with self._rx_lock:
            if request_id in self._regs:
                regs = dict(self._regs)
                del regs[request_id]
                self._regs = regs
            if request_id in self._ready:
                ready = dict(self._ready)
                del ready[request_id]
                self._ready = ready

    def _recv_main(self) -> None:
        while True:
            with self._rx_cond:
                while not self._polling and not self._halt.is_set():
                    self._rx_cond.wait(self.wait_timeout)
                if self._halt.is_set():
                    return
                n = len(self._polling)
            progress = False
            for _ in range(n):
                if self._halt.is_set():
                    return
                if self._visit():
                    progress = True
            self.rounds += 1
            if not progress:
                self._halt.wait(self.idle_backoff)

    def _visit(self) -> bool:
        with self._rx_lock:
            if not self._polling:
                return False
            rid, token = self._polling.popleft()
            reg = self._regs.get(rid)
            if reg is None or reg[0] != token:
                return False  # a stale entry: its registration is gone
            chunk_id = reg[1]
        key = f"{rid}_{self.src_stage_id}_{chunk_id}"
        try:
            value = self.connector.get(key)
        except _CALL_ERRORS:
            self._count("get_failed")
            log.debug("get(%s) raised", key, exc_info=True)
            value = None
        with self._rx_lock:
            reg = self._regs.get(rid)
            if reg is None or reg[0] != token:
                return False  # cleaned up while the get was in flight: discarded
            if value is None:
                self._polling.append((rid, token))
                return False
            done = isinstance(value, dict) and value.get("finished") is True
            self._regs = {**self._regs, rid: (token, chunk_id + 1, done)}
            self._ready = {**self._ready, rid: (*self._ready.get(rid, ()), value)}
            if not done:
                self._polling.append((rid, token))
        self._count("committed")
        return True

    # ------------------------------------------------------------------ lifecycle

    def stop(self) -> None:
        first = not self._halt.is_set()
        self._halt.set()
        self._work.set()
        with self._rx_cond:
            self._rx_cond.notify_all()
        deadline = time.monotonic() + (self.join_timeout if first else 0.0)
        me = threading.current_thread()
        for thread in (self._save_thread, self._recv_thread):
            if thread is not me:
                thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> CowAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


OPTIONS = ("put_tries", "put_backoff", "put_backoff_max", "wait_timeout", "idle_backoff",
           "join_timeout", "snapshot")  # fmt: skip


def make_with(cls: type, connector: Any, stage_id: int, src_stage_id: Any, build_payload: Any,
              options: dict[str, Any]) -> Any:  # fmt: skip
    return cls(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **{k: v for k, v in options.items() if k in OPTIONS and v is not None},
    )


def make(connector: Any, *, stage_id: int, src_stage_id: int | None = None,
         build_payload: Callable[[str, Any, bool], Any] | None = None,
         **options: Any) -> CowAdapter:  # fmt: skip
    return make_with(CowAdapter, connector, stage_id, src_stage_id, build_payload, options)
