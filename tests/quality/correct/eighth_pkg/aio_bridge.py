"""aio_bridge — a ChunkAdapter whose state lives on ONE asyncio event loop, fed by forwarded calls.

Design (keeps R1-R24 of the contract):

- One daemon thread runs an event loop. The scheduler's sending calls never touch the
  sender's state: ``save_async`` snapshots on the scheduler thread and forwards
  ``(request_id, snapshot, is_final)`` with ``call_soon_threadsafe``; ``cancel_sender``
  forwards the cancel the same way. The loop's ready queue is FIFO, so the loop sees
  saves and cancels in the order the scheduler made them. The FIFO (a deque), the next
  chunk ids and the cancel marks are touched by loop callbacks and the sender
  coroutine only: no lock.
- The sender coroutine takes one item at a time (R5), reads the mark on the loop, builds
  and puts on a one-worker daemon pool (``run_in_executor``). A successful put posts
  ``_after_put`` to the loop FROM THE WORKER, right after the put returns and before the
  job itself returns. So the id update (or, after a final, forgetting the stream and its
  mark) is ordered in the loop's FIFO exactly where the put happened relative to the
  scheduler's forwarded cancels: a cancel made after the final's put returned lands after
  the update and marks the next stream (R6, R27); one made before lands before it.
- Receiving: the scheduler side keeps only what the fence needs, under ``_buf_lock``:
  the current token of each registration (``_live``) and the ready lists. ``load_async``
  decides idempotency there and forwards the registration; ``cleanup_receiver`` forgets
  token and ready chunks under the lock (the commit fence) and forwards the cleanup. The
  receive coroutine goes round the registrations on the loop, one get each (on a
  one-worker get pool, which checks the token right before the get), and commits under
  ``_buf_lock`` only if the token is still current (R16).
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
    __slots__ = ("next", "rid", "token")

    def __init__(self, rid: str, token: object) -> None:
        self.rid = rid
        self.token = token
        self.next = 0


class BridgeAdapter:
    def __init__(self, connector, *, stage_id, src_stage_id=None, build_payload=None, **options):
        o = take_options(type(self).__name__, options)
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
        self._stopped = False
        self._stop_lock = threading.Lock()
        self._gate = PutGate()
        self._save_pool = DaemonPool(1, "bridge-save")
        self._get_pool = DaemonPool(1, "bridge-get")
        self._lt = LoopThread("bridge-loop")
        self._loop = self._lt.loop
        # loop-owned (callbacks and coroutines on the loop only)
        self._fifo: deque = deque()
        self._next: dict[str, int] = {}
        self._marks: set[str] = set()
        self._regs: dict[str, _Reg] = {}
        self._pollq: deque = deque()
        self._tx_wake: asyncio.Event | None = None
        self._rx_wake: asyncio.Event | None = None
        self._tasks: list = []
        # shared with the scheduler thread, under _buf_lock (never held across a call out)
        self._buf_lock = threading.Lock()
        self._live: dict[str, object] = {}
        self._ready: dict[str, list] = {}
        self._lt.post(self._setup)
        self._lt.start()

    # ------------------------------------------------------------------ loop setup
    def _setup(self) -> None:
        self._tx_wake = asyncio.Event()
        self._rx_wake = asyncio.Event()
        self._tasks = [
            self._loop.create_task(self._sender()),
            self._loop.create_task(self._receiver()),
        ]

    def _running(self) -> None:
        if self._stopped:
            raise RuntimeError("adapter is stopped")

    def _forward(self, fn, *args) -> None:
        if not self._lt.post(fn, *args):
            raise RuntimeError("adapter is stopped")

    # ------------------------------------------------------------------ sender
    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        check_rid(request_id)
        check_final(is_final)
        self._running()
        snap = self._snapshot(obj)
        self._forward(self._on_save, (request_id, snap, is_final))

    def cancel_sender(self, request_id: str) -> None:
        check_rid(request_id)
        self._running()
        self._forward(self._on_cancel, request_id)

    def _on_save(self, item) -> None:
        self._fifo.append(item)
        self._tx_wake.set()

    def _on_cancel(self, request_id: str) -> None:
        self._marks.add(request_id)

    async def _sender(self) -> None:
        while True:
            if not self._fifo:
                self._tx_wake.clear()
                try:  # noqa: SIM105
                    await asyncio.wait_for(self._tx_wake.wait(), self.wait_timeout)
                except asyncio.TimeoutError:
                    pass
                continue
            rid, snap, fin = self._fifo.popleft()
            await self._send_item(rid, snap, fin)
            rid = snap = None  # a suspended coroutine holds nothing of a sent chunk

    async def _build_payload(self, rid, snap, fin):
        kind, payload = await self._loop.run_in_executor(
            self._save_pool, guarded, self._build, rid, snap, fin
        )
        if kind == "err":
            raise payload
        return payload

    async def _send_item(self, rid: str, snap: Any, fin: bool) -> None:
        if rid in self._marks:
            if not fin:
                return  # cancelled: dropped, no build
            payload = None
        else:
            try:
                payload = await self._build_payload(rid, snap, fin)
            except Exception:
                self._log.warning("build_payload failed for %r", rid, exc_info=True)
                if not fin:
                    return
                payload = None
        if payload is None and not fin:
            return  # skipped: no put, no id
        await self._put_value(rid, {"data": payload, "finished": fin}, fin)

    async def _put_value(self, rid: str, value: dict, fin: bool, tries: int = 0) -> None:
        delay = self.put_backoff
        while True:
            key = f"{rid}_{self.stage_id}_{self._next.get(rid, 0)}"
            res = await self._loop.run_in_executor(
                self._save_pool, self._put_job, key, value, rid, fin
            )
            if res is True or res is STOPPED:
                return
            tries += 1
            self._log.debug("put of %s failed (%r)", key, res)
            if not fin and tries >= self.put_tries:
                self._log.warning("dropping %s after %d failed puts", key, tries)
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.put_backoff_max)

    def _put_job(self, key: str, value: dict, rid: str, fin: bool):
        if not self._gate.enter():
            return STOPPED
        try:
            kind, err = guarded(self._conn.put, key, value)
            if kind == "err":
                return err
            self._lt.post(self._after_put, rid, fin)  # before this job returns: ordered
            return True
        finally:
            self._gate.leave()

    def _after_put(self, rid: str, fin: bool) -> None:
        if fin:
            self._next.pop(rid, None)
            self._marks.discard(rid)
        else:
            self._next[rid] = self._next.get(rid, 0) + 1

    # ------------------------------------------------------------------ receiver
    def load_async(self, request_id: str) -> None:
        check_rid(request_id)
        self._running()
        with self._buf_lock:
            if request_id in self._live:
                return
            token = object()
            self._live[request_id] = token
        self._forward(self._on_load, request_id, token)

    def cleanup_receiver(self, request_id: str) -> None:
        check_rid(request_id)
        with self._buf_lock:
            token = self._live.pop(request_id, None)
            self._ready.pop(request_id, None)
        if token is not None:
            self._lt.post(self._on_cleanup, request_id, token)

    def poll_ready(self) -> dict:
        with self._buf_lock:
            out, self._ready = self._ready, {}
        return out

    def _on_load(self, rid: str, token: object) -> None:
        reg = _Reg(rid, token)
        self._regs[rid] = reg
        self._pollq.append(reg)
        self._rx_wake.set()

    def _on_cleanup(self, rid: str, token: object) -> None:
        reg = self._regs.get(rid)
        if reg is not None and reg.token is token:
            del self._regs[rid]

    def _get_job(self, rid: str, token: object, key: str):
        with self._buf_lock:
            if self._live.get(rid) is not token:
                return ("stale", None)
        kind, value = guarded(self._conn.get, key)
        if kind == "err":
            return ("err", value)
        return ("value", value) if value is not None else ("empty", None)

    def _commit(self, reg: _Reg, value: dict) -> bool:
        with self._buf_lock:
            if self._live.get(reg.rid) is not reg.token:
                return False
            self._ready.setdefault(reg.rid, []).append(value)
            return True

    async def _receiver(self) -> None:
        while True:
            if not self._pollq:
                self._rx_wake.clear()
                try:  # noqa: SIM105
                    await asyncio.wait_for(self._rx_wake.wait(), self.wait_timeout)
                except asyncio.TimeoutError:
                    pass
                continue
            progress = False
            for _ in range(len(self._pollq)):
                reg = self._pollq.popleft()
                if self._regs.get(reg.rid) is not reg:
                    continue  # a cleaned-up registration's entry
                key = f"{reg.rid}_{self.src_stage_id}_{reg.next}"
                kind, value = await self._loop.run_in_executor(
                    self._get_pool, self._get_job, reg.rid, reg.token, key
                )
                if kind == "stale":
                    continue
                if kind == "value":
                    if not self._commit(reg, value):
                        continue  # stale value: discarded, not progress
                    progress = True
                    reg.next += 1
                    if value.get("finished"):
                        if self._regs.get(reg.rid) is reg:
                            del self._regs[reg.rid]
                        continue  # done: never polled again
                elif kind == "err":
                    self._log.debug("get of %s failed: %r", key, value)
                self._pollq.append(reg)
            reg = value = key = None  # hold nothing of a registration while waiting
            if not progress:
                await asyncio.sleep(self.idle_backoff)

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
    return BridgeAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **options,
    )
