"""The reference ChunkAdapter (docs/contract.md, rules R1–R23).

The scheduler thread calls ``save_async``, ``cancel_sender``, ``load_async``,
``poll_ready`` and ``cleanup_receiver`` and never waits; a SAVE thread builds
payloads and puts them, a RECV thread gets chunks and commits them.
"""

from __future__ import annotations

import copy
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from ._validate import check_final, check_request_id, check_stage, non_negative, positive
from .connectors.base import Connector, chunk_key, subscription
from .errors import AdapterStopped, InvalidType, InvalidValue, SnapshotError
from .runtime import Runtime, ThreadingRuntime, ThreadLike
from .stats import AdapterStats

__all__ = ["ChunkAdapter"]

BuildPayload = Callable[[str, Any, bool], Any]
Snapshot = Callable[[Any], Any]
SAVE_THREAD = "chunk-adapter-save"
_SEND_COUNTERS = (
    "chunks_put",
    "finals_put",
    "put_failures",
    "put_retries",
    "dropped_cancelled",
    "dropped_build_failed",
    "dropped_put_failed",
    "build_failures",
    "skipped_none",
)
_RECV_COUNTERS = (
    "gets",
    "gets_empty",
    "get_failures",
    "committed",
    "stale_discarded",
    "stale_entries_dropped",
)
RECV_THREAD = "chunk-adapter-recv"


def _default_build(request_id: str, snapshot: Any, is_final: bool) -> Any:
    return snapshot


class ChunkAdapter:
    """Moves per-request chunks between pipeline stages through a connector.

    Invariants (``check_invariants`` asserts them; each holds whenever the lock
    that guards it is free):

    Sender, under ``_send_lock``:
      S1. ``_next_send_id`` values are >= 1: a request is in it only after its
          first successful non-final put; absent means "next id is 0" (R9, R11).
      S2. The FIFO holds ``(request_id, snapshot, is_final)`` in save order (R5).

    Receiver, under ``_recv_lock``:
      V1. ``_tokens`` and ``_next_recv_id`` have the same keys (registered ids).
      V2. Every key of ``_ready`` is registered, and its list is non-empty.
      V3. No two polling-queue entries carry the same current token (R16); an
          entry whose token is no longer current is dropped when the RECV thread
          reaches it, and an entry is not put back once its final is committed (R13).
    """

    def __init__(
        self,
        connector: Connector,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: BuildPayload | None = None,
        runtime: Runtime | None = None,
        wait_timeout: float = 0.1,
        idle_backoff: float = 0.001,
        join_timeout: float = 1.0,
        put_tries: int = 3,
        put_backoff: float = 0.005,
        put_backoff_max: float = 0.1,
        snapshot: Snapshot = copy.deepcopy,
        logger: logging.Logger | None = None,
        event_driven: bool | None = None,
        repoll_interval: float = 0.5,
    ) -> None:
        if not (
            callable(getattr(connector, "put", None)) and callable(getattr(connector, "get", None))
        ):
            raise InvalidType(
                f"connector must have put(key, value) and get(key) methods, got {connector!r}"
            )
        self.stage_id = check_stage("stage_id", stage_id)
        self.src_stage_id = (
            self.stage_id - 1 if src_stage_id is None else check_stage("src_stage_id", src_stage_id)
        )
        if build_payload is not None and not callable(build_payload):
            raise InvalidType(f"build_payload must be callable or None, got {build_payload!r}")
        if not callable(snapshot):
            raise InvalidType(f"snapshot must be callable (e.g. copy.deepcopy), got {snapshot!r}")
        if isinstance(put_tries, bool) or not isinstance(put_tries, int) or put_tries < 1:
            raise InvalidValue(
                f"put_tries counts every try and must be an int >= 1, got {put_tries!r}"
            )
        self.connector = connector
        self.build_payload: BuildPayload = build_payload or _default_build
        self.runtime: Runtime = runtime if runtime is not None else ThreadingRuntime()
        self.wait_timeout = positive("wait_timeout", wait_timeout)
        self.idle_backoff = non_negative("idle_backoff", idle_backoff)
        self.join_timeout = non_negative("join_timeout", join_timeout)
        self.put_tries = put_tries
        self.put_backoff = non_negative("put_backoff", put_backoff)
        self.put_backoff_max = non_negative("put_backoff_max", put_backoff_max)
        self.snapshot = snapshot
        self.log = logger if logger is not None else logging.getLogger("chunk_adapter")
        subscribe = subscription(connector)
        if event_driven and subscribe is None:
            raise InvalidValue(
                f"event_driven=True needs a connector with subscribe(callback); {connector!r} "
                "has none. Pass event_driven=None to poll such connectors"
            )
        self.event_driven = subscribe is not None and event_driven is not False
        self.repoll_interval = positive("repoll_interval", repoll_interval)
        rt = self.runtime

        # Set once by stop(); every loop and every sending/registering call checks it.
        # Its wait() is also the interruptible sleep for put backoff and idle rounds.
        self._stop = rt.Event()

        # Guards the sender state: _fifo, _next_send_id, _cancelled and the send
        # counters. Held only briefly, never while building or putting.
        self._send_lock = rt.Lock()
        # Over _send_lock. The SAVE thread waits on it for a non-empty FIFO or
        # stop; save_async notifies after appending, stop() notifies all.
        self._send_cond = rt.Condition(self._send_lock)
        self._fifo: deque[tuple[str, Any, bool]] = deque()
        self._next_send_id: dict[str, int] = {}
        self._cancelled: set[str] = set()

        # Guards the receiver state: _tokens, _next_recv_id, _ready, _queue and
        # the recv counters. Held only briefly, never while calling get. The
        # token check and the commit happen under it together (R16).
        self._recv_lock = rt.Lock()
        # Over _recv_lock. The RECV thread waits on it for a non-empty polling
        # queue or stop; load_async notifies after queueing, stop() notifies all.
        self._recv_cond = rt.Condition(self._recv_lock)
        self._tokens: dict[str, object] = {}
        self._next_recv_id: dict[str, int] = {}
        self._ready: dict[str, list[dict[str, Any]]] = {}
        self._queue: deque[tuple[str, object]] = deque()
        # Event-driven receive: keys the RECV thread is about to get or found
        # empty, and a counter bumped (and _recv_cond notified) by load_async
        # and by a put notification for one of those keys.
        self._awaited: set[str] = set()
        self._recv_signal = 0
        # Set by the RECV thread when a get of this round raised or returned a
        # non-dict: no put notification will come for that key, so the pause
        # after the round is the short polling backoff.
        self._get_failed = False

        # Counters: each dict is guarded by its side's lock (written by that side's thread).
        self._send_counts: dict[str, int] = dict.fromkeys(_SEND_COUNTERS, 0)
        self._recv_counts: dict[str, int] = dict.fromkeys(_RECV_COUNTERS, 0)
        # The RECV thread subscribes when it first has a request to receive (a
        # pure sender never subscribes) and unsubscribes when it exits.
        self._subscribe = subscribe if self.event_driven else None
        self._unsubscribe: Callable[[], None] | None = None
        self._threads: list[ThreadLike] = [
            rt.start_thread(self._save_loop, SAVE_THREAD),
            rt.start_thread(self._recv_loop, RECV_THREAD),
        ]

    # ------------------------------------------------------------------ sender
    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        """Snapshot *obj* and queue it for the SAVE thread; never blocks (R3, R4)."""
        check_request_id(request_id, "save_async")
        check_final(is_final, "save_async")
        self._check_running("save_async")
        try:
            snap = self.snapshot(obj)
        except Exception as exc:
            raise SnapshotError(
                f"save_async({request_id!r}): cannot snapshot {type(obj).__name__} object "
                f"{obj!r:.80}: {exc}. Nothing was queued; pass an object the snapshot "
                "function can copy, or give the adapter snapshot=<a function that can>"
            ) from exc
        with self._send_cond:
            self._check_running("save_async")
            self._fifo.append((request_id, snap, is_final))
            self._send_cond.notify()

    def cancel_sender(self, request_id: str) -> None:
        """Drop the request's non-final chunks; its final goes out with data None (R6)."""
        check_request_id(request_id, "cancel_sender")
        with self._send_lock:
            self._check_running("cancel_sender")
            self._cancelled.add(request_id)

    def _save_loop(self) -> None:
        while True:
            with self._send_cond:
                while not self._fifo and not self._stop.is_set():
                    self._send_cond.wait(self.wait_timeout)
                if self._stop.is_set():
                    return
                request_id, snap, is_final = self._fifo.popleft()
                cancelled = request_id in self._cancelled
            try:
                self._send_one(request_id, snap, is_final, cancelled)
            except Exception:  # a bug of ours must not kill the thread either (R22)
                self.log.exception("SAVE thread: unexpected error on %r; continuing", request_id)

    def _send_one(self, request_id: str, snap: Any, is_final: bool, cancelled: bool) -> None:
        """Build (outside every lock) and put one chunk (R6, R7, R8)."""
        if cancelled and not is_final:
            self._count_send("dropped_cancelled")
            return
        payload: Any = None
        if not cancelled:
            try:
                payload = self.build_payload(request_id, snap, is_final)
            except Exception:
                self.log.exception("build_payload failed for %r (final=%s)", request_id, is_final)
                self._count_send("build_failures")
                if not is_final:
                    self._count_send("dropped_build_failed")
                    return
                payload = None
            if payload is None and not is_final:
                self._count_send("skipped_none")
                return
        self._put_with_retries(request_id, {"data": payload, "finished": is_final}, is_final)

    def _put_with_retries(self, request_id: str, value: dict[str, Any], is_final: bool) -> None:
        """Put under the stream's next id; the id advances only on success (R9, R10, R11)."""
        tries = 0
        while True:
            with self._send_lock:
                chunk_id = self._next_send_id.get(request_id, 0)
            if self._stop.is_set():
                return  # no put starts once stop() has begun (R18)
            key = chunk_key(request_id, self.stage_id, chunk_id)
            try:
                self.connector.put(key, value)
            except Exception as exc:
                tries += 1
                self._count_send("put_failures")
                if not is_final and tries >= self.put_tries:
                    self.log.warning("dropping %s after %d failed puts: %r", key, tries, exc)
                    self._count_send("dropped_put_failed")
                    return
                self.log.info("put %s failed (try %d): %r; retrying", key, tries, exc)
                self._count_send("put_retries")
                if self._stop.wait(min(self.put_backoff * 2 ** (tries - 1), self.put_backoff_max)):
                    return
                continue
            with self._send_lock:
                self._send_counts["chunks_put"] += 1
                if is_final:
                    self._send_counts["finals_put"] += 1
                    self._next_send_id.pop(request_id, None)
                    self._cancelled.discard(request_id)
                else:
                    self._next_send_id[request_id] = chunk_id + 1
            return

    def _count_send(self, name: str) -> None:
        with self._send_lock:
            self._send_counts[name] += 1

    # ---------------------------------------------------------------- receiver
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
            self._queue.append((request_id, token))
            self._recv_signal += 1
            self._recv_cond.notify()

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        """Swap out everything committed since the last call (R14, R15)."""
        with self._recv_lock:
            ready, self._ready = self._ready, {}
        return ready

    def cleanup_receiver(self, request_id: str) -> None:
        """Forget the registration and its ready chunks: a commit fence (R16)."""
        check_request_id(request_id, "cleanup_receiver")
        with self._recv_lock:
            self._tokens.pop(request_id, None)
            next_id = self._next_recv_id.pop(request_id, None)
            self._ready.pop(request_id, None)
            if next_id is not None:
                self._awaited.discard(chunk_key(request_id, self.src_stage_id, next_id))

    def _on_put(self, key: str) -> None:
        """Subscription callback: wake the RECV thread if it awaits *key*."""
        with self._recv_cond:
            if key in self._awaited:
                self._recv_signal += 1
                self._recv_cond.notify()

    def _recv_loop(self) -> None:
        try:
            self._recv_rounds()
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
                if self._tokens.get(request_id) is not token:
                    self._recv_counts["stale_entries_dropped"] += 1
                    continue
                chunk_id = self._next_recv_id[request_id]
                key = chunk_key(request_id, self.src_stage_id, chunk_id)
                if self.event_driven:
                    self._awaited.add(key)
            progress = self._poll_one(request_id, token, key, chunk_id) or progress
        return progress

    def _poll_one(self, request_id: str, token: object, key: str, chunk_id: int) -> bool:
        """One get of *key* outside the lock, then check the token and commit under it (R16)."""
        value: Any = None
        failed = False
        try:
            value = self.connector.get(key)
        except Exception as exc:
            self.log.info("get %s failed: %r; will retry", key, exc)
            failed = True
        if value is not None and not isinstance(value, dict):
            self.log.warning("get %s returned %r, not a dict; ignoring it", key, value)
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
                self._recv_counts["stale_discarded"] += 1
                return False
            self._ready.setdefault(request_id, []).append(value)
            self._next_recv_id[request_id] = chunk_id + 1
            self._recv_counts["committed"] += 1
            if not value.get("finished"):
                self._queue.append((request_id, token))
            return True

    # ---------------------------------------------------------------- lifecycle
    def stop(self) -> None:
        """Wake and join both threads against one deadline; idempotent (R18, R19)."""
        first = not self._stop.is_set()
        self._stop.set()
        for cond in (self._send_cond, self._recv_cond):
            with cond:
                cond.notify_all()
        deadline = self.runtime.monotonic() + (self.join_timeout if first else 0.0)
        for thread in self._threads:
            thread.join(max(0.0, deadline - self.runtime.monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        if first and alive:
            self.log.warning(
                "stop(): %s still blocked after %.3fs; abandoned as daemon threads",
                ", ".join(alive),
                self.join_timeout,
            )

    def _check_running(self, call: str) -> None:
        if self._stop.is_set():
            raise AdapterStopped(
                f"{call}: this adapter was stopped; create a new ChunkAdapter to send or receive"
            )

    def __enter__(self) -> ChunkAdapter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stats(self) -> AdapterStats:
        """An immutable snapshot of the counters and queue depths."""
        with self._send_lock:
            counts = dict(self._send_counts)
            counts["save_queue_depth"] = len(self._fifo)
        with self._recv_lock:
            counts.update(self._recv_counts)
            counts["poll_queue_depth"] = len(self._queue)
            counts["registered"] = len(self._tokens)
            counts["ready_chunks"] = sum(len(v) for v in self._ready.values())
        return AdapterStats(**counts)

    def threads(self) -> list[ThreadLike]:
        """The SAVE and RECV thread handles (for tests that check nothing leaks)."""
        return list(self._threads)

    def check_invariants(self) -> None:
        """Assert the class invariants S1, V1–V3 (an AssertionError is a bug here)."""
        with self._send_lock:
            bad = {r: i for r, i in self._next_send_id.items() if i < 1}
            assert not bad, f"S1: next send ids must be >= 1 when present: {bad}"
        with self._recv_lock:
            assert self._tokens.keys() == self._next_recv_id.keys(), "V1: tokens vs next ids"
            stray = [r for r, v in self._ready.items() if r not in self._tokens or not v]
            assert not stray, f"V2: ready lists for unregistered or empty requests: {stray}"
            live = [id(t) for r, t in self._queue if self._tokens.get(r) is t]
            assert len(live) == len(set(live)), "V3: a registration has two queue entries"

    def __repr__(self) -> str:
        state = "stopped" if self._stop.is_set() else "running"
        return (
            f"ChunkAdapter({self.connector!r}, stage_id={self.stage_id}, "
            f"src_stage_id={self.src_stage_id}, {state})"
        )
