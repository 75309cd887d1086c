"""A correct ChunkAdapter whose sender runs on a ``ThreadPoolExecutor``, with one chained
job per request; its receiver scans a registry instead of keeping a polling queue.

Design notes (keeps R1-R24 of docs/contract.md):

- Sender. Each request with an open stream (or a cancel mark) has a ``_Chain``: its
  pending chunks (a ``deque``), a ``running`` flag, its next chunk id and its cancel
  mark, all guarded by ``_tx_lock``. ``save_async`` snapshots, appends to the
  chain and, if no job is running for the chain, marks it running and submits ONE
  job for it to the executor (``chain_workers``, 3 by default). The job sends the
  chain's chunks one at a time in save order (R5) until the chain is empty; seeing
  it empty, marking it idle and retiring a clean chain (no stream open, no mark)
  happen in ONE critical section, so a ``save_async`` either finds the job still
  running (and the job takes its chunk) or submits a new one. Requests run side
  by side on the pool's workers; a request never has two jobs at once.
- The cancel mark is read in the section that takes the chunk; builds happen
  outside every lock; the id is read right before a put and advanced right after
  it succeeds; a final's success resets the id to 0 and clears the mark (R11).
  Put retries: capped exponential pause, a non-final ``put_tries`` tries in all, a
  final until it succeeds or ``stop()``.
- The executor's workers are started at construction, from a short-lived daemon
  thread (a worker inherits the daemon flag of the thread whose ``submit`` spawns
  it), so ``save_async`` never spawns a thread: its ``submit`` only enqueues. A
  worker abandoned by ``stop()`` (blocked in a build or a put) is taken off
  ``concurrent.futures``' exit-time join list.
- Receiver. Registrations are ``_Reg`` objects (the object is the token) in the
  dict ``_regs``; the RECV thread's round is every registration that has not
  received its final, read from the registry under the lock at the start of the
  round (so one registration is polled at most once per round: there is no queue
  that could hold two entries). Before each get and again in the critical section
  that commits, the registration must still be ``_regs[rid]`` (the fence, R16).
  ``_ready_n`` counts the chunks committed since the last ``poll_ready``, which
  swaps ``_ready`` out and zeroes the count in one critical section.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import concurrent.futures.thread
import copy
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

_log = logging.getLogger(__name__)

_CALL_ERRORS = (Exception, asyncio.CancelledError)


def _seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number of seconds >= 0")
    return value


class _Chain:
    __slots__ = ("cancelled", "next_id", "pending", "rid", "running")

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.pending: deque[tuple[Any, bool]] = deque()
        self.running = False
        self.next_id = 0
        self.cancelled = False


class _Reg:
    __slots__ = ("done", "next", "rid")

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.next = 0
        self.done = False


class ChainPoolAdapter:
    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Callable[[str, Any, bool], Any] | None = None,
        chain_workers: int = 3,
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
        if (isinstance(chain_workers, bool) or not isinstance(chain_workers, int)
                or chain_workers < 1):  # fmt: skip
            raise ValueError(f"chain_workers must be an int >= 1, got {chain_workers!r}")
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
                       "build_failures": 0, "jobs": 0, "gets": 0, "get_failures": 0,
                       "committed": 0}  # fmt: skip

        # ---- sender
        self._tx_lock = threading.Lock()  # guards _chains and every _Chain's fields
        self._chains: dict[str, _Chain] = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=chain_workers, thread_name_prefix=f"chain-save-{stage_id}"
        )
        self._pool_threads = self._start_workers(chain_workers)

        # ---- receiver
        self._rx_lock = threading.Lock()
        self._rx_cv = threading.Condition(self._rx_lock)
        self._regs: dict[str, _Reg] = {}
        self._ready: dict[str, list[Any]] = {}
        self._ready_n = 0  # chunks committed since the last poll_ready
        self._recv_thread = threading.Thread(
            target=self._recv_main, name=f"chain-recv-{stage_id}", daemon=True
        )
        self._recv_thread.start()

    def _start_workers(self, n: int) -> list[threading.Thread]:
        """Spawn all *n* workers now, from a daemon thread: each submit finds no idle
        worker (the earlier ones hold until all are submitted), so each spawns one."""
        started: list[threading.Thread] = []
        lock = threading.Lock()
        go = threading.Event()

        def hold() -> None:
            with lock:
                started.append(threading.current_thread())
            go.wait(10.0)

        def spawn() -> None:
            futures = [self._pool.submit(hold) for _ in range(n)]
            go.set()
            for future in futures:
                future.result(10.0)

        spawner = threading.Thread(target=spawn, name="chain-save-spawner", daemon=True)
        spawner.start()
        spawner.join(15.0)
        if len(started) != n or spawner.is_alive():
            self._pool.shutdown(wait=False)
            raise RuntimeError("the SAVE workers did not start")
        return started

    # ------------------------------------------------------------------ helpers

    def _count(self, name: str, n: int = 1) -> None:
        with self._stats_lock:
            self._stats[name] += n

    def stats(self) -> dict[str, int]:
        with self._stats_lock:
            out = dict(self._stats)
        with self._tx_lock:
            out["open_streams"] = len(self._chains)
            out["save_queue_depth"] = sum(len(c.pending) for c in self._chains.values())
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

    # ------------------------------------------------------------------ sender

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._check_rid(request_id)
        if not isinstance(is_final, bool):
            raise TypeError(f"is_final must be a bool, got {type(is_final).__name__}")
        self._check_running("save_async")
        snap = self._snapshot(obj)  # may raise: nothing is queued
        with self._tx_lock:
            self._check_running("save_async")
            chain = self._chains.get(request_id)
            if chain is None:
                chain = self._chains[request_id] = _Chain(request_id)
            chain.pending.append((snap, is_final))
            if not chain.running:
                chain.running = True
                self._pool.submit(self._run_chain, chain)

    def cancel_sender(self, request_id: str) -> None:
        self._check_rid(request_id)
        with self._tx_lock:
            self._check_running("cancel_sender")
            chain = self._chains.get(request_id)
            if chain is None:
                chain = self._chains[request_id] = _Chain(request_id)
            chain.cancelled = True

    def _retire_if_clean(self, chain: _Chain) -> None:
        """Under _tx_lock: forget a chain with nothing queued, running, open or marked."""
        if (not chain.running and not chain.pending and chain.next_id == 0
                and not chain.cancelled and self._chains.get(chain.rid) is chain):  # fmt: skip
            del self._chains[chain.rid]

    def _run_chain(self, chain: _Chain) -> None:
        """One job: send the chain's chunks in order until it is empty."""
        self._count("jobs")
        while True:
            with self._tx_lock:
                if self._halt.is_set() or not chain.pending:
                    chain.running = False
                    self._retire_if_clean(chain)
                    return
                snap, final = chain.pending.popleft()
                cancelled = chain.cancelled
            try:
                self._send_one(chain, snap, final, cancelled)
            except Exception:  # defensive: _send_one catches what the calls raise
                _log.exception("SAVE job: a chunk of %r was lost", chain.rid)

    def _send_one(self, chain: _Chain, snap: Any, final: bool, cancelled: bool) -> None:
        rid = chain.rid
        if cancelled:
            if not final:
                self._count("dropped")
                return
            data = None
        else:
            if self._build is None:
                data = snap
            else:
                try:
                    data = self._build(rid, snap, final)
                except _CALL_ERRORS:
                    self._count("build_failures")
                    _log.warning("build_payload(%r) raised", rid, exc_info=True)
                    if not final:
                        self._count("dropped")
                        return
                    data = None
            if data is None and not final:
                self._count("skipped")
                return
        self._deliver(chain, {"data": data, "finished": final}, final)

    def _deliver(self, chain: _Chain, wire: dict[str, Any], final: bool) -> None:
        tries = 0
        while True:
            with self._tx_lock:
                chunk_id = chain.next_id
            if self._halt.is_set():
                return  # no put starts once stop() has begun
            key = f"{chain.rid}_{self.stage_id}_{chunk_id}"
            try:
                self.connector.put(key, wire)
            except _CALL_ERRORS:
                tries += 1
                self._count("put_failures")
                if not final and tries >= self.put_tries:
                    self._count("dropped")
                    _log.warning("dropping %s after %d failed puts", key, tries)
                    return
                pause = min(self._backoff * 2 ** min(tries - 1, 30), self._backoff_max)
                if self._halt.wait(pause):
                    return
                continue
            self._count("puts")
            with self._tx_lock:
                if final:
                    chain.next_id = 0  # R11: the next stream starts at chunk 0
                    chain.cancelled = False
                else:
                    chain.next_id = chunk_id + 1
            return

    # ------------------------------------------------------------------ receiver

    def load_async(self, request_id: str) -> None:
        self._check_rid(request_id)
        with self._rx_cv:
            self._check_running("load_async")
            if request_id in self._regs:
                return  # R12: idempotent while registered
            self._regs[request_id] = _Reg(request_id)
            self._rx_cv.notify()

    def poll_ready(self) -> dict[str, list[Any]]:
        with self._rx_lock:
            if not self._ready_n:
                return {}
            out, self._ready = self._ready, {}
            self._ready_n = 0
        return out

    def cleanup_receiver(self, request_id: str) -> None:
        self._check_rid(request_id)
        with self._rx_lock:
            self._regs.pop(request_id, None)
            self._ready.pop(request_id, None)

    def _recv_main(self) -> None:
        while True:
            with self._rx_cv:
                while True:
                    if self._halt.is_set():
                        return
                    round_ = [reg for reg in self._regs.values() if not reg.done]
                    if round_:
                        break
                    self._rx_cv.wait(self._wait)
            progress = False
            for reg in round_:
                if self._halt.is_set():
                    return
                try:
                    if self._poll(reg):
                        progress = True
                except Exception:  # defensive
                    _log.exception("RECV thread: unexpected error")
            if not progress:
                self._halt.wait(self._idle)

    def _poll(self, reg: _Reg) -> bool:
        with self._rx_lock:
            if self._regs.get(reg.rid) is not reg or reg.done:
                return False  # cleaned up (perhaps registered again) since the round began
            chunk_id = reg.next
        key = f"{reg.rid}_{self.src_stage_id}_{chunk_id}"
        self._count("gets")
        try:
            value = self.connector.get(key)
        except _CALL_ERRORS:
            self._count("get_failures")
            _log.debug("get(%s) raised", key, exc_info=True)
            return False
        with self._rx_lock:
            if self._regs.get(reg.rid) is not reg:
                return False  # cleaned up while the get was in flight: discarded
            if not isinstance(value, dict):
                return False
            self._ready.setdefault(reg.rid, []).append(value)
            self._ready_n += 1
            reg.next = chunk_id + 1
            if value.get("finished") is True:
                reg.done = True  # R13: never polled again
        self._count("committed")
        return True

    # ------------------------------------------------------------------ lifecycle

    def stop(self) -> None:
        first = not self._halt.is_set()
        self._halt.set()
        with self._tx_lock:
            # queued jobs are cancelled; idle workers wake up and leave
            self._pool.shutdown(wait=False, cancel_futures=True)
        with self._rx_cv:
            self._rx_cv.notify_all()
        deadline = time.monotonic() + (self.join_timeout if first else 0.0)
        me = threading.current_thread()
        for thread in [*self._pool_threads, self._recv_thread]:
            if thread is not me:
                thread.join(max(0.0, deadline - time.monotonic()))
        for thread in self._pool_threads:
            if thread.is_alive():  # blocked in a build or a put: abandoned
                concurrent.futures.thread._threads_queues.pop(thread, None)

    def __enter__(self) -> ChainPoolAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_OPTIONS = ("chain_workers", "put_tries", "put_backoff", "put_backoff_max", "wait_timeout",
            "idle_backoff", "join_timeout", "snapshot")  # fmt: skip


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Callable[[str, Any, bool], Any] | None = None,
    **options: Any,
) -> ChainPoolAdapter:
    """The factory: the contract's keywords plus the options in ``_OPTIONS``; any
    other option is ignored."""
    return ChainPoolAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **{k: v for k, v in options.items() if k in _OPTIONS and v is not None},
    )
