"""Broken adapters that keep state per finished request: only R24 (bounded state) sees them.

Each is the reference ChunkAdapter with ONE change and otherwise keeps every
other rule, so the stateful machines, stress and the explorer pass it; the
``bounded state`` check of the examples stage must report R24 with the bytes
per request. Factories: ``tests.quality.broken_leaks:<name>``.

- ``send_state_kept``: when a final is put the sender resets the stream's id
  counter to 0 instead of dropping it: one dict entry per request id ever sent.
- ``leak_after_cleanup``: the RECV thread stamps a registration's stall clock
  before it checks the registration is still current, so a request cleaned up
  before its final gets its stall state re-created by the RECV thread's late
  visit of its stale queue entry — and nothing removes it again.
"""

from __future__ import annotations

from typing import Any

from chunk_adapter.adapter import ChunkAdapter
from tests.quality.broken_stateful import _factory


class SendStateKept(ChunkAdapter):
    """Keeps every finished request's id counter (reset to 0, never dropped)."""

    def _put_with_retries(self, request_id: str, value: dict[str, Any], is_final: bool) -> None:
        super()._put_with_retries(request_id, value, is_final)
        if is_final:
            with self._send_lock:
                if request_id not in self._next_send_id:
                    self._next_send_id[request_id] = 0  # BUG: reset, never dropped


class LeakAfterCleanup(ChunkAdapter):
    """Re-creates stall state for a registration that was cleaned up (never dropped)."""

    def _recv_round(self, entries: int) -> bool:
        with self._recv_lock:
            for request_id, _token in list(self._queue)[:entries]:
                # BUG: stamped before the token check; a cleaned-up request gets it back
                self._progress_at.setdefault(request_id, self.runtime.monotonic())
        return super()._recv_round(entries)


send_state_kept = _factory(SendStateKept, "send_state_kept")
leak_after_cleanup = _factory(LeakAfterCleanup, "leak_after_cleanup")

EXPECTED: dict[str, set[str]] = {
    "send_state_kept": {"R24"},
    "leak_after_cleanup": {"R24"},
}
