"""A correct ChunkAdapter with a batching SAVE thread and a scanning, pipe-woken RECV thread.

Design (keeps R1-R24 of the contract):

- Sender. ``save_async`` appends to a ``deque`` under ``_tx_lock`` and notifies the
  SAVE thread's ``Condition``. The SAVE thread takes *everything queued* in one
  critical section (a batch) and works through it in FIFO order, so a request's
  chunks keep their save order. Per item it re-checks ``stop()`` and reads the
  request's cancel mark under the lock at that moment (a cancel made while the batch
  is being worked on still drops the batch's later chunks of that request). The
  chunk id is read under the lock right before each put and advanced (or, after a
  final, forgotten with the cancel mark) right after a successful put. A failed put
  is retried in place with a capped doubling pause.
- Receiver. Registrations are ``_Reg`` objects (the object is the per-registration
  token) in ``_regs``. Each round the RECV thread takes the list of registrations
  not yet done and visits each once, in turn, so no request waits behind another.
  It sleeps in ``selectors.select`` on a non-blocking wake-up pipe:
  ``wait_timeout`` with nothing to poll, ``idle_backoff`` after a round without
  progress. ``load_async`` and ``stop()`` write one byte to the pipe. Each
  registration's last progress time is kept for a stall warning; it is forgotten
  with the registration. The pipe is closed by ``stop()`` once the RECV thread has
  ended (never while it may still use it).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import os
import selectors
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

# What a build, put or get may raise without killing a thread (R22): an asyncio
# CancelledError from the callee is that call's failure too.
_CALL_ERRORS = (Exception, asyncio.CancelledError)


class _Reg:
    """One registration; the object itself is the per-registration token."""

    __slots__ = ("done", "fails", "next", "rid", "warned")

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.next = 0
        self.done = False
        self.fails = 0  # consecutive failed gets (for paced logging)
        self.warned = False


class BatchScanAdapter:
    stall_warning = 30.0

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
        self.rounds = 0

        # ---- sender
        self._tx_lock = threading.Lock()
        self._tx_cond = threading.Condition(self._tx_lock)
        self._fifo: deque[tuple[str, Any, bool]] = deque()
        self._next_ids: dict[str, int] = {}
        self._cancels: set[str] = set()

        # ---- receiver
        self._rx_lock = threading.Lock()
        self._regs: dict[str, _Reg] = {}
        self._ready: dict[str, list[Any]] = {}
        self._quiet: dict[str, float] = {}  # rid -> time of the registration's last progress

        # ---- the RECV thread's wake-up pipe
        self._pipe_lock = threading.Lock()
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._r, selectors.EVENT_READ)
        self._pipe_open = True

        self._save_thread = threading.Thread(target=self._save_main, name=f"bs-save-{stage_id}",
                                             daemon=True)  # fmt: skip
        self._recv_thread = threading.Thread(target=self._recv_main, name=f"bs-recv-{stage_id}",
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
            out["save_queue_depth"] = len(self._fifo)
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

    def _ring(self) -> None:
        with self._pipe_lock:
            if self._pipe_open:
                with contextlib.suppress(BlockingIOError):  # full: the RECV thread is awake
                    os.write(self._w, b"!")

    def _nap(self, timeout: float) -> None:
        """Sleep until the pipe rings or *timeout* passes, then drain the pipe."""
        if self._sel.select(timeout):
            try:
                while os.read(self._r, 4096):
                    pass
            except BlockingIOError:
                pass

    def _close_pipe(self) -> None:
        with self._pipe_lock:
            if not self._pipe_open:
                return
            self._pipe_open = False
            self._sel.close()
            os.close(self._r)
            os.close(self._w)

    # ------------------------------------------------------------------ sender

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._check_rid(request_id)
        if not isinstance(is_final, bool):
            raise TypeError(f"is_final must be a bool, got {type(is_final).__name__}")
        self._check_running("save_async")
        snap = self.snapshot(obj)  # may raise: nothing queued
        with self._tx_cond:
            self._check_running("save_async")
            self._fifo.append((request_id, snap, is_final))
            self._tx_cond.notify()

    def cancel_sender(self, request_id: str) -> None:
        self._check_rid(request_id)
        with self._tx_lock:
            self._check_running("cancel_sender")
            self._cancels.add(request_id)

    def _save_main(self) -> None:
        while True:
            with self._tx_cond:
                while not self._fifo and not self._halt.is_set():
                    self._tx_cond.wait(self.wait_timeout)
                if self._halt.is_set():
                    return
                batch = list(self._fifo)
                self._fifo.clear()
            self._run_batch(batch)

    def _run_batch(self, batch: list[tuple[str, Any, bool]]) -> None:
        for rid, snap, final in batch:
            if self._halt.is_set():
                return
            with self._tx_lock:
                cancelled = rid in self._cancels
            try:
                self._send_one(rid, snap, final, cancelled)
            except _CALL_ERRORS:  # defensive
                log.exception("SAVE: a chunk of %r was lost", rid)

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
        self._deliver(rid, {"data": payload, "finished": final}, final)

    def _deliver(self, rid: str, wire: dict[str, Any], final: bool) -> None:
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
            self._regs[request_id] = _Reg(request_id)
            self._quiet[request_id] = time.monotonic()
        self._ring()

    def poll_ready(self) -> dict[str, list[Any]]:
        with self._rx_lock:
            out, self._ready = self._ready, {}
        return out

    def cleanup_receiver(self, request_id: str) -> None:
        self._check_rid(request_id)
        with self._rx_lock:
            self._regs.pop(request_id, None)
            self._ready.pop(request_id, None)
            self._quiet.pop(request_id, None)

    def _recv_main(self) -> None:
        while not self._halt.is_set():
            with self._rx_lock:
                active = [reg for reg in self._regs.values() if not reg.done]
            if not active:
                self._nap(self.wait_timeout)
                continue
            progress = False
            for reg in active:
                if self._halt.is_set():
                    return
                if self._visit(reg):
                    progress = True
            self.rounds += 1
            if not progress:
                self._nap(self.idle_backoff)

    def _visit(self, reg: _Reg) -> bool:
        with self._rx_lock:
            if self._regs.get(reg.rid) is not reg or reg.done:
                return False
            chunk_id = reg.next
        key = f"{reg.rid}_{self.src_stage_id}_{chunk_id}"
        failed = False
        try:
            value = self.connector.get(key)
        except _CALL_ERRORS:
            failed, value = True, None
            self._count("get_failed")
        now = time.monotonic()
        with self._rx_lock:
            if self._regs.get(reg.rid) is not reg:
                return False  # cleaned up while the get was in flight: discarded
            if failed:
                reg.fails += 1
                if reg.fails % 100 == 1:
                    log.warning("get %s failed (%d in a row)", key, reg.fails)
                return False
            reg.fails = 0
            if value is None:
                since = self._quiet.get(reg.rid, now)
                if not reg.warned and now - since > self.stall_warning:
                    reg.warned = True
                    log.warning("%s: nothing for %.0f s", key, now - since)
                return False
            self._ready.setdefault(reg.rid, []).append(value)
            reg.next = chunk_id + 1
            reg.warned = False
            if isinstance(value, dict) and value.get("finished") is True:
                reg.done = True
                self._quiet.pop(reg.rid, None)
            else:
                self._quiet[reg.rid] = now
        self._count("committed")
        return True

    # ------------------------------------------------------------------ lifecycle

    def stop(self) -> None:
        first = not self._halt.is_set()
        self._halt.set()
        with self._tx_cond:
            self._tx_cond.notify_all()
        self._ring()
        deadline = time.monotonic() + (self.join_timeout if first else 0.0)
        me = threading.current_thread()
        for thread in (self._save_thread, self._recv_thread):
            if thread is not me:
                thread.join(max(0.0, deadline - time.monotonic()))
        if not self._recv_thread.is_alive():
            self._close_pipe()  # a RECV thread blocked for good keeps its pipe

    def __enter__(self) -> BatchScanAdapter:
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
         **options: Any) -> BatchScanAdapter:  # fmt: skip
    return make_with(BatchScanAdapter, connector, stage_id, src_stage_id, build_payload, options)
