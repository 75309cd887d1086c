"""The reference adapter with a receiver that reads a stream in bursts.

Once a get returns a chunk, the RECV thread goes on getting the same registration's
next keys at once, up to ``burst`` (8) chunks, instead of waiting for its next turn:
a stream whose chunks are already stored arrives in one go. Each commit checks the
token under the lock, and the burst ends at an empty get, a failed one or the final.

BUG (R15): the ready list is looked up once, at the burst's first commit, and the
later commits of the burst append to that list object. If ``poll_ready`` swaps the
ready lists out in the middle of a burst, the rest of the burst goes into the list it
has already handed to the scheduler: those chunks are never handed out by a later
call (R14: lost; the stream never completes at the receiver, R23). Bursts are short,
so only a ``poll_ready`` that lands inside one shows it; the demonstration holds a
get of the burst with a gate.
"""

from __future__ import annotations

from typing import Any

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors.base import chunk_key

from ._reference import factory

__all__ = ["BurstReceiver", "make"]


class BurstReceiver(ChunkAdapter):
    """The reference ChunkAdapter; a registration that has data is read in bursts of 8."""

    burst = 8

    def _poll_one(self, request_id: str, token: object, key: str, chunk_id: int) -> bool:
        bucket: list[dict[str, Any]] | None = None
        for _ in range(self.burst):
            value, failed = self._get_one(key)
            with self._recv_lock:
                self._recv_counts["gets"] += 1
                if failed:
                    self._recv_counts["get_failures"] += 1
                    self._get_failed = True
                elif value is None:
                    self._recv_counts["gets_empty"] += 1
                current = self._tokens.get(request_id) is token
                if value is None or not current:
                    if current:
                        self._queue.append((request_id, token))
                    else:
                        self._awaited.discard(key)
                    return bucket is not None
                self._awaited.discard(key)
                if bucket is None:
                    bucket = self._ready.setdefault(request_id, [])
                bucket.append(value)  # BUG (R15): poll_ready may have taken `bucket` since
                self._next_recv_id[request_id] = chunk_id + 1
                self._recv_counts["committed"] += 1
                self._stalled.discard(request_id)
                if value.get("finished"):
                    self._progress_at.pop(request_id, None)
                    return True
                self._progress_at[request_id] = self.runtime.monotonic()
                chunk_id += 1
                key = chunk_key(request_id, self.src_stage_id, chunk_id)
                if self.event_driven:
                    self._awaited.add(key)
            if self._stop.is_set():
                break
        with self._recv_lock:
            if self._tokens.get(request_id) is token:
                self._queue.append((request_id, token))  # burst over: its next turn
        return True

    def _get_one(self, key: str) -> tuple[Any, bool]:
        try:
            value = self.connector.get(key)
        except Exception as exc:
            self.log.info("get %s failed: %r; will retry", key, exc)
            return None, True
        if value is not None and not isinstance(value, dict):
            self.log.warning("get %s returned %r, not a dict; ignoring it", key, value)
            return None, True
        return value, False


make = factory(BurstReceiver, drop=("discard_leftovers", "leftover_timeout"))
