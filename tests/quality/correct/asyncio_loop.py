"""A correct ChunkAdapter whose SAVE and RECV work are coroutines on ONE asyncio event loop.

One daemon thread runs an event loop (``asyncio.new_event_loop()`` and
``loop.run_forever()``) with two tasks on it: the sender, the one consumer of an
``asyncio.Queue`` (the FIFO, R5), and the receiver, which goes round the
registrations one ``get`` each. Every blocking call is handed to an executor with
``await loop.run_in_executor(...)``: ``build_payload`` and ``connector.put`` to the
loop's default executor (a one-worker pool: the SAVE worker), ``connector.get`` to
a second one-worker pool, so a blocked put never holds up a get (or the reverse).

The scheduler-thread calls never wait (R3): ``save_async`` snapshots and hands the
item to the loop with ``loop.call_soon_threadsafe`` (FIFO, so save order is kept);
``cancel_sender``, ``load_async``, ``poll_ready`` and ``cleanup_receiver`` read or
swap shared state under a ``threading.Lock`` that no one holds across a build, a
put or a get (``load_async`` also wakes the receiver through the loop).

Two details keep the contract's edges:

* the sender's state is updated *in the executor thread, right after the put
  returns* (as the reference does on its SAVE thread), not later on the loop: a
  ``cancel_sender`` made once a final is put then always outlives it (R6, R27);
* the receiver reads the registration (its token and next id) under the lock right
  before each ``get`` and re-checks both under the lock when it commits, in the same
  critical section as the commit (R16: ``cleanup_receiver`` is a commit fence).

``stop()`` sets the stop flag, wakes both tasks through the loop and joins the loop
thread against ``join_timeout`` (1 s); the loop stops itself once both tasks have
returned, so a put that started before ``stop()`` ends before ``stop()`` returns
unless it is blocked (then the loop stops at half the join timeout all the same, its
thread ends, the blocked worker, a daemon, is abandoned, and the blocked
executor worker is taken off ``concurrent.futures``' exit-time join list so it
cannot hold the interpreter open). Factory: ``tests.quality.correct.asyncio_loop:make``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import concurrent.futures.thread
import contextlib
import copy
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

BuildPayload = Callable[[str, Any, bool], Any]
Item = tuple[str, Any, bool]
# What a blocking call handed to an executor reports back: ("ok", result),
# ("failed", exception) or ("stopped", None). The executor functions never raise, so an
# exception from the connector or the build (an asyncio.CancelledError included) can
# never cancel or kill a task on the loop (R22).
Outcome = tuple[str, Any]


def _key(request_id: str, stage_id: int, chunk_id: int) -> str:
    """The key of a chunk (R1)."""
    return f"{request_id}_{stage_id}_{chunk_id}"


def _identity(request_id: str, snapshot: Any, is_final: bool) -> Any:
    return snapshot


class _Registration:
    """One ``load_async`` up to its ``cleanup_receiver``; the object itself is the
    per-registration token (R12, R16). Guarded by ``_recv_lock``."""

    __slots__ = ("done", "next_id")

    def __init__(self) -> None:
        self.next_id = 0
        self.done = False  # its final is committed: never polled again (R13)


def _forget_workers(pool: concurrent.futures.ThreadPoolExecutor) -> None:
    """Take *pool*'s live workers off ``concurrent.futures``' exit-time join list: a worker
    blocked forever in a build, a put or a get must not hold the interpreter open (R18)."""
    for worker in list(getattr(pool, "_threads", ())):
        if worker.is_alive():
            concurrent.futures.thread._threads_queues.pop(worker, None)


class AsyncioLoopAdapter:
    """Sender and receiver as two tasks on one event loop in one daemon thread."""

    def __init__(self, connector: Any, **options: Any) -> None:
        """*options*: the keywords of :meth:`_configure`, which checks them."""
        self._configure(connector, **options)

        self._loop = asyncio.new_event_loop()
        # The SAVE worker: the loop's default executor, one thread, so builds and puts run
        # one at a time on one thread (R5). Its worker is spawned by the (daemon) loop
        # thread, so it is a daemon too.
        self._save_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"asyncio-save-{self.stage_id}"
        )
        self._loop.set_default_executor(self._save_pool)
        # The RECV worker: gets only.
        self._recv_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"asyncio-recv-{self.stage_id}"
        )
        # The FIFO (R5). Only the loop touches it: save_async's items arrive through
        # call_soon_threadsafe, in call order; stop() adds a None to wake the send task.
        self._fifo: asyncio.Queue[Item | None] = asyncio.Queue()
        # Loop-side wake-ups (asyncio primitives are set on the loop only, through
        # call_soon_threadsafe): _recv_wake by load_async and stop(), waited on by the
        # receive task with a timeout in a loop that re-checks (R20); _stop_wake by stop(),
        # cuts a put-retry backoff short.
        self._recv_wake = asyncio.Event()
        self._stop_wake = asyncio.Event()
        self._thread = threading.Thread(
            target=self._run_loop, name=f"asyncio-loop-{self.stage_id}", daemon=True
        )
        self._thread.start()

    def _configure(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: BuildPayload | None = None,
        put_tries: int = 3,
        put_backoff: float = 0.005,
        put_backoff_max: float = 0.1,
        idle_backoff: float = 0.001,
        wait_timeout: float = 0.1,
        join_timeout: float = 1.0,
    ) -> None:
        """Check the options and set the state both sides share (the locks and their
        dicts): everything of ``__init__`` but the event loop, its pools and its thread."""
        if not (
            callable(getattr(connector, "put", None)) and callable(getattr(connector, "get", None))
        ):
            raise TypeError("connector must have put(key, value) and get(key)")
        for name, stage in (("stage_id", stage_id), ("src_stage_id", src_stage_id)):
            if stage is not None and (isinstance(stage, bool) or not isinstance(stage, int)):
                raise TypeError(f"{name} must be an int")
        if build_payload is not None and not callable(build_payload):
            raise TypeError("build_payload must be callable or None")
        if isinstance(put_tries, bool) or not isinstance(put_tries, int) or put_tries < 1:
            raise ValueError(f"put_tries must be an int >= 1, got {put_tries!r}")
        for name, seconds in (
            ("put_backoff", put_backoff),
            ("put_backoff_max", put_backoff_max),
            ("idle_backoff", idle_backoff),
            ("wait_timeout", wait_timeout),
            ("join_timeout", join_timeout),
        ):
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
                raise TypeError(f"{name} must be a number of seconds")
            if not 0 <= seconds < float("inf"):
                raise ValueError(f"{name} must be a finite number >= 0, got {seconds!r}")
        if wait_timeout <= 0:
            raise ValueError("wait_timeout must be > 0")
        self.connector = connector
        self.stage_id = stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self.build_payload: BuildPayload = build_payload or _identity
        self.put_tries = put_tries
        self.put_backoff = float(put_backoff)
        self.put_backoff_max = float(put_backoff_max)
        self.idle_backoff = float(idle_backoff)
        self.wait_timeout = float(wait_timeout)
        self.join_timeout = float(join_timeout)

        # Set once by stop(). Read by every scheduler call that starts work (R19), by the
        # tasks on the loop between steps, and by the SAVE worker right before a put (R18).
        self._stopping = threading.Event()

        # Guards the sender state: _next_id and _cancelled. Taken by cancel_sender (the
        # scheduler), by the send task on the loop (the cancel check) and by the SAVE
        # executor worker (the id before a put, the update right after it). Held for a few
        # dict operations only, never across a build or a put; nobody waits on it.
        self._send_lock = threading.Lock()
        self._next_id: dict[str, int] = {}  # absent: next id 0 (R9, R11, R24)
        self._cancelled: set[str] = set()  # cancel marks (R6, R27)

        # Guards the receiver state: _regs and _ready. Taken by load_async, poll_ready and
        # cleanup_receiver (the scheduler) and by the receive task on the loop (the read
        # before a get, and the token check and the commit together, R16). Held for a few
        # dict operations only, never across a get; nobody waits on it.
        self._recv_lock = threading.Lock()
        self._regs: dict[str, _Registration] = {}
        self._ready: dict[str, list[dict[str, Any]]] = {}

    # ------------------------------------------------------------------ the loop thread

    def _run_loop(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        tasks = [loop.create_task(self._send_forever()), loop.create_task(self._recv_forever())]
        left = [len(tasks)]

        def one_done(_task: asyncio.Task[None]) -> None:
            left[0] -= 1
            if left[0] == 0:
                loop.stop()

        for task in tasks:
            task.add_done_callback(one_done)
        try:
            loop.run_forever()
        finally:
            self._recv_pool.shutdown(wait=False)
            loop.close()  # shuts the default executor (the SAVE worker) down too

    def _wake_all(self) -> None:
        """On the loop: stop() has begun; wake every task that waits."""
        self._fifo.put_nowait(None)
        self._recv_wake.set()
        self._stop_wake.set()

    async def _run_blocking(
        self, pool: concurrent.futures.Executor | None, fn: Callable[..., Outcome], *args: Any
    ) -> Outcome:
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    # ------------------------------------------------------------------ validation

    @staticmethod
    def _check_request_id(request_id: Any) -> None:
        if not isinstance(request_id, str):
            raise TypeError(f"request_id must be a str, got {type(request_id).__name__}")

    def _check_running(self, call: str) -> None:
        if self._stopping.is_set():
            raise RuntimeError(f"{call}() called after stop()")

    # ------------------------------------------------------------------ sender (scheduler)

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._check_request_id(request_id)
        if not isinstance(is_final, bool):
            raise TypeError(f"is_final must be a bool, got {type(is_final).__name__}")
        self._check_running("save_async")
        snapshot = copy.deepcopy(obj)  # raises here if obj cannot be copied (R21)
        self._hand_over((request_id, snapshot, is_final))

    def _hand_over(self, item: Item) -> None:
        """Append *item* to the FIFO on the loop (call_soon_threadsafe keeps call order)."""
        try:
            self._loop.call_soon_threadsafe(self._fifo.put_nowait, item)
        except RuntimeError:  # the loop is closed: stop() ran meanwhile
            raise RuntimeError("save_async() called after stop()") from None

    def cancel_sender(self, request_id: str) -> None:
        self._check_request_id(request_id)
        self._check_running("cancel_sender")
        with self._send_lock:
            self._cancelled.add(request_id)

    # ------------------------------------------------------------------ sender (loop)

    async def _send_forever(self) -> None:
        while not self._stopping.is_set():
            item = await self._fifo.get()
            if item is None or self._stopping.is_set():
                return
            try:
                await self._send_one(*item)
            except Exception:  # never let the send task die (R22)
                log.exception("asyncio adapter: sending a chunk of %r failed", item[0])

    async def _send_one(self, request_id: str, snapshot: Any, is_final: bool) -> None:
        with self._send_lock:
            cancelled = request_id in self._cancelled
        if cancelled and not is_final:
            return  # dropped without a build (R6)
        payload: Any = None
        if not cancelled:
            status, result = await self._run_blocking(
                None, self._build_blocking, request_id, snapshot, is_final
            )
            if status == "ok":
                payload = result
            elif not is_final:
                log.info("build_payload failed for %r: chunk dropped (R7): %r", request_id, result)
                return
        if payload is None and not is_final:
            return  # skipped: no put, no id used (R8)
        await self._put_with_retries(request_id, {"data": payload, "finished": is_final})

    def _build_blocking(self, request_id: str, snapshot: Any, is_final: bool) -> Outcome:
        """On the SAVE worker, outside every lock (R7)."""
        try:
            return ("ok", self.build_payload(request_id, snapshot, is_final))
        except (Exception, asyncio.CancelledError) as exc:
            return ("failed", exc)

    async def _put_with_retries(self, request_id: str, value: dict[str, Any]) -> None:
        is_final = value["finished"]
        tries = 0
        while not self._stopping.is_set():
            status, error = await self._run_blocking(
                None, self._put_blocking, request_id, value, is_final
            )
            if status != "failed":
                return  # put ("ok"), or not started because stop() has begun
            tries += 1
            if not is_final and tries >= self.put_tries:
                log.info(
                    "dropping a chunk of %r after %d failed puts: %r", request_id, tries, error
                )
                return  # the next chunk takes its id (R10)
            # the exponent capped: 2 ** 1024 is no float (a final retried through a long outage)
            pause = min(self.put_backoff * 2 ** min(tries - 1, 30), self.put_backoff_max)
            with contextlib.suppress(asyncio.TimeoutError):  # cut short by stop()
                await asyncio.wait_for(self._stop_wake.wait(), pause)

    def _put_blocking(self, request_id: str, value: dict[str, Any], is_final: bool) -> Outcome:
        """On the SAVE worker: put under the stream's next id, then record it at once."""
        with self._send_lock:
            chunk_id = self._next_id.get(request_id, 0)
        if self._stopping.is_set():
            return ("stopped", None)  # no put starts once stop() has begun (R18)
        try:
            self.connector.put(_key(request_id, self.stage_id, chunk_id), value)
        except (Exception, asyncio.CancelledError) as exc:
            return ("failed", exc)  # stored nothing, used no id (R10)
        self._after_put(request_id, chunk_id, is_final)
        return ("ok", None)

    def _after_put(self, request_id: str, chunk_id: int, is_final: bool) -> None:
        """Right after a put returned, still on the SAVE worker."""
        self._advance(request_id, chunk_id, is_final)

    def _advance(self, request_id: str, chunk_id: int, is_final: bool) -> None:
        """The id advances only on a successful put (R9); a final's put ends the stream:
        the sender forgets its id counter and its cancel mark (R6, R11, R24)."""
        with self._send_lock:
            if is_final:
                self._next_id.pop(request_id, None)
                self._cancelled.discard(request_id)
            else:
                self._next_id[request_id] = chunk_id + 1

    # ------------------------------------------------------------------ receiver (scheduler)

    def load_async(self, request_id: str) -> None:
        self._check_request_id(request_id)
        self._check_running("load_async")
        with self._recv_lock:
            if request_id in self._regs:
                return  # idempotent while registered (R12)
            self._regs[request_id] = _Registration()
        # A RuntimeError: the loop is closed, stop() ran meanwhile, nothing to wake.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._recv_wake.set)

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        with self._recv_lock:
            ready, self._ready = self._ready, {}  # one swap (R15)
        return ready

    def cleanup_receiver(self, request_id: str) -> None:
        self._check_request_id(request_id)
        with self._recv_lock:
            self._regs.pop(request_id, None)
            self._ready.pop(request_id, None)

    # ------------------------------------------------------------------ receiver (loop)

    async def _recv_forever(self) -> None:
        while not self._stopping.is_set():
            self._recv_wake.clear()
            with self._recv_lock:
                todo = [(rid, reg) for rid, reg in self._regs.items() if not reg.done]
            if not todo:
                with contextlib.suppress(asyncio.TimeoutError):  # then re-check (R17, R20)
                    await asyncio.wait_for(self._recv_wake.wait(), self.wait_timeout)
                continue
            progress = False
            for request_id, reg in todo:
                if self._stopping.is_set():
                    return
                try:
                    progress = await self._poll_one(request_id, reg) or progress
                except Exception:  # never let the receive task die (R22)
                    log.exception("asyncio adapter: polling %r failed", request_id)
            if not progress:
                await asyncio.sleep(self.idle_backoff)  # ~1 ms after every idle round (R17)

    async def _poll_one(self, request_id: str, reg: _Registration) -> bool:
        """One get for *reg*'s next id; commit it if *reg* is still current (R13, R16)."""
        with self._recv_lock:  # the token, read right before the get
            if self._regs.get(request_id) is not reg or reg.done:
                return False
            chunk_id = reg.next_id
        key = _key(request_id, self.src_stage_id, chunk_id)
        status, value = await self._run_blocking(self._recv_pool, self._get_blocking, key)
        if status != "ok" or not isinstance(value, dict):
            return False  # failed or empty: retried next round (R13)
        return self._commit(request_id, reg, chunk_id, value)

    def _get_blocking(self, key: str) -> Outcome:
        """On the RECV worker, outside every lock."""
        try:
            return ("ok", self.connector.get(key))
        except (Exception, asyncio.CancelledError) as exc:
            return ("failed", exc)

    def _commit(
        self, request_id: str, reg: _Registration, chunk_id: int, value: dict[str, Any]
    ) -> bool:
        with self._recv_lock:  # the token check and the commit in one critical section
            if self._regs.get(request_id) is not reg or reg.next_id != chunk_id or reg.done:
                return False  # cleaned up (or re-registered) while the get was in flight
            self._ready.setdefault(request_id, []).append(value)
            reg.next_id = chunk_id + 1
            reg.done = value.get("finished") is True
        return True

    # ------------------------------------------------------------------ lifecycle

    def stop(self) -> None:
        """Set the stop flag, wake the loop, join its thread against ``join_timeout``;
        idempotent (R18, R19)."""
        first = not self._stopping.is_set()
        self._stopping.set()
        deadline = time.monotonic() + (self.join_timeout if first else 0.0)
        if first:
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                self._loop.call_soon_threadsafe(self._wake_all)
                # a task awaiting a build, put or get blocked forever never returns: the
                # loop stops anyway before the deadline, and only the blocked worker lives on
                self._loop.call_soon_threadsafe(
                    self._loop.call_later, self.join_timeout / 2, self._loop.stop
                )
        me = threading.current_thread()
        # then the workers: the pools are shut down without waiting (the loop's thread
        # must not wait for a blocked one), so an idle worker is still on its way out
        pools = (self._save_pool, self._recv_pool)
        workers = [w for pool in pools for w in list(getattr(pool, "_threads", ()))]
        for thread in [self._thread, *workers]:
            if thread is not me:
                thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():  # blocked in a build, a put or a get: abandoned
            _forget_workers(self._save_pool)
            _forget_workers(self._recv_pool)

    def __enter__(self) -> AsyncioLoopAdapter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


_OPTIONS = (
    "put_tries",
    "put_backoff",
    "put_backoff_max",
    "idle_backoff",
    "wait_timeout",
    "join_timeout",
)


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: BuildPayload | None = None,
    **options: Any,
) -> AsyncioLoopAdapter:
    """The factory: the contract's keywords, the tuning options above; others ignored."""
    known = {k: v for k, v in options.items() if k in _OPTIONS and v is not None}
    return AsyncioLoopAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **known,
    )
