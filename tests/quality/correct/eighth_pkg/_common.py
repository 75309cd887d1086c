"""Plumbing shared by the three asyncio designs: options, checks, a daemon thread pool,
the put gate that keeps "no put starts after stop()", and the loop thread."""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import logging
import queue
import threading
import time
from typing import Any

DEFAULTS: dict[str, Any] = {
    "wait_timeout": 0.1,
    "idle_backoff": 0.001,
    "join_timeout": 1.0,
    "put_tries": 3,
    "put_backoff": 0.005,
    "put_backoff_max": 0.1,
    "snapshot": copy.deepcopy,
    "logger": None,
}

STOPPED = object()  # what a put job returns when stop() came first


def take_options(
    owner: str, options: dict[str, Any], extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The options in effect; an unknown name is refused as Python refuses it."""
    known = dict(DEFAULTS)
    known.update(extra or {})
    for name in options:
        if name not in known:
            raise TypeError(f"{owner}() got an unexpected keyword argument '{name}'")
    known.update(options)
    for name in ("wait_timeout", "idle_backoff", "join_timeout", "put_backoff", "put_backoff_max"):
        value = known[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise TypeError(f"{name} must be a number of seconds >= 0, got {value!r}")
    tries = known["put_tries"]
    if isinstance(tries, bool) or not isinstance(tries, int) or tries < 1:
        raise TypeError(f"put_tries must be an int >= 1, got {tries!r}")
    if not callable(known["snapshot"]):
        raise TypeError("snapshot must be callable")
    return known


def check_stages(stage_id: Any, src_stage_id: Any) -> int:
    if isinstance(stage_id, bool) or not isinstance(stage_id, int):
        raise TypeError(f"stage_id must be an int, got {stage_id!r}")
    if src_stage_id is None:
        return stage_id - 1
    if isinstance(src_stage_id, bool) or not isinstance(src_stage_id, int):
        raise TypeError(f"src_stage_id must be an int or None, got {src_stage_id!r}")
    return src_stage_id


def check_rid(request_id: Any) -> None:
    if not isinstance(request_id, str):
        raise TypeError(f"request_id must be a str, got {type(request_id).__name__}")


def check_final(is_final: Any) -> None:
    if not isinstance(is_final, bool):
        raise TypeError(f"is_final must be a bool, got {type(is_final).__name__}")


def identity_build(request_id: str, snapshot: Any, is_final: bool) -> Any:
    return snapshot


def guarded(fn, *args):
    """Run a blocking call on a worker thread; never raise: ("ok", value) or ("err", exc).

    Catching BaseException here keeps an exception the callee raised (even an
    asyncio.CancelledError) from looking like a cancellation of the awaiting task."""
    try:
        return ("ok", fn(*args))
    except BaseException as exc:
        return ("err", exc)


class DaemonPool(concurrent.futures.ThreadPoolExecutor):
    """A fixed pool of DAEMON worker threads behind the Executor interface.

    A subclass of ThreadPoolExecutor only so that ``loop.set_default_executor``
    accepts it (3.11+ checks the type); none of the base class is used. Its workers
    are daemons and never on concurrent.futures' exit-time join list, so a call
    blocked forever is abandoned by stop() and never holds the interpreter open."""

    def __init__(self, workers: int, name: str) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        self._threads_list = []
        for i in range(workers):
            t = threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            t.start()
            self._threads_list.append(t)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fut, fn, args, kwargs = job
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                fut.set_exception(exc)
            else:
                fut.set_result(result)
            del job, fut, fn, args, kwargs

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        if self._closed:
            raise RuntimeError("pool is shut down")
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._jobs.put((fut, fn, args, kwargs))
        return fut

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:  # type: ignore[override]
        if self._closed:
            return
        self._closed = True
        for _ in self._threads_list:
            self._jobs.put(None)

    def __del__(self) -> None:  # the base class has none we want
        pass


class PutGate:
    """Counts puts in progress. ``enter`` refuses once closed; stop() closes it and then
    waits (against its deadline) for the puts already started: no put starts after
    stop() returns. No lock is held across a put."""

    def __init__(self) -> None:
        self._cv = threading.Condition(threading.Lock())
        self._closed = False
        self._inside = 0

    def enter(self) -> bool:
        with self._cv:
            if self._closed:
                return False
            self._inside += 1
            return True

    def leave(self) -> None:
        with self._cv:
            self._inside -= 1
            if self._inside == 0:
                self._cv.notify_all()

    def close(self) -> None:
        with self._cv:
            self._closed = True

    def wait_idle(self, deadline: float) -> bool:
        with self._cv:
            while self._inside:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(min(left, 0.05))
            return True


class LoopThread:
    """A new event loop run by one daemon thread. ``post`` is call_soon_threadsafe that
    reports a closed loop instead of raising. At the end of ``run_forever`` the tasks
    left are cancelled and given a moment to unwind, then the loop is closed."""

    def __init__(
        self, name: str, default_executor: concurrent.futures.Executor | None = None
    ) -> None:
        self.loop = asyncio.new_event_loop()
        if default_executor is not None:
            self.loop.set_default_executor(default_executor)
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        loop = self.loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            try:
                tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
                for t in tasks:
                    t.cancel()
                if tasks:
                    loop.run_until_complete(asyncio.wait(tasks, timeout=0.2))
            except BaseException:
                logging.getLogger(__name__).debug("loop shutdown", exc_info=True)
            finally:
                loop.close()

    def post(self, fn, *args) -> bool:
        try:
            self.loop.call_soon_threadsafe(fn, *args)
            return True
        except RuntimeError:  # the loop is closed: the adapter has stopped
            return False

    def request_stop(self) -> None:
        self.post(self.loop.stop)

    def join(self, deadline: float) -> None:
        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(max(0.0, deadline - time.monotonic()))
