"""The reference adapter with a safety valve on final chunks.

A final is retried as the reference retries it, but "so that a store that is gone for
good cannot pin the SAVE thread", it is given up once its puts have been failing for
``final_give_up`` seconds (3 s), and the stream is forgotten as after a put final.

BUG (R10, R11): a final chunk must be retried until it succeeds or ``stop()`` is
called. After an outage longer than 3 s the final is never put, so the stream never
ends at the receiver (R23), although the adapter runs on and the store came back.
Outages shorter than 3 s (every blip a test injects by count) cost nothing.
"""

from __future__ import annotations

from typing import Any

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors.base import chunk_key, is_permanent

from ._reference import factory

__all__ = ["PatientFinals", "make"]


class PatientFinals(ChunkAdapter):
    """The reference ChunkAdapter; a final whose puts fail for 3 s is given up."""

    final_give_up = 3.0  # seconds of failing puts after which a final is given up

    def _put_with_retries(self, request_id: str, value: dict[str, Any], is_final: bool) -> None:
        tries = 0
        failing_since: float | None = None
        while True:
            with self._send_lock:
                chunk_id = self._next_send_id.get(request_id, 0)
            if self._stop.is_set():
                self._abandon_in_flight()
                return
            key = chunk_key(request_id, self.stage_id, chunk_id)
            try:
                self.connector.put(key, value)
            except Exception as exc:
                tries += 1
                self._count_send("put_failures")
                if is_permanent(exc):
                    self._rejected(request_id, key, value, is_final, exc)
                    return
                if not is_final and tries >= self.put_tries:
                    self.log.warning("dropping %s after %d failed puts: %r", key, tries, exc)
                    self._count_send("dropped_put_failed")
                    return
                now = self.runtime.monotonic()
                failing_since = now if failing_since is None else failing_since
                if is_final and now - failing_since >= self.final_give_up:
                    self._give_up(request_id, key, now - failing_since, exc)  # BUG (R10)
                    return
                self._count_send("put_retries")
                if self._stop.wait(self._backoff(tries, is_final)):
                    self._abandon_in_flight()
                    return
                continue
            with self._send_lock:
                self._send_counts["chunks_put"] += 1
                if is_final:
                    self._send_counts["finals_put"] += 1
                    self._next_send_id.pop(request_id, None)
                    self._cancelled.discard(request_id)
                else:
                    self._next_send_id[request_id] = chunk_id + 1
            return

    def _give_up(self, request_id: str, key: str, failing: float, exc: Exception) -> None:
        self.log.error("giving up final %s after %.1fs of failed puts: %r", key, failing, exc)
        with self._send_lock:
            self._send_counts["finals_failed"] += 1
            self._next_send_id.pop(request_id, None)
            self._cancelled.discard(request_id)


make = factory(PatientFinals)
