"""Design A, ``lockfree``: no locks at all; state moves between threads only through
GIL-atomic operations, and threads wake each other with ``threading.Event``s.

Ownership, not locking, is what keeps it right:

- Sender. ``save_async`` snapshots and does ONE ``deque.append`` onto the FIFO, then
  sets the SAVE event. ``cancel_sender`` does one ``deque.append`` of the request id
  onto a cancel inbox. The SAVE thread alone owns the next-id table and the cancel
  marks (a plain dict and set nobody else touches): it drains the cancel inbox right
  after each ``popleft`` of an item, so every cancel appended before the item was
  taken is seen by that item's check; after a final's put succeeds it drains the inbox
  once more and then forgets the request (a cancel appended later marks the next stream,
  R27). ``stop()`` is checked right before each put.
- Receiver. ``load_async`` does ``dict.setdefault(request_id, reg)`` (atomic: idempotent
  without a lock) and sets the RECV event. The registration object IS the token. The
  RECV thread alone owns each registration's next id and done flag. A round takes
  ``list(regs.items())`` (one C-level call, atomic under the GIL), checks with one
  ``dict.get`` that the entry is still the current registration right before its get,
  and commits by ONE ``deque.append((request_id, reg, value))`` onto the commit log.
- ``poll_ready`` pops the commit log from the left until it is empty: what it takes is
  a prefix of the commit order, i.e. one atomic cut. It hands out an entry only if its
  registration object is still the one registered under its id (``regs.get(id) is
  reg``). That check is the R16 commit fence: ``cleanup_receiver`` (same scheduler
  thread) removes the registration with one ``dict.pop``, so every entry of the old
  registration -- even one the RECV thread appends later, from a get that was in
  flight -- is refused by every later ``poll_ready``. ``cleanup_receiver`` also purges
  the log of the id's entries (into a scheduler-owned carry deque for the others), so
  no ready chunk of it is kept (R24).
- Pacing: an empty round waits on the RECV event (``wait_timeout``), a round without
  progress waits ``idle_backoff`` on the stop event, progress goes on at once.
"""

from __future__ import annotations

import threading
from collections import deque
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
    """One registration; the object is its token. Fields written by the RECV thread only."""

    __slots__ = ("done", "next_id")

    def __init__(self) -> None:
        self.next_id = 0
        self.done = False


class LockFreeAdapter:
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
        )
        self.rx_counters = Counters("gets", "get_failures", "committed", "stale_skipped")
        # --- sender: FIFO and cancel inbox are the only things the scheduler touches
        self._fifo: deque = deque()
        self._cancel_inbox: deque = deque()
        self._save_wake = threading.Event()
        self._marks: set[str] = set()  # SAVE thread only
        self._next_send: dict[str, int] = {}  # SAVE thread only
        # --- receiver
        self._regs: dict[str, _Reg] = {}  # scheduler: setdefault/pop; RECV: get/list
        self._recv_wake = threading.Event()
        self._log: deque = deque()  # RECV appends, scheduler pops
        self._carry: deque = deque()  # scheduler only
        self._save_thread = threading.Thread(
            target=self._save_loop, name="lockfree-save", daemon=True
        )
        self._recv_thread = threading.Thread(
            target=self._recv_loop, name="lockfree-recv", daemon=True
        )
        self._save_thread.start()
        self._recv_thread.start()

    # ------------------------------------------------------------ scheduler calls
    def _check_running(self, what: str) -> None:
        if self._stop_evt.is_set():
            raise RuntimeError(f"{what} after stop()")

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        check_id(request_id)
        check_final(is_final)
        self._check_running("save_async")
        snap = self._s.snapshot(obj)
        self._fifo.append((request_id, snap, is_final))
        self._save_wake.set()

    def cancel_sender(self, request_id: str) -> None:
        check_id(request_id)
        self._check_running("cancel_sender")
        self._cancel_inbox.append(request_id)
        self._save_wake.set()

    def load_async(self, request_id: str) -> None:
        check_id(request_id)
        self._check_running("load_async")
        reg = _Reg()
        if self._regs.setdefault(request_id, reg) is reg:
            self._recv_wake.set()

    def poll_ready(self) -> dict[str, list]:
        out: dict[str, list] = {}
        regs = self._regs
        for source in (self._carry, self._log):
            while True:
                try:
                    rid, reg, value = source.popleft()
                except IndexError:
                    break
                if regs.get(rid) is reg:
                    out.setdefault(rid, []).append(value)
        return out

    def cleanup_receiver(self, request_id: str) -> None:
        check_id(request_id)
        self._regs.pop(request_id, None)
        self._purge(request_id)

    def _purge(self, request_id: str) -> None:
        # pop (never iterate) both deques; the other ids' entries go back to the front
        # of the carry deque in their order, so they are still handed out oldest first
        kept: deque = deque()
        for source in (self._carry, self._log):
            while True:
                try:
                    e = source.popleft()
                except IndexError:
                    break
                if e[0] != request_id:
                    kept.append(e)
        self._carry.extendleft(reversed(kept))

    def stop(self) -> None:
        self._stop_evt.set()
        self._save_wake.set()
        self._recv_wake.set()
        join_all([self._save_thread, self._recv_thread], self._s.join_timeout)

    def __enter__(self) -> LockFreeAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ SAVE thread
    def _drain_cancels(self) -> None:
        while True:
            try:
                self._marks.add(self._cancel_inbox.popleft())
            except IndexError:
                return

    def _save_loop(self) -> None:
        while not self._stop_evt.is_set():
            self._save_wake.clear()
            self._drain_cancels()
            try:
                item = self._fifo.popleft()
            except IndexError:
                self._save_wake.wait(self._s.wait_timeout)
                continue
            self._drain_cancels()
            try:
                self._send_one(*item)
            except Exception:  # never die (R22)
                self._s.logger.exception("lockfree: unexpected error in the SAVE thread")

    def _send_one(self, rid: str, snap: Any, final: bool) -> None:
        s = self._s
        cancelled = rid in self._marks
        if cancelled and not final:
            self.counters.dropped_cancelled += 1
            return
        payload = None
        if not cancelled:
            try:
                payload = s.build_payload(rid, snap, final)
            except Exception:
                s.logger.warning("lockfree: build_payload failed for %r", rid, exc_info=True)
                if not final:
                    self.counters.dropped_build_failed += 1
                    return
                payload = None
        if payload is None and not final:
            self.counters.skipped_none += 1
            return
        nid = self._next_send.get(rid, 0)
        key = send_key(s, rid, nid)
        value = {"data": payload, "finished": final}
        if not self._put(key, value, final):
            return
        self.counters.chunks_put += 1
        if final:
            self._forget(rid)
        else:
            self._next_send[rid] = nid + 1

    def _forget(self, rid: str) -> None:
        self._drain_cancels()  # a cancel made before the final was put ends here
        self._marks.discard(rid)
        self._next_send.pop(rid, None)

    def _put(self, key: str, value: dict, final: bool) -> bool:
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
                    s.logger.warning("lockfree: dropped %s after %d failed puts", key, tries)
                    self.counters.dropped_put_failed += 1
                    return False
            if self._stop_evt.wait(delay):
                return False
            delay = min(delay * 2, s.put_backoff_max)

    # ------------------------------------------------------------ RECV thread
    def _round_entries(self) -> list:
        return [(rid, reg) for rid, reg in list(self._regs.items()) if not reg.done]

    def _recv_loop(self) -> None:
        while not self._stop_evt.is_set():
            self._recv_wake.clear()
            entries = self._round_entries()
            if not entries:
                self._recv_wake.wait(self._s.wait_timeout)
                continue
            progress = False
            for rid, reg in entries:
                if self._stop_evt.is_set():
                    break
                try:
                    progress = self._poll_one(rid, reg) or progress
                except Exception:  # never die (R22)
                    self._s.logger.exception("lockfree: unexpected error in the RECV thread")
            if not progress:
                self._stop_evt.wait(self._s.idle_backoff)

    def _poll_one(self, rid: str, reg: _Reg) -> bool:
        if self._regs.get(rid) is not reg or reg.done:
            return False
        nid = reg.next_id
        self.rx_counters.gets += 1
        try:
            value = self._conn.get(recv_key(self._s, rid, nid))
        except Exception:
            self.rx_counters.get_failures += 1
            return False
        if value is None:
            return False
        if self._regs.get(rid) is not reg:  # cleaned up while the get was in flight
            self.rx_counters.stale_skipped += 1
            return False
        reg.next_id = nid + 1
        if is_finished(value):
            reg.done = True
        self._log.append((rid, reg, value))  # the commit; poll_ready is the fence
        self.rx_counters.committed += 1
        return True


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Any = None,
    **options: Any,
) -> LockFreeAdapter:
    return LockFreeAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **options,
    )
