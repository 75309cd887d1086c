"""Broken adapters only the deeper generators of issue 11 catch (the state machines).

Each is the reference ChunkAdapter with ONE change, exposed as a factory
(``tests.quality.broken_deep:<name>``) for ``--adapter``. ``EXPECTED`` maps
each factory to the rule a report must name first.

- ``shallow_snapshot``: ``copy.copy`` instead of ``copy.deepcopy`` (R4). Passes
  Example 2 (it mutates only the top-level list); caught by the nested payloads
  the machines mutate at every depth after ``save_async``.
- ``container_snapshot``: a "fast" snapshot that copies lists, dicts and
  tuples and deep-copies other objects, but keeps bytes-likes as they are,
  "because bytes are immutable" — a ``bytearray`` is not (R4).
- ``reuse_drops_queued``: once a final is put, the SAVE thread drops whatever
  is still queued under the same request id, taking it for a leftover of the
  finished stream: a new stream saved while the previous final was still
  queued loses its chunks, final included (R11; vllm-omni's sender
  generations lost chunks this way). Caught only by
  ``reuse_while_final_queued``.
"""

from __future__ import annotations

import copy
from typing import Any

from chunk_adapter.adapter import ChunkAdapter
from tests.quality.broken_stateful import _factory


def containers_only(obj: Any) -> Any:
    """Copies lists, dicts and tuples; BUG: keeps bytes-likes, ``bytearray`` included."""
    if isinstance(obj, list):
        return [containers_only(x) for x in obj]
    if isinstance(obj, tuple):
        return tuple(containers_only(x) for x in obj)
    if isinstance(obj, dict):
        return {k: containers_only(v) for k, v in obj.items()}
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return obj  # BUG: a bytearray is mutable; the caller's changes reach the payload
    return copy.deepcopy(obj)


class ReuseDropsQueued(ChunkAdapter):
    """After a final is put, drops the request's chunks still queued (R11)."""

    def _send_one(self, request_id: str, snap: Any, is_final: bool, cancelled: bool) -> None:
        super()._send_one(request_id, snap, is_final, cancelled)
        if not is_final:
            return
        with self._drained_cond:
            # BUG: these belong to the NEXT stream of this id, not to the finished one.
            kept = [item for item in self._fifo if item[0] != request_id]
            gone = len(self._fifo) - len(kept)
            self._fifo.clear()
            self._fifo.extend(kept)
            self._queued.pop(request_id, None)
            self._done += gone  # so flush() still returns
            self._drained_cond.notify_all()


shallow_snapshot = _factory(ChunkAdapter, "shallow_snapshot", copy.copy)
container_snapshot = _factory(ChunkAdapter, "container_snapshot", containers_only)
reuse_drops_queued = _factory(ReuseDropsQueued, "reuse_drops_queued")

EXPECTED: dict[str, set[str]] = {
    "shallow_snapshot": {"R4"},
    "container_snapshot": {"R4"},
    "reuse_drops_queued": {"R11"},
}
