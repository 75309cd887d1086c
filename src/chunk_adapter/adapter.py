"""The reference ChunkAdapter (docs/contract.md, rules R1–R32).

The scheduler thread calls ``save_async``, ``cancel_sender``, ``load_async``,
``poll_ready`` and ``cleanup_receiver`` and never waits; a SAVE thread builds
payloads and puts them, a RECV thread gets chunks and commits them. This
module builds the adapter and stops it; the two halves live in
:mod:`._adapter_send` and :mod:`._adapter_recv`.

Over 400 lines, and one module because the constructor creates and documents every lock,
condition and piece of state both halves use (each commented where it is made, house
style), with validation of every option; the halves themselves are apart.
"""

from __future__ import annotations

import copy
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, Literal

from ._adapter_leftovers import Drain, StreamIdentity, Sweep
from ._adapter_recv import ReceiverSide
from ._adapter_send import SenderSide
from ._logpace import LogPace
from ._save_schedule import SaveSchedule
from ._validate import check_stage, non_negative, optional_positive, positive, short_repr
from .connectors.base import Connector, subscription
from .errors import InvalidType, InvalidValue
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
    "put_rejected",
    "dropped_put_rejected",
    "finals_degraded",
    "finals_failed",
    "abandoned",
    "abandoned_finals",
    "dropped_at_exit",
    "saves_refused",
    "cancels_idle",
)
_RECV_COUNTERS = (
    "gets",
    "gets_empty",
    "get_failures",
    "committed",
    "stale_discarded",
    "stale_entries_dropped",
    "stalls_reported",
    "leftovers_discarded",
    "leftovers_given_up",
    "streams_left",
)
RECV_THREAD = "chunk-adapter-recv"


def _default_build(request_id: str, snapshot: Any, is_final: bool) -> Any:
    return snapshot


def _retry_window(connector: Connector, option: object) -> float | None:
    """The ``put_retry_window`` in effect: the option, or with ``"auto"`` the connector's
    ``put_retry_window`` hint (absent: none)."""
    if option != "auto":
        return optional_positive("put_retry_window", option)
    hint = getattr(connector, "put_retry_window", None)
    try:
        return optional_positive("put_retry_window", hint)
    except (InvalidType, InvalidValue) as exc:
        raise InvalidValue(
            f"{short_repr(connector)} has a bad put_retry_window hint ({exc}); pass "
            "put_retry_window=<seconds> or None to the adapter"
        ) from exc


def _max_save_queue(option: object) -> int | None:
    if option is None:
        return None
    if isinstance(option, bool) or not isinstance(option, int) or option < 1:
        raise InvalidValue(
            f"max_save_queue is the most chunks that may wait to be sent, an int >= 1 or "
            f"None (no bound), got {short_repr(option)}; pass e.g. max_save_queue=10000"
        )
    return option


def _discard_leftovers(connector: Connector, option: object) -> bool:
    if not isinstance(option, bool):
        raise InvalidType(f"discard_leftovers must be True or False, got {short_repr(option)}")
    if option and getattr(connector, "consume_on_get", True) is False:
        raise InvalidValue(
            f"discard_leftovers=True needs a connector whose get consumes, and "
            f"{short_repr(connector)} keeps values (consume_on_get=False): a stream's old "
            "chunks would stay readable. Make it with consume_on_get=True"
        )
    return option


def _stream_identity(connector: Connector) -> StreamIdentity | None:
    """The connector's ``abandon`` and ``sweep`` (stream identity kept by the connector,
    R29), if it offers both and its get consumes."""
    abandon = getattr(connector, "abandon", None)
    sweep = getattr(connector, "sweep", None)
    if not callable(abandon) or not callable(sweep):
        return None
    if getattr(connector, "consume_on_get", True) is False:
        return None
    if getattr(connector, "stream_identity", True) is False:
        return None  # turned off: discard_leftovers' drain, if asked for, does it
    return StreamIdentity(abandon, sweep)


class ChunkAdapter(SenderSide, ReceiverSide):
    """Moves per-request chunks between pipeline stages through a connector.

    Options beyond the contract's (docs/contract.md R25–R28): ``put_retry_window``
    (seconds, or ``None``) spreads a non-final's ``put_tries`` tries over that
    long, so a short outage costs no chunk; the default, ``"auto"``, takes the
    connector's hint (2 s on shared memory and Redis, none in memory; see
    :mod:`.connectors.base`); ``exit_drain_timeout`` (5 s)
    bounds how long ``with`` waits for saved chunks to be put before stopping;
    ``stall_timeout`` (30 s, ``None`` for off) reports a registration that
    makes no progress for that long. Stream identity (R29): on a connector that
    keeps it (shared memory, Redis) ``cleanup_receiver`` of an unfinished
    registration has the connector throw the rest of that stream away, so a later
    stream with the same request id never receives it; on one without,
    ``discard_leftovers`` (``False``) has the adapter drain that rest itself
    (docs/connectors.md, "Stream identity"); either gives up on a rest that does
    not come for ``leftover_timeout`` (30 s). ``final_put_timeout``
    (``None``: off, as R10 asks) gives up, loudly, a final whose puts have
    failed for that many seconds; ``max_save_queue`` (``None``: no bound)
    refuses a non-final ``save_async`` with ``SaveQueueFull`` while that many
    chunks wait to be sent. Every timeout is a finite number.

    One stream's failing puts never hold back another's: a put that fails
    transiently parks its stream until its next try, and the SAVE thread goes
    on with other requests' chunks (per-request order kept, R5).

    Invariants (``check_invariants`` asserts them; each holds whenever the lock
    that guards it is free):

    Sender, under ``_send_lock``:
      S1. ``_next_send_id`` values are >= 1: a request is in it only after its
          first successful non-final put; absent means "next id is 0" (R9, R11).
      S2. The FIFO holds ``(request_id, snapshot, is_final)`` in save order (R5).
      S3. ``_done <= _saved``; ``_saved - _done`` is the FIFO's length plus one
          while an item is in flight (``_in_flight``) plus the parked and held
          items (``_schedule``), until stop() empties them (R26); ``_queued``
          counts the FIFO's items per request.

    Receiver, under ``_recv_lock``:
      V1. ``_tokens`` and ``_next_recv_id`` have the same keys (registered ids).
      V2. Every key of ``_ready`` is registered, and its list is non-empty.
      V3. No two polling-queue entries carry the same current token (R16); an
          entry whose token is no longer current is dropped when the RECV thread
          reaches it, and an entry is not put back once its final is committed (R13).
      V4. ``_progress_at`` and ``_stalled`` hold registered ids only (R28).
      V5. A registration of a request id with a drain (``_drains``) never gets a
          key at or past the drain's bound (:meth:`_Drain.bound`).
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
        put_retry_window: float | Literal["auto"] | None = "auto",
        exit_drain_timeout: float = 5.0,
        stall_timeout: float | None = 30.0,
        discard_leftovers: bool = False,
        leftover_timeout: float = 30.0,
        final_put_timeout: float | None = None,
        max_save_queue: int | None = None,
    ) -> None:
        if not (
            callable(getattr(connector, "put", None)) and callable(getattr(connector, "get", None))
        ):
            raise InvalidType(
                "connector must have put(key, value) and get(key) methods, got "
                f"{short_repr(connector)}"
            )
        self.stage_id = check_stage("stage_id", stage_id)
        self.src_stage_id = (
            self.stage_id - 1 if src_stage_id is None else check_stage("src_stage_id", src_stage_id)
        )
        if build_payload is not None and not callable(build_payload):
            raise InvalidType(
                f"build_payload must be callable or None, got {short_repr(build_payload)}"
            )
        if not callable(snapshot):
            raise InvalidType(
                f"snapshot must be callable (e.g. copy.deepcopy), got {short_repr(snapshot)}"
            )
        if isinstance(put_tries, bool) or not isinstance(put_tries, int) or put_tries < 1:
            raise InvalidValue(
                f"put_tries counts every try and must be an int >= 1, got {short_repr(put_tries)}"
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
        self.put_retry_window = _retry_window(connector, put_retry_window)
        self.exit_drain_timeout = non_negative("exit_drain_timeout", exit_drain_timeout)
        self.stall_timeout = optional_positive("stall_timeout", stall_timeout)
        self.discard_leftovers = _discard_leftovers(connector, discard_leftovers)
        self.leftover_timeout = positive("leftover_timeout", leftover_timeout)
        self._identity = _stream_identity(connector)
        self.final_put_timeout = optional_positive("final_put_timeout", final_put_timeout)
        self.max_save_queue = _max_save_queue(max_save_queue)
        self.snapshot = snapshot
        self.log = logger if logger is not None else logging.getLogger("chunk_adapter")
        subscribe = subscription(connector)
        if event_driven and subscribe is None:
            raise InvalidValue(
                "event_driven=True needs a connector with subscribe(callback); "
                f"{short_repr(connector)} has none. Pass event_driven=None to poll such connectors"
            )
        self.event_driven = subscribe is not None and event_driven is not False
        self.repoll_interval = positive("repoll_interval", repoll_interval)
        rt = self.runtime

        # Set once by stop(); every loop and every sending/registering call checks it.
        # Its wait() is also the interruptible sleep for put backoff and idle rounds.
        self._stop = rt.Event()

        # Guards the sender state: _fifo, _schedule, _next_send_id, _cancelled, _queued,
        # _saved, _done, _taken, _in_flight, _abandoned_seq, _idle_cancel_logged,
        # _finals_pending, _ending_by, _cut and the send counters.
        # Held only briefly, never while building or putting.
        self._send_lock = rt.Lock()
        # Over _send_lock. The SAVE thread waits on it for a non-empty FIFO or
        # stop; save_async notifies after appending, stop() notifies all.
        self._send_cond = rt.Condition(self._send_lock)
        # Over _send_lock. flush() waits on it until the SAVE thread has finished
        # every item saved before the call; the SAVE thread notifies all after each
        # item, stop() notifies all.
        self._drained_cond = rt.Condition(self._send_lock)
        self._fifo: deque[tuple[str, Any, bool]] = deque()
        self._next_send_id: dict[str, int] = {}
        self._cancelled: set[str] = set()
        # How many FIFO items each request has (absent: none), so cancel_sender can
        # tell an open stream from a closed one in O(1).
        self._queued: dict[str, int] = {}
        # Items ever appended to the FIFO / ever finished by the SAVE thread (put,
        # dropped, skipped, failed or abandoned): flush() waits for _done >= _saved.
        self._saved = 0
        self._done = 0
        # Streams whose put failed and waits for its next try (parked), and their later
        # chunks taken from the FIFO meanwhile (held): the SAVE thread goes on with other
        # requests' chunks (issue 27: no head-of-line blocking; R5 is per request).
        self._schedule = SaveSchedule()
        # Items the SAVE thread has taken to work on (their seq numbers), the item it is
        # working on: (seq, request_id, is_final), and the seq of the last in-flight item
        # counted as abandoned (counted once, by stop() or by the SAVE thread, whichever
        # sees it first).
        self._taken = 0
        self._in_flight: tuple[int, str, bool] | None = None
        # Finals saved and not yet finished (queued, held, parked or in flight), and the
        # deadline of an ending drain (stop(drain_timeout=...) or leaving `with`), set
        # before it flushes: when the time left is short for those finals, the streams
        # still waiting are cut (_cut: their non-finals dropped, their finals put with
        # data None) so that every final can go out (R26).
        self._finals_pending = 0
        self._ending_by: float | None = None
        self._cut: set[str] = set()
        # Seconds a chunk takes to put (moving average), for that reckoning, and when the
        # last put ended while the thread went straight on (None after an idle wait);
        # SAVE thread only.
        self._put_seconds = 0.0
        self._last_put_end: float | None = None
        self._abandoned_seq = -1
        self._idle_cancel_logged = False
        # Why a background thread ended on what it must not survive (R30), set once by
        # that thread under _send_lock; save_async and load_async read it and raise.
        self._death: str | None = None

        # Guards the receiver state: _tokens, _next_recv_id, _ready, _queue,
        # _progress_at, _stalled, _drains, _sweeps, _awaited, _recv_signal, _get_failed and the
        # recv counters. Held only briefly, never while calling get. The token check and
        # the commit happen under it together (R16).
        self._recv_lock = rt.Lock()
        # Over _recv_lock. The RECV thread waits on it for a non-empty polling
        # queue or stop; load_async notifies after queueing, stop() notifies all.
        self._recv_cond = rt.Condition(self._recv_lock)
        self._tokens: dict[str, object] = {}
        self._next_recv_id: dict[str, int] = {}
        self._ready: dict[str, list[dict[str, Any]]] = {}
        self._queue: deque[tuple[str, object]] = deque()
        # Stall report (R28): when each unfinished registration last made progress
        # (registered, or committed a chunk), and which of them were reported.
        self._progress_at: dict[str, float] = {}
        self._stalled: set[str] = set()
        # Event-driven receive: keys the RECV thread is about to get or found
        # empty, and a counter bumped (and _recv_cond notified) by load_async
        # and by a put notification for one of those keys.
        self._awaited: set[str] = set()
        self._recv_signal = 0
        # discard_leftovers: the abandoned streams being discarded, per request id;
        # each has its own polling-queue entry (its token) (V5).
        self._drains: dict[str, Drain] = {}
        # On a connector that keeps stream identity: the request ids whose abandoned
        # streams' rest the connector is sweeping away, each with its own polling-queue
        # entry (its token).
        self._sweeps: dict[str, Sweep] = {}
        # Set by the RECV thread when a get of this round raised or returned a
        # non-dict: no put notification will come for that key, so the pause
        # after the round is the short polling backoff.
        self._get_failed = False

        # Paced log lines (one per kind and key per second, the rest counted): each used
        # only by its side's thread (SAVE: builds and puts; RECV: gets), so no lock.
        self._send_pace = LogPace(rt.monotonic)
        self._recv_pace = LogPace(rt.monotonic)
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

    # ---------------------------------------------------------------- lifecycle
    def stop(self, drain_timeout: float = 0.0) -> None:
        """Wake and join both threads against one deadline; idempotent (R18, R19).

        With ``drain_timeout`` > 0 it first waits up to that long for every chunk
        saved so far to be put or counted (:meth:`flush`), finals first: when the
        time left is short for the finals still waiting, their streams are cut
        (non-finals dropped, ``dropped_at_exit``; finals put with data ``None``).
        What stop() gives up — chunks still queued, held or parked, and the one
        in flight if its thread is still blocked — is counted in ``stats()``
        (``abandoned``, ``abandoned_finals``) and logged at WARNING (R26).
        """
        if drain_timeout and not self._stop.is_set():
            self._end_within(drain_timeout)
        first = not self._stop.is_set()
        self._stop.set()
        for cond in (self._send_cond, self._recv_cond, self._drained_cond):
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
        if first:
            self._count_abandoned()

    def _end_within(self, timeout: float) -> None:
        """An ending drain: flush for up to *timeout* seconds, finals first (R26)."""
        timeout = non_negative("drain_timeout", timeout)
        with self._send_cond:
            self._ending_by = self.runtime.monotonic() + timeout
            self._send_cond.notify()
        self.flush(timeout)

    def __enter__(self) -> ChunkAdapter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Drain for up to ``exit_drain_timeout`` seconds, then stop (R26).

        No drain when leaving on a ``KeyboardInterrupt``-like ``BaseException``.
        """
        exc = exc_info[0] if exc_info else None
        draining = exc is None or (isinstance(exc, type) and issubclass(exc, Exception))
        if draining and self.exit_drain_timeout > 0 and not self._stop.is_set():
            self._end_within(self.exit_drain_timeout)
        self.stop()

    def stats(self) -> AdapterStats:
        """An immutable snapshot of the counters and queue depths."""
        with self._send_lock:
            counts = dict(self._send_counts)
            counts["save_queue_depth"] = len(self._fifo)
            counts["save_in_flight"] = int(self._in_flight is not None)
            counts["save_parked"] = len(self._schedule.parked)
            counts["save_held"] = self._schedule.pending() - len(self._schedule.parked)
            counts["cancel_marks"] = len(self._cancelled)
            counts["open_streams"] = len(self._next_send_id)
        with self._recv_lock:
            counts.update(self._recv_counts)
            counts["poll_queue_depth"] = len(self._queue)
            counts["registered"] = len(self._tokens)
            counts["ready_chunks"] = sum(len(v) for v in self._ready.values())
            counts["stalled"] = len(self._stalled)
            counts["draining"] = len(self._drains) + len(self._sweeps)
        return AdapterStats(**counts)

    def threads(self) -> list[ThreadLike]:
        """The SAVE and RECV thread handles (for tests that check nothing leaks)."""
        return list(self._threads)

    def check_invariants(self) -> None:
        """Assert the class invariants S1–S3, V1–V4 (an AssertionError is a bug here)."""
        with self._send_lock:
            bad = {r: i for r, i in self._next_send_id.items() if i < 1}
            assert not bad, f"S1: next send ids must be >= 1 when present: {bad}"
            if not self._stop.is_set():
                pending = len(self._fifo) + (self._in_flight is not None) + self._schedule.pending()
                assert self._saved - self._done == pending, (
                    f"S3: {self._saved} saved - {self._done} done != {pending} pending"
                )
                queued = sum(self._queued.values())
                assert queued == len(self._fifo), f"S3: {queued} counted != {len(self._fifo)}"
        with self._recv_lock:
            assert self._tokens.keys() == self._next_recv_id.keys(), "V1: tokens vs next ids"
            stray = [r for r, v in self._ready.items() if r not in self._tokens or not v]
            assert not stray, f"V2: ready lists for unregistered or empty requests: {stray}"
            live = [id(t) for r, t in self._queue if self._tokens.get(r) is t]
            assert len(live) == len(set(live)), "V3: a registration has two queue entries"
            gone = (self._progress_at.keys() | self._stalled) - self._tokens.keys()
            assert not gone, f"V4: stall state for unregistered requests: {gone}"
            past = {
                r: (self._next_recv_id[r], d.bound())
                for r, d in self._drains.items()
                if r in self._next_recv_id and self._next_recv_id[r] > d.bound()
            }
            assert not past, f"V5: registrations past their id's drain (next id, bound): {past}"

    def __repr__(self) -> str:
        state = "stopped" if self._stop.is_set() else "running"
        return (
            f"ChunkAdapter({self.connector!r}, stage_id={self.stage_id}, "
            f"src_stage_id={self.src_stage_id}, {state})"
        )
