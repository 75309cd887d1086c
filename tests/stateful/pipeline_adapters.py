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
    store): a slow RECV loop, still within the contract.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chunk_adapter.connectors.base import Connector, ConnectorWrapper

__all__ = ["SharedStateAdapter", "SlowGets", "shared_state", "slow_gets"]

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


def _check_id(request_id: object, call: str) -> None:
    if not isinstance(request_id, str):
        raise TypeError(f"{call}({request_id!r}): the request id must be a str")


class SharedStateAdapter:
    """A correct adapter whose two sides share per-request records (module doc)."""

    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Callable[[str, Any, bool], Any] | None = None,
        wait_timeout: float = 0.1,
        idle_backoff: float = 0.001,
        join_timeout: float = 1.0,
        put_tries: int = 3,
        put_backoff: float = 0.005,
    ) -> None:
        self.connector = connector
        self.stage_id = stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self.build_payload = build_payload or (lambda rid, snap, final: snap)
        self.wait_timeout = wait_timeout
        self.idle_backoff = idle_backoff
        self.join_timeout = join_timeout
        self.put_tries = put_tries
        self.put_backoff = put_backoff
        # Set once by stop(); every loop checks it; its wait() is the interruptible sleep.
        self._stop = threading.Event()
        # Guards _fifo, _requests and _polling. The SAVE thread waits on _save_cond
        # (save_async notifies), the RECV thread on _recv_cond (load_async notifies);
        # stop() notifies both. Never held across a put, a get or a build.
        self._lock = threading.Lock()
        self._save_cond = threading.Condition(self._lock)
        self._recv_cond = threading.Condition(self._lock)
        self._fifo: deque[tuple[str, Any, bool]] = deque()
        self._requests: dict[str, _Request] = {}
        self._polling: deque[tuple[str, object]] = deque()
        self._threads = [
            threading.Thread(target=self._save_loop, name="shared-save", daemon=True),
            threading.Thread(target=self._recv_loop, name="shared-recv", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    # ------------------------------------------------------------------ sender
    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        _check_id(request_id, "save_async")
        if not isinstance(is_final, bool):
            raise TypeError(f"save_async: is_final must be a bool, got {is_final!r}")
        self._running("save_async")
        snapshot = copy.deepcopy(obj)
        with self._lock:
            self._fifo.append((request_id, snapshot, is_final))
            self._save_cond.notify()

    def cancel_sender(self, request_id: str) -> None:
        _check_id(request_id, "cancel_sender")
        self._running("cancel_sender")
        with self._lock:
            self._requests.setdefault(request_id, _Request()).cancelled = True

    def _save_loop(self) -> None:
        while True:
            with self._lock:
                while not self._fifo and not self._stop.is_set():
                    self._save_cond.wait(self.wait_timeout)
                if self._stop.is_set():
                    return
                request_id, snapshot, is_final = self._fifo.popleft()
                record = self._requests.get(request_id)
                cancelled = record is not None and record.cancelled
            if cancelled and not is_final:
                continue
            payload = None
            if not cancelled:
                try:
                    payload = self.build_payload(request_id, snapshot, is_final)
                except Exception:
                    log.debug("build failed for %r", request_id, exc_info=True)
                    if not is_final:
                        continue
                if payload is None and not is_final:
                    continue
            self._put(request_id, {"data": payload, "finished": is_final}, is_final)

    def _put(self, request_id: str, value: dict[str, Any], is_final: bool) -> None:
        tries = 0
        while not self._stop.is_set():
            with self._lock:
                record = self._requests.get(request_id)
                chunk_id = record.next_send if record is not None else 0
            try:
                self.connector.put(f"{request_id}_{self.stage_id}_{chunk_id}", value)
            except Exception:
                tries += 1
                if not is_final and tries >= self.put_tries:
                    return
                if self._stop.wait(min(self.put_backoff * 2 ** (tries - 1), 0.1)):
                    return
                continue
            with self._lock:
                if is_final:
                    # Terminal cleanup: the request is over here; forget all of it.
                    self._requests.pop(request_id, None)
                else:
                    self._requests.setdefault(request_id, _Request()).next_send = chunk_id + 1
            return

    # ---------------------------------------------------------------- receiver
    def load_async(self, request_id: str) -> None:
        _check_id(request_id, "load_async")
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
        _check_id(request_id, "cleanup_receiver")
        with self._lock:
            # Terminal cleanup: the request is over here; forget all of it.
            self._requests.pop(request_id, None)

    def _recv_loop(self) -> None:
        while True:
            with self._lock:
                while not self._polling and not self._stop.is_set():
                    self._recv_cond.wait(self.wait_timeout)
                if self._stop.is_set():
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
            self._save_cond.notify_all()
            self._recv_cond.notify_all()
        deadline = time.monotonic() + self.join_timeout
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> SharedStateAdapter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


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


_OPTIONS = ("wait_timeout", "idle_backoff", "join_timeout", "put_tries", "put_backoff")


def shared_state(connector: Any, **kwargs: Any) -> SharedStateAdapter:
    """The adapter; options it does not have (the suite offers several) are ignored."""
    known = {k: v for k, v in kwargs.items() if k in _OPTIONS}
    ids = {k: v for k, v in kwargs.items() if k in ("stage_id", "src_stage_id", "build_payload")}
    return SharedStateAdapter(connector, **ids, **known)


def slow_gets(connector: Any, **kwargs: Any) -> SharedStateAdapter:
    """The adapter over a connector whose gets take 2 ms each."""
    return shared_state(SlowGets(connector), **kwargs)
