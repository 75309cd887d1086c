"""Design C, ``epochs``: the receiver works in rounds over an immutable snapshot of the
registrations, validated against a global cleanup epoch plus a per-registration
generation.

- Receiver. Registrations live in ``_regs`` (request id -> ``_Reg(gen, next_id, done)``)
  under ``_rx_lock``. ``gen`` comes from ONE process-wide counter, so no two
  registrations ever share a generation. ``cleanup_receiver`` forgets the registration
  and its ready chunks and bumps ``_epoch`` (the cleanup epoch), all under the lock.
  Each RECV round takes, under the lock, an immutable snapshot: a tuple of
  ``(request_id, reg, gen)`` for every registration not yet done, and the epoch at that
  moment. It then polls each entry once, in order. Before each get: if the epoch is
  still the snapshot's, no registration of the snapshot can have been cleaned up, so the
  entry is current without a look-up; if it moved, the entry is re-validated under the
  lock (same ``gen`` registered under its id?) and skipped if not. The commit is one
  critical section that does the same test (epoch unchanged, or the generation still
  registered) and then appends the value and advances the next id. Since cleanup bumps
  the epoch under the same lock, the test and the commit are atomic with respect to
  it: the R16 fence. No round is ever restarted; a new registration joins at the next
  round. There is no polling queue, so a registration cannot have two entries.
- Pacing: nothing to poll -> wait on ``_rx_cond`` (``wait_timeout``, in a loop);
  a round without progress -> ``idle_backoff`` on the stop event; progress -> at once.
- Sender: one SAVE thread over a ``deque`` FIFO and ``_tx_cond``; the cancel mark is
  read in the critical section that takes the item; build and put outside the lock;
  the id is advanced (or, after a final, the id counter and the mark forgotten) right
  after a successful put, under the lock.
"""

from __future__ import annotations

import itertools
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

_GENERATIONS = itertools.count(1)  # process-wide: a generation is never reused


class _Reg:
    __slots__ = ("done", "gen", "next_id")

    def __init__(self, gen: int) -> None:
        self.gen = gen
        self.next_id = 0
        self.done = False


class EpochsAdapter:
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
        self.rx_counters = Counters(
            "gets", "get_failures", "committed", "stale_discarded", "rounds"
        )
        # sender
        self._tx_lock = threading.Lock()
        self._tx_cond = threading.Condition(self._tx_lock)
        self._fifo: deque = deque()
        self._marks: set[str] = set()
        self._next_send: dict[str, int] = {}
        # receiver
        self._rx_lock = threading.Lock()
        self._rx_cond = threading.Condition(self._rx_lock)
        self._regs: dict[str, _Reg] = {}
        self._ready: dict[str, list] = {}
        self._epoch = 0
        self._save_thread = threading.Thread(
            target=self._save_loop, name="epochs-save", daemon=True
        )
        self._recv_thread = threading.Thread(
            target=self._recv_loop, name="epochs-recv", daemon=True
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
        with self._tx_lock:
            self._fifo.append((request_id, snap, is_final))
            self._tx_cond.notify()

    def cancel_sender(self, request_id: str) -> None:
        check_id(request_id)
        self._check_running("cancel_sender")
        with self._tx_lock:
            self._marks.add(request_id)

    def _new_gen(self, request_id: str) -> int:
        return next(_GENERATIONS)

    def load_async(self, request_id: str) -> None:
        check_id(request_id)
        self._check_running("load_async")
        with self._rx_lock:
            if request_id in self._regs:
                return
            self._regs[request_id] = _Reg(self._new_gen(request_id))
            self._rx_cond.notify()

    def poll_ready(self) -> dict[str, list]:
        with self._rx_lock:
            out, self._ready = self._ready, {}
        return out

    def _forget_registration(self, request_id: str) -> None:
        self._regs.pop(request_id, None)

    def cleanup_receiver(self, request_id: str) -> None:
        check_id(request_id)
        with self._rx_lock:
            self._forget_registration(request_id)
            self._ready.pop(request_id, None)
            self._epoch += 1

    def stop(self) -> None:
        self._stop_evt.set()
        with self._tx_cond:
            self._tx_cond.notify_all()
        with self._rx_cond:
            self._rx_cond.notify_all()
        join_all([self._save_thread, self._recv_thread], self._s.join_timeout)

    def __enter__(self) -> EpochsAdapter:
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
                rid, snap, final = self._fifo.popleft()
                cancelled = rid in self._marks
                nid = self._next_send.get(rid, 0)
            try:
                self._send_one(rid, snap, final, cancelled, nid)
            except Exception:  # never die (R22)
                self._s.logger.exception("epochs: unexpected error in the SAVE thread")

    def _send_one(self, rid: str, snap: Any, final: bool, cancelled: bool, nid: int) -> None:
        s = self._s
        if cancelled and not final:
            self.counters.dropped_cancelled += 1
            return
        payload = None
        if not cancelled:
            try:
                payload = s.build_payload(rid, snap, final)
            except Exception:
                s.logger.warning("epochs: build_payload failed for %r", rid, exc_info=True)
                if not final:
                    self.counters.dropped_build_failed += 1
                    return
                payload = None
        if payload is None and not final:
            self.counters.skipped_none += 1
            return
        value = {"data": payload, "finished": final}
        tries = 0
        delay = s.put_backoff
        while True:
            if self._stop_evt.is_set():
                return
            try:
                self._conn.put(send_key(s, rid, nid), value)
                break
            except Exception:
                tries += 1
                self.counters.put_failures += 1
                if not final and tries >= s.put_tries:
                    s.logger.warning(
                        "epochs: dropped %r chunk %d after %d failed puts", rid, nid, tries
                    )
                    self.counters.dropped_put_failed += 1
                    return
            if self._stop_evt.wait(delay):
                return
            delay = min(delay * 2, s.put_backoff_max)
        self.counters.chunks_put += 1
        with self._tx_lock:
            if final:
                self._next_send.pop(rid, None)
                self._marks.discard(rid)
            else:
                self._next_send[rid] = nid + 1

    # ------------------------------------------------------------ RECV thread
    def _snapshot_round(self) -> tuple[tuple, int] | None:
        with self._rx_lock:
            while not self._stop_evt.is_set():
                snap = tuple((rid, reg, reg.gen) for rid, reg in self._regs.items() if not reg.done)
                if snap:
                    return snap, self._epoch
                self._rx_cond.wait(self._s.wait_timeout)
        return None

    def _recv_loop(self) -> None:
        while True:
            taken = self._snapshot_round()
            if taken is None:
                return
            snap, epoch0 = taken
            self.rx_counters.rounds += 1
            try:
                progress = self._round(snap, epoch0)
            except Exception:  # never die (R22)
                self._s.logger.exception("epochs: unexpected error in the RECV thread")
                progress = False
            if self._stop_evt.is_set():
                return
            if not progress:
                self._stop_evt.wait(self._s.idle_backoff)

    def _round(self, snap: tuple, epoch0: int) -> bool:
        progress = False
        for rid, reg, gen in snap:
            if self._stop_evt.is_set():
                break
            if self._epoch != epoch0 and not self._still_current(rid, gen):
                continue
            progress = self._poll_entry(rid, reg, gen, epoch0) or progress
        return progress

    def _still_current(self, rid: str, gen: int) -> bool:
        with self._rx_lock:
            cur = self._regs.get(rid)
            return cur is not None and cur.gen == gen and not cur.done

    def _poll_entry(self, rid: str, reg: _Reg, gen: int, epoch0: int) -> bool:
        nid = reg.next_id
        self.rx_counters.gets += 1
        try:
            value = self._conn.get(recv_key(self._s, rid, nid))
        except Exception:
            self.rx_counters.get_failures += 1
            return False
        if value is None:
            return False
        return self._commit(rid, gen, nid, value, epoch0)

    def _commit(self, rid: str, gen: int, nid: int, value: Any, epoch0: int) -> bool:
        with self._rx_lock:
            cur = self._regs.get(rid)
            if self._epoch != epoch0 and (cur is None or cur.gen != gen):
                self.rx_counters.stale_discarded += 1
                self._on_stale(rid, gen)
                return False
            self._ready.setdefault(rid, []).append(value)
            cur.next_id = nid + 1
            if is_finished(value):
                cur.done = True
        self.rx_counters.committed += 1
        return True

    def _on_stale(self, rid: str, gen: int) -> None:
        """A value fetched for a registration that was cleaned up: nothing to do."""


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Any = None,
    **options: Any,
) -> EpochsAdapter:
    return EpochsAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **options,
    )
