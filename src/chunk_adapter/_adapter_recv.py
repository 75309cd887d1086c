"""The receiving half of the reference ChunkAdapter (rules R12–R17, R28).

:class:`ReceiverSide` is a mixin of :class:`~chunk_adapter.adapter.ChunkAdapter`:
the scheduler's ``load_async``, ``poll_ready`` and ``cleanup_receiver``, and
the RECV thread's rounds. The state it uses (``_recv_lock``, ``_tokens`` ...)
is created and documented in ``ChunkAdapter.__init__``.

Stream identity (R29): what ``cleanup_receiver`` of an unfinished registration
starts, and the RECV thread's entries that carry it out, are in
:mod:`._adapter_leftovers`.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from ._adapter_leftovers import Drain, Leave, LeftoverSide
from ._death import survived
from ._logpace import LogPace
from ._validate import check_request_id, short_repr
from .connectors.base import Connector, Subscribe, chunk_key
from .runtime import ConditionLike, EventLike, LockLike, Runtime

__all__ = ["ReceiverSide"]


class ReceiverSide(LeftoverSide):
    """Receiver calls and the RECV thread (see module doc)."""

    # Set up by ChunkAdapter.__init__ (documented there).
    connector: Connector
    runtime: Runtime
    log: logging.Logger
    src_stage_id: int
    wait_timeout: float
    idle_backoff: float
    repoll_interval: float
    stall_timeout: float | None
    discard_leftovers: bool
    leftover_timeout: float
    event_driven: bool
    _stop: EventLike
    _recv_lock: LockLike
    _recv_cond: ConditionLike
    _tokens: dict[str, object]
    _next_recv_id: dict[str, int]
    _ready: dict[str, list[dict[str, Any]]]
    _queue: deque[tuple[str, object]]
    _progress_at: dict[str, float]
    _stalled: set[str]
    _drains: dict[str, Drain]
    _awaited: set[str]
    _recv_signal: int
    _get_failed: bool
    _recv_counts: dict[str, int]
    _recv_pace: LogPace
    _subscribe: Subscribe | None
    _unsubscribe: Callable[[], None] | None

    def _check_running(self, call: str) -> None:
        raise NotImplementedError  # SenderSide's, first in ChunkAdapter's bases

    def _died(self, side: str, exc: BaseException) -> None:
        raise NotImplementedError  # SenderSide's, first in ChunkAdapter's bases

    def load_async(self, request_id: str) -> None:
        """Register *request_id* for receiving; idempotent while registered (R12)."""
        check_request_id(request_id, "load_async")
        with self._recv_cond:
            self._check_running("load_async")
            if request_id in self._tokens:
                return
            token = object()
            self._tokens[request_id] = token
            self._next_recv_id[request_id] = 0
            self._progress_at[request_id] = self.runtime.monotonic()
            self._queue.append((request_id, token))
            self._recv_signal += 1
            self._recv_cond.notify()

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        """Swap out everything committed since the last call (R14, R15)."""
        with self._recv_lock:
            ready, self._ready = self._ready, {}
        return ready

    def cleanup_receiver(self, request_id: str) -> None:
        """Forget the registration and its ready chunks: a commit fence (R16).

        An unfinished registration's stream is left to the connector's stream
        identity, or drained with ``discard_leftovers`` on a connector without it
        (:mod:`._adapter_leftovers`); both run on the RECV thread, so this never
        waits (R3).
        """
        check_request_id(request_id, "cleanup_receiver")
        with self._recv_lock:  # _recv_cond's lock: notify() below may be called under it
            self._tokens.pop(request_id, None)
            next_id = self._next_recv_id.pop(request_id, None)
            self._ready.pop(request_id, None)
            unfinished = self._progress_at.pop(request_id, None) is not None
            self._stalled.discard(request_id)
            if next_id is None:
                return
            self._awaited.discard(chunk_key(request_id, self.src_stage_id, next_id))
            if self._identity is not None:
                if unfinished and not self._stop.is_set():
                    self._queue.append((request_id, Leave(next_id)))
                    self._recv_signal += 1
                    self._recv_cond.notify()
                return
            # A drain only for a stream that arrived: one that never did may never be sent.
            started = next_id > 0
            if not (self.discard_leftovers and unfinished and started) or self._stop.is_set():
                return
            drain = self._drains.get(request_id)
            if drain is not None:
                drain.later.append(next_id)
                return
            drain = Drain(next_id, self.runtime.monotonic())
            self._drains[request_id] = drain
            self._queue.append((request_id, drain.token))
            self._recv_signal += 1
            self._recv_cond.notify()

    def _on_put(self, key: str) -> None:
        """Subscription callback: wake the RECV thread if it awaits *key*."""
        with self._recv_cond:
            if key in self._awaited:
                self._recv_signal += 1
                self._recv_cond.notify()

    def _recv_loop(self) -> None:
        try:
            self._recv_rounds()
        except BaseException as exc:  # R30: end loudly (what R22 survives never gets here)
            self._died("RECV", exc)  # logged with its traceback: not raised again
        finally:
            if self._unsubscribe is not None:
                self._unsubscribe()

    def _recv_rounds(self) -> None:
        while True:
            with self._recv_cond:
                while not self._queue and not self._stop.is_set():
                    self._recv_cond.wait(self.wait_timeout)
                if self._stop.is_set():
                    return
                entries = len(self._queue)
                signal = self._recv_signal
                self._get_failed = False
            if self._subscribe is not None:
                self._start_subscription()
            try:
                progress = self._recv_round(entries)
            except Exception:  # a bug of ours must not kill the thread either (R22)
                self.log.exception("RECV thread: unexpected error; continuing")
                progress = False
            if not progress and self._idle(signal):
                return

    def _start_subscription(self) -> None:
        """Subscribe to put notifications (once); fall back to polling if that fails."""
        subscribe, self._subscribe = self._subscribe, None
        try:
            self._unsubscribe = subscribe(self._on_put) if subscribe is not None else None
        except Exception:
            self.log.exception("subscribe failed; receiving by polling instead")
            self.event_driven = False

    def _idle(self, signal: int) -> bool:
        """Pause after a round without progress (R17); True once stop() was called.

        Polling: sleep ``idle_backoff``. Event-driven: wait until a put of an
        awaited key or a load_async bumped the signal, re-polling after
        ``repoll_interval`` anyway, so a lost notification costs latency only.
        Each wait is at most ``wait_timeout`` and re-checks (R20).
        """
        with self._recv_lock:
            retry_soon = self._get_failed
        if not self.event_driven or retry_soon:
            return self._stop.wait(self.idle_backoff)
        deadline = self.runtime.monotonic() + self.repoll_interval
        with self._recv_cond:
            while self._recv_signal == signal and not self._stop.is_set():
                remaining = deadline - self.runtime.monotonic()
                if remaining <= 0:
                    break
                self._recv_cond.wait(min(remaining, self.wait_timeout))
        return self._stop.is_set()

    def _recv_round(self, entries: int) -> bool:
        """Poll each of the first *entries* queue entries once (R13, R17)."""
        progress = False
        for _ in range(entries):
            if self._stop.is_set():
                return progress
            with self._recv_lock:
                if not self._queue:
                    return progress
                request_id, token = self._queue.popleft()
                leftover = self._leftover_entry(request_id, token)
                if leftover is None:
                    drain = self._drains.get(request_id)
                    if drain is None or drain.token is not token:
                        drain = None
                        if self._tokens.get(request_id) is not token:
                            self._recv_counts["stale_entries_dropped"] += 1
                            continue
                        chunk_id = self._next_recv_id[request_id]
                    else:
                        chunk_id = drain.next_id
                    key = chunk_key(request_id, self.src_stage_id, chunk_id)
                    stalled_for = None if drain is not None else self._stalled_for(request_id)
                    blocking = self._drains.get(request_id)
                    blocked = (
                        drain is None and blocking is not None and chunk_id >= blocking.bound()
                    )
                    if blocked:
                        self._queue.append((request_id, token))  # V5: the drain goes first
                    elif self.event_driven:
                        self._awaited.add(key)
            if isinstance(leftover, Leave):
                self._leave(request_id, leftover)  # outside the lock: a connector call
                continue
            if leftover is not None:
                progress = self._sweep_one(request_id, leftover) or progress
                continue
            if drain is not None:
                progress = self._drain_one(request_id, drain, key) or progress
                continue
            if stalled_for is not None:
                self.log.warning(
                    "receiver: %s has made no progress for %.1fs: waiting for key %s. Is its "
                    "sender alive, on the same connector/namespace, at stage %d? (reported "
                    "once; counted in stats().stalled)",
                    short_repr(request_id),
                    stalled_for,
                    key,
                    self.src_stage_id,
                )
            if not blocked:
                progress = self._poll_one(request_id, token, key, chunk_id) or progress
        return progress

    def _poll_one(self, request_id: str, token: object, key: str, chunk_id: int) -> bool:
        """One get of *key* outside the lock, then check the token and commit under it (R16)."""
        value: Any = None
        failed = False
        try:
            value = self.connector.get(key)
        except survived() as exc:
            self._recv_pace.say(
                self.log.info, "get", key, "get %s failed: %r; will retry", key, exc
            )
            failed = True
        if value is not None and not isinstance(value, dict):
            self._recv_pace.say(
                self.log.warning, "not a dict", key,
                "get %s returned %r, not a dict; ignoring it", key, value,
            )  # fmt: skip
            value, failed = None, True
        with self._recv_lock:
            self._recv_counts["gets"] += 1
            if failed:
                self._recv_counts["get_failures"] += 1
                self._get_failed = True
            elif value is None:
                self._recv_counts["gets_empty"] += 1
            current = self._tokens.get(request_id) is token
            if value is None:
                if current:
                    self._queue.append((request_id, token))
                else:
                    self._awaited.discard(key)
                return False
            self._awaited.discard(key)
            if not current:
                drain = self._drains.get(request_id)
                if drain is not None and drain.next_id == chunk_id:
                    # The cleaned-up registration's last get took the key its drain waits
                    # for: that is the drain's value (else the drain would take the next
                    # stream's chunk under this key instead).
                    self._drained(request_id, drain, value, self.runtime.monotonic())
                    return False
                self._recv_counts["stale_discarded"] += 1
                return False
            self._ready.setdefault(request_id, []).append(value)
            self._next_recv_id[request_id] = chunk_id + 1
            self._recv_counts["committed"] += 1
            self._stalled.discard(request_id)
            if value.get("finished"):
                self._progress_at.pop(request_id, None)
            else:
                self._progress_at[request_id] = self.runtime.monotonic()
                self._queue.append((request_id, token))
            return True

    def _stalled_for(self, request_id: str) -> float | None:
        """Called with ``_recv_lock`` held: seconds without progress if *request_id* just
        became stalled (R28), else ``None``. Each stall is reported once."""
        since = self._progress_at.get(request_id)
        if self.stall_timeout is None or since is None or request_id in self._stalled:
            return None
        idle = self.runtime.monotonic() - since
        if idle < self.stall_timeout:
            return None
        self._stalled.add(request_id)
        self._recv_counts["stalls_reported"] += 1
        return idle
