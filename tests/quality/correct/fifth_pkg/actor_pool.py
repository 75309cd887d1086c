"""A correct ChunkAdapter whose sender is a set of per-request actors run by a fixed pool
of two SAVE workers, one chunk per turn; its receiver tells registrations apart by
integer generations.

Design (keeps R1-R24 of the contract):

- Sender. Every request with something to send (or a cancel mark) has an ``_Actor``:
  a mailbox (``deque`` of ``(snapshot, is_final)``), its next chunk id, its cancel
  mark and a ``scheduled`` flag. All of it, the registry ``_actors`` and the run queue
  ``_runq`` are guarded by ``_tx_lock``. ``save_async`` snapshots, appends to the
  actor's mailbox and, if the actor is not scheduled, schedules it (appends it to the
  run queue and notifies ``_tx_cv``). A worker takes the actor at the head of the run
  queue and ONE chunk of its mailbox, reading the cancel mark in that critical section;
  the actor stays scheduled while the worker has it, so no other worker can take it
  (one chunk of a request in flight at a time: R5). The worker builds outside every
  lock, reads the id under the lock right before each put, and puts with retries
  (capped doubling pause; a non-final ``put_tries`` tries in all, a final until it
  succeeds or ``stop()``). Then, in ONE critical section, it records the put (advance
  the id, or after a final forget the id and the cancel mark, R11) and hands the actor
  back: to the tail of the run queue if its mailbox has more (so requests take turns),
  else unscheduled -- and, if it holds nothing (id 0, no mark), retired from the
  registry (R24). ``cancel_sender`` sets the mark on the registered actor, creating one
  if there is none (a mark for the next stream, R27), in one critical section.
- A bounded record of the last 256 request ids whose final was put (an LRU
  ``OrderedDict``) lets ``cancel_sender`` warn about a cancel that comes after a
  stream's final (R27 allows a record of recent requests bounded at <= 500).
- Receiver. One RECV thread. A registration is a generation number from an
  adapter-wide counter (never reused): ``_regs[request_id] = [generation, next id]``;
  the polling queue holds ``(request_id, generation)`` entries, one per live
  registration. Before each get and again in the critical section that commits, the
  entry's generation must still be the registered one (R16); a stale entry is dropped.
- ``stop()`` sets ``_stop``, notifies both conditions and joins the three daemon
  threads against one deadline (``join_timeout``).

Factory: ``tests.quality.correct.fifth_pkg.actor_pool:make``.
"""

from __future__ import annotations

import copy
import itertools
import logging
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from typing import Any

from ._common import (
    check_is_final,
    check_request_id,
    chunk_key,
    factory_for,
    identity_payload,
    is_final_value,
    positive_int,
    seconds,
)

log = logging.getLogger(__name__)

BuildPayload = Callable[[str, Any, bool], Any]
RECENT_FINISHED = 256  # request ids remembered after their final (<= 500, R24)


class _Actor:
    __slots__ = ("cancelled", "mailbox", "next_id", "request_id", "scheduled")

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.mailbox: deque[tuple[Any, bool]] = deque()
        self.next_id = 0
        self.cancelled = False
        self.scheduled = False


class ActorPoolAdapter:
    def __init__(
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
        save_workers: int = 2,
    ) -> None:
        if build_payload is not None and not callable(build_payload):
            raise TypeError("build_payload must be callable or None")
        self._conn = connector
        self.stage_id = stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self._build: BuildPayload = build_payload or identity_payload
        self.put_tries = positive_int("put_tries", put_tries)
        self.put_backoff = seconds("put_backoff", put_backoff)
        self.put_backoff_max = max(self.put_backoff, seconds("put_backoff_max", put_backoff_max))
        self.idle_backoff = seconds("idle_backoff", idle_backoff)
        self.wait_timeout = max(0.001, seconds("wait_timeout", wait_timeout))
        self.join_timeout = seconds("join_timeout", join_timeout)
        self.save_workers = positive_int("save_workers", save_workers)
        self._counts: Counter[str] = Counter()
        self._stop = threading.Event()

        # -- sender: _tx_lock guards the registry, the run queue, every actor's fields
        # and the recent record; _tx_cv (over it) is waited on by the SAVE workers.
        self._tx_lock = threading.Lock()
        self._tx_cv = threading.Condition(self._tx_lock)
        self._actors: dict[str, _Actor] = {}
        self._runq: deque[_Actor] = deque()
        self._init_recent()
        self._warned_late_cancel = False

        # -- receiver: _rx_lock guards _regs, _polling and _ready; _rx_cv is waited on by
        # the RECV thread, notified by load_async and stop().
        self._rx_lock = threading.Lock()
        self._rx_cv = threading.Condition(self._rx_lock)
        self._generations = itertools.count(1)
        self._regs: dict[str, list[int]] = {}  # request id -> [generation, next chunk id]
        self._polling: deque[tuple[str, int]] = deque()
        self._ready: dict[str, list[Any]] = {}

        self._threads = [
            threading.Thread(target=self._save_worker, name=f"ap-SAVE-{n}", daemon=True)
            for n in range(self.save_workers)
        ]
        self._threads.append(threading.Thread(target=self._recv_main, name="ap-RECV", daemon=True))
        for thread in self._threads:
            thread.start()

    # ------------------------------------------------------------------ recent finals

    def _init_recent(self) -> None:
        self._recent: OrderedDict[str, None] = OrderedDict()

    def _note_finished(self, request_id: str) -> None:
        """A stream of *request_id* put its final (caller holds _tx_lock)."""
        self._recent[request_id] = None
        self._recent.move_to_end(request_id)
        while len(self._recent) > RECENT_FINISHED:
            self._recent.popitem(last=False)

    def _recently_finished(self, request_id: str) -> bool:
        return request_id in self._recent

    # ------------------------------------------------------------------ scheduler calls

    def _running(self, where: str) -> None:
        if self._stop.is_set():
            raise RuntimeError(f"{where}: the adapter is stopped")

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        check_request_id(request_id, "save_async")
        check_is_final(is_final, "save_async")
        self._running("save_async")
        snap = copy.deepcopy(obj)
        with self._tx_cv:
            actor = self._actors.get(request_id)
            if actor is None:
                actor = self._actors[request_id] = _Actor(request_id)
            actor.mailbox.append((snap, is_final))
            if not actor.scheduled:
                actor.scheduled = True
                self._runq.append(actor)
                self._tx_cv.notify()

    def cancel_sender(self, request_id: str) -> None:
        check_request_id(request_id, "cancel_sender")
        with self._tx_lock:
            self._running("cancel_sender")
            actor = self._actors.get(request_id)
            if actor is None:
                if self._recently_finished(request_id):
                    level = logging.DEBUG if self._warned_late_cancel else logging.WARNING
                    self._warned_late_cancel = True
                    log.log(
                        level,
                        "cancel_sender(%r) after its stream's final: it cuts the next stream "
                        "(logged at WARNING once per adapter)",
                        request_id,
                    )
                actor = self._actors[request_id] = _Actor(request_id)
            actor.cancelled = True

    def load_async(self, request_id: str) -> None:
        check_request_id(request_id, "load_async")
        with self._rx_cv:
            self._running("load_async")
            if request_id in self._regs:
                return
            generation = next(self._generations)
            self._regs[request_id] = [generation, 0]
            self._polling.append((request_id, generation))
            self._rx_cv.notify()

    def poll_ready(self) -> dict[str, list[Any]]:
        with self._rx_lock:
            handed, self._ready = self._ready, {}
        return handed

    def cleanup_receiver(self, request_id: str) -> None:
        check_request_id(request_id, "cleanup_receiver")
        with self._rx_lock:
            self._regs.pop(request_id, None)
            self._ready.pop(request_id, None)

    def stop(self) -> None:
        self._stop.set()
        with self._tx_cv:
            self._tx_cv.notify_all()
        with self._rx_cv:
            self._rx_cv.notify_all()
        deadline = time.monotonic() + self.join_timeout
        me = threading.current_thread()
        for thread in self._threads:
            if thread is not me:
                thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> ActorPoolAdapter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ SAVE workers

    def _save_worker(self) -> None:
        while True:
            with self._tx_cv:
                while not self._runq and not self._stop.is_set():
                    self._tx_cv.wait(self.wait_timeout)
                if self._stop.is_set():
                    return
                actor = self._runq.popleft()
                snap, final = actor.mailbox.popleft()
                cancelled = actor.cancelled
            self._turn(actor, snap, final, cancelled)

    def _turn(self, actor: _Actor, snap: Any, final: bool, cancelled: bool) -> None:
        """Send one chunk of *actor*, then record the outcome and hand the actor back."""
        put_id: int | None = None
        try:
            put_id = self._send(actor, snap, final, cancelled)
        except Exception:
            log.exception("SAVE worker: unexpected error (the worker goes on)")
        with self._tx_lock:
            if put_id is not None:
                self._record_locked(actor, put_id, final)
            self._release_locked(actor)

    def _record_locked(self, actor: _Actor, put_id: int, final: bool) -> None:
        if final:
            actor.next_id = 0
            actor.cancelled = False
            self._note_finished(actor.request_id)
        else:
            actor.next_id = put_id + 1

    def _release_locked(self, actor: _Actor) -> None:
        if actor.mailbox:
            self._runq.append(actor)  # stays scheduled; its next chunk after the others'
            self._tx_cv.notify()
            return
        actor.scheduled = False
        if (
            actor.next_id == 0
            and not actor.cancelled
            and self._actors.get(actor.request_id) is actor
        ):
            del self._actors[actor.request_id]  # holds nothing: retired (R24)

    def _send(self, actor: _Actor, snap: Any, final: bool, cancelled: bool) -> int | None:
        """Build and put one chunk; the chunk id put, or None if nothing was put."""
        request_id = actor.request_id
        if cancelled:
            if not final:
                self._counts["dropped_cancelled"] += 1
                return None
            payload = None
        else:
            try:
                payload = self._build(request_id, snap, final)
            except Exception:
                log.info("build_payload(%r) raised", request_id, exc_info=True)
                if not final:
                    self._counts["dropped_build"] += 1
                    return None
                payload = None
            if payload is None and not final:
                self._counts["skipped"] += 1
                return None
        return self._put_with_retries(actor, {"data": payload, "finished": final}, final)

    def _put_with_retries(self, actor: _Actor, value: dict[str, Any], final: bool) -> int | None:
        pause = self.put_backoff
        failures = 0
        while not self._stop.is_set():
            with self._tx_lock:
                chunk_id = actor.next_id
            key = chunk_key(actor.request_id, self.stage_id, chunk_id)
            try:
                self._conn.put(key, value)
            except Exception as exc:
                failures += 1
                self._counts["put_failures"] += 1
                if not final and failures >= self.put_tries:
                    self._counts["dropped_put"] += 1
                    log.info("put %s failed %d times (%r); dropped", key, failures, exc)
                    return None
                if self._stop.wait(pause):
                    return None
                pause = min(max(pause * 2, 0.001), self.put_backoff_max)
                continue
            return chunk_id
        return None

    # ------------------------------------------------------------------ RECV thread

    def _recv_main(self) -> None:
        while not self._stop.is_set():
            with self._rx_cv:
                while not self._polling and not self._stop.is_set():
                    self._rx_cv.wait(self.wait_timeout)
                entries = len(self._polling)
            if self._stop.is_set():
                return
            progress = False
            for _ in range(entries):
                if self._stop.is_set():
                    return
                if self._poll_one():
                    progress = True
            if not progress:
                self._stop.wait(self.idle_backoff)

    def _poll_one(self) -> bool:
        with self._rx_lock:
            if not self._polling:
                return False
            request_id, generation = self._polling.popleft()
            reg = self._regs.get(request_id)
            if reg is None or reg[0] != generation:
                return False  # a stale entry: its registration was cleaned up
            chunk_id = reg[1]
        key = chunk_key(request_id, self.src_stage_id, chunk_id)
        try:
            value = self._conn.get(key)
        except Exception as exc:
            self._counts["get_failures"] += 1
            log.debug("get %s failed (%r)", key, exc)
            value = None
        with self._rx_lock:
            reg = self._regs.get(request_id)
            if reg is None or reg[0] != generation:
                if value is not None:
                    self._counts["discarded_stale"] += 1
                return False
            if value is None:
                self._polling.append((request_id, generation))
                return False
            self._ready.setdefault(request_id, []).append(value)
            reg[1] = chunk_id + 1
            if not is_final_value(value):
                self._polling.append((request_id, generation))
        return True


make = factory_for(ActorPoolAdapter)
