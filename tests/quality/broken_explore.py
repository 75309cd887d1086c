"""Broken adapters the interleaving explorer must find (tests/quality/test_explorer_finds.py).

Each is the reference :class:`~chunk_adapter.adapter.ChunkAdapter` with one
method overridden to carry one classic concurrency bug. They all still take
``runtime=``, so the explorer drives them white-box.
"""

from __future__ import annotations

from typing import Any

from chunk_adapter.adapter import SAVE_THREAD, ChunkAdapter

__all__ = [
    "BROKEN",
    "LostWakeup",
    "NoTokenCheck",
    "SplitPoll",
    "StopSkipsSaveJoin",
    "TwoSaveThreads",
    "WaitNotInLoop",
]


class NoTokenCheck(ChunkAdapter):
    """Commits what a get returned without checking the registration's token (R16)."""

    def _poll_one(self, request_id: str, token: object, key: str, chunk_id: int) -> bool:
        value: Any = None
        try:
            value = self.connector.get(key)
        except Exception:
            value = None
        if not isinstance(value, dict):
            value = None
        with self._recv_lock:
            if value is None:
                self._queue.append((request_id, token))
                return False
            # BUG: no `self._tokens.get(request_id) is token` check: a value fetched for
            # a registration cleaned up meanwhile is committed to the new one.
            self._ready.setdefault(request_id, []).append(value)
            self._next_recv_id[request_id] = chunk_id + 1
            if not value.get("finished"):
                self._queue.append((request_id, token))
            return True


class SplitPoll(ChunkAdapter):
    """``poll_ready`` copies and clears in two critical sections (R15)."""

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        with self._recv_lock:
            ready = {rid: list(values) for rid, values in self._ready.items()}
        # BUG: a chunk committed here is cleared without ever being handed out.
        with self._recv_lock:
            self._ready.clear()
        return ready


class LostWakeup(ChunkAdapter):
    """The SAVE thread checks its FIFO outside the lock, then waits with no timeout (R20)."""

    def _save_loop(self) -> None:
        while True:
            # BUG: the check and the wait are not under one lock hold, and the wait has
            # no timeout and no re-check: a notify between them is lost for good.
            if not self._fifo and not self._stop.is_set():
                with self._send_cond:
                    self._send_cond.wait()
            if self._stop.is_set():
                return
            with self._send_cond:
                if not self._fifo:
                    continue
                request_id, snap, is_final, cancelled = self._take()
            self._send_one(request_id, snap, is_final, cancelled)


class WaitNotInLoop(ChunkAdapter):
    """``Condition.wait`` under ``if`` instead of ``while``: acts on a stale predicate (R20)."""

    def _save_loop(self) -> None:
        while True:
            with self._send_cond:
                # BUG: `if`, not `while`: after a timeout the FIFO may still be empty.
                if not self._fifo and not self._stop.is_set():
                    self._send_cond.wait(self.wait_timeout)
                if self._stop.is_set():
                    return
                request_id, snap, is_final, cancelled = self._take()
            self._send_one(request_id, snap, is_final, cancelled)


class TwoSaveThreads(ChunkAdapter):
    """Starts a second SAVE thread on the same FIFO (R5, R9)."""

    def __init__(self, connector: Any, **kwargs: Any) -> None:
        super().__init__(connector, **kwargs)
        # BUG: two consumers of one FIFO: chunks of a request race to the connector.
        self._threads.append(self.runtime.start_thread(self._save_loop, SAVE_THREAD + "-2"))


class StopSkipsSaveJoin(ChunkAdapter):
    """``stop()`` joins the RECV thread only ("the SAVE thread checks the stop flag before
    it takes the next chunk anyway"): a chunk it took before the flag was set is still put,
    after ``stop()`` returned (R18). Found by holding the SAVE thread just before that
    put while the scheduler calls ``stop()`` (:mod:`chunk_adapter.explore.strategies.effects`)."""

    def stop(self, drain_timeout: float = 0.0) -> None:
        threads = self._threads
        self._threads = [t for t in threads if t.name != SAVE_THREAD]  # BUG (R18)
        try:
            super().stop(drain_timeout)
        finally:
            self._threads = threads


BROKEN: dict[str, type[ChunkAdapter]] = {
    cls.__name__: cls
    for cls in (NoTokenCheck, SplitPoll, LostWakeup, WaitNotInLoop, TwoSaveThreads)
}

FOUND_BY: list[tuple[str, str]] = [
    ("NoTokenCheck", "q5-cleanup-inflight-get"),
    ("SplitPoll", "q4-receiver-finished"),
    ("LostWakeup", "q7-stop-wakes-save"),
    ("LostWakeup", "q1-save-snapshot-enqueue"),
    ("WaitNotInLoop", "q7-stop-idle"),
    ("TwoSaveThreads", "q1-save-snapshot-enqueue"),
]
"""Each broken adapter with a library scenario that finds it (the DPOR benchmark's rows,
and the cases where DFS and DPOR must agree)."""
