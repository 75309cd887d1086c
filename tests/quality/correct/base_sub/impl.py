"""The concrete half of the base_sub adapter: the sender and receiver logic, and ``make``."""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import deque
from typing import Any

from .base import ChunkAdapterBase

_log = logging.getLogger(__name__)


class KVChunkAdapter(ChunkAdapterBase):
    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Any = None,
        put_tries: int = 3,
        join_timeout: float = 1.0,
        wait_timeout: float = 0.1,
        idle_backoff: float = 0.001,
    ) -> None:
        super().__init__(join_timeout=join_timeout, name=f"kv-{stage_id}")
        if put_tries < 1:
            raise ValueError("put_tries must be >= 1")
        self.connector = connector
        self.stage_id = stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self.build_payload = build_payload
        self.put_tries = put_tries
        self.wait_timeout = wait_timeout
        self.idle_backoff = idle_backoff

        # send_mutex guards queue, send_ids and cancel_marks. send_signal (over it) is
        # notified by save_async and wake_workers() (stop); SAVE waits on it.
        self.send_mutex = threading.Lock()
        self.send_signal = threading.Condition(self.send_mutex)
        self.queue: deque[tuple[str, Any, bool]] = deque()
        self.send_ids: dict[str, int] = {}
        self.cancel_marks: set[str] = set()

        # recv_mutex guards registrations, pending and ready. recv_signal (over it) is
        # notified by load_async and wake_workers() (stop); RECV waits on it.
        self.recv_mutex = threading.Lock()
        self.recv_signal = threading.Condition(self.recv_mutex)
        self.registrations: dict[str, list[Any]] = {}  # rid -> [token, next id]
        self.pending: deque[tuple[str, object]] = deque()
        self.ready: dict[str, list[Any]] = {}

        self.dropped = 0
        self.errors = 0
        self.start()

    # ------------------------------------------------------------ scheduler calls

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self.require_request_id(request_id)
        if not isinstance(is_final, bool):
            raise TypeError(f"is_final must be bool, got {is_final!r}")
        self.require_running("save_async")
        snap = copy.deepcopy(obj)
        with self.send_signal:
            self.require_running("save_async")
            self.queue.append((request_id, snap, is_final))
            self.send_signal.notify()

    def cancel_sender(self, request_id: str) -> None:
        self.require_request_id(request_id)
        with self.send_mutex:
            self.require_running("cancel_sender")
            self.cancel_marks.add(request_id)

    def load_async(self, request_id: str) -> None:
        self.require_request_id(request_id)
        with self.recv_signal:
            self.require_running("load_async")
            if request_id not in self.registrations:
                token = object()
                self.registrations[request_id] = [token, 0]
                self.pending.append((request_id, token))
                self.recv_signal.notify()

    def poll_ready(self) -> dict[str, list[Any]]:
        with self.recv_mutex:
            result, self.ready = self.ready, {}
            return result

    def cleanup_receiver(self, request_id: str) -> None:
        self.require_request_id(request_id)
        with self.recv_mutex:
            self.registrations.pop(request_id, None)
            self.ready.pop(request_id, None)

    def wake_workers(self) -> None:
        with self.send_signal:
            self.send_signal.notify_all()
        with self.recv_signal:
            self.recv_signal.notify_all()

    # ------------------------------------------------------------ SAVE

    def save_iteration(self) -> None:
        with self.send_signal:
            while not self.queue and not self.stop_requested.is_set():
                self.send_signal.wait(self.wait_timeout)
            if self.stop_requested.is_set():
                return
            rid, snap, final = self.queue.popleft()
            cancelled = rid in self.cancel_marks
        payload = self._payload_for(rid, snap, final, cancelled)
        if payload is _DROP:
            self.dropped += 1
            return
        self._put_until_done(rid, {"data": payload, "finished": final}, final)

    def _payload_for(self, rid: str, snap: Any, final: bool, cancelled: bool) -> Any:
        if cancelled:
            return None if final else _DROP
        try:
            payload = snap if self.build_payload is None else self.build_payload(rid, snap, final)
        except Exception:
            _log.info("build_payload failed (%s, final=%s)", rid, final, exc_info=True)
            return None if final else _DROP
        if payload is None and not final:
            return _DROP
        return payload

    def _put_until_done(self, rid: str, value: dict[str, Any], final: bool) -> None:
        failed = 0
        while not self.stop_requested.is_set():
            with self.send_mutex:
                chunk_id = self.send_ids.get(rid, 0)
            key = f"{rid}_{self.stage_id}_{chunk_id}"
            try:
                self.connector.put(key, value)
            except Exception:
                failed += 1
                self.errors += 1
                if not final and failed >= self.put_tries:
                    _log.info("put %s failed %d times; dropped", key, failed)
                    self.dropped += 1
                    return
                self.stop_requested.wait(min(0.05, 0.001 * 2 ** min(failed, 16)))
                continue
            with self.send_mutex:
                if final:
                    self.send_ids.pop(rid, None)
                    self.cancel_marks.discard(rid)
                else:
                    self.send_ids[rid] = chunk_id + 1
            return

    # ------------------------------------------------------------ RECV

    def recv_iteration(self) -> None:
        with self.recv_signal:
            while not self.pending and not self.stop_requested.is_set():
                self.recv_signal.wait(self.wait_timeout)
            entries = [self.pending.popleft() for _ in range(len(self.pending))]
        progressed = False
        for rid, token in entries:
            if self.stop_requested.is_set():
                return
            progressed = self._poll(rid, token) or progressed
        if entries and not progressed:
            time.sleep(self.idle_backoff)

    def _poll(self, rid: str, token: object) -> bool:
        with self.recv_mutex:
            reg = self.registrations.get(rid)
            if reg is None or reg[0] is not token:
                return False
            chunk_id = reg[1]
        try:
            value = self.connector.get(f"{rid}_{self.src_stage_id}_{chunk_id}")
        except Exception:
            self.errors += 1
            value = None
        with self.recv_mutex:
            reg = self.registrations.get(rid)
            if reg is None or reg[0] is not token:
                return False
            if value is None:
                self.pending.append((rid, token))
                return False
            reg[1] = chunk_id + 1
            self.ready.setdefault(rid, []).append(value)
            if not (isinstance(value, dict) and value.get("finished")):
                self.pending.append((rid, token))
            return True


_DROP = object()  # "_payload_for": this chunk is not put


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Any = None,
    **options: Any,
) -> KVChunkAdapter:
    accepted = ("put_tries", "join_timeout", "wait_timeout", "idle_backoff")
    return KVChunkAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **{name: options[name] for name in accepted if name in options},
    )
