"""A correct ChunkAdapter whose factory takes everything as ``**options``.

``make(connector, **options)`` reads ``stage_id``, ``src_stage_id`` and
``build_payload`` and silently ignores any other option (``runtime=``,
``wait_timeout=``, ``put_tries=``...): this adapter has fixed settings.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from typing import Any

_log = logging.getLogger(__name__)

_MAX_PUT_TRIES = 3
_JOIN_TIMEOUT = 1.0
_IDLE_WAIT = 0.1
_NO_PROGRESS_NAP = 0.001


def _identity(_request_id: str, snapshot: Any, _is_final: bool) -> Any:
    return snapshot


class OptionsAdapter:
    def __init__(self, connector: Any, stage_id: int, src_stage_id: int | None, build: Any):
        self._connector = connector
        self._stage = stage_id
        self._source = stage_id - 1 if src_stage_id is None else src_stage_id
        self._build = build if build is not None else _identity
        self._stopped = threading.Event()

        # _out_cv guards the outgoing list, the send counters and the cancel marks (its own
        # internal lock). Notified by save_async and stop(); the SAVE thread waits on it.
        self._out_cv = threading.Condition()
        self._outgoing: list[tuple[str, Any, bool]] = []
        self._send_counter: dict[str, int] = {}
        self._cancel_marks: set[str] = set()

        # _in_cv guards tokens, receive counters, the polling list and the received lists
        # (its own internal lock). Notified by load_async and stop(); the RECV thread waits.
        self._in_cv = threading.Condition()
        self._tokens: dict[str, object] = {}
        self._recv_counter: dict[str, int] = {}
        self._polling: list[tuple[str, object]] = []
        self._received: dict[str, list[Any]] = {}

        self.build_failures = 0
        self.put_drops = 0
        self.get_failures = 0

        self._save_thread = threading.Thread(target=self._save_loop, daemon=True)
        self._recv_thread = threading.Thread(target=self._recv_loop, daemon=True)
        self._save_thread.start()
        self._recv_thread.start()

    @staticmethod
    def _check(request_id: Any, is_final: Any = False) -> None:
        if not isinstance(request_id, str):
            raise TypeError("request id must be str")
        if not isinstance(is_final, bool):
            raise TypeError("is_final must be bool")

    def _alive(self, what: str) -> None:
        if self._stopped.is_set():
            raise RuntimeError(f"{what}: the adapter is stopped")

    # -- sender --

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._check(request_id, is_final)
        self._alive("save_async")
        item = (request_id, copy.deepcopy(obj), is_final)
        with self._out_cv:
            self._alive("save_async")
            self._outgoing.append(item)
            self._out_cv.notify()

    def cancel_sender(self, request_id: str) -> None:
        self._check(request_id)
        with self._out_cv:
            self._alive("cancel_sender")
            self._cancel_marks.add(request_id)

    def _next_item(self) -> tuple[str, Any, bool, bool] | None:
        with self._out_cv:
            while not self._outgoing:
                if self._stopped.is_set():
                    return None
                self._out_cv.wait(_IDLE_WAIT)
            if self._stopped.is_set():
                return None
            rid, snap, final = self._outgoing.pop(0)
            return rid, snap, final, rid in self._cancel_marks

    def _save_loop(self) -> None:
        while (item := self._next_item()) is not None:
            try:
                self._handle(*item)
            except Exception:  # never let the SAVE thread die
                _log.exception("unexpected SAVE error")

    def _handle(self, rid: str, snap: Any, final: bool, cancelled: bool) -> None:
        payload: Any = None
        if cancelled and not final:
            return
        if not cancelled:
            try:
                payload = self._build(rid, snap, final)
            except Exception:
                self.build_failures += 1
                _log.info("build failed for %s", rid, exc_info=True)
                if not final:
                    return
                payload = None
        if payload is None and not final:
            return
        attempt = 0
        while True:
            if self._stopped.is_set():
                return
            with self._out_cv:
                n = self._send_counter.get(rid, 0)
            try:
                key = f"{rid}_{self._stage}_{n}"
                self._connector.put(key, {"data": payload, "finished": final})
            except Exception as exc:
                attempt += 1
                if not final and attempt >= _MAX_PUT_TRIES:
                    self.put_drops += 1
                    _log.info("dropping %s chunk %d: %r", rid, n, exc)
                    return
                self._stopped.wait(min(0.002 * attempt, 0.05))
                continue
            with self._out_cv:
                if final:
                    self._send_counter.pop(rid, None)
                    self._cancel_marks.discard(rid)
                else:
                    self._send_counter[rid] = n + 1
            return

    # -- receiver --

    def load_async(self, request_id: str) -> None:
        self._check(request_id)
        with self._in_cv:
            self._alive("load_async")
            if request_id not in self._tokens:
                token = object()
                self._tokens[request_id] = token
                self._recv_counter[request_id] = 0
                self._polling.append((request_id, token))
                self._in_cv.notify()

    def poll_ready(self) -> dict[str, list[Any]]:
        with self._in_cv:
            received = self._received
            self._received = {}
        return received

    def cleanup_receiver(self, request_id: str) -> None:
        self._check(request_id)
        with self._in_cv:
            self._tokens.pop(request_id, None)
            self._recv_counter.pop(request_id, None)
            self._received.pop(request_id, None)

    def _recv_loop(self) -> None:
        while not self._stopped.is_set():
            with self._in_cv:
                while not self._polling and not self._stopped.is_set():
                    self._in_cv.wait(_IDLE_WAIT)
                count = len(self._polling)
            progress = False
            for _ in range(count):
                if self._stopped.is_set():
                    return
                with self._in_cv:
                    rid, token = self._polling.pop(0)
                    if self._tokens.get(rid) is not token:
                        continue
                    n = self._recv_counter[rid]
                try:
                    value = self._connector.get(f"{rid}_{self._source}_{n}")
                except Exception:
                    self.get_failures += 1
                    value = None
                with self._in_cv:
                    if self._tokens.get(rid) is not token:
                        continue  # cleaned up meanwhile: whatever we fetched is stale
                    if value is None:
                        self._polling.append((rid, token))
                        continue
                    self._received.setdefault(rid, []).append(value)
                    self._recv_counter[rid] = n + 1
                    progress = True
                    if not (isinstance(value, dict) and value.get("finished")):
                        self._polling.append((rid, token))
            if count and not progress:
                time.sleep(_NO_PROGRESS_NAP)

    # -- lifecycle --

    def stop(self) -> None:
        self._stopped.set()
        with self._out_cv:
            self._out_cv.notify_all()
        with self._in_cv:
            self._in_cv.notify_all()
        deadline = time.monotonic() + _JOIN_TIMEOUT
        for thread in (self._save_thread, self._recv_thread):
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> OptionsAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def make(connector: Any, **options: Any) -> OptionsAdapter:
    """``make(connector, stage_id=..., [src_stage_id=...], [build_payload=...], **ignored)``."""
    if "stage_id" not in options:
        raise TypeError("make() needs stage_id=")
    return OptionsAdapter(
        connector,
        options["stage_id"],
        options.get("src_stage_id"),
        options.get("build_payload"),
    )
