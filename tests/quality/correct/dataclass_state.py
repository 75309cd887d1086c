"""A correct ChunkAdapter keeping per-request state in dataclasses."""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

BuildPayload = Callable[[str, Any, bool], Any]


@dataclass(frozen=True)
class WorkItem:
    request_id: str
    snapshot: Any
    is_final: bool


@dataclass
class SenderStream:
    """One request's sending state, from its first chunk (or a cancel) to its final put."""

    next_chunk: int = 0
    cancelled: bool = False


@dataclass
class Registration:
    """One load_async of a request, up to its cleanup_receiver."""

    request_id: str
    token: object = field(default_factory=object)
    next_chunk: int = 0
    complete: bool = False


@dataclass
class Tallies:
    dropped_cancelled: int = 0
    dropped_build: int = 0
    skipped_none: int = 0
    dropped_put: int = 0
    put_errors: int = 0
    get_errors: int = 0


@dataclass
class Settings:
    put_tries: int = 3
    join_timeout: float = 1.0
    idle_wait: float = 0.1
    nap: float = 0.001


class DataclassChunkAdapter:
    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: BuildPayload | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.connector = connector
        self.stage_id = stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self.build_payload: BuildPayload = build_payload or (lambda _r, snap, _f: snap)
        self.settings = settings or Settings()
        self.tallies = Tallies()
        self._stop = threading.Event()

        # _send_lock guards _work and _streams; _send_cond (over it) is notified by
        # save_async and stop(), and waited on by the SAVE thread.
        self._send_lock = threading.Lock()
        self._send_cond = threading.Condition(self._send_lock)
        self._work: deque[WorkItem] = deque()
        self._streams: dict[str, SenderStream] = {}

        # _recv_lock guards _registrations, _to_poll and _arrived; _recv_cond (over it) is
        # notified by load_async and stop(), and waited on by the RECV thread.
        self._recv_lock = threading.Lock()
        self._recv_cond = threading.Condition(self._recv_lock)
        self._registrations: dict[str, Registration] = {}
        self._to_poll: deque[tuple[str, object]] = deque()
        self._arrived: dict[str, list[Any]] = {}

        self._save_thread = threading.Thread(target=self._save_run, name="dc-save", daemon=True)
        self._recv_thread = threading.Thread(target=self._recv_run, name="dc-recv", daemon=True)
        self._save_thread.start()
        self._recv_thread.start()

    # ----- checks

    @staticmethod
    def _need_str(request_id: object) -> None:
        if not isinstance(request_id, str):
            raise TypeError(f"request_id: expected str, got {type(request_id).__name__}")

    def _need_running(self) -> None:
        if self._stop.is_set():
            raise RuntimeError("the adapter is stopped")

    # ----- sender

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._need_str(request_id)
        if not isinstance(is_final, bool):
            raise TypeError(f"is_final: expected bool, got {type(is_final).__name__}")
        self._need_running()
        item = WorkItem(request_id, copy.deepcopy(obj), is_final)
        with self._send_cond:
            self._need_running()
            self._work.append(item)
            self._send_cond.notify()

    def cancel_sender(self, request_id: str) -> None:
        self._need_str(request_id)
        with self._send_lock:
            self._need_running()
            self._streams.setdefault(request_id, SenderStream()).cancelled = True

    def _save_run(self) -> None:
        while True:
            with self._send_cond:
                while not self._work and not self._stop.is_set():
                    self._send_cond.wait(self.settings.idle_wait)
                if self._stop.is_set():
                    return
                item = self._work.popleft()
                stream = self._streams.get(item.request_id)
                cancelled = stream is not None and stream.cancelled
            try:
                self._send(item, cancelled)
            except Exception:
                logger.exception("SAVE: unexpected error for %s", item.request_id)

    def _send(self, item: WorkItem, cancelled: bool) -> None:
        if cancelled and not item.is_final:
            self.tallies.dropped_cancelled += 1
            return
        payload: Any = None
        if not cancelled:
            try:
                payload = self.build_payload(item.request_id, item.snapshot, item.is_final)
            except Exception:
                logger.info("build_payload raised for %s", item.request_id, exc_info=True)
                if not item.is_final:
                    self.tallies.dropped_build += 1
                    return
                payload = None
        if payload is None and not item.is_final:
            self.tallies.skipped_none += 1
            return
        value = {"data": payload, "finished": item.is_final}
        tries = 0
        while not self._stop.is_set():
            with self._send_lock:
                stream = self._streams.setdefault(item.request_id, SenderStream())
                chunk = stream.next_chunk
            try:
                self.connector.put(f"{item.request_id}_{self.stage_id}_{chunk}", value)
            except Exception:
                tries += 1
                self.tallies.put_errors += 1
                if not item.is_final and tries >= self.settings.put_tries:
                    self.tallies.dropped_put += 1
                    logger.info("dropped %s chunk %d after %d tries", item.request_id, chunk, tries)
                    return
                self._stop.wait(min(0.001 * tries * tries, 0.05))
                continue
            with self._send_lock:
                if item.is_final:
                    self._streams.pop(item.request_id, None)
                else:
                    self._streams.setdefault(item.request_id, SenderStream()).next_chunk = chunk + 1
            return

    # ----- receiver

    def load_async(self, request_id: str) -> None:
        self._need_str(request_id)
        with self._recv_cond:
            self._need_running()
            if request_id in self._registrations:
                return
            reg = Registration(request_id)
            self._registrations[request_id] = reg
            self._to_poll.append((request_id, reg.token))
            self._recv_cond.notify()

    def poll_ready(self) -> dict[str, list[Any]]:
        with self._recv_lock:
            arrived, self._arrived = self._arrived, {}
        return arrived

    def cleanup_receiver(self, request_id: str) -> None:
        self._need_str(request_id)
        with self._recv_lock:
            self._registrations.pop(request_id, None)
            self._arrived.pop(request_id, None)

    def _current(self, request_id: str, token: object) -> Registration | None:
        """The registration if *token* is still current (call with _recv_lock held)."""
        reg = self._registrations.get(request_id)
        return reg if reg is not None and reg.token is token else None

    def _recv_run(self) -> None:
        while not self._stop.is_set():
            with self._recv_cond:
                while not self._to_poll and not self._stop.is_set():
                    self._recv_cond.wait(self.settings.idle_wait)
                this_round = list(self._to_poll)
                self._to_poll.clear()
            progress = False
            for request_id, token in this_round:
                if self._stop.is_set():
                    return
                with self._recv_lock:
                    reg = self._current(request_id, token)
                    if reg is None:
                        continue
                    chunk = reg.next_chunk
                try:
                    value = self.connector.get(f"{request_id}_{self.src_stage_id}_{chunk}")
                except Exception:
                    self.tallies.get_errors += 1
                    value = None
                with self._recv_lock:
                    reg = self._current(request_id, token)
                    if reg is None:
                        continue
                    if value is None:
                        self._to_poll.append((request_id, token))
                        continue
                    self._arrived.setdefault(request_id, []).append(value)
                    reg.next_chunk = chunk + 1
                    progress = True
                    reg.complete = isinstance(value, dict) and bool(value.get("finished"))
                    if not reg.complete:
                        self._to_poll.append((request_id, token))
            if this_round and not progress:
                time.sleep(self.settings.nap)

    # ----- lifecycle

    def stop(self) -> None:
        self._stop.set()
        for cond in (self._send_cond, self._recv_cond):
            with cond:
                cond.notify_all()
        deadline = time.monotonic() + self.settings.join_timeout
        for thread in (self._save_thread, self._recv_thread):
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> DataclassChunkAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: BuildPayload | None = None,
    put_tries: int = 3,
    **_others: Any,
) -> DataclassChunkAdapter:
    return DataclassChunkAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        settings=Settings(put_tries=put_tries),
    )
