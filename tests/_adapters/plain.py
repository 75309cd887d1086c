"""The plain-threading base of the test adapters; it imports no threading or time itself.

An adapter built on it creates its primitives and threads itself, in
:meth:`Options.make_threads` (in its own module, its own way: that is what
makes the explorer's shapes different shapes), passes its own clock to
:meth:`Options.join_all`, and sets the attributes these parts use: ``_stop`` (an Event),
``_send_lock`` / ``_send_cond`` and ``_recv_lock`` / ``_recv_cond`` (locks and
conditions over them). The SAVE and RECV loops here only call methods on those
objects, and on the hooks an adapter may override:

* sender: :meth:`SendPart.is_cancelled`, :meth:`~SendPart.next_send_id` and
  :meth:`~SendPart.sent` (where the send-side bookkeeping lives),
  :meth:`~SendPart.send_one` (what happens to one saved chunk),
  :meth:`~SendPart.build_failed` and :meth:`~SendPart.backoff`;
* receiver: none; it is ``tests.quality.plain_threading_adapter``'s, reused
  method for method (that module is a measurement input and stays as it is).
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable
from typing import Any

from tests.quality.plain_threading_adapter import PlainChunkAdapterFixed as _Plain
from tests.quality.plain_threading_adapter import _check_id as check_id

__all__ = ["Build", "Options", "RecvPart", "SendPart", "check_id", "identity"]

Build = Callable[[str, Any, bool], Any]


def identity(request_id: str, snapshot: Any, is_final: bool) -> Any:
    return snapshot


class Options:
    """The keyword options every test adapter takes, with the contract's defaults.

    Building one: :meth:`set_options`, then each part's bookkeeping
    (:meth:`init_parts`), then :meth:`make_threads`, the adapter's own."""

    _stop: Any  # made by make_threads

    def __init__(
        self,
        connector: Any,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Build | None = None,
        **options: Any,
    ) -> None:
        self.set_options(connector, stage_id, src_stage_id, build_payload, **options)
        self.init_parts()
        self.make_threads()

    def init_parts(self) -> None:
        """Each part's bookkeeping; a part adds its own and calls ``super()``."""

    def make_threads(self) -> None:
        """Create the primitives (``_stop``, the locks and conditions) and start the
        threads, in the adapter's own module and its own way."""
        raise NotImplementedError(f"{type(self).__name__} must define make_threads()")

    def set_options(
        self,
        connector: Any,
        stage_id: int,
        src_stage_id: int | None,
        build_payload: Build | None,
        wait_timeout: float = 0.1,
        idle_backoff: float = 0.001,
        join_timeout: float = 1.0,
        put_tries: int = 3,
        **ignored: Any,  # runtime=, logger=...: these adapters take their own threading
    ) -> None:
        self.connector = connector
        self.stage_id = stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self.build_payload: Build = build_payload or identity
        self.wait_timeout = wait_timeout
        self.idle_backoff = idle_backoff
        self.join_timeout = join_timeout
        self.put_tries = put_tries

    def wait_for_work(self, condition: Any, work: Any) -> bool:
        """With *condition* held: wait until *work* is not empty, or stop; True if stopped."""
        while not work and not self._stop.is_set():
            condition.wait(self.wait_timeout)
        return bool(self._stop.is_set())

    def wake(self, *conditions: Any) -> None:
        """Notify every waiter of each condition (after ``_stop`` was set)."""
        for condition in conditions:
            with condition:
                condition.notify_all()

    def join_all(self, threads: Any, clock: Callable[[], float]) -> None:
        """Join *threads* within ``join_timeout`` in all, timed by *clock*: the adapter's
        own (``time.monotonic``, ``perf_counter``...), looked up in its module."""
        deadline = clock() + self.join_timeout
        for thread in threads:
            thread.join(max(0.0, deadline - clock()))

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()  # type: ignore[attr-defined]


class SendPart(Options):
    """The sender: a FIFO under ``_send_cond``, one SAVE loop, puts with retries."""

    put_backoff = 0.005  # the first retry's pause; it doubles per try, up to 0.1 s
    _stop: Any
    _send_lock: Any
    _send_cond: Any

    def init_parts(self) -> None:
        super().init_parts()
        self._fifo: deque[tuple[str, Any, bool]] = deque()
        self._next_send_id: dict[str, int] = {}
        self._cancelled: set[str] = set()

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        check_id(request_id, "save_async")
        if not isinstance(is_final, bool):
            raise TypeError(f"save_async(..., is_final={is_final!r}): a bool please")
        snap = copy.deepcopy(obj)
        with self._send_cond:
            if self._stop.is_set():
                raise RuntimeError("save_async after stop()")
            self._fifo.append((request_id, snap, is_final))
            self._send_cond.notify()

    cancel_sender = _Plain.cancel_sender

    def save_loop(self) -> None:
        while True:
            with self._send_cond:
                if self.wait_for_work(self._send_cond, self._fifo):
                    return
                request_id, snap, is_final = self._fifo.popleft()
                cancelled = self.is_cancelled(request_id)
            self.send_one(request_id, snap, is_final, cancelled)

    def send_taken(self, request_id: str, snap: Any, is_final: bool) -> None:
        """:meth:`send_one` for a chunk taken off a FIFO of the adapter's own (a
        ``queue.Queue``, an executor's), outside ``_send_lock``."""
        with self._send_lock:
            cancelled = self.is_cancelled(request_id)
        self.send_one(request_id, snap, is_final, cancelled)

    def is_cancelled(self, request_id: str) -> bool:
        """Whether *request_id*'s stream was cancelled; called with the send lock held."""
        return request_id in self._cancelled

    def send_one(self, request_id: str, snap: Any, is_final: bool, cancelled: bool) -> None:
        if cancelled and not is_final:
            return
        payload: Any = None
        if not cancelled:
            try:
                payload = self.build_payload(request_id, snap, is_final)
            except Exception:
                self.build_failed(request_id)
                if not is_final:
                    return
            if payload is None and not is_final:
                return
        self.put_with_retries(request_id, {"data": payload, "finished": is_final}, is_final)

    def build_failed(self, request_id: str) -> None:
        """Called (in the except block) when ``build_payload`` raised; silent here."""

    def put_with_retries(self, request_id: str, value: dict[str, Any], is_final: bool) -> None:
        tries = 0
        while not self._stop.is_set():
            chunk_id = self.next_send_id(request_id)
            try:
                self.connector.put(f"{request_id}_{self.stage_id}_{chunk_id}", value)
            except Exception:
                tries += 1
                if not is_final and tries >= self.put_tries:
                    return
                if self.backoff(min(self.put_backoff * 2 ** (tries - 1), 0.1)):
                    return
                continue
            self.sent(request_id, chunk_id, is_final)
            return

    def next_send_id(self, request_id: str) -> int:
        with self._send_lock:
            return self._next_send_id.get(request_id, 0)

    def sent(self, request_id: str, chunk_id: int, is_final: bool) -> None:
        """*chunk_id* of *request_id* is stored: the next id, or (final) forget the stream."""
        with self._send_lock:
            if is_final:
                self._next_send_id.pop(request_id, None)
                self._cancelled.discard(request_id)
            else:
                self._next_send_id[request_id] = chunk_id + 1

    def backoff(self, seconds: float) -> bool:
        """Wait *seconds* or until stop; True when stopped."""
        return bool(self._stop.wait(seconds))


class RecvPart(Options):
    """The receiver: registrations by token, one RECV loop polling round-robin.

    Method for method ``tests.quality.plain_threading_adapter``'s (with the token
    check, ``CHECK_TOKEN``; False is its seeded bug: a stale get committed to a
    new registration)."""

    CHECK_TOKEN = True
    _stop: Any
    _recv_lock: Any
    _recv_cond: Any

    def init_parts(self) -> None:
        super().init_parts()
        self._tokens: dict[str, object] = {}
        self._next_recv_id: dict[str, int] = {}
        self._ready: dict[str, list[dict[str, Any]]] = {}
        self._queue: deque[tuple[str, object]] = deque()

    load_async = _Plain.load_async
    poll_ready = _Plain.poll_ready
    cleanup_receiver = _Plain.cleanup_receiver
    recv_loop = _Plain._recv_loop
    _poll_one = _Plain._poll_one
