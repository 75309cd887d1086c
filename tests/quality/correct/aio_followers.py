"""A correct ChunkAdapter on ONE asyncio event loop in a daemon thread: an
``asyncio.Queue`` sender task, and one follower task per registration.

Design notes (keeps R1-R24 of docs/contract.md):

- One daemon thread runs the loop (``run_forever``). Blocking calls never run on
  it: ``build_payload`` and ``connector.put`` go through ``asyncio.to_thread`` to
  the loop's default executor, a ONE-worker pool (the SAVE worker); ``connector.get``
  goes through ``run_in_executor`` to a separate pool of ``get_workers`` (2), so a
  blocked put never holds up a get, nor one blocked get every registration.
- Sender. ``save_async`` snapshots on the scheduler thread and hands
  ``(request_id, snapshot, is_final)`` to the loop with ``call_soon_threadsafe``
  (FIFO), where it is put on an ``asyncio.Queue`` and the SAVE task is woken. The
  SAVE task takes items one at a time in that order (R5); the cancel mark (a
  ``set`` under the ``threading.Lock`` ``_tx_lock``) is read right after the take.
  On the SAVE worker, one function reads the stream's next id, checks for
  ``stop()``, puts, and updates the id (or forgets the stream after its final)
  right after the put returns (R9, R11). Retries: capped exponential pause on the
  loop (cut short by ``stop()``), a non-final ``put_tries`` tries in all, a final
  until it succeeds or ``stop()``.
- Receiver. ``load_async`` creates a ``_Reg`` (the object is the token) under
  ``_rx_lock`` and asks the loop to start a follower task for it. A follower
  loops: under the lock, check that its registration is still current and not
  finished and read its next id; get (on the get pool, where the worker checks the
  registration again right before the get: a get queued behind others may start after
  a cleanup and a new load, and on a consuming connector would take the new
  registration's chunk); under the lock again, check the registration and commit
  (R16). After a committed chunk it gets the next id at once; after an empty or
  failed get it sleeps ``idle_backoff`` (1 ms); after the final it ends (R13). A
  follower whose registration was cleaned up ends at its next check; the new
  registration has a follower of its own.
- ``poll_ready`` swaps ``_ready`` out under ``_rx_lock``; ``cleanup_receiver`` forgets
  the registration and its ready chunks under the same lock.
- ``stop()`` sets the stop flag, wakes the loop, which cancels the followers and
  stops once the SAVE task has returned, or after half the join timeout if that task
  awaits a call blocked forever; then joins the loop's thread and the pools' workers
  against one deadline. A blocked worker is abandoned (taken off
  ``concurrent.futures``' exit-time join list).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import concurrent.futures.thread
import contextlib
import copy
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

_log = logging.getLogger(__name__)


def _seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number of seconds >= 0")
    return value


class _Failed:
    """What a blocking call that raised returns to its coroutine."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _guarded(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except (Exception, asyncio.CancelledError) as exc:
        return _Failed(exc)


_PUT, _HALTED = "put", "halted"


class _Reg:
    __slots__ = ("done", "next", "rid")

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.next = 0
        self.done = False


class AioFollowersAdapter:
    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Callable[[str, Any, bool], Any] | None = None,
        get_workers: int = 2,
        put_tries: int = 3,
        put_backoff: float = 0.005,
        put_backoff_max: float = 0.1,
        wait_timeout: float = 0.1,
        idle_backoff: float = 0.001,
        join_timeout: float = 1.0,
        snapshot: Callable[[Any], Any] | None = None,
    ) -> None:
        if isinstance(put_tries, bool) or not isinstance(put_tries, int) or put_tries < 1:
            raise ValueError(f"put_tries must be an int >= 1, got {put_tries!r}")
        if isinstance(get_workers, bool) or not isinstance(get_workers, int) or get_workers < 1:
            raise ValueError(f"get_workers must be an int >= 1, got {get_workers!r}")
        if build_payload is not None and not callable(build_payload):
            raise TypeError("build_payload must be callable or None")
        if snapshot is not None and not callable(snapshot):
            raise TypeError("snapshot must be callable or None")
        self.connector = connector
        self.stage_id = stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self._build = build_payload
        self._snapshot = snapshot or copy.deepcopy
        self.put_tries = put_tries
        self._backoff = _seconds("put_backoff", put_backoff)
        self._backoff_max = _seconds("put_backoff_max", put_backoff_max)
        self._wait = max(0.001, _seconds("wait_timeout", wait_timeout))
        self._idle = _seconds("idle_backoff", idle_backoff)
        self.join_timeout = _seconds("join_timeout", join_timeout)
        self._halt = threading.Event()
        self._stats_lock = threading.Lock()
        self._stats = {"puts": 0, "put_failures": 0, "dropped": 0, "skipped": 0,
                       "build_failures": 0, "gets": 0, "get_failures": 0,
                       "committed": 0}  # fmt: skip

        # ---- sender state shared with the scheduler (never held across a call)
        self._tx_lock = threading.Lock()
        self._next_id: dict[str, int] = {}
        self._cancelled: set[str] = set()

        # ---- receiver state shared with the scheduler (never held across a call)
        self._rx_lock = threading.Lock()
        self._regs: dict[str, _Reg] = {}
        self._ready: dict[str, list[Any]] = {}

        # ---- the loop and its pools
        self._loop = asyncio.new_event_loop()
        self._save_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"aio-save-{stage_id}"
        )
        self._get_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=get_workers, thread_name_prefix=f"aio-get-{stage_id}"
        )
        self._loop.set_default_executor(self._save_pool)
        # loop-side objects, touched on the loop only
        self._fifo: asyncio.Queue[tuple[str, Any, bool]] = asyncio.Queue()
        self._wake = asyncio.Event()
        self._stop_evt = asyncio.Event()
        self._followers: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self._run, name=f"aio-loop-{stage_id}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ helpers

    def _count(self, name: str, n: int = 1) -> None:
        with self._stats_lock:
            self._stats[name] += n

    def stats(self) -> dict[str, int]:
        with self._stats_lock:
            out = dict(self._stats)
        with self._tx_lock:
            out["open_streams"] = len(self._next_id)
            out["cancel_marks"] = len(self._cancelled)
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

    # ------------------------------------------------------------------ the loop

    def _run(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        sender = loop.create_task(self._send_main())
        sender.add_done_callback(lambda _task: loop.stop())
        try:
            loop.run_forever()
        finally:
            try:
                left = [task for task in asyncio.all_tasks(loop) if not task.done()]
                for task in left:
                    task.cancel()
                if left:  # let them see the cancellation (bounded: never waits long)
                    loop.run_until_complete(asyncio.wait(left, timeout=0.05))
            except Exception:  # defensive
                _log.debug("loop shutdown", exc_info=True)
            self._get_pool.shutdown(wait=False)
            loop.close()  # shuts the default executor (the SAVE worker) down too

    def _on_stop(self) -> None:
        """On the loop: stop() has begun."""
        self._wake.set()
        self._stop_evt.set()
        for task in list(self._followers):
            task.cancel()
        # a SAVE task awaiting a call blocked forever never returns: stop anyway
        self._loop.call_later(self.join_timeout / 2, self._loop.stop)

    # ------------------------------------------------------------------ sender

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._check_rid(request_id)
        if not isinstance(is_final, bool):
            raise TypeError(f"is_final must be a bool, got {type(is_final).__name__}")
        self._check_running("save_async")
        snap = self._snapshot(obj)  # may raise: nothing is queued
        with self._tx_lock:
            self._check_running("save_async")
            self._loop.call_soon_threadsafe(self._enqueue, (request_id, snap, is_final))

    def _enqueue(self, item: tuple[str, Any, bool]) -> None:
        """On the loop, in save order."""
        self._fifo.put_nowait(item)
        self._wake.set()

    def cancel_sender(self, request_id: str) -> None:
        self._check_rid(request_id)
        with self._tx_lock:
            self._check_running("cancel_sender")
            self._cancelled.add(request_id)

    async def _send_main(self) -> None:
        while not self._halt.is_set():
            if self._fifo.empty():
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._wait)
                continue
            rid, snap, final = self._fifo.get_nowait()
            with self._tx_lock:
                cancelled = rid in self._cancelled
            try:
                await self._send(rid, snap, final, cancelled)
            except Exception:  # the SAVE task never dies (R22)
                if not self._halt.is_set():
                    _log.exception("SAVE task: a chunk of %r was lost", rid)

    async def _send(self, rid: str, snap: Any, final: bool, cancelled: bool) -> None:
        if cancelled:
            if not final:
                self._count("dropped")
                return
            data = None
        else:
            if self._build is None:
                data = snap
            else:
                built = await asyncio.to_thread(_guarded, self._build, rid, snap, final)
                if isinstance(built, _Failed):
                    self._count("build_failures")
                    _log.warning("build_payload(%r) raised %r", rid, built.error)
                    if not final:
                        self._count("dropped")
                        return
                    data = None
                else:
                    data = built
            if data is None and not final:
                self._count("skipped")
                return
        wire = {"data": data, "finished": final}
        tries = 0
        while not self._halt.is_set():
            outcome = await asyncio.to_thread(self._put_once, rid, wire, final)
            if not isinstance(outcome, _Failed):
                return  # put, or not started because stop() has begun
            tries += 1
            self._count("put_failures")
            if not final and tries >= self.put_tries:
                self._count("dropped")
                _log.warning("dropping a chunk of %r after %d failed puts", rid, tries)
                return
            pause = min(self._backoff * 2 ** min(tries - 1, 30), self._backoff_max)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop_evt.wait(), pause)

    def _put_once(self, rid: str, wire: dict[str, Any], final: bool) -> str | _Failed:
        """On the SAVE worker: one try under the stream's next id."""
        with self._tx_lock:
            chunk_id = self._next_id.get(rid, 0)
        if self._halt.is_set():
            return _HALTED  # no put starts once stop() has begun
        try:
            self.connector.put(f"{rid}_{self.stage_id}_{chunk_id}", wire)
        except (Exception, asyncio.CancelledError) as exc:
            return _Failed(exc)
        self._count("puts")
        with self._tx_lock:
            if final:
                self._next_id.pop(rid, None)
                self._cancelled.discard(rid)
            else:
                self._next_id[rid] = chunk_id + 1
        return _PUT

    # ------------------------------------------------------------------ receiver

    def load_async(self, request_id: str) -> None:
        self._check_rid(request_id)
        with self._rx_lock:
            self._check_running("load_async")
            if request_id in self._regs:
                return  # R12: idempotent while registered
            reg = _Reg(request_id)
            self._regs[request_id] = reg
            self._loop.call_soon_threadsafe(self._spawn, reg)

    def _spawn(self, reg: _Reg) -> None:
        """On the loop: start the registration's follower (unless it is gone already)."""
        if self._halt.is_set():
            return
        with self._rx_lock:
            if self._regs.get(reg.rid) is not reg:
                return
        task = self._loop.create_task(self._follow(reg))
        self._followers.add(task)
        task.add_done_callback(self._followers.discard)

    async def _follow(self, reg: _Reg) -> None:
        loop = asyncio.get_running_loop()
        while not self._halt.is_set():
            with self._rx_lock:
                if self._regs.get(reg.rid) is not reg or reg.done:
                    return
                chunk_id = reg.next
            key = f"{reg.rid}_{self.src_stage_id}_{chunk_id}"
            self._count("gets")
            try:
                got = await loop.run_in_executor(self._get_pool, self._get_if_current, reg, key)
            except RuntimeError:  # the pool was shut down: stop() has begun
                return
            with self._rx_lock:
                if self._regs.get(reg.rid) is not reg:
                    return  # cleaned up while the get was in flight: discarded
                if isinstance(got, dict):
                    self._ready.setdefault(reg.rid, []).append(got)
                    reg.next = chunk_id + 1
                    if got.get("finished") is True:
                        reg.done = True  # R13: never polled again
                    committed = True
                else:
                    committed = False
            if committed:
                self._count("committed")
                continue  # progress: the next id at once
            if isinstance(got, _Failed):
                self._count("get_failures")
            await asyncio.sleep(self._idle)  # R17: ~1 ms after an empty or failed get

    def _get_if_current(self, reg: _Reg, key: str) -> Any:
        """On a get worker: the get, if *reg* is still current right before it. A get
        queued behind others may start after a cleanup and a new load; on a consuming
        connector it would take the new registration's chunk and throw it away."""
        with self._rx_lock:
            if self._regs.get(reg.rid) is not reg:
                return None
        return _guarded(self.connector.get, key)

    def poll_ready(self) -> dict[str, list[Any]]:
        with self._rx_lock:
            out, self._ready = self._ready, {}
        return out

    def cleanup_receiver(self, request_id: str) -> None:
        self._check_rid(request_id)
        with self._rx_lock:
            self._regs.pop(request_id, None)
            self._ready.pop(request_id, None)

    # ------------------------------------------------------------------ lifecycle

    def stop(self) -> None:
        first = not self._halt.is_set()
        self._halt.set()
        deadline = time.monotonic() + (self.join_timeout if first else 0.0)
        if first:
            with contextlib.suppress(RuntimeError):  # the loop is closed already
                self._loop.call_soon_threadsafe(self._on_stop)
        me = threading.current_thread()
        if self._thread is not me:
            self._thread.join(max(0.0, deadline - time.monotonic()))
        pools = (self._save_pool, self._get_pool)
        for pool in pools:
            pool.shutdown(wait=False)  # idempotent; idle workers leave
        workers = [t for pool in pools for t in list(getattr(pool, "_threads", ()))]
        for thread in workers:
            if thread is not me:
                thread.join(max(0.0, deadline - time.monotonic()))
        for thread in workers:
            if thread.is_alive():  # blocked in a build, a put or a get: abandoned
                concurrent.futures.thread._threads_queues.pop(thread, None)

    def __enter__(self) -> AioFollowersAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_OPTIONS = ("get_workers", "put_tries", "put_backoff", "put_backoff_max", "wait_timeout",
            "idle_backoff", "join_timeout", "snapshot")  # fmt: skip


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Callable[[str, Any, bool], Any] | None = None,
    **options: Any,
) -> AioFollowersAdapter:
    """The factory: the contract's keywords plus the options in ``_OPTIONS``; any
    other option is ignored."""
    return AioFollowersAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **{k: v for k, v in options.items() if k in _OPTIONS and v is not None},
    )
