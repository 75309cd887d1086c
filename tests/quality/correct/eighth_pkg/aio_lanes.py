"""aio_lanes — a ChunkAdapter with one asyncio task per request stream on the send side
and a completion-driven get dispatcher (several gets in flight) on the receive side.

Design (keeps R1-R24 of the contract):

- One daemon thread runs an event loop. Sender: each request id with something to send
  has a ``_Lane`` (pending items, next chunk id, cancel mark, ``running``), all under the
  ``threading.Lock`` ``_tx_lock``. ``save_async`` snapshots, appends to the lane and, if
  no task runs for the lane, marks it running and posts the task's creation to the loop.
  The lane task sends its items one at a time in save order (R5) and, finding its lane
  empty, clears ``running`` and retires the lane (no open stream, no mark) in ONE
  critical section, so a concurrent ``save_async`` either finds the task still running
  or starts a new one. A request never has two lane tasks; lanes of different requests
  build and put side by side on a ``send_workers`` (2) daemon pool. The mark is read in
  the section that takes the item; the id is read right before the put and advanced (or,
  after a final, reset with the mark cleared) right after it succeeds, on the worker, under
  the lock (R6, R9, R11). A failed put waits its backoff with ``asyncio.sleep`` in its own
  lane, so other requests go on.
- Receiver: registrations (``_Reg``, the object is the token) and ready lists under
  ``_rx_lock``. One dispatcher coroutine keeps AT MOST ONE get in flight per
  registration on a ``get_workers`` (2) daemon pool, waits with
  ``asyncio.wait(..., FIRST_COMPLETED)`` on the gets and a wake-up future, and handles
  each completion: a committed chunk relaunches the registration at once, an empty or
  failed get relaunches it ``idle_backoff`` later (``call_later``), a final or a
  cleaned-up registration ends it. The worker checks the registration right before its
  get; the commit checks it again in the critical section that commits (R16).
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


class _Lane:
    __slots__ = ("items", "mark", "next", "rid", "running")

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.items: deque = deque()
        self.next = 0
        self.mark = False
        self.running = False


class _Reg:
    __slots__ = ("done", "inflight", "launched", "next", "rid")

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.next = 0
        self.done = False
        self.inflight = 0
        self.launched = 0.0


class LanesAdapter:
    def __init__(self, connector, *, stage_id, src_stage_id=None, build_payload=None, **options):
        o = take_options(type(self).__name__, options, {"send_workers": 2, "get_workers": 2})
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
        self._snapshot = o["snapshot"]
        self._log = o["logger"] or _log
        for name in ("send_workers", "get_workers"):
            v = o[name]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise TypeError(f"{name} must be an int >= 1, got {v!r}")
        self._stopped = False
        self._stop_lock = threading.Lock()
        self._gate = PutGate()
        self._send_pool = DaemonPool(o["send_workers"], "lanes-send")
        self._get_pool = DaemonPool(o["get_workers"], "lanes-get")
        self._lt = LoopThread("lanes-loop")
        self._loop = self._lt.loop
        # sender, under _tx_lock
        self._tx_lock = threading.Lock()
        self._lanes: dict[str, _Lane] = {}
        self._lane_tasks: set = set()  # loop-only: strong references to running lane tasks
        # receiver, under _rx_lock
        self._rx_lock = threading.Lock()
        self._regs: dict[str, _Reg] = {}
        self._ready: dict[str, list] = {}
        # dispatcher, loop-only
        self._due: deque = deque()
        self._inflight: dict = {}  # asyncio future -> _Reg
        self._wakeup = None
        self._lt.post(self._setup)
        self._lt.start()

    def _setup(self) -> None:
        self._wakeup = self._loop.create_future()
        self._dispatcher = self._loop.create_task(self._dispatch())

    def _running(self) -> None:
        if self._stopped:
            raise RuntimeError("adapter is stopped")

    # ------------------------------------------------------------------ sender
    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        check_rid(request_id)
        check_final(is_final)
        self._running()
        snap = self._snapshot(obj)
        with self._tx_lock:
            lane = self._lanes.get(request_id)
            if lane is None:
                lane = self._lanes[request_id] = _Lane(request_id)
            lane.items.append((snap, is_final))
            start = not lane.running
            if start:
                lane.running = True
        if start and not self._lt.post(self._spawn, lane):
            raise RuntimeError("adapter is stopped")

    def cancel_sender(self, request_id: str) -> None:
        check_rid(request_id)
        self._running()
        with self._tx_lock:
            lane = self._lanes.get(request_id)
            if lane is None:
                lane = self._lanes[request_id] = _Lane(request_id)
            lane.mark = True

    def _spawn(self, lane: _Lane) -> None:
        task = self._loop.create_task(self._run_lane(lane))
        self._lane_tasks.add(task)
        task.add_done_callback(self._lane_tasks.discard)

    def _take(self, lane: _Lane):
        """The lane's next item and whether it is cancelled, or None (lane retired)."""
        with self._tx_lock:
            if not lane.items:
                lane.running = False
                if lane.next == 0 and not lane.mark and self._lanes.get(lane.rid) is lane:
                    del self._lanes[lane.rid]
                return None
            snap, fin = lane.items.popleft()
            return snap, fin, lane.mark

    async def _run_lane(self, lane: _Lane) -> None:
        while True:
            took = self._take(lane)
            if took is None:
                return
            snap, fin, cancelled = took
            await self._send(lane, snap, fin, cancelled)
            del took, snap

    async def _send(self, lane: _Lane, snap: Any, fin: bool, cancelled: bool) -> None:
        rid = lane.rid
        if cancelled:
            if not fin:
                return
            payload = None
        else:
            kind, payload = await self._loop.run_in_executor(
                self._send_pool, guarded, self._build, rid, snap, fin
            )
            if kind == "err":
                self._log.warning("build_payload failed for %r: %r", rid, payload)
                if not fin:
                    return
                payload = None
        if payload is None and not fin:
            return
        value = {"data": payload, "finished": fin}
        tries = 0
        delay = self.put_backoff
        while True:
            res = await self._loop.run_in_executor(self._send_pool, self._put_job, lane, value, fin)
            if res is True or res is STOPPED:
                return
            tries += 1
            if not fin and tries >= self.put_tries:
                self._log.warning("dropping a chunk of %r after %d failed puts", rid, tries)
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.put_backoff_max)

    def _put_job(self, lane: _Lane, value: dict, fin: bool):
        if not self._gate.enter():
            return STOPPED
        try:
            with self._tx_lock:
                key = f"{lane.rid}_{self.stage_id}_{lane.next}"
            kind, err = guarded(self._conn.put, key, value)
            if kind == "err":
                return err
            self._after_put(lane, fin)
            return True
        finally:
            self._gate.leave()

    def _after_put(self, lane: _Lane, fin: bool) -> None:
        with self._tx_lock:
            if fin:
                lane.next = 0
                lane.mark = False
            else:
                lane.next += 1

    # ------------------------------------------------------------------ receiver
    def load_async(self, request_id: str) -> None:
        check_rid(request_id)
        self._running()
        with self._rx_lock:
            if request_id in self._regs:
                return
            reg = self._regs[request_id] = _Reg(request_id)
        if not self._lt.post(self._kick, reg):
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

    def _current(self, reg: _Reg) -> bool:
        with self._rx_lock:
            return self._regs.get(reg.rid) is reg and not reg.done

    def _kick(self, reg: _Reg) -> None:
        self._due.append(reg)
        if not self._wakeup.done():
            self._wakeup.set_result(None)

    def _get_job(self, reg: _Reg, key: str):
        if not self._current(reg):
            return ("stale", None)
        kind, value = guarded(self._conn.get, key)
        if kind == "err":
            return ("err", value)
        return ("value", value) if value is not None else ("empty", None)

    def _launch(self, reg: _Reg) -> None:
        key = f"{reg.rid}_{self.src_stage_id}_{reg.next}"
        fut = self._loop.run_in_executor(self._get_pool, self._get_job, reg, key)
        reg.inflight += 1
        reg.launched = time.monotonic()
        self._inflight[fut] = reg

    def _commit(self, reg: _Reg, value: dict) -> bool:
        with self._rx_lock:
            if self._regs.get(reg.rid) is not reg or reg.done:
                return False
            self._ready.setdefault(reg.rid, []).append(value)
            reg.next += 1
            if value.get("finished"):
                reg.done = True
            return True

    def _on_get_done(self, fut) -> None:
        reg = self._inflight.pop(fut)
        reg.inflight -= 1
        kind, value = fut.result()
        if kind == "value":
            if self._commit(reg, value):  # noqa: SIM102
                if not reg.done:
                    self._due.append(reg)  # progress: the next id at once
            return  # a stale value is dropped with its registration's entry
        if kind == "stale" or not self._current(reg):
            return
        if kind == "err":
            self._log.debug("get for %r failed: %r", reg.rid, value)
        self._loop.call_later(self.idle_backoff, self._kick, reg)

    def _wait_timeout(self) -> float:
        return self.wait_timeout

    def _after_wait(self) -> None:
        """Hook: called after every wait of the dispatcher."""

    async def _dispatch(self) -> None:
        while True:
            if self._wakeup.done():
                self._wakeup = self._loop.create_future()
            while self._due:
                reg = self._due.popleft()
                if reg.inflight or not self._current(reg):
                    continue
                self._launch(reg)
            reg = None  # hold nothing of a registration while waiting
            waiting = [*self._inflight, self._wakeup]
            done, _ = await asyncio.wait(
                waiting, timeout=self._wait_timeout(), return_when=asyncio.FIRST_COMPLETED
            )
            for fut in done:
                if fut in self._inflight:
                    self._on_get_done(fut)
            done = fut = waiting = None
            self._after_wait()

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
        self._send_pool.shutdown(wait=False)
        self._get_pool.shutdown(wait=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def make(connector, *, stage_id, src_stage_id=None, build_payload=None, **options):
    return LanesAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **options,
    )
