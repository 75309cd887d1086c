"""A ChunkAdapter whose state lives in small per-request objects, each with its own lock.

Design notes (correct adapter; keeps R1-R24 of docs/contract.md):

- Sender: one ``_Stream`` per open stream (next chunk id, cancel mark, ``retired``
  flag, its own lock), found through the ``_streams`` registry under
  ``_streams_lock``, which also guards the FIFO (a ``deque``). The SAVE thread is
  woken by an ``Event`` (set by ``save_async`` and ``stop()``); it re-checks the
  deque after every wait. When a final is put the stream is retired (flag set
  under its lock, then removed from the registry under the registry lock), so a
  ``cancel_sender`` that found the object just before retries on a fresh one.
- Receiver: one ``_Registration`` per ``load_async`` (its identity is the
  per-registration token) with its own lock, next id and ``live`` flag; the
  registry ``_regs`` and the polling deque sit under ``_regs_lock`` (with a
  ``Condition`` for the RECV thread). Committed chunks go to one inbox under
  ``_inbox_lock`` so that ``poll_ready`` is a single atomic swap. A commit holds
  the registration's lock while it checks ``live`` and appends to the inbox;
  ``cleanup_receiver`` clears ``live`` under that lock and then drops the inbox
  entry, all inside ``_regs_lock`` -- a commit fence. Lock order: registry lock,
  then an object's lock, then the inbox lock.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

log = logging.getLogger(__name__)


class _Item(NamedTuple):
    request_id: str
    snapshot: Any
    is_final: bool


class _Stream:
    __slots__ = ("cancelled", "lock", "next_id", "retired")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.next_id = 0
        self.cancelled = False
        self.retired = False


class _Registration:
    __slots__ = ("done", "live", "lock", "next_id", "request_id")

    def __init__(self, request_id: str) -> None:
        self.lock = threading.Lock()
        self.request_id = request_id
        self.next_id = 0
        self.live = True
        self.done = False


def _finished(value: Any) -> bool:
    return isinstance(value, dict) and bool(value.get("finished"))


class RequestObjectsAdapter:
    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Callable[[str, Any, bool], Any] | None = None,
        put_tries: int = 3,
        put_backoff: float = 0.005,
        put_backoff_max: float = 0.1,
        wait_timeout: float = 0.1,
        idle_backoff: float = 0.001,
        join_timeout: float = 1.0,
        snapshot: Callable[[Any], Any] | None = None,
    ) -> None:
        if int(put_tries) < 1:
            raise ValueError("put_tries must be >= 1")
        self.connector = connector
        self.stage_id = stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self.build_payload = build_payload
        self.snapshot = snapshot or copy.deepcopy
        self.put_tries = int(put_tries)
        self.put_backoff = float(put_backoff)
        self.put_backoff_max = float(put_backoff_max)
        self.wait_timeout = float(wait_timeout)
        self.idle_backoff = float(idle_backoff)
        self.join_timeout = float(join_timeout)
        self.counters: dict[str, int] = {}
        self._stopping = threading.Event()

        self._streams_lock = threading.Lock()
        self._streams: dict[str, _Stream] = {}
        self._outbox: deque[_Item] = deque()
        self._outbox_ready = threading.Event()

        self._regs_lock = threading.Lock()
        self._regs_cond = threading.Condition(self._regs_lock)
        self._regs: dict[str, _Registration] = {}
        self._rounds: deque[_Registration] = deque()
        self._inbox_lock = threading.Lock()
        self._inbox: dict[str, list[Any]] = {}

        self._save_thread = threading.Thread(target=self._save_main, name="objs-save", daemon=True)
        self._recv_thread = threading.Thread(target=self._recv_main, name="objs-recv", daemon=True)
        self._save_thread.start()
        self._recv_thread.start()

    # ---------------------------------------------------------------- small helpers

    def _count(self, name: str) -> None:
        self.counters[name] = self.counters.get(name, 0) + 1

    def stats(self) -> dict[str, int]:
        return dict(self.counters)

    @staticmethod
    def _check_rid(request_id: Any) -> None:
        if not isinstance(request_id, str):
            raise TypeError(f"request_id {request_id!r:.60} is not a str")

    def _check_open(self, call: str) -> None:
        if self._stopping.is_set():
            raise RuntimeError(f"{call}: the adapter is stopped")

    # ---------------------------------------------------------------- sender

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._check_rid(request_id)
        if not isinstance(is_final, bool):
            raise TypeError(f"is_final {is_final!r:.60} is not a bool")
        self._check_open("save_async")
        snap = self.snapshot(obj)
        with self._streams_lock:
            self._check_open("save_async")
            self._outbox.append(_Item(request_id, snap, is_final))
        self._outbox_ready.set()

    def cancel_sender(self, request_id: str) -> None:
        self._check_rid(request_id)
        while True:
            with self._streams_lock:
                self._check_open("cancel_sender")
                stream = self._streams.get(request_id)
                if stream is None:
                    stream = self._streams[request_id] = _Stream()
            with stream.lock:
                if stream.retired:
                    continue  # its final was put meanwhile: mark the next stream instead
                stream.cancelled = True
                return

    def _stream_for(self, request_id: str) -> _Stream:
        with self._streams_lock:
            stream = self._streams.get(request_id)
            if stream is None:
                stream = self._streams[request_id] = _Stream()
            return stream

    def _retire(self, request_id: str, stream: _Stream) -> None:
        with self._streams_lock:
            with stream.lock:
                stream.retired = True
            if self._streams.get(request_id) is stream:
                del self._streams[request_id]

    def _save_main(self) -> None:
        while True:
            item = self._take()
            if item is None:
                return
            try:
                self._send(item)
            except Exception:
                log.exception("SAVE: unexpected error")

    def _take(self) -> _Item | None:
        while True:
            with self._streams_lock:
                if self._stopping.is_set():
                    return None
                if self._outbox:
                    return self._outbox.popleft()
            self._outbox_ready.wait(self.wait_timeout)
            self._outbox_ready.clear()  # the deque is re-checked before the next wait

    def _send(self, item: _Item) -> None:
        rid, final = item.request_id, item.is_final
        stream = self._stream_for(rid)
        with stream.lock:
            cancelled = stream.cancelled
        if cancelled:
            if not final:
                self._count("dropped_cancelled")
                return
            payload = None
        else:
            try:
                if self.build_payload is None:
                    payload = item.snapshot
                else:
                    payload = self.build_payload(rid, item.snapshot, final)
            except Exception:
                self._count("build_failed")
                log.warning("build_payload(%r) raised", rid, exc_info=True)
                if not final:
                    return
                payload = None
            if payload is None and not final:
                self._count("skipped")
                return
        self._deliver(rid, stream, {"data": payload, "finished": final}, final)

    def _deliver(self, rid: str, stream: _Stream, value: dict[str, Any], final: bool) -> None:
        tries = 0
        pause = self.put_backoff
        while not self._stopping.is_set():
            with stream.lock:
                chunk_id = stream.next_id
            key = f"{rid}_{self.stage_id}_{chunk_id}"
            try:
                self.connector.put(key, value)
            except Exception:
                tries += 1
                self._count("put_failed")
                if not final and tries >= self.put_tries:
                    self._count("dropped_put")
                    log.warning("%s: gave up after %d failed puts", key, tries)
                    return
                if self._stopping.wait(pause):
                    return
                pause = min(max(pause * 2, 0.001), self.put_backoff_max)
                continue
            self._count("put")
            if final:
                self._retire(rid, stream)
            else:
                with stream.lock:
                    stream.next_id = chunk_id + 1
            return

    # ---------------------------------------------------------------- receiver

    def load_async(self, request_id: str) -> None:
        self._check_rid(request_id)
        with self._regs_cond:
            self._check_open("load_async")
            if request_id in self._regs:
                return
            reg = _Registration(request_id)
            self._regs[request_id] = reg
            self._rounds.append(reg)
            self._regs_cond.notify()

    def poll_ready(self) -> dict[str, list[Any]]:
        with self._inbox_lock:
            out, self._inbox = self._inbox, {}
        return out

    def cleanup_receiver(self, request_id: str) -> None:
        self._check_rid(request_id)
        with self._regs_lock:
            reg = self._regs.pop(request_id, None)
            if reg is not None:
                with reg.lock:
                    reg.live = False
            with self._inbox_lock:
                self._inbox.pop(request_id, None)

    def _recv_main(self) -> None:
        while True:
            with self._regs_cond:
                while not self._rounds and not self._stopping.is_set():
                    self._regs_cond.wait(self.wait_timeout)
                if self._stopping.is_set():
                    return
                batch = list(self._rounds)
                self._rounds.clear()
            progress = False
            for reg in batch:
                if self._stopping.is_set():
                    return
                if self._visit(reg):
                    progress = True
            if not progress:
                self._stopping.wait(self.idle_backoff)

    def _visit(self, reg: _Registration) -> bool:
        with reg.lock:
            if not reg.live:
                return False
            chunk_id = reg.next_id
        key = f"{reg.request_id}_{self.src_stage_id}_{chunk_id}"
        try:
            value = self.connector.get(key)
        except Exception:
            self._count("get_failed")
            log.info("get(%s) raised", key, exc_info=True)
            value = None
        again = False
        committed = False
        with reg.lock:
            if not reg.live:
                return False  # cleaned up while the get was in flight: discard
            if value is None:
                again = True
            else:
                with self._inbox_lock:
                    self._inbox.setdefault(reg.request_id, []).append(value)
                reg.next_id = chunk_id + 1
                committed = True
                if _finished(value):
                    reg.done = True
                else:
                    again = True
        if again:
            with self._regs_lock:
                self._rounds.append(reg)
        return committed

    # ---------------------------------------------------------------- lifecycle

    def stop(self) -> None:
        self._stopping.set()
        self._outbox_ready.set()
        with self._regs_cond:
            self._regs_cond.notify_all()
        deadline = time.monotonic() + self.join_timeout
        for thread in (self._save_thread, self._recv_thread):
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> RequestObjectsAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Callable[[str, Any, bool], Any] | None = None,
    **options: Any,
) -> RequestObjectsAdapter:
    accepted = ("put_tries", "put_backoff", "put_backoff_max", "wait_timeout",
                "idle_backoff", "join_timeout", "snapshot")  # fmt: skip
    return RequestObjectsAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **{k: v for k, v in options.items() if k in accepted and v is not None},
    )
