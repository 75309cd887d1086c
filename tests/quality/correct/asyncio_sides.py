"""A correct ChunkAdapter with ONE asyncio event loop PER SIDE, each in its own daemon thread.

The send side's loop runs one coroutine, the SAVE task; the receive side's loop runs
one coroutine, the RECV task. Each loop's default executor is a one-worker thread
pool, and every blocking call goes to it with ``asyncio.to_thread``: ``build_payload``
and ``connector.put`` on the send side, ``connector.get`` on the receive side. So a
blocked put never holds up a get, and the sender builds and puts one chunk at a time,
on one worker, in save order (R5).

The FIFO is a plain ``deque`` under a ``threading.Lock``: ``save_async`` snapshots,
appends ``(request_id, snapshot, is_final)`` and wakes the SAVE task through its
loop (``call_soon_threadsafe`` of an ``asyncio.Event.set``), as R3 describes it.
The receiver keeps a polling queue of ``(request_id, token)`` entries, one per live
registration. A round takes every entry, hands the whole round's gets to the
receive worker in ONE ``asyncio.to_thread`` call (one thread hand-off per round, not
per get: idle polling stays cheap), and commits what came back on the loop. An entry
is put back unless its final was committed; an entry whose token is no longer
current (cleaned up, perhaps registered again) is dropped (R12, R16). The worker
reads each entry's token and next id under the lock right before its get, and the
commit re-checks the token in the critical section that commits (R16).

``stop()`` sets the stop flag, wakes both tasks through their loops and joins both
threads against one deadline (``join_timeout``, 1 s); each loop stops itself once its
task has returned, so a put under way when ``stop()`` is called ends before it
returns, unless it is blocked (then the daemon threads are abandoned and the blocked
worker taken off ``concurrent.futures``' exit-time join list). Factory:
``tests.quality.correct.asyncio_sides:make``.
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
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)

BuildPayload = Callable[[str, Any, bool], Any]
# One entry of a receive round: (request_id, token, chunk id, what its get returned).
_Fetched = tuple[str, object, int, Any]


def _identity(request_id: str, snapshot: Any, is_final: bool) -> Any:
    return snapshot


class _Failed:
    """What a blocking call that raised returns to its coroutine (it never raises
    there, so no exception from the connector or the build reaches a task, R22)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _guarded(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except (Exception, asyncio.CancelledError) as exc:
        return _Failed(exc)


class _Side:
    """One daemon thread running one event loop with one task on it; the loop stops
    when the task returns. Blocking calls go to the loop's one-worker default executor."""

    def __init__(self, name: str, main: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self.loop = asyncio.new_event_loop()
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self.loop.set_default_executor(self.pool)
        self._main = main
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        task = self.loop.create_task(self._main())
        task.add_done_callback(lambda _task: self.loop.stop())
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()  # shuts the pool down too (it is the default executor)

    def stop_within(self, seconds: float) -> None:
        """Stop the loop after *seconds* even if its task has not returned (it awaits a
        call blocked forever): the thread ends, the blocked worker is abandoned."""
        self.call(lambda: self.loop.call_later(seconds, self.loop.stop) and None)

    def call(self, callback: Callable[[], None]) -> bool:
        """Run *callback* on this side's loop; False once the loop is closed."""
        try:
            self.loop.call_soon_threadsafe(callback)
        except RuntimeError:
            return False
        return True

    def join(self, deadline: float) -> None:
        """Join the loop's thread, then its worker (``loop.close()`` shuts the pool down
        without waiting: an idle worker is still on its way out), by *deadline*."""
        me = threading.current_thread()
        for thread in [self.thread, *getattr(self.pool, "_threads", ())]:
            if thread is not me:
                thread.join(max(0.0, deadline - time.monotonic()))

    def forget_blocked_worker(self) -> None:
        """Called when stop() gives up on this side: a worker blocked forever must not
        hold the interpreter open at exit."""
        for worker in list(getattr(self.pool, "_threads", ())):
            if worker.is_alive():
                concurrent.futures.thread._threads_queues.pop(worker, None)


class AsyncioSidesAdapter:
    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: BuildPayload | None = None,
        put_tries: int = 3,
        idle_backoff: float = 0.001,
        join_timeout: float = 1.0,
    ) -> None:
        if isinstance(put_tries, bool) or not isinstance(put_tries, int) or put_tries < 1:
            raise ValueError(f"put_tries must be an int >= 1, got {put_tries!r}")
        if build_payload is not None and not callable(build_payload):
            raise TypeError("build_payload must be callable or None")
        for name, seconds in (("idle_backoff", idle_backoff), ("join_timeout", join_timeout)):
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
                raise TypeError(f"{name} must be a number of seconds")
            if not 0 <= seconds < float("inf"):
                raise ValueError(f"{name} must be a finite number >= 0, got {seconds!r}")
        self.connector = connector
        self.stage_id = stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self.build_payload: BuildPayload = build_payload or _identity
        self.put_tries = put_tries
        self.idle_backoff = float(idle_backoff)
        self.join_timeout = float(join_timeout)

        # Set once by stop(); read by the scheduler calls that start work (R19), by both
        # tasks between steps, and on the send worker right before a put (R18).
        self._stopped = threading.Event()

        # Guards _outbox (the FIFO), _sent (next id per open stream) and _cancel_marks.
        # Taken by save_async and cancel_sender (the scheduler), by the SAVE task (take an
        # item, the cancel check) and by the send worker (the id before a put, the update
        # right after it). Never held across a build or a put; nobody waits on it (the
        # SAVE task waits on _outbox_ready, set through the send loop).
        self._send_lock = threading.Lock()
        self._outbox: deque[tuple[str, Any, bool]] = deque()
        self._sent: dict[str, int] = {}
        self._cancel_marks: set[str] = set()

        # Guards _tokens, _next, _polling and _inbox. Taken by load_async, poll_ready and
        # cleanup_receiver (the scheduler) and by the RECV task (take an entry and read its
        # registration before the get; re-check the token and commit after it, in one
        # critical section, R16). Never held across a get; nobody waits on it (the RECV
        # task waits on _polling_ready, set through the receive loop).
        self._recv_lock = threading.Lock()
        self._tokens: dict[str, object] = {}
        self._next: dict[str, int] = {}
        self._polling: deque[tuple[str, object]] = deque()
        self._inbox: dict[str, list[dict[str, Any]]] = {}

        # Loop-side events, each set only on its own loop (through call_soon_threadsafe):
        # _outbox_ready by save_async and stop(), waited on by the SAVE task; _send_stop by
        # stop(), cuts a put-retry pause short; _polling_ready by load_async and stop(),
        # waited on by the RECV task. Every wait has a timeout and re-checks (R20).
        self._outbox_ready = asyncio.Event()
        self._send_stop = asyncio.Event()
        self._polling_ready = asyncio.Event()
        self._send_side = _Side(f"asyncio-send-{stage_id}", self._save_task)
        self._recv_side = _Side(f"asyncio-recv-{stage_id}", self._recv_task)

    # ---------------------------------------------------------------- checks

    @staticmethod
    def _rid(request_id: Any) -> None:
        if not isinstance(request_id, str):
            raise TypeError(f"request_id must be a str, not {type(request_id).__name__}")

    def _running(self, call: str) -> None:
        if self._stopped.is_set():
            raise RuntimeError(f"{call}: adapter stopped")

    # ---------------------------------------------------------------- sender

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._rid(request_id)
        if not isinstance(is_final, bool):
            raise TypeError(f"is_final must be a bool, not {type(is_final).__name__}")
        self._running("save_async")
        snapshot = copy.deepcopy(obj)
        with self._send_lock:
            self._running("save_async")
            self._outbox.append((request_id, snapshot, is_final))
        self._send_side.call(self._outbox_ready.set)

    def cancel_sender(self, request_id: str) -> None:
        self._rid(request_id)
        with self._send_lock:
            self._running("cancel_sender")
            self._cancel_marks.add(request_id)

    async def _save_task(self) -> None:
        while not self._stopped.is_set():
            self._outbox_ready.clear()
            with self._send_lock:
                item = self._outbox.popleft() if self._outbox else None
                cancelled = item is not None and item[0] in self._cancel_marks
            if item is None:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._outbox_ready.wait(), 0.1)
                continue
            try:
                await self._send(item[0], item[1], item[2], cancelled)
            except Exception:  # the SAVE task never dies (R22)
                log.exception("sending a chunk of %r failed", item[0])

    async def _send(self, request_id: str, snapshot: Any, final: bool, cancelled: bool) -> None:
        if cancelled and not final:
            return  # R6: dropped, no build
        payload = None
        if not cancelled:
            built = await asyncio.to_thread(
                _guarded, self.build_payload, request_id, snapshot, final
            )
            if isinstance(built, _Failed):
                log.info("build_payload failed for %r: %r", request_id, built.error)
                if not final:
                    return  # R7: dropped
            else:
                payload = built
        if payload is None and not final:
            return  # R8: skipped, no id used
        value = {"data": payload, "finished": final}
        tries = 0
        while not self._stopped.is_set():
            outcome = await asyncio.to_thread(self._put, request_id, value, final)
            if not isinstance(outcome, _Failed):
                return  # put, or not started because stop() has begun
            tries += 1
            if not final and tries >= self.put_tries:
                log.info("dropped a chunk of %r after %d failed puts", request_id, tries)
                return  # R10: the next chunk takes its id
            with contextlib.suppress(asyncio.TimeoutError):
                # the exponent capped: 2 ** 1024 is no float (a final through a long outage)
                pause = min(0.002 * 2 ** min(tries, 30), 0.05)
                await asyncio.wait_for(self._send_stop.wait(), pause)

    def _put(self, request_id: str, value: dict[str, Any], final: bool) -> bool | _Failed:
        """On the send worker: one try under the stream's next id, the state updated right
        after the put returns (R9, R11)."""
        with self._send_lock:
            chunk = self._sent.get(request_id, 0)
        if self._stopped.is_set():
            return False  # no put starts after stop() (R18)
        try:
            self.connector.put(f"{request_id}_{self.stage_id}_{chunk}", value)
        except (Exception, asyncio.CancelledError) as exc:
            return _Failed(exc)
        with self._send_lock:
            if final:
                self._sent.pop(request_id, None)
                self._cancel_marks.discard(request_id)
            else:
                self._sent[request_id] = chunk + 1
        return True

    # ---------------------------------------------------------------- receiver

    def load_async(self, request_id: str) -> None:
        self._rid(request_id)
        with self._recv_lock:
            self._running("load_async")
            if request_id in self._tokens:
                return  # R12: idempotent while registered
            token = object()
            self._tokens[request_id] = token
            self._next[request_id] = 0
            self._polling.append((request_id, token))
        self._recv_side.call(self._polling_ready.set)

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        with self._recv_lock:
            inbox, self._inbox = self._inbox, {}
        return inbox

    def cleanup_receiver(self, request_id: str) -> None:
        self._rid(request_id)
        with self._recv_lock:
            self._tokens.pop(request_id, None)
            self._next.pop(request_id, None)
            self._inbox.pop(request_id, None)

    async def _recv_task(self) -> None:
        while not self._stopped.is_set():
            self._polling_ready.clear()
            with self._recv_lock:
                entries = list(self._polling)
                self._polling.clear()
            if not entries:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._polling_ready.wait(), 0.1)
                continue
            try:
                fetched = await asyncio.to_thread(self._get_round, entries)
                progress = self._commit_round(fetched)
            except Exception:  # the RECV task never dies (R22)
                log.exception("receiving failed")
                progress = False
            if not progress:
                await asyncio.sleep(self.idle_backoff)  # R17: ~1 ms after a quiet round

    def _get_round(self, entries: list[tuple[str, object]]) -> list[_Fetched]:
        """On the receive worker: one get per entry, in queue order (no entry waits behind
        another's later chunks, R17). The entry's token and next id are read under the
        lock right before its get; a stale entry gets nothing."""
        fetched: list[_Fetched] = []
        for request_id, token in entries:
            if self._stopped.is_set():
                break  # the rest is not fetched; nothing is received after stop()
            with self._recv_lock:
                current = self._tokens.get(request_id) is token
                chunk = self._next[request_id] if current else -1
            if not current:
                fetched.append((request_id, token, chunk, None))
                continue
            key = f"{request_id}_{self.src_stage_id}_{chunk}"
            fetched.append((request_id, token, chunk, _guarded(self.connector.get, key)))
        return fetched

    def _commit_round(self, fetched: list[_Fetched]) -> bool:
        """On the receive loop: commit what the round got, each value only if its
        registration is still the one it was fetched for (R16), in id order (R13)."""
        progress = False
        with self._recv_lock:
            for request_id, token, chunk, got in fetched:
                if self._tokens.get(request_id) is not token:
                    continue  # cleaned up (before or during its get): entry and value dropped
                if not isinstance(got, dict) or self._next[request_id] != chunk:
                    self._polling.append((request_id, token))  # empty or failed: later (R13)
                    continue
                self._inbox.setdefault(request_id, []).append(got)
                self._next[request_id] = chunk + 1
                progress = True
                if got.get("finished") is not True:
                    self._polling.append((request_id, token))  # R13: never past the final
        return progress

    # ---------------------------------------------------------------- lifecycle

    def stop(self) -> None:
        """Stop flag, wake both loops, join both threads against one deadline (R18)."""
        first = not self._stopped.is_set()
        self._stopped.set()
        deadline = time.monotonic() + (self.join_timeout if first else 0.0)
        if first:
            self._send_side.call(self._wake_sender)
            self._recv_side.call(self._polling_ready.set)
            for side in (self._send_side, self._recv_side):
                side.stop_within(self.join_timeout / 2)
        for side in (self._send_side, self._recv_side):
            side.join(deadline)
            if side.thread.is_alive():
                side.forget_blocked_worker()

    def _wake_sender(self) -> None:
        self._outbox_ready.set()
        self._send_stop.set()

    def __enter__(self) -> AsyncioSidesAdapter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: BuildPayload | None = None,
    **options: Any,
) -> AsyncioSidesAdapter:
    """The factory: the contract's keywords plus ``put_tries``, ``idle_backoff`` and
    ``join_timeout``; any other option is ignored."""
    tuning = {
        k: options[k]
        for k in ("put_tries", "idle_backoff", "join_timeout")
        if options.get(k) is not None
    }
    return AsyncioSidesAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **tuning,
    )
