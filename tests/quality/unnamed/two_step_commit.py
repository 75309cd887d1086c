"""The reference adapter with its RECV commit refactored into two small steps.

``_poll_one`` gets the key outside the lock (as it must), then asks
``_still_registered`` whether the registration is current, and then ``_commit``s the
value: each step takes the receive lock for itself, which reads well and keeps every
critical section short.

BUG (R16): the token check and the commit are two lock sections, not one. A
``cleanup_receiver`` that runs between them (after the check, before the commit) has
returned when the chunk is committed: the chunk of a cleaned-up registration appears
in ``poll_ready``, and its next id, ready list and stall state are re-created for a
request that is no longer registered (R24). The window is a few microseconds, so a
plain scripted run does not hit it; the demonstration holds the RECV thread between
the two steps with a gate.
"""

from __future__ import annotations

from typing import Any

from chunk_adapter.adapter import ChunkAdapter

from ._reference import factory

__all__ = ["TwoStepCommit", "make"]


class TwoStepCommit(ChunkAdapter):
    """The reference ChunkAdapter; the RECV thread checks the token, then commits."""

    def _poll_one(self, request_id: str, token: object, key: str, chunk_id: int) -> bool:
        value, failed = self._fetch(key)
        if not self._still_registered(request_id, token, key):
            return False
        return self._commit(request_id, token, key, chunk_id, value, failed)  # BUG (R16)

    def _fetch(self, key: str) -> tuple[Any, bool]:
        """One get, outside every lock: (value or None, whether it failed)."""
        try:
            value = self.connector.get(key)
        except Exception as exc:
            self.log.info("get %s failed: %r; will retry", key, exc)
            return None, True
        if value is not None and not isinstance(value, dict):
            self.log.warning("get %s returned %r, not a dict; ignoring it", key, value)
            return None, True
        return value, False

    def _still_registered(self, request_id: str, token: object, key: str) -> bool:
        """Whether the get was made for the current registration (else it is dropped)."""
        with self._recv_lock:
            self._recv_counts["gets"] += 1
            if self._tokens.get(request_id) is token:
                return True
            self._awaited.discard(key)
            self._recv_counts["stale_discarded"] += 1
            return False

    def _commit(
        self, request_id: str, token: object, key: str, chunk_id: int, value: Any, failed: bool
    ) -> bool:
        """Commit what the get returned (the registration was checked just before)."""
        with self._recv_lock:
            if failed:
                self._recv_counts["get_failures"] += 1
                self._get_failed = True
            elif value is None:
                self._recv_counts["gets_empty"] += 1
            if value is None:
                self._queue.append((request_id, token))
                return False
            self._awaited.discard(key)
            self._ready.setdefault(request_id, []).append(value)
            self._next_recv_id[request_id] = chunk_id + 1
            self._recv_counts["committed"] += 1
            self._stalled.discard(request_id)
            if value.get("finished"):
                self._progress_at.pop(request_id, None)
            else:
                self._progress_at[request_id] = self.runtime.monotonic()
                self._queue.append((request_id, token))
            return True


make = factory(TwoStepCommit, drop=("discard_leftovers", "leftover_timeout"))
