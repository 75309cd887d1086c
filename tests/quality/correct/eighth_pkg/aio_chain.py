"""aio_chain — a ChunkAdapter with a chain of per-chunk tasks (each awaits the one before it)
as its FIFO, and receive rounds armed one at a time on the loop, with patient gets.

Design (keeps R1-R24 of the contract):

- One daemon thread runs an event loop whose default executor is a ONE-worker daemon
  pool (the SAVE worker): ``asyncio.to_thread`` runs builds and puts there. There is no
  sender task and no queue: ``save_async`` snapshots and forwards the item with
  ``call_soon_threadsafe``; the loop callback creates a task for that one chunk that first
  waits for the previous chunk's task (``asyncio.wait({prev})``, which never raises) and
  then sends its chunk. So the chunks are sent one at a time, in save order (R5), and a
  finished link is dropped: nothing outlives its send. The cancel mark is read (under
  ``_tx_lock``) when the link's turn comes; the id is read right before the put and
  advanced (or forgotten with the mark, after a final) right after it succeeds, on the
  worker, under the lock (R6, R9, R11).
- Patience: a put or get still running after ``put_patience`` / ``get_patience`` (50 ms)
  is logged as slow but NEVER given up: the future is kept (``asyncio.wait`` with a
  timeout does not cancel what it waits for). A slow put is awaited to its end before the
  next try or the next link; a slow get stays parked on its registration and is collected
  by a later round, while the other registrations are polled.
- Receiver: registrations (``_Reg``, the object is the token), the polling queue and the
  ready lists under ``_rx_lock``. There is no long-lived receive task: a round is a task
  armed by the previous round (``call_soon`` after progress, ``call_later(idle_backoff)``
  otherwise) or by ``load_async`` when the chain of rounds is disarmed (``_armed``, under
  the lock). A round takes the polling queue, gets (or collects a parked get) for each
  entry once, re-queues every entry still polling, parked ones included, and at its end,
  under the lock, disarms only if the queue is empty. The worker checks the registration
  right before its get; the commit re-checks it in the section that commits (R16).
- Puts pass a PutGate: stop() closes it, so no put starts after stop() returns (R18).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from typing import Any

from ._common import (
    STOPPED,
    DaemonPool,
    LoopThread,
    PutGate,
    check_final,
    check_rid,
    check_stages,
    guarded,
    identity_build,
    take_options,
)

_log = logging.getLogger(__name__)


class _Reg:
    __slots__ = ("done", "next", "pending", "rid")

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.next = 0
        self.done = False
        self.pending = None  # a parked get's future (loop-only)


class ChainAdapter:
    def __init__(self, connector, *, stage_id, src_stage_id=None, build_payload=None, **options):
        o = take_options(
            type(self).__name__,
            options,
            {"put_patience": 0.05, "get_patience": 0.05, "get_workers": 2},
        )
        self.src_stage_id = check_stages(stage_id, src_stage_id)
        self.stage_id = stage_id
        self._conn = connector
        self._build = build_payload if build_payload is not None else identity_build
        self.wait_timeout = o["wait_timeout"]
        self.idle_backoff = o["idle_backoff"]
        self.join_timeout = o["join_timeout"]
        self.put_tries = o["put_tries"]
        self.put_backoff = o["put_backoff"]
        self.put_backoff_max = o["put_backoff_max"]
        self.put_patience = o["put_patience"]
        self.get_patience = o["get_patience"]
        self._snapshot = o["snapshot"]
        self._log = o["logger"] or _log
        gw = o["get_workers"]
        if isinstance(gw, bool) or not isinstance(gw, int) or gw < 1:
            raise TypeError(f"get_workers must be an int >= 1, got {gw!r}")
        self._stopped = False
        self._stop_lock = threading.Lock()
        self._gate = PutGate()
        self._save_pool = DaemonPool(1, "chain-save")
        self._get_pool = DaemonPool(gw, "chain-get")
        self._lt = LoopThread("chain-loop", self._save_pool)
        self._loop = self._lt.loop
        self._tail = None  # loop-only: the last link's task
        self._tx_lock = threading.Lock()
        self._next: dict[str, int] = {}
        self._marks: set[str] = set()
        self._rx_lock = threading.Lock()
        self._regs: dict[str, _Reg] = {}
        self._pollq: deque = deque()
        self._ready: dict[str, list] = {}
        self._armed = False
        self._lt.start()

    def _running(self) -> None:
        if self._stopped:
            raise RuntimeError("adapter is stopped")

    # ------------------------------------------------------------------ sender
    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        check_rid(request_id)
        check_final(is_final)
        self._running()
        snap = self._snapshot(obj)
        self._submit((request_id, snap, is_final))

    def _submit(self, item) -> None:
        if not self._lt.post(self._link, item):
            raise RuntimeError("adapter is stopped")

    def cancel_sender(self, request_id: str) -> None:
        check_rid(request_id)
        self._running()
        with self._tx_lock:
            self._marks.add(request_id)

    def _link(self, item) -> None:
        self._tail = self._loop.create_task(self._send_after(self._tail, item))

    async def _send_after(self, prev, item) -> None:
        if prev is not None:
            if not prev.done():
                await asyncio.wait({prev})
            prev = None
        rid, snap, fin = item
        item = None
        with self._tx_lock:
            cancelled = rid in self._marks
        if cancelled:
            if not fin:
                return
            payload = None
        else:
            kind, payload = await asyncio.to_thread(guarded, self._build, rid, snap, fin)
            if kind == "err":
                self._log.warning("build_payload failed for %r: %r", rid, payload)
                if not fin:
                    return
                payload = None
        del snap
        if payload is None and not fin:
            return
        await self._put_with_retries(rid, {"data": payload, "finished": fin}, fin)

    async def _put_once(self, rid: str, value: dict, fin: bool):
        """One try; a slow put is waited for to its end (patience only logs)."""
        fut = asyncio.ensure_future(asyncio.to_thread(self._put_job, rid, value, fin))
        while True:
            done, _ = await asyncio.wait({fut}, timeout=self.put_patience)
            if done:
                return fut.result()
            self._log.debug("put for %r is slow; still waiting for it", rid)

    async def _put_with_retries(self, rid: str, value: dict, fin: bool) -> None:
        tries = 0
        delay = self.put_backoff
        while True:
            res = await self._put_once(rid, value, fin)
            if res is True or res is STOPPED:
                return
            tries += 1
            if not fin and tries >= self.put_tries:
                self._log.warning("dropping a chunk of %r after %d failed puts", rid, tries)
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.put_backoff_max)

    def _put_job(self, rid: str, value: dict, fin: bool):
        if not self._gate.enter():
            return STOPPED
        try:
            with self._tx_lock:
                key = f"{rid}_{self.stage_id}_{self._next.get(rid, 0)}"
            kind, err = guarded(self._conn.put, key, value)
            if kind == "err":
                return err
            with self._tx_lock:
                if fin:
                    self._next.pop(rid, None)
                    self._marks.discard(rid)
                else:
                    self._next[rid] = self._next.get(rid, 0) + 1
            return True
        finally:
            self._gate.leave()

    # ------------------------------------------------------------------ receiver
    def load_async(self, request_id: str) -> None:
        check_rid(request_id)
        self._running()
        with self._rx_lock:
            if request_id in self._regs:
                return
            reg = self._regs[request_id] = _Reg(request_id)
            self._pollq.append(reg)
            arm = not self._armed
            if arm:
                self._armed = True
        if arm and not self._lt.post(self._start_round):
            raise RuntimeError("adapter is stopped")

    def cleanup_receiver(self, request_id: str) -> None:
        check_rid(request_id)
        with self._rx_lock:
            self._regs.pop(request_id, None)
            self._ready.pop(request_id, None)

    def poll_ready(self) -> dict:
        with self._rx_lock:
            out, self._ready = self._ready, {}
        return out

    def _start_round(self) -> None:
        self._loop.create_task(self._round())

    def _current(self, reg: _Reg) -> bool:
        with self._rx_lock:
            return self._regs.get(reg.rid) is reg and not reg.done

    def _get_job(self, reg: _Reg, key: str):
        if not self._current(reg):
            return ("stale", None)
        kind, value = guarded(self._conn.get, key)
        if kind == "err":
            return ("err", value)
        return ("value", value) if value is not None else ("empty", None)

    def _commit(self, reg: _Reg, value: dict) -> bool:
        with self._rx_lock:
            if self._regs.get(reg.rid) is not reg or reg.done:
                return False
            self._ready.setdefault(reg.rid, []).append(value)
            reg.next += 1
            if value.get("finished"):
                reg.done = True
            return True

    def _requeue(self, reg: _Reg) -> None:
        with self._rx_lock:
            self._pollq.append(reg)

    def _park(self, reg: _Reg) -> None:
        """A get still running after get_patience: it stays parked on its registration,
        and the entry goes back to the queue so that a later round collects it."""
        self._requeue(reg)

    async def _collect(self, reg: _Reg):
        """The result of the registration's get (launched now or parked before), or None
        if it is still running after get_patience."""
        if reg.pending is None:
            key = f"{reg.rid}_{self.src_stage_id}_{reg.next}"
            reg.pending = self._loop.run_in_executor(self._get_pool, self._get_job, reg, key)
        done, _ = await asyncio.wait({reg.pending}, timeout=self.get_patience)
        if not done:
            return None
        fut, reg.pending = reg.pending, None
        return fut.result()

    async def _round(self) -> None:
        with self._rx_lock:
            entries = list(self._pollq)
            self._pollq.clear()
        progress = False
        for reg in entries:
            if reg.pending is None and not self._current(reg):
                continue  # cleaned up (or done): the entry is dropped
            res = await self._collect(reg)
            if res is None:
                self._park(reg)
                continue
            kind, value = res
            if kind == "stale":
                continue
            if kind == "value":
                if not self._commit(reg, value):
                    continue  # stale value: discarded, not progress
                progress = True
                if reg.done:
                    continue  # final committed: never polled again
            elif kind == "err":
                self._log.debug("get for %r failed: %r", reg.rid, value)
            self._requeue(reg)
        with self._rx_lock:
            if not self._pollq:
                self._armed = False
                return
        if progress:
            self._loop.call_soon(self._start_round)
        else:
            self._loop.call_later(self.idle_backoff, self._start_round)

    # ------------------------------------------------------------------ stop
    def stop(self) -> None:
        with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
        deadline = time.monotonic() + self.join_timeout
        self._gate.close()
        self._lt.request_stop()
        self._gate.wait_idle(deadline)
        self._lt.join(deadline)
        self._save_pool.shutdown(wait=False)
        self._get_pool.shutdown(wait=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def make(connector, *, stage_id, src_stage_id=None, build_payload=None, **options):
    return ChainAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **options,
    )
