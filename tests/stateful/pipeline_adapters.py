"""Correct third-party-style adapters the verify stages must never fail.

``SharedStateAdapter`` keeps one record per request id for **both** of its
sides, as vllm-omni's adapter does: the sender's next id and cancel mark and
the receiver's registration, next id and ready chunks live in the same
record, and when a request ends on either side — its final chunk put, or
``cleanup_receiver`` — the record is deleted whole (terminal cleanup). In a
pipeline (a sender and a receiver adapter) that is correct. Driven as a
loopback (one adapter receiving its own chunks) it is not: putting the final
wipes the registration waiting for it. The suite must therefore drive a
pipeline by default.

Plain ``threading``/``time``, no runtime seam, polling only (1 ms backoff,
100 ms condition wait), no ``stats()``: what a third-party adapter looks like.

Factories (``tests.stateful.pipeline_adapters:<name>``):

``shared_state``
    the adapter as it is;
``slow_gets``
    the same over a connector whose every ``get`` takes 2 ms (a remote
    store): a slow RECV loop, still within the contract;
``odd_wire``
    broken on purpose, for the stages' own tests: every put carries an extra
    field, so it is not the wire value (R2).

Its options, sender loop and put retries are the shared plain-threading base's
(:mod:`tests._adapters.plain`); what is its own is the per-request record:
where the send and receive bookkeeping live, and its terminal cleanup.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from chunk_adapter.connectors.base import Connector, ConnectorWrapper
from tests._adapters.plain import SendPart, check_id

__all__ = ["OddWire", "SharedStateAdapter", "SlowGets", "odd_wire", "shared_state", "slow_gets"]

log = logging.getLogger("shared_state_adapter")


@dataclass
class _Request:
    """Everything this adapter knows about one request id, send and receive side alike."""

    next_send: int = 0
    cancelled: bool = False
    token: object | None = None  # the current registration, None if not registered
    next_recv: int = 0
    done: bool = False  # the registration's final was committed: no more gets
    ready: list[dict[str, Any]] = field(default_factory=list)


class SharedStateAdapter(SendPart):
    """A correct adapter whose two sides share per-request records (module doc)."""

    def __init__(
        self, connector: Any, *, stage_id: int, put_backoff: float = 0.005, **options: Any
    ) -> None:
        """*options*: ``src_stage_id``, ``build_payload`` and the base's timeouts."""
        self.put_backoff = put_backoff
        super().__init__(connector, stage_id, **options)

    def init_parts(self) -> None:  # the records instead of the base's per-side tables
        self._fifo: deque[tuple[str, Any, bool]] = deque()
        self._requests: dict[str, _Request] = {}
        self._polling: deque[tuple[str, object]] = deque()

    def make_threads(self) -> None:
        # Set once by stop(); every loop checks it; its wait() is the interruptible sleep.
        self._stop = threading.Event()
        # Guards _fifo, _requests and _polling. The SAVE thread waits on _send_cond
        # (save_async notifies), the RECV thread on _recv_cond (load_async notifies);
        # stop() notifies both. Never held across a put, a get or a build.
        self._lock = threading.Lock()
        self._send_cond = threading.Condition(self._lock)
        self._recv_cond = threading.Condition(self._lock)
        self._threads = [
            threading.Thread(target=self.save_loop, name="shared-save", daemon=True),
            threading.Thread(target=self._recv_loop, name="shared-recv", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    # ------------------------------------------------------------------ sender
    # save_async, the SAVE loop and the put retries are the base's; the record is ours.
    def cancel_sender(self, request_id: str) -> None:
        check_id(request_id, "cancel_sender")
        self._running("cancel_sender")
        with self._lock:
            self._requests.setdefault(request_id, _Request()).cancelled = True

    def is_cancelled(self, request_id: str) -> bool:
        record = self._requests.get(request_id)
        return record is not None and record.cancelled

    def build_failed(self, request_id: str) -> None:
        log.debug("build failed for %r", request_id, exc_info=True)

    def next_send_id(self, request_id: str) -> int:
        with self._lock:
            record = self._requests.get(request_id)
            return record.next_send if record is not None else 0

    def sent(self, request_id: str, chunk_id: int, is_final: bool) -> None:
        with self._lock:
            if is_final:
                # Terminal cleanup: the request is over here; forget all of it.
                self._requests.pop(request_id, None)
            else:
                self._requests.setdefault(request_id, _Request()).next_send = chunk_id + 1

    # ---------------------------------------------------------------- receiver
    def load_async(self, request_id: str) -> None:
        check_id(request_id, "load_async")
        self._running("load_async")
        with self._lock:
            record = self._requests.setdefault(request_id, _Request())
            if record.token is not None:
                return  # registered already: idempotent
            record.token = object()
            record.next_recv, record.done, record.ready = 0, False, []
            self._polling.append((request_id, record.token))
            self._recv_cond.notify()

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        with self._lock:
            out: dict[str, list[dict[str, Any]]] = {}
            for request_id, record in self._requests.items():
                if record.ready:
                    out[request_id], record.ready = record.ready, []
            return out

    def cleanup_receiver(self, request_id: str) -> None:
        check_id(request_id, "cleanup_receiver")
        with self._lock:
            # Terminal cleanup: the request is over here; forget all of it.
            self._requests.pop(request_id, None)

    def _recv_loop(self) -> None:
        while True:
            with self._lock:
                if self.wait_for_work(self._recv_cond, self._polling):
                    return
                entries = len(self._polling)
            progress = False
            for _ in range(entries):
                progress = self._poll_one() or progress
            if not progress and self._stop.wait(self.idle_backoff):
                return

    def _poll_one(self) -> bool:
        with self._lock:
            if not self._polling:
                return False
            request_id, token = self._polling.popleft()
            record = self._requests.get(request_id)
            if record is None or record.token is not token:
                return False  # the entry of a registration that is gone: dropped
            chunk_id = record.next_recv
        try:
            value = self.connector.get(f"{request_id}_{self.src_stage_id}_{chunk_id}")
        except Exception:
            value = None
        with self._lock:
            record = self._requests.get(request_id)
            current = record is not None and record.token is token
            if not isinstance(value, dict):
                if current:
                    self._polling.append((request_id, token))
                return False
            if record is None or not current:
                return False  # fetched for a registration cleaned up meanwhile: discarded
            record.ready.append(value)
            record.next_recv = chunk_id + 1
            if value.get("finished") is True:
                record.done = True
            else:
                self._polling.append((request_id, token))
            return True

    # ---------------------------------------------------------------- stopping
    def _running(self, call: str) -> None:
        if self._stop.is_set():
            raise RuntimeError(f"{call} after stop()")

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            self._send_cond.notify_all()
            self._recv_cond.notify_all()
        deadline = time.monotonic() + self.join_timeout
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))


class SlowGets(ConnectorWrapper):
    """Every ``get`` takes *delay* seconds longer (a remote store)."""

    def __init__(self, inner: Connector, delay: float = 0.002) -> None:
        super().__init__(inner)
        self.delay = delay

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.inner.put(key, value)

    def get(self, key: str) -> dict[str, Any] | None:
        time.sleep(self.delay)
        return self.inner.get(key)


class OddWire(SharedStateAdapter):
    """Puts ``{"data", "finished", "extra"}``: not the wire value (R2). Broken on purpose."""

    def put_with_retries(self, request_id: str, value: dict[str, Any], is_final: bool) -> None:
        super().put_with_retries(request_id, {**value, "extra": 0}, is_final)


def shared_state(connector: Any, **kwargs: Any) -> SharedStateAdapter:
    """The adapter; options it does not have (the suite offers several) are ignored."""
    return SharedStateAdapter(connector, **kwargs)


def odd_wire(connector: Any, **kwargs: Any) -> OddWire:
    """The broken variant (:class:`OddWire`), options as :func:`shared_state`."""
    return OddWire(connector, **kwargs)


def slow_gets(connector: Any, **kwargs: Any) -> SharedStateAdapter:
    """The adapter over a connector whose gets take 2 ms each."""
    return shared_state(SlowGets(connector), **kwargs)
