"""Design B, ``seqlock``: each side is a sequence lock -- one writer lock and a version
counter that every writer bumps to odd before its update and back to even after it;
readers read optimistically and retry when the version was odd or moved.

- Sender (``_tx_*``). Writers, each under ``_tx_lock`` with the two bumps:
  ``save_async`` (FIFO append; the snapshot is taken BEFORE the write section),
  ``cancel_sender`` (mark), the SAVE thread taking an item, and the SAVE thread's
  bookkeeping after a put. The SAVE thread reads ``(cancelled?, next id)`` for the item
  it took optimistically (``_tx_read``), builds outside every lock, puts, and then
  writes the bookkeeping: if the version is still the one it read, nothing changed and
  the precomputed update is applied (fast path); otherwise it re-derives the update from
  the tables (slow path). Either path, for a final: forget the id counter and the mark.
  The SAVE thread waits on ``_tx_cond`` (over ``_tx_lock``) with a timeout, in a loop.
- Receiver (``_rx_*``). Writers: ``load_async`` (new registration: a fresh token
  object, next id 0, one polling-queue entry), ``cleanup_receiver`` (forget the
  registration and its ready chunks), ``poll_ready``'s swap, and the RECV thread's
  commits. The RECV thread reads ``(still current?, next id)`` optimistically before
  its get, and remembers the version it read. The commit is ONE write section: it
  commits if the version is unchanged since that read (nothing at all was written, so
  the registration is current) or else if the token read is still the registered one
  (``is``); otherwise the value is stale and discarded. Every writer that can end a
  registration bumps the version, so the fast path is never wrong, and the check and
  the commit share the lock with ``cleanup_receiver``: the R16 fence.
- ``poll_ready`` has an optimistic fast path: nothing ready (read validated by the
  version) -> ``{}`` without the lock; else it swaps the ready dict in a write section.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ._common import (
    Counters,
    Settings,
    check_final,
    check_id,
    expose_options,
    is_finished,
    join_all,
    recv_key,
    send_key,
)


class _Reg:
    """A registration; the object is its token. next_id/done written under _rx_lock."""

    __slots__ = ("done", "next_id")

    def __init__(self) -> None:
        self.next_id = 0
        self.done = False


class SeqlockAdapter:
    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Any = None,
        **options: Any,
    ) -> None:
        s = Settings(connector, stage_id, src_stage_id, build_payload, **options)
        self._s = s
        expose_options(self, s)
        self._conn = connector
        self._stop_evt = threading.Event()
        self.counters = Counters(
            "chunks_put",
            "put_failures",
            "dropped_cancelled",
            "dropped_build_failed",
            "dropped_put_failed",
            "skipped_none",
            "slow_path",
        )
        self.rx_counters = Counters("gets", "get_failures", "committed", "stale_discarded")
        # send side seqlock
        self._tx_lock = threading.Lock()
        self._tx_cond = threading.Condition(self._tx_lock)
        self._tx_ver = 0
        self._fifo: deque = deque()
        self._marks: set[str] = set()
        self._next_send: dict[str, int] = {}
        # receive side seqlock
        self._rx_lock = threading.Lock()
        self._rx_cond = threading.Condition(self._rx_lock)
        self._rx_ver = 0
        self._regs: dict[str, _Reg] = {}
        self._queue: deque = deque()  # (request_id, reg) entries
        self._ready: dict[str, list] = {}
        self._save_thread = threading.Thread(
            target=self._save_loop, name="seqlock-save", daemon=True
        )
        self._recv_thread = threading.Thread(
            target=self._recv_loop, name="seqlock-recv", daemon=True
        )
        self._save_thread.start()
        self._recv_thread.start()

    # ------------------------------------------------------------ optimistic reads
    @staticmethod
    def _read(get_ver: Callable[[], int], fn: Callable[[], Any]) -> tuple[Any, int]:
        """Run ``fn`` until it ran with no writer inside or between: (result, version)."""
        spins = 0
        while True:
            v1 = get_ver()
            if not v1 & 1:
                try:
                    result = fn()
                except (RuntimeError, KeyError):  # torn read of a changing container
                    result = None
                    v1 = -1
                if get_ver() == v1:
                    return result, v1
            spins += 1
            time.sleep(0 if spins < 100 else 0.0001)

    def _tx_read(self, fn: Callable[[], Any]) -> tuple[Any, int]:
        return self._read(lambda: self._tx_ver, fn)

    def _rx_read(self, fn: Callable[[], Any]) -> tuple[Any, int]:
        return self._read(lambda: self._rx_ver, fn)

    # ------------------------------------------------------------ scheduler calls
    def _check_running(self, what: str) -> None:
        if self._stop_evt.is_set():
            raise RuntimeError(f"{what} after stop()")

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        check_id(request_id)
        check_final(is_final)
        self._check_running("save_async")
        snap = self._s.snapshot(obj)
        with self._tx_lock:
            self._tx_ver += 1
            self._fifo.append((request_id, snap, is_final))
            self._tx_ver += 1
            self._tx_cond.notify()

    def cancel_sender(self, request_id: str) -> None:
        check_id(request_id)
        self._check_running("cancel_sender")
        with self._tx_lock:
            self._tx_ver += 1
            self._marks.add(request_id)
            self._tx_ver += 1

    def load_async(self, request_id: str) -> None:
        check_id(request_id)
        self._check_running("load_async")
        with self._rx_lock:
            if request_id in self._regs:
                return
            self._rx_ver += 1
            reg = _Reg()
            self._regs[request_id] = reg
            self._queue.append((request_id, reg))
            self._rx_ver += 1
            self._rx_cond.notify()

    def poll_ready(self) -> dict[str, list]:
        empty, _ = self._rx_read(lambda: not self._ready)
        if empty:
            return {}
        with self._rx_lock:
            self._rx_ver += 1
            out, self._ready = self._ready, {}
            self._rx_ver += 1
        return out

    def cleanup_receiver(self, request_id: str) -> None:
        check_id(request_id)
        with self._rx_lock:
            self._rx_ver += 1
            self._regs.pop(request_id, None)
            self._ready.pop(request_id, None)
            self._rx_ver += 1

    def stop(self) -> None:
        self._stop_evt.set()
        with self._tx_cond:
            self._tx_cond.notify_all()
        with self._rx_cond:
            self._rx_cond.notify_all()
        join_all([self._save_thread, self._recv_thread], self._s.join_timeout)

    def __enter__(self) -> SeqlockAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ SAVE thread
    def _save_loop(self) -> None:
        while True:
            with self._tx_lock:
                while not self._fifo and not self._stop_evt.is_set():
                    self._tx_cond.wait(self._s.wait_timeout)
                if self._stop_evt.is_set():
                    return
                self._tx_ver += 1
                item = self._fifo.popleft()
                self._tx_ver += 1
            try:
                self._send_one(*item)
            except Exception:  # never die (R22)
                self._s.logger.exception("seqlock: unexpected error in the SAVE thread")

    def _send_one(self, rid: str, snap: Any, final: bool) -> None:
        s = self._s
        (cancelled, nid), v_read = self._tx_read(
            lambda: (rid in self._marks, self._next_send.get(rid, 0))
        )
        if cancelled and not final:
            self.counters.dropped_cancelled += 1
            return
        payload = None
        if not cancelled:
            try:
                payload = s.build_payload(rid, snap, final)
            except Exception:
                s.logger.warning("seqlock: build_payload failed for %r", rid, exc_info=True)
                if not final:
                    self.counters.dropped_build_failed += 1
                    return
                payload = None
        if payload is None and not final:
            self.counters.skipped_none += 1
            return
        value = {"data": payload, "finished": final}
        if not self._put(send_key(s, rid, nid), value, final, rid, v_read):
            return
        self.counters.chunks_put += 1
        self._after_put(rid, nid, final, v_read)

    def _after_put(self, rid: str, nid: int, final: bool, v_read: int) -> None:
        with self._tx_lock:
            unchanged = self._tx_ver == v_read
            self._tx_ver += 1
            if unchanged:  # fast path: the precomputed update
                if final:
                    self._marks.discard(rid)
                    self._next_send.pop(rid, None)
                else:
                    self._next_send[rid] = nid + 1
            else:  # slow path: re-derive from the tables
                self.counters.slow_path += 1
                if final:
                    self._marks.discard(rid)
                    self._next_send.pop(rid, None)
                else:
                    self._next_send[rid] = self._next_send.get(rid, 0) + 1
            self._tx_ver += 1

    def _put(self, key: str, value: dict, final: bool, rid: str, v_read: int) -> bool:
        s = self._s
        tries = 0
        delay = s.put_backoff
        while True:
            if self._stop_evt.is_set():
                return False
            try:
                self._conn.put(key, value)
                return True
            except Exception:
                tries += 1
                self.counters.put_failures += 1
                if not final and tries >= s.put_tries:
                    s.logger.warning("seqlock: dropped %s after %d failed puts", key, tries)
                    self.counters.dropped_put_failed += 1
                    return False
            if self._stop_evt.wait(delay):
                return False
            delay = min(delay * 2, s.put_backoff_max)

    # ------------------------------------------------------------ RECV thread
    def _recv_loop(self) -> None:
        while True:
            with self._rx_lock:
                while not self._queue and not self._stop_evt.is_set():
                    self._rx_cond.wait(self._s.wait_timeout)
                if self._stop_evt.is_set():
                    return
                n = len(self._queue)
            progress = False
            for _ in range(n):
                if self._stop_evt.is_set():
                    return
                try:
                    progress = self._poll_one(self._queue.popleft()) or progress
                except IndexError:
                    break
                except Exception:  # never die (R22)
                    self._s.logger.exception("seqlock: unexpected error in the RECV thread")
            if not progress:
                self._stop_evt.wait(self._s.idle_backoff)

    def _poll_one(self, entry: tuple) -> bool:
        rid, reg = entry
        (current, nid), v_read = self._rx_read(
            lambda: (self._regs.get(rid) is reg and not reg.done, reg.next_id)
        )
        if not current:
            return False  # stale entry: dropped
        self.rx_counters.gets += 1
        try:
            value = self._conn.get(recv_key(self._s, rid, nid))
        except Exception:
            self.rx_counters.get_failures += 1
            self._queue.append(entry)
            return False
        if value is None:
            self._queue.append(entry)
            return False
        return self._commit(entry, nid, value, v_read)

    def _commit(self, entry: tuple, nid: int, value: Any, v_read: int) -> bool:
        rid, reg = entry
        with self._rx_lock:
            if not (self._rx_ver == v_read or self._regs.get(rid) is reg):
                self.rx_counters.stale_discarded += 1
                return False  # cleaned up meanwhile: discard, drop entry
            self._rx_ver += 1
            self._ready.setdefault(rid, []).append(value)
            reg.next_id = nid + 1
            if is_finished(value):
                reg.done = True
            self._rx_ver += 1
            done = reg.done
        self.rx_counters.committed += 1
        if not done:
            self._queue.append(entry)
        return True


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Any = None,
    **options: Any,
) -> SeqlockAdapter:
    return SeqlockAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **options,
    )
