"""Adapters with one seeded bug each that the stress scenarios (or the worlds) find.

Each is the reference :class:`ChunkAdapter` with one method overridden, and
is exposed as a factory (``tests.quality.broken_stress:<name>``) so it can be
handed to a scenario, to pytest's ``--adapter`` or to ``chunk-adapter verify``.
``test_stress_finds.py`` proves each one is caught.
"""

from __future__ import annotations

from typing import Any

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors.base import chunk_key

__all__ = [
    "builds_in_save_async",
    "busy_spinning_recv",
    "final_not_retried",
    "head_of_line_recv",
    "miscounts_drops",
    "puts_after_stop",
    "save_dies_on_put_error",
    "stop_joins_each_thread",
    "stop_joins_forever",
    "stop_without_notify",
    "waits_for_room",
]


class FinalNotRetried(ChunkAdapter):
    """A final chunk is given up after ``put_tries`` failed puts, like a non-final one (R10/R11)."""

    def _put_with_retries(self, request_id: str, value: dict[str, Any], is_final: bool) -> None:
        tries = 0
        while not self._stop.is_set():
            with self._send_lock:
                chunk_id = self._next_send_id.get(request_id, 0)
            try:
                self.connector.put(chunk_key(request_id, self.stage_id, chunk_id), value)
            except Exception:
                tries += 1
                self._count_send("put_failures")
                if tries >= self.put_tries:  # BUG: finals must be retried until they succeed
                    if not is_final:
                        self._count_send("dropped_put_failed")
                    return
                self._count_send("put_retries")
                self._stop.wait(self.put_backoff)
                continue
            with self._send_lock:
                self._send_counts["chunks_put"] += 1
                self._send_counts["finals_put"] += is_final
                if is_final:
                    self._next_send_id.pop(request_id, None)
                    self._cancelled.discard(request_id)
                else:
                    self._next_send_id[request_id] = chunk_id + 1
            return


class SaveDiesOnPutError(ChunkAdapter):
    """The SAVE loop puts without catching: the first failed put kills the thread (R22)."""

    def _save_loop(self) -> None:
        while True:
            with self._send_cond:
                while not self._fifo and not self._stop.is_set():
                    self._send_cond.wait(self.wait_timeout)
                if self._stop.is_set():
                    return
                request_id, snap, is_final, cancelled = self._take()
                chunk_id = self._next_send_id.get(request_id, 0)
            if cancelled and not is_final:
                continue
            payload = None if cancelled else self.build_payload(request_id, snap, is_final)
            if payload is None and not is_final:
                continue
            value = {"data": payload, "finished": is_final}
            if self._stop.is_set():
                return
            # BUG: an exception from put propagates and ends the SAVE thread.
            self.connector.put(chunk_key(request_id, self.stage_id, chunk_id), value)
            with self._send_lock:
                if is_final:
                    self._next_send_id.pop(request_id, None)
                    self._cancelled.discard(request_id)
                else:
                    self._next_send_id[request_id] = chunk_id + 1


class BusySpinningRecv(ChunkAdapter):
    """After a round without progress the RECV thread goes straight on: a busy loop (R17)."""

    def _recv_loop(self) -> None:
        while True:
            with self._recv_cond:
                while not self._queue and not self._stop.is_set():
                    self._recv_cond.wait(self.wait_timeout)
                if self._stop.is_set():
                    return
                entries = len(self._queue)
            try:
                self._recv_round(entries)  # BUG: no pause when nothing arrived
            except Exception:
                self.log.exception("RECV thread: unexpected error; continuing")


class StopJoinsForever(ChunkAdapter):
    """stop() joins each thread without a timeout: hangs while a call is blocked (R18)."""

    def stop(self) -> None:
        self._stop.set()
        for cond in (self._send_cond, self._recv_cond):
            with cond:
                cond.notify_all()
        for thread in self._threads:
            thread.join()  # BUG: no timeout


class StopJoinsEachThread(ChunkAdapter):
    """stop() gives each thread the whole join timeout: with a build and a get both
    blocked (one adapter that sends and receives) it takes twice as long (R18: one
    deadline for both threads). No stress scenario blocks both threads of one adapter;
    the generated worlds do (calls that hang right before stop())."""

    def stop(self) -> None:
        self._stop.set()
        for cond in (self._send_cond, self._recv_cond):
            with cond:
                cond.notify_all()
        for thread in self._threads:
            thread.join(self.join_timeout)  # BUG: a timeout each, not one deadline


class StopWithoutNotify(ChunkAdapter):
    """stop() sets the event but wakes nobody; with a long wait timeout the idle
    threads sleep through it (R18). Its factory passes ``wait_timeout=5.0``."""

    def stop(self) -> None:
        self._stop.set()  # BUG: no notify_all on the conditions
        deadline = self.runtime.monotonic() + self.join_timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - self.runtime.monotonic()))


class HeadOfLineRecv(ChunkAdapter):
    """The RECV round stays on the head of the polling queue until it has data,
    so every request behind an idle one waits (R17)."""

    def _recv_round(self, entries: int) -> bool:
        with self._recv_lock:
            if not self._queue:
                return False
            request_id, token = self._queue[0]  # BUG: only ever the head
            if self._tokens.get(request_id) is not token:
                self._queue.popleft()
                return True
            chunk_id = self._next_recv_id[request_id]
        key = chunk_key(request_id, self.src_stage_id, chunk_id)
        try:
            value = self.connector.get(key)
        except Exception:
            value = None
        if not isinstance(value, dict):
            return False
        with self._recv_lock:
            if self._tokens.get(request_id) is token:
                self._ready.setdefault(request_id, []).append(value)
                self._next_recv_id[request_id] = chunk_id + 1
                if value.get("finished"):
                    self._queue.popleft()
        return True


class BuildsInSaveAsync(ChunkAdapter):
    """save_async calls build_payload on the scheduler thread: it waits for a slow build (R3)."""

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self.build_payload(request_id, obj, is_final)  # BUG: a build may block
        super().save_async(request_id, obj, is_final)


class WaitsForRoom(ChunkAdapter):
    """save_async waits while 256 chunks wait to be sent: a bounded queue whose producer
    blocks, so the scheduler waits for a held build once the backlog fills it (R3)."""

    ROOM = 256

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        with self._send_cond:
            while len(self._fifo) >= self.ROOM and not self._stop.is_set():
                self._send_cond.wait(0.05)  # BUG: the scheduler waits for room
        super().save_async(request_id, obj, is_final)


class PutsAfterStop(ChunkAdapter):
    """The SAVE thread puts without checking for stop(): a build that returns after
    stop() still reaches the connector (R18)."""

    def _put_with_retries(self, request_id: str, value: dict[str, Any], is_final: bool) -> None:
        with self._send_lock:
            chunk_id = self._next_send_id.get(request_id, 0)
        self.connector.put(chunk_key(request_id, self.stage_id, chunk_id), value)  # BUG
        with self._send_lock:
            if is_final:
                self._next_send_id.pop(request_id, None)
                self._cancelled.discard(request_id)
            else:
                self._next_send_id[request_id] = chunk_id + 1


class MiscountsDrops(ChunkAdapter):
    """Chunks dropped after failed puts are not counted: stats() disagrees with the wire."""

    def _count_send(self, name: str) -> None:
        if name != "dropped_put_failed":  # BUG: this counter never moves
            super()._count_send(name)


def final_not_retried(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return FinalNotRetried(connector, **kwargs)


def save_dies_on_put_error(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return SaveDiesOnPutError(connector, **kwargs)


def busy_spinning_recv(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return BusySpinningRecv(connector, **kwargs)


def stop_joins_each_thread(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return StopJoinsEachThread(connector, **kwargs)


def stop_joins_forever(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return StopJoinsForever(connector, **kwargs)


def stop_without_notify(connector: Any, **kwargs: Any) -> ChunkAdapter:
    kwargs["wait_timeout"] = 5.0
    return StopWithoutNotify(connector, **kwargs)


def builds_in_save_async(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return BuildsInSaveAsync(connector, **kwargs)


def puts_after_stop(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return PutsAfterStop(connector, **kwargs)


def miscounts_drops(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return MiscountsDrops(connector, **kwargs)


def head_of_line_recv(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return HeadOfLineRecv(connector, **kwargs)


def waits_for_room(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return WaitsForRoom(connector, **kwargs)
