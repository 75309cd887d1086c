"""A correct ChunkAdapter in event-sourced style: the scheduler only journals, the
workers fold.

Design (keeps R1-R24 of the contract):

- Sender. The scheduler's sending calls never touch the sender's bookkeeping: they
  append a command to the *send journal* (a ``deque`` under ``_tx_lock``) --
  ``("save", request_id, snapshot, is_final)`` or ``("cancel", request_id)`` -- and
  wake the SAVE thread through ``_tx_cv``. The SAVE thread owns the state the journal
  folds into: the queue of chunks still to send (``_pending``), each open stream's
  next chunk id (``_next``) and the cancel marks (``_marks``). It folds the journal
  in the critical section that takes the next chunk, so a cancel journaled before
  that moment reaches every chunk of the request still queued, before or after it in
  the journal (R6), and the mark is read in that same section. Builds and puts happen
  outside every lock. After a successful final put the SAVE thread folds once more,
  then forgets the stream's id and cancel mark (a cancel journaled while that final
  was in flight is consumed by it, as with a mark set directly); a cancel journaled
  after that cuts the next stream of the id (R27).
- Receiver. ``load_async`` records the registration (request id -> a fresh token
  ``object()``) in ``_live`` and journals ``(request_id, token)`` for the RECV
  thread, which folds it into a private cursor (token -> [request id, next id]).
  ``cleanup_receiver`` journals nothing: it forgets the registration and its ready
  chunks under ``_rx_lock``, and the RECV thread drops a cursor whose token is no
  longer the live one on its next visit. Before each get and again in the critical
  section that commits, the cursor's token must still be ``_live[request_id]``: the
  commit fence (R16). ``poll_ready`` swaps ``_ready`` out under the same lock.
- Pacing (R17): each round visits every cursor once; no cursors -> wait on
  ``_rx_cv`` (``wait_timeout``); a round without a commit -> ``idle_backoff`` (1 ms);
  a commit -> next round at once.
- ``stop()`` sets ``_stop``, notifies both conditions and joins both daemon threads
  against one deadline (``join_timeout``). Every wait has a timeout and re-checks.

Factory: ``tests.quality.correct.fifth_pkg.journal:make``.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import Counter, deque
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


class JournalAdapter:
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
        snapshot: Callable[[Any], Any] = copy.deepcopy,
    ) -> None:
        if build_payload is not None and not callable(build_payload):
            raise TypeError("build_payload must be callable or None")
        if not callable(snapshot):
            raise TypeError("snapshot must be callable")
        self._conn = connector
        self.stage_id = stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self._build: BuildPayload = build_payload or identity_payload
        self._snapshot = snapshot
        self.put_tries = positive_int("put_tries", put_tries)
        self.put_backoff = seconds("put_backoff", put_backoff)
        self.put_backoff_max = max(self.put_backoff, seconds("put_backoff_max", put_backoff_max))
        self.idle_backoff = seconds("idle_backoff", idle_backoff)
        self.wait_timeout = max(0.001, seconds("wait_timeout", wait_timeout))
        self.join_timeout = seconds("join_timeout", join_timeout)
        self._counts: Counter[str] = Counter()
        self._stop = threading.Event()

        # -- sender. _tx_lock guards the journal; _tx_cv (over it) is waited on by the
        # SAVE thread only, notified by save_async, cancel_sender and stop().
        self._tx_lock = threading.Lock()
        self._tx_cv = threading.Condition(self._tx_lock)
        self._tx_log: deque[tuple[Any, ...]] = deque()
        # Folded from the journal; touched by the SAVE thread only (under _tx_lock when
        # it folds, so a fold and a take are one critical section).
        self._pending: deque[tuple[str, Any, bool]] = deque()
        self._next: dict[str, int] = {}
        self._marks: set[str] = set()

        # -- receiver. _rx_lock guards _live, _ready and _rx_log; _rx_cv (over it) is
        # waited on by the RECV thread only, notified by load_async and stop().
        self._rx_lock = threading.Lock()
        self._rx_cv = threading.Condition(self._rx_lock)
        self._rx_log: deque[tuple[str, object]] = deque()
        self._live: dict[str, object] = {}
        self._ready: dict[str, list[Any]] = {}
        # The RECV thread's own cursors: token -> [request id, next chunk id].
        self._cursors: dict[object, list[Any]] = {}

        self._save_thread = threading.Thread(target=self._save_main, name="j-SAVE", daemon=True)
        self._recv_thread = threading.Thread(target=self._recv_main, name="j-RECV", daemon=True)
        self._save_thread.start()
        self._recv_thread.start()

    # ------------------------------------------------------------------ scheduler calls

    def _running(self, where: str) -> None:
        if self._stop.is_set():
            raise RuntimeError(f"{where}: the adapter is stopped")

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        check_request_id(request_id, "save_async")
        check_is_final(is_final, "save_async")
        self._running("save_async")
        snap = self._snapshot(obj)  # raises here, nothing journaled, if obj cannot be copied
        with self._tx_cv:
            self._tx_log.append(("save", request_id, snap, is_final))
            self._tx_cv.notify()

    def cancel_sender(self, request_id: str) -> None:
        check_request_id(request_id, "cancel_sender")
        with self._tx_cv:
            self._running("cancel_sender")
            self._tx_log.append(("cancel", request_id))
            self._tx_cv.notify()

    def load_async(self, request_id: str) -> None:
        check_request_id(request_id, "load_async")
        with self._rx_cv:
            self._running("load_async")
            if request_id in self._live:
                return  # registered (polling, or finished and not cleaned up): nothing changes
            token = object()
            self._live[request_id] = token
            self._rx_log.append((request_id, token))
            self._rx_cv.notify()

    def poll_ready(self) -> dict[str, list[Any]]:
        with self._rx_lock:
            handed, self._ready = self._ready, {}
        return handed

    def cleanup_receiver(self, request_id: str) -> None:
        check_request_id(request_id, "cleanup_receiver")
        with self._rx_lock:
            self._live.pop(request_id, None)
            self._ready.pop(request_id, None)

    def stop(self) -> None:
        self._stop.set()
        with self._tx_cv:
            self._tx_cv.notify_all()
        with self._rx_cv:
            self._rx_cv.notify_all()
        deadline = time.monotonic() + self.join_timeout
        me = threading.current_thread()
        for thread in (self._save_thread, self._recv_thread):
            if thread is not me:
                thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> JournalAdapter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ SAVE thread

    def _save_main(self) -> None:
        while True:
            item = self._take()
            if item is None:
                return
            try:
                self._send(*item)
            except Exception:
                log.exception("SAVE thread: unexpected error (the thread goes on)")

    def _fold_locked(self) -> None:
        """Fold the send journal into the SAVE thread's state (caller holds _tx_lock)."""
        log_ = self._tx_log
        while log_:
            command = log_.popleft()
            if command[0] == "save":
                self._pending.append(command[1:])
            else:
                self._marks.add(command[1])

    def _take(self) -> tuple[str, Any, bool, bool] | None:
        """The next chunk to send and whether its request is cancelled; None on stop()."""
        with self._tx_cv:
            self._fold_locked()
            while not self._pending:
                if self._stop.is_set():
                    return None
                self._tx_cv.wait(self.wait_timeout)
                self._fold_locked()
            if self._stop.is_set():
                return None
            request_id, snap, final = self._pending.popleft()
            return request_id, snap, final, request_id in self._marks

    def _send(self, request_id: str, snap: Any, final: bool, cancelled: bool) -> None:
        if cancelled:
            if not final:
                self._counts["dropped_cancelled"] += 1
                return
            payload = None
        else:
            try:
                payload = self._build(request_id, snap, final)
            except Exception:
                log.info("build_payload(%r) raised", request_id, exc_info=True)
                if not final:
                    self._counts["dropped_build"] += 1
                    return
                payload = None
            if payload is None and not final:
                self._counts["skipped"] += 1
                return
        self._put_with_retries(request_id, {"data": payload, "finished": final}, final)

    def _put_with_retries(self, request_id: str, value: dict[str, Any], final: bool) -> None:
        pause = self.put_backoff
        failures = 0
        while not self._stop.is_set():
            chunk_id = self._next.get(request_id, 0)
            key = chunk_key(request_id, self.stage_id, chunk_id)
            try:
                self._conn.put(key, value)
            except Exception as exc:
                failures += 1
                self._counts["put_failures"] += 1
                if not final and failures >= self.put_tries:
                    self._counts["dropped_put"] += 1
                    log.info("put %s failed %d times (%r); dropped", key, failures, exc)
                    return
                log.debug("put %s failed (%r); retrying", key, exc)
                if self._stop.wait(pause):
                    return
                pause = min(max(pause * 2, 0.001), self.put_backoff_max)
                continue
            self._record(request_id, chunk_id, final)
            return

    def _record(self, request_id: str, chunk_id: int, final: bool) -> None:
        """A put succeeded: advance the id, or after a final forget the stream."""
        with self._tx_lock:
            if final:
                self._fold_locked()  # cancels journaled until now were this stream's
                self._next.pop(request_id, None)
                self._marks.discard(request_id)
            else:
                self._next[request_id] = chunk_id + 1

    # ------------------------------------------------------------------ RECV thread

    def _absorb_locked(self) -> None:
        """Fold the registrations journaled by load_async (caller holds _rx_lock)."""
        while self._rx_log:
            request_id, token = self._rx_log.popleft()
            if self._live.get(request_id) is token:
                self._cursors[token] = [request_id, 0]

    def _recv_main(self) -> None:
        while not self._stop.is_set():
            with self._rx_cv:
                self._absorb_locked()
                while not self._cursors and not self._stop.is_set():
                    self._rx_cv.wait(self.wait_timeout)
                    self._absorb_locked()
            if self._stop.is_set():
                return
            if not self._round():
                self._stop.wait(self.idle_backoff)

    def _round(self) -> bool:
        """Visit every cursor once; True if a chunk was committed."""
        progress = False
        for token, cursor in list(self._cursors.items()):
            if self._stop.is_set():
                break
            if self._poll_cursor(token, cursor):
                progress = True
        return progress

    def _poll_cursor(self, token: object, cursor: list[Any]) -> bool:
        request_id, chunk_id = cursor
        with self._rx_lock:
            if self._live.get(request_id) is not token:
                self._cursors.pop(token, None)  # cleaned up (perhaps registered again)
                return False
        key = chunk_key(request_id, self.src_stage_id, chunk_id)
        try:
            value = self._conn.get(key)
        except Exception as exc:
            self._counts["get_failures"] += 1
            log.debug("get %s failed (%r); retried next round", key, exc)
            return False
        if value is None:
            return False
        with self._rx_lock:
            if self._live.get(request_id) is not token:
                self._cursors.pop(token, None)
                self._counts["discarded_stale"] += 1
                return False
            self._ready.setdefault(request_id, []).append(value)
            if is_final_value(value):
                self._cursors.pop(token, None)
            else:
                cursor[1] = chunk_id + 1
        return True


make = factory_for(JournalAdapter)
