"""A correct ChunkAdapter whose SAVE work runs on a one-worker ThreadPoolExecutor.

``save_async`` snapshots and submits one task per chunk; the executor's single
worker is the SAVE thread and its work queue is the FIFO, so chunks are built
and put in save order. RECV is a plain daemon thread.

The contract wants daemon threads. An executor's worker inherits its daemon
flag from the thread whose ``submit`` spawns it, so the worker is spawned from a
short-lived daemon thread; and an abandoned worker (blocked forever in a build
or a put when ``stop()`` gives up on it) is taken off ``concurrent.futures``'
exit-time join list so it cannot hold the interpreter open.
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.thread
import copy
import logging
import threading
import time
from collections import deque
from typing import Any

LOG = logging.getLogger(__name__)


class ExecutorAdapter:
    PUT_TRIES = 3
    JOIN_TIMEOUT = 1.0

    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Any = None,
    ) -> None:
        self.connector = connector
        self.stage_id = stage_id
        self.src_stage_id = stage_id - 1 if src_stage_id is None else src_stage_id
        self.build = build_payload
        self.stopping = threading.Event()
        self.stats = {"build_failed": 0, "put_gave_up": 0, "get_failed": 0}

        # tx_lock guards next_chunk and cancelled, and orders submit() calls. No thread
        # waits on it: the executor's own work queue wakes the SAVE worker.
        self.tx_lock = threading.Lock()
        self.next_chunk: dict[str, int] = {}
        self.cancelled: set[str] = set()
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"chunk-save-{stage_id}"
        )
        self.save_worker = self._spawn_daemon_worker()

        # rx_cond (over its own Lock) guards rx, poll_queue and inbox. It is notified by
        # load_async and by stop(); the RECV thread is the only waiter.
        self.rx_cond = threading.Condition(threading.Lock())
        self.rx: dict[str, dict[str, Any]] = {}  # rid -> {"token", "next"}
        self.poll_queue: deque[tuple[str, object]] = deque()
        self.inbox: dict[str, list[Any]] = {}
        self.recv_thread = threading.Thread(
            target=self._receive, name=f"chunk-recv-{stage_id}", daemon=True
        )
        self.recv_thread.start()

    def _spawn_daemon_worker(self) -> threading.Thread:
        found: list[threading.Thread] = []

        def spawn() -> None:  # runs on a daemon thread, so the worker it spawns is a daemon
            found.append(self.pool.submit(threading.current_thread).result(timeout=10.0))

        starter = threading.Thread(target=spawn, name="chunk-save-spawner", daemon=True)
        starter.start()
        starter.join(10.0)
        if not found:
            raise RuntimeError("the SAVE worker did not start")
        return found[0]

    # ---------------------------------------------------------------- validation

    @staticmethod
    def _require_rid(request_id: Any) -> None:
        if not isinstance(request_id, str):
            raise TypeError(f"request_id must be str, got {type(request_id).__name__}")

    def _require_running(self, call: str) -> None:
        if self.stopping.is_set():
            raise RuntimeError(f"{call}() after stop()")

    # ---------------------------------------------------------------- sender

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._require_rid(request_id)
        if not isinstance(is_final, bool):
            raise TypeError(f"is_final must be bool, got {type(is_final).__name__}")
        self._require_running("save_async")
        snapshot = copy.deepcopy(obj)
        with self.tx_lock:
            self._require_running("save_async")
            self.pool.submit(self._save_one, request_id, snapshot, is_final)

    def cancel_sender(self, request_id: str) -> None:
        self._require_rid(request_id)
        with self.tx_lock:
            self._require_running("cancel_sender")
            self.cancelled.add(request_id)

    def _save_one(self, rid: str, snapshot: Any, final: bool) -> None:
        """One FIFO item, on the executor's single worker. Never raises."""
        try:
            if self.stopping.is_set():
                return
            with self.tx_lock:
                was_cancelled = rid in self.cancelled
            if was_cancelled and not final:
                return
            payload = None
            if not was_cancelled:
                try:
                    payload = snapshot if self.build is None else self.build(rid, snapshot, final)
                except Exception:
                    self.stats["build_failed"] += 1
                    LOG.info("build_payload failed for %r", rid, exc_info=True)
                    if not final:
                        return
                    payload = None
            if payload is None and not final:
                return
            self._put_with_retries(rid, {"data": payload, "finished": final}, final)
        except Exception:
            LOG.exception("SAVE task failed unexpectedly")

    def _put_with_retries(self, rid: str, value: dict[str, Any], final: bool) -> None:
        tries = 0
        delay = 0.001
        while not self.stopping.is_set():
            with self.tx_lock:
                chunk = self.next_chunk.get(rid, 0)
            try:
                self.connector.put(f"{rid}_{self.stage_id}_{chunk}", value)
            except Exception:
                tries += 1
                if not final and tries >= self.PUT_TRIES:
                    self.stats["put_gave_up"] += 1
                    LOG.info("dropped %r chunk %d after %d tries", rid, chunk, tries)
                    return
                self.stopping.wait(delay)
                delay = min(2 * delay, 0.05)
                continue
            with self.tx_lock:
                if final:
                    self.next_chunk.pop(rid, None)
                    self.cancelled.discard(rid)
                else:
                    self.next_chunk[rid] = chunk + 1
            return

    # ---------------------------------------------------------------- receiver

    def load_async(self, request_id: str) -> None:
        self._require_rid(request_id)
        with self.rx_cond:
            self._require_running("load_async")
            if request_id in self.rx:
                return
            token = object()
            self.rx[request_id] = {"token": token, "next": 0}
            self.poll_queue.append((request_id, token))
            self.rx_cond.notify_all()

    def poll_ready(self) -> dict[str, list[Any]]:
        with self.rx_cond:
            out = self.inbox
            self.inbox = {}
            return out

    def cleanup_receiver(self, request_id: str) -> None:
        self._require_rid(request_id)
        with self.rx_cond:
            self.rx.pop(request_id, None)
            self.inbox.pop(request_id, None)

    def _receive(self) -> None:
        while True:
            with self.rx_cond:
                while not self.poll_queue and not self.stopping.is_set():
                    self.rx_cond.wait(timeout=0.1)
                if self.stopping.is_set():
                    return
                round_entries = list(self.poll_queue)
                self.poll_queue.clear()
            progress = 0
            for rid, token in round_entries:
                if self.stopping.is_set():
                    return
                progress += self._fetch(rid, token)
            if progress == 0:
                time.sleep(0.001)

    def _fetch(self, rid: str, token: object) -> int:
        with self.rx_cond:
            reg = self.rx.get(rid)
            if reg is None or reg["token"] is not token:
                return 0
            chunk = reg["next"]
        try:
            value = self.connector.get(f"{rid}_{self.src_stage_id}_{chunk}")
        except Exception:
            self.stats["get_failed"] += 1
            value = None
        with self.rx_cond:
            reg = self.rx.get(rid)
            if reg is None or reg["token"] is not token:
                return 0  # stale: the registration was cleaned up meanwhile
            if value is None:
                self.poll_queue.append((rid, token))
                return 0
            self.inbox.setdefault(rid, []).append(value)
            reg["next"] = chunk + 1
            if not (isinstance(value, dict) and value.get("finished")):
                self.poll_queue.append((rid, token))
            return 1

    # ---------------------------------------------------------------- lifecycle

    def stop(self) -> None:
        deadline = time.monotonic() + self.JOIN_TIMEOUT
        self.stopping.set()
        self.pool.shutdown(wait=False, cancel_futures=True)  # wakes the SAVE worker
        with self.rx_cond:
            self.rx_cond.notify_all()
        here = threading.current_thread()
        for thread in (self.save_worker, self.recv_thread):
            if thread is not here:
                thread.join(max(0.0, deadline - time.monotonic()))
        if self.save_worker.is_alive():
            # Abandoned (blocked in a build or a put): do not let interpreter exit join it.
            concurrent.futures.thread._threads_queues.pop(self.save_worker, None)

    def __enter__(self) -> ExecutorAdapter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Any = None,
    **_options: Any,
) -> ExecutorAdapter:
    return ExecutorAdapter(
        connector, stage_id=stage_id, src_stage_id=src_stage_id, build_payload=build_payload
    )
