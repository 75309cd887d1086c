"""A correct ChunkAdapter keeping ONE record per request id, shared by its send and receive sides.

In a pipeline a middle stage both receives request ``r`` from the stage before
and sends ``r`` to the stage after, so (vllm-omni style) one record per request
carries both sides' fields. The sides never reset each other's fields: a final
put forgets only the sender fields, ``cleanup_receiver`` only the receiver
fields, and a record is deleted once both sides are idle. It works the same when
sender and receiver are different adapter instances.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import deque
from typing import Any

_logger = logging.getLogger(__name__)


class _RequestRecord:
    __slots__ = ("cancelled", "next_get", "next_put", "ready", "sending", "token")

    def __init__(self) -> None:
        # sender side
        self.sending = False  # a stream is open (some chunk or a cancel seen, no final put yet)
        self.next_put = 0
        self.cancelled = False
        # receiver side
        self.token: object | None = None  # None: not registered
        self.next_get = 0
        self.ready: list[Any] = []

    def idle(self) -> bool:
        return not self.sending and not self.cancelled and self.token is None and not self.ready


class SharedStateAdapter:
    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Any = None,
    ) -> None:
        self._connector = connector
        self._stage_id = stage_id
        self._src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self._build_payload = build_payload
        self._stopped = threading.Event()
        # _mu guards _records, _save_fifo, _poll_fifo and _news.
        # _save_wakeup (over _mu): notified by save_async and stop(); SAVE thread waits.
        # _recv_wakeup (over _mu): notified by load_async and stop(); RECV thread waits.
        self._mu = threading.Lock()
        self._save_wakeup = threading.Condition(self._mu)
        self._recv_wakeup = threading.Condition(self._mu)
        self._records: dict[str, _RequestRecord] = {}
        self._save_fifo: deque[tuple[str, Any, bool]] = deque()
        self._poll_fifo: deque[tuple[str, object]] = deque()
        self._news: dict[str, None] = {}  # rids with ready chunks, in arrival order
        self._threads = [
            threading.Thread(target=self._save_thread, name="shared-save", daemon=True),
            threading.Thread(target=self._recv_thread, name="shared-recv", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    # ------------------------------------------------------------------ internals

    def _record(self, rid: str) -> _RequestRecord:
        """The record of *rid*, created on demand (hold _mu)."""
        record = self._records.get(rid)
        if record is None:
            record = self._records[rid] = _RequestRecord()
        return record

    def _maybe_forget(self, rid: str) -> None:
        """Drop *rid*'s record once neither side needs it (hold _mu)."""
        record = self._records.get(rid)
        if record is not None and record.idle():
            del self._records[rid]

    @staticmethod
    def _typecheck(request_id: Any, is_final: Any = False) -> None:
        if not isinstance(request_id, str):
            raise TypeError(f"request_id must be str, got {type(request_id).__name__}")
        if not isinstance(is_final, bool):
            raise TypeError(f"is_final must be bool, got {type(is_final).__name__}")

    def _refuse_if_stopped(self) -> None:
        if self._stopped.is_set():
            raise RuntimeError("adapter is stopped")

    # ------------------------------------------------------------------ sender

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._typecheck(request_id, is_final)
        self._refuse_if_stopped()
        snapshot = copy.deepcopy(obj)
        with self._save_wakeup:
            self._refuse_if_stopped()
            self._save_fifo.append((request_id, snapshot, is_final))
            self._save_wakeup.notify()

    def cancel_sender(self, request_id: str) -> None:
        self._typecheck(request_id)
        with self._mu:
            self._refuse_if_stopped()
            record = self._record(request_id)
            record.cancelled = True

    def _save_thread(self) -> None:
        while True:
            with self._save_wakeup:
                while not self._save_fifo and not self._stopped.is_set():
                    self._save_wakeup.wait(0.1)
                if self._stopped.is_set():
                    return
                rid, snapshot, final = self._save_fifo.popleft()
                record = self._record(rid)
                record.sending = True
                cancelled = record.cancelled
            try:
                self._save_one(rid, snapshot, final, cancelled)
            except Exception:
                _logger.exception("SAVE thread: unexpected error for %r", rid)

    def _save_one(self, rid: str, snapshot: Any, final: bool, cancelled: bool) -> None:
        if cancelled and not final:
            return
        payload = None
        if not cancelled:
            try:
                payload = (
                    snapshot
                    if self._build_payload is None
                    else self._build_payload(rid, snapshot, final)
                )
            except Exception:
                _logger.info("build_payload failed for %r", rid, exc_info=True)
                if not final:
                    return
                payload = None
        if payload is None and not final:
            return
        value = {"data": payload, "finished": final}
        failures = 0
        while not self._stopped.is_set():
            with self._mu:
                chunk_id = self._record(rid).next_put
            try:
                self._connector.put(f"{rid}_{self._stage_id}_{chunk_id}", value)
            except Exception:
                failures += 1
                if not final and failures >= 3:
                    _logger.info("chunk %d of %r dropped after 3 failed puts", chunk_id, rid)
                    return
                self._stopped.wait(min(0.001 * (1 << min(failures, 6)), 0.05))
                continue
            with self._mu:
                record = self._record(rid)
                if final:
                    record.sending = False
                    record.next_put = 0
                    record.cancelled = False
                    self._maybe_forget(rid)
                else:
                    record.next_put = chunk_id + 1
            return

    # ------------------------------------------------------------------ receiver

    def load_async(self, request_id: str) -> None:
        self._typecheck(request_id)
        with self._recv_wakeup:
            self._refuse_if_stopped()
            record = self._record(request_id)
            if record.token is not None:
                return
            record.token = object()
            record.next_get = 0
            record.ready = []
            self._poll_fifo.append((request_id, record.token))
            self._recv_wakeup.notify()

    def poll_ready(self) -> dict[str, list[Any]]:
        with self._mu:
            out: dict[str, list[Any]] = {}
            for rid in self._news:
                record = self._records.get(rid)
                if record is not None and record.ready:
                    out[rid], record.ready = record.ready, []
            self._news.clear()
        return out

    def cleanup_receiver(self, request_id: str) -> None:
        self._typecheck(request_id)
        with self._mu:
            record = self._records.get(request_id)
            if record is not None:
                record.token = None
                record.next_get = 0
                record.ready = []
                self._maybe_forget(request_id)
            self._news.pop(request_id, None)

    def _recv_thread(self) -> None:
        while True:
            with self._recv_wakeup:
                while not self._poll_fifo and not self._stopped.is_set():
                    self._recv_wakeup.wait(0.1)
                if self._stopped.is_set():
                    return
                todo = list(self._poll_fifo)
                self._poll_fifo.clear()
            progress = False
            for rid, token in todo:
                if self._stopped.is_set():
                    return
                with self._mu:
                    record = self._records.get(rid)
                    if record is None or record.token is not token:
                        continue
                    chunk_id = record.next_get
                try:
                    value = self._connector.get(f"{rid}_{self._src_stage_id}_{chunk_id}")
                except Exception:
                    _logger.debug("get failed for %r", rid, exc_info=True)
                    value = None
                with self._mu:
                    record = self._records.get(rid)
                    if record is None or record.token is not token:
                        continue
                    if value is None:
                        self._poll_fifo.append((rid, token))
                        continue
                    record.ready.append(value)
                    record.next_get = chunk_id + 1
                    self._news[rid] = None
                    progress = True
                    if not (isinstance(value, dict) and value.get("finished")):
                        self._poll_fifo.append((rid, token))
            if not progress:
                time.sleep(0.001)

    # ------------------------------------------------------------------ lifecycle

    def stop(self) -> None:
        self._stopped.set()
        with self._save_wakeup:
            self._save_wakeup.notify_all()
        with self._recv_wakeup:
            self._recv_wakeup.notify_all()
        deadline = time.monotonic() + 1.0
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> SharedStateAdapter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Any = None,
    **maybe_options: Any,
) -> SharedStateAdapter:
    return SharedStateAdapter(
        connector, stage_id=stage_id, src_stage_id=src_stage_id, build_payload=build_payload
    )
