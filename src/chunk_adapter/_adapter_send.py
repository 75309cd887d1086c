"""The sending half of the reference ChunkAdapter (rules R3–R11, R25–R27).

:class:`SenderSide` is a mixin of :class:`~chunk_adapter.adapter.ChunkAdapter`:
the scheduler's ``save_async``, ``cancel_sender`` and ``flush``, and the SAVE
thread's loop. The state it uses (``_send_lock``, ``_fifo`` ...) is created
and documented in ``ChunkAdapter.__init__``.

Over 400 lines, and one module because the SAVE loop's steps (snapshot, cancel check,
build, put, retry, forget) share the per-stream state and its lock; split, each half
would reach into the other's state, and the lock's comments would live apart from the
code that takes it.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

from ._death import cause, survived
from ._logpace import LogPace
from ._save_schedule import Attempt, Item, SaveSchedule
from ._validate import check_final, check_request_id, non_negative, short_repr
from .connectors.base import Connector, chunk_key, is_permanent
from .errors import AdapterFailed, AdapterStopped, SaveQueueFull, SnapshotError
from .runtime import ConditionLike, EventLike, LockLike, Runtime

__all__ = ["SenderSide"]


def _is_final(what: Attempt | Item) -> bool:
    return what.is_final if isinstance(what, Attempt) else what[2]


class SenderSide:
    """Sender calls and the SAVE thread (see module doc)."""

    # Set up by ChunkAdapter.__init__ (documented there).
    connector: Connector
    runtime: Runtime
    log: logging.Logger
    stage_id: int
    wait_timeout: float
    put_tries: int
    put_backoff: float
    put_backoff_max: float
    put_retry_window: float | None
    final_put_timeout: float | None
    max_save_queue: int | None
    build_payload: Callable[[str, Any, bool], Any]
    snapshot: Callable[[Any], Any]
    _stop: EventLike
    _send_lock: LockLike
    _send_cond: ConditionLike
    _drained_cond: ConditionLike
    _fifo: deque[tuple[str, Any, bool]]
    _next_send_id: dict[str, int]
    _cancelled: set[str]
    _queued: dict[str, int]
    _saved: int
    _done: int
    _in_flight: tuple[int, str, bool] | None
    _taken: int
    _schedule: SaveSchedule
    _finals_pending: int
    _ending_by: float | None
    _cut: set[str]
    _put_seconds: float
    _last_put_end: float | None
    _abandoned_seq: int
    _idle_cancel_logged: bool
    _send_counts: dict[str, int]
    _death: str | None
    _send_pace: LogPace

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        """Snapshot *obj* and queue it for the SAVE thread; never blocks (R3, R4).

        With ``max_save_queue``, a non-final chunk saved while that many chunks
        wait to be sent raises :class:`SaveQueueFull` at once, nothing queued
        (counted: ``saves_refused``); a final is always accepted (R11).
        """
        check_request_id(request_id, "save_async")
        check_final(is_final, "save_async")
        self._check_running("save_async")
        try:
            snap = self.snapshot(obj)
        except Exception as exc:
            raise SnapshotError(
                f"save_async({short_repr(request_id)}): cannot snapshot {type(obj).__name__} "
                f"object {short_repr(obj)}: {exc}. Nothing was queued; pass an object the "
                "snapshot function can copy, or give the adapter snapshot=<a function that can>"
            ) from exc
        with self._send_cond:
            self._check_running("save_async")
            bound = self.max_save_queue
            if bound is not None and not is_final:
                waiting = len(self._fifo) + self._schedule.pending()
                if waiting >= bound:
                    self._send_counts["saves_refused"] += 1
                    raise SaveQueueFull(
                        f"save_async({short_repr(request_id)}): {waiting} chunks wait to be "
                        f"sent, the max_save_queue bound; nothing was queued. Save it again "
                        "later, cancel_sender the request, or raise max_save_queue (a final "
                        "is always accepted)"
                    )
            self._fifo.append((request_id, snap, is_final))
            self._saved += 1
            self._finals_pending += is_final
            self._queued[request_id] = self._queued.get(request_id, 0) + 1
            self._send_cond.notify()

    def cancel_sender(self, request_id: str) -> None:
        """Drop the request's non-final chunks; its final goes out with data None (R6).

        A cancel of a request with no open stream (nothing queued, in flight or
        partly put) still marks it, as R6 requires: the mark cuts the next stream
        saved under that id. It is counted (``cancels_idle``) and logged once.
        """
        check_request_id(request_id, "cancel_sender")
        with self._send_lock:
            self._check_running("cancel_sender")
            if request_id in self._cancelled or self._stream_open(request_id):
                self._cancelled.add(request_id)
                return
            self._cancelled.add(request_id)
            self._send_counts["cancels_idle"] += 1
            first, self._idle_cancel_logged = not self._idle_cancel_logged, True
        (self.log.warning if first else self.log.debug)(
            "cancel_sender(%s): nothing of it is queued, being sent or partly put. The mark "
            "cuts the NEXT stream saved under this id (its non-finals dropped, its final put "
            "with data None) and is kept until that final is put (contract R6). Do not "
            "cancel a request after saving its final. (Logged once per adapter; counted in "
            "stats().cancels_idle.)",
            short_repr(request_id),
        )

    def _stream_open(self, request_id: str) -> bool:
        """Called with ``_send_lock`` held: is a stream of *request_id* queued, in flight
        or partly put? O(1)."""
        return (
            request_id in self._next_send_id
            or request_id in self._queued
            or (self._in_flight is not None and self._in_flight[1] == request_id)
            or self._schedule.blocked(request_id)
        )

    def flush(self, timeout: float) -> bool:
        """Wait until every chunk saved before this call is put or counted (R26).

        Returns ``True`` once the SAVE thread has finished each of them — put,
        dropped, skipped or failed, each counted in ``stats()`` — and ``False``
        if *timeout* seconds pass first, the adapter is stopped or a thread of it
        died (R30). Unlike the
        five scheduler calls it blocks: call it when a stage winds down, not per
        chunk. Chunks saved meanwhile (by other threads) are not waited for.
        """
        timeout = non_negative("flush timeout", timeout)
        rt = self.runtime
        deadline = rt.monotonic() + timeout
        with self._drained_cond:
            target = self._saved
            while self._done < target:
                remaining = deadline - rt.monotonic()
                if self._stop.is_set() or self._death is not None or remaining <= 0:
                    return False
                self._drained_cond.wait(min(remaining, self.wait_timeout))
            return self._death is None  # what a dead thread left is not done

    def _save_loop(self) -> None:
        """The SAVE thread: chunks in save order, a stream whose put fails parked.

        A put that fails transiently parks its stream until its next try is
        due, and the thread goes on with other requests' chunks; the parked
        stream's later chunks are held behind it (:mod:`._save_schedule`). A
        subclass that overrides ``_send_one`` or ``_put_with_retries`` wrote
        them for one chunk at a time, retried in place: it gets that loop.
        """
        mine = (SenderSide._send_one, SenderSide._put_with_retries)
        if (type(self)._send_one, type(self)._put_with_retries) != mine:
            self._save_loop_in_place()
            return
        while True:
            with self._send_cond:
                job = self._next_job()
                if job is None:
                    return
            finished = self._guarded(job[0], partial(self._work, job))
            with self._drained_cond:
                self._in_flight = None
                self._schedule.fresh_first = finished is False or isinstance(job[1], Attempt)
                if finished is not False:
                    self._done += 1
                    self._finals_pending -= _is_final(job[1])
                    self._schedule.finished(job[0])
                    self._drained_cond.notify_all()
            if finished is None:
                return

    def _next_job(self) -> tuple[str, Attempt | Item] | None:
        """Called with ``_send_cond`` held: wait for the next chunk to work on and mark it
        in flight; ``None`` once stop() has begun. New work is held chunks whose
        stream is free again, then the FIFO; a due retry goes before it, except
        right after a retry or a park (``fresh_first``): the two take turns."""
        rt, schedule = self.runtime, self._schedule
        while not self._stop.is_set():
            attempt = None if schedule.fresh_first else schedule.take_due(rt.monotonic())
            if attempt is not None:
                self._in_flight = (attempt.seq, attempt.request_id, attempt.is_final)
                return attempt.request_id, attempt
            item = schedule.take_resumed()
            if item is None and self._fifo:
                request_id, snap, is_final, _ = self._take()
                if schedule.blocked(request_id):
                    schedule.hold((request_id, snap, is_final))
                    continue
                item = (request_id, snap, is_final)
            if item is not None:
                self._taken += 1
                self._in_flight = (self._taken, item[0], item[2])
                return item[0], item
            if schedule.fresh_first:  # no new work: a due retry may go
                schedule.fresh_first = False
                continue
            due = schedule.next_due()
            pause = self.wait_timeout if due is None else due - rt.monotonic()
            if pause > 0:
                self._last_put_end = None  # idle: the next put's pace starts afresh
                self._send_cond.wait(min(pause, self.wait_timeout))
        return None

    def _work(self, job: tuple[str, Attempt | Item]) -> bool:
        """Build (a new chunk) and try its put once; ``False`` when it was parked."""
        request_id, what = job
        if isinstance(what, Attempt):
            attempt = what
            if not attempt.is_final and self._cutting(request_id, False):
                return True
        else:
            _, snap, is_final = what
            cut = self._cutting(request_id, is_final)
            if cut and not is_final:
                return True
            with self._send_lock:
                cancelled = cut or request_id in self._cancelled
                seq = self._taken
            value = self._value_of(request_id, snap, is_final, cancelled)
            if value is None:
                return True
            attempt = Attempt(request_id, value, is_final, seq)
        pause = self._put_once(attempt)
        if pause is None:
            return True
        with self._send_lock:
            self._schedule.park(attempt, self.runtime.monotonic() + pause)
        return False

    def _cutting(self, request_id: str, is_final: bool) -> bool:
        """During an ending drain: is this chunk's stream cut so that the finals still
        waiting can go out in the time left (R26)? A non-final of a cut stream is
        dropped here (``dropped_at_exit``); its final goes out with data ``None``, as
        after a cancel (R6), so the receiver sees the stream end, cut."""
        with self._send_lock:
            ending_by = self._ending_by
            if ending_by is None:
                return False
            if request_id not in self._cut:
                if is_final:
                    return False
                left = ending_by - self.runtime.monotonic()
                if left >= 2.0 * self._finals_pending * self._put_seconds + 0.05:
                    return False
                self._cut.add(request_id)
                self._cut_queued()
            if not is_final:
                self._send_counts["dropped_at_exit"] += 1
            return True

    def _cut_queued(self) -> None:
        """Called with ``_send_lock`` held, once the time left is short for the finals
        waiting: cut every stream with a chunk in the FIFO at once (its non-finals
        dropped, counted and done; its final kept in place), so that the finals need
        not wait for the drops one by one. One pass, in save order."""
        kept: deque[tuple[str, Any, bool]] = deque()
        dropped = 0
        for item in self._fifo:
            if item[2]:
                kept.append(item)
                continue
            dropped += 1
            self._cut.add(item[0])
            left = self._queued[item[0]] - 1
            if left:
                self._queued[item[0]] = left
            else:
                del self._queued[item[0]]
        self._fifo = kept
        self._done += dropped
        self._send_counts["dropped_at_exit"] += dropped
        self._drained_cond.notify_all()

    def _save_loop_in_place(self) -> None:
        """One chunk at a time, a failed put retried in place (for subclasses' hooks)."""
        while True:
            with self._send_cond:
                while not self._fifo and not self._stop.is_set():
                    self._send_cond.wait(self.wait_timeout)
                if self._stop.is_set():
                    return
                request_id, snap, is_final, cancelled = self._take()
                self._taken += 1
                self._in_flight = (self._taken, request_id, is_final)
            went_on = self._guarded(
                request_id, partial(self._send_one, request_id, snap, is_final, cancelled)
            )
            with self._drained_cond:
                self._in_flight = None
                self._done += 1
                self._finals_pending -= is_final
                self._drained_cond.notify_all()
            if went_on is None:
                return

    def _guarded(self, request_id: str, work: Callable[[], bool | None]) -> bool | None:
        """Run one item's *work* for either SAVE loop: what it returns (``False``: the
        item was parked), ``True`` after an unexpected error of ours (logged: it must
        not kill the thread, R22), ``None`` when the thread must end (R30: died loudly,
        logged with its traceback, not raised again into threading's hook)."""
        try:
            return work() is not False
        except Exception:
            self.log.exception(
                "SAVE thread: unexpected error on %s; continuing", short_repr(request_id)
            )
            return True
        except BaseException as exc:
            self._died("SAVE", exc)
            return None

    def _take(self) -> tuple[str, Any, bool, bool]:
        """Called with ``_send_cond`` held and the FIFO not empty: the next item as
        (request id, snapshot, final?, cancelled?), no longer counted in ``_queued``.
        Subclasses that write their own SAVE loop take items with this, so the
        per-request count never outlives the stream (R24)."""
        request_id, snap, is_final = self._fifo.popleft()
        left = self._queued.pop(request_id, 1) - 1
        if left > 0:
            self._queued[request_id] = left
        return request_id, snap, is_final, request_id in self._cancelled

    def _send_one(self, request_id: str, snap: Any, is_final: bool, cancelled: bool) -> None:
        """Build (outside every lock) and put one chunk, retried in place (R6–R10)."""
        value = self._value_of(request_id, snap, is_final, cancelled)
        if value is not None:
            self._put_with_retries(request_id, value, is_final)

    def _value_of(
        self, request_id: str, snap: Any, is_final: bool, cancelled: bool
    ) -> dict[str, Any] | None:
        """The wire value to put for a saved chunk, built outside every lock, or ``None``
        when it is dropped or skipped (counted): R6, R7, R8."""
        if cancelled and not is_final:
            self._count_send("dropped_cancelled")
            return None
        payload: Any = None
        if not cancelled:
            try:
                payload = self.build_payload(request_id, snap, is_final)
            except survived():
                self._send_pace.say(
                    self.log.exception, "build", request_id,
                    "build_payload failed for %s (final=%s)", short_repr(request_id), is_final,
                )  # fmt: skip
                self._count_send("build_failures")
                if not is_final:
                    self._count_send("dropped_build_failed")
                    return None
                payload = None
            if payload is None and not is_final:
                self._count_send("skipped_none")
                return None
        return {"data": payload, "finished": is_final}

    def _put_with_retries(self, request_id: str, value: dict[str, Any], is_final: bool) -> None:
        """Put under the stream's next id, retrying in place until done (R9, R10, R11)."""
        with self._send_lock:
            seq = self._taken
        attempt = Attempt(request_id, value, is_final, seq)
        while True:
            pause = self._put_once(attempt)
            if pause is None:
                return
            if self._stop.wait(pause):
                self._abandon_in_flight()
                return

    def _put_once(self, attempt: Attempt) -> float | None:
        """Try *attempt*'s put once under its stream's next id; the id advances only on
        success (R9). Returns the pause before the next try, or ``None`` once the chunk
        is finished: put, dropped after ``put_tries`` (R10), refused for good (R25),
        given up after ``final_put_timeout``, or abandoned to stop() (R18).
        """
        request_id, value, is_final = attempt.request_id, attempt.value, attempt.is_final
        with self._send_lock:
            chunk_id = self._next_send_id.get(request_id, 0)
        if self._stop.is_set():
            self._abandon_in_flight()
            return None  # no put starts once stop() has begun (R18)
        key = chunk_key(request_id, self.stage_id, chunk_id)
        began = self.runtime.monotonic()
        try:
            self.connector.put(key, value)
        except survived() as exc:
            attempt.tries += 1
            self._count_send("put_failures")
            if isinstance(exc, Exception) and is_permanent(exc):  # a cancellation is not
                return self._rejected(attempt, key, exc)
            if not is_final and attempt.tries >= self.put_tries:
                self.log.warning("dropping %s after %d failed puts: %r", key, attempt.tries, exc)
                self._count_send("dropped_put_failed")
                return None
            now = self.runtime.monotonic()
            if attempt.failing_since is None:
                attempt.failing_since = now
            limit = self.final_put_timeout
            if is_final and limit is not None and now - attempt.failing_since >= limit:
                self._final_given_up(request_id, key, exc, f"its puts failed for {limit:g} s")
                return None
            self._send_pace.say(
                self.log.info, "put", key,
                "put %s failed (try %d): %r; retrying", key, attempt.tries, exc,
            )  # fmt: skip
            self._count_send("put_retries")
            return self._backoff(attempt.tries, is_final)
        ended = self.runtime.monotonic()
        # The pace: from the previous put's end when the thread went straight on (what
        # a chunk costs all told: its build, the loop, other threads' turns), else
        # this put's own time.
        last, self._last_put_end = self._last_put_end, ended
        took = ended - (began if last is None else last)
        self._put_seconds = took if not self._put_seconds else 0.9 * self._put_seconds + 0.1 * took
        with self._send_lock:
            self._send_counts["chunks_put"] += 1
            if is_final:
                self._send_counts["finals_put"] += 1
                self._next_send_id.pop(request_id, None)
                self._cancelled.discard(request_id)
                self._cut.discard(request_id)
            else:
                self._next_send_id[request_id] = chunk_id + 1
        return None

    def _backoff(self, tries: int, is_final: bool) -> float:
        """The pause after the *tries*-th failed try (R10).

        Doubling from ``put_backoff`` up to ``put_backoff_max``. With
        ``put_retry_window`` a non-final's last pause is stretched so that its
        last try comes that many seconds after its first: a short outage then
        costs no chunk, while a blip is still retried after ``put_backoff``.
        """
        pause = min(self.put_backoff * 2.0 ** (tries - 1), self.put_backoff_max)
        if is_final or self.put_retry_window is None or tries != self.put_tries - 1:
            return pause
        spent = sum(min(self.put_backoff * 2.0**k, self.put_backoff_max) for k in range(tries - 1))
        return max(pause, self.put_retry_window - spent)

    def _rejected(self, attempt: Attempt, key: str, exc: Exception) -> float | None:
        """A put failed with a permanent error (R25): never retried, never blocking.

        A non-final is dropped. A final is put once more with data ``None`` (the
        stream still ends at the receiver, as after a failed build, R7): the
        attempt starts over with that value and the pause 0 is returned. If
        that is refused too, the stream is given up and the sender forgets it (R11).
        """
        self._count_send("put_rejected")
        if not attempt.is_final:
            self.log.warning("dropping %s: the connector refused it for good: %r", key, exc)
            self._count_send("dropped_put_rejected")
            return None
        if attempt.value["data"] is not None:
            self.log.error(
                "final %s refused for good (%r); putting it with data None instead", key, exc
            )
            self._count_send("finals_degraded")
            attempt.value, attempt.tries, attempt.failing_since = (
                {"data": None, "finished": True}, 0, None,
            )  # fmt: skip
            return 0.0
        self._final_given_up(attempt.request_id, key, exc, "it was refused for good")
        return None

    def _final_given_up(self, request_id: str, key: str, exc: BaseException, why: str) -> None:
        """Give a stream's final up loudly and forget the stream (R11, R25)."""
        self.log.error(
            "final %s given up: %s (last error %r); stream %s will not end at its "
            "receiver (its stall report names it)",
            key,
            why,
            exc,
            short_repr(request_id),
        )
        with self._send_lock:
            self._send_counts["finals_failed"] += 1
            self._next_send_id.pop(request_id, None)
            self._cancelled.discard(request_id)
            self._cut.discard(request_id)

    def _abandon_in_flight(self) -> None:
        """Count the SAVE thread's current item as abandoned by stop(), once (R26)."""
        with self._send_lock:
            flight = self._in_flight
            if flight is None or flight[0] == self._abandoned_seq:
                return
            self._abandoned_seq = flight[0]
            self._send_counts["abandoned"] += 1
            self._send_counts["abandoned_finals"] += flight[2]

    def _count_send(self, name: str) -> None:
        with self._send_lock:
            self._send_counts[name] += 1

    def _count_abandoned(self) -> None:
        """Count and log what stop() gave up: the FIFO, and a blocked in-flight item."""
        self._abandon_in_flight()  # still blocked in a build or a put: it may yet complete
        with self._send_lock:
            left, self._fifo = self._fifo, deque()
            self._queued.clear()
            parked, held = self._schedule.clear()
            left.extend(held)
            left.extend((a.request_id, None, a.is_final) for a in parked)
            self._finals_pending, self._ending_by = 0, None
            self._cut.clear()
            finals = sum(1 for item in left if item[2])
            self._send_counts["abandoned"] += len(left)
            self._send_counts["abandoned_finals"] += finals
            total = self._send_counts["abandoned"]
            total_finals = self._send_counts["abandoned_finals"]
        if total:
            names = sorted({item[0] for item in left})
            self.log.warning(
                "stop(): abandoned %d saved chunk(s) (%d final(s)); queued ones of %d "
                "request(s): %s. Their receivers will not get them. Call flush(timeout) or "
                "stop(drain_timeout=...) first to put them",
                total,
                total_finals,
                len(names),
                short_repr(names),
            )

    def _died(self, side: str, exc: BaseException) -> None:
        """A thread ends on what it must not survive (R30): say so now and at every
        later sending or registering call."""
        death = cause(side, exc)
        self.log.critical(  # first: whoever sees the death below finds it logged
            "%s; this adapter can no longer deliver: save_async and load_async raise "
            "AdapterFailed from now on; stop() it and build a new one",
            death,
            exc_info=exc,
        )
        with self._drained_cond:
            self._death = self._death or death
            self._drained_cond.notify_all()  # flush() returns False at once

    def _check_running(self, call: str) -> None:
        death = self._death
        if death is not None:
            raise AdapterFailed(
                f"{call}: {death}, so nothing more can be delivered; stop() this adapter "
                "and create a new ChunkAdapter (and see what raised it: a build_payload, "
                "put or get that raises SystemExit or KeyboardInterrupt)"
            )
        if self._stop.is_set():
            raise AdapterStopped(
                f"{call}: this adapter was stopped; create a new ChunkAdapter to send or receive"
            )
