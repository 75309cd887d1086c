"""The reference adapter with a receiver that retires registrations whose gets keep failing.

"A registration whose gets raise 200 times in a row reads from a store that is gone":
it is taken off the polling queue (logged once), so it stops costing a get per round.
It stays registered until ``cleanup_receiver``; an empty get (nothing put yet) is not
a failure and resets the count, as does a successful one.

BUG (R13): a failed get must be retried later, however long the store keeps failing.
After a get outage of 200 failed gets in a row (about a quarter of a second at the
1 ms polling pace) the registration is never polled again: the chunks put for it are
never committed and its stream never completes (R23), although the store came back.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from chunk_adapter.adapter import ChunkAdapter

from ._reference import factory

__all__ = ["RetiringReceiver", "make"]


class RetiringReceiver(ChunkAdapter):
    """The reference ChunkAdapter; a registration with 200 failed gets in a row is retired."""

    retire_after = 200  # failed gets in a row

    def __init__(self, connector: Any, **kwargs: Any) -> None:
        # Failed gets in a row per registered request id; guarded by _recv_lock.
        self._failing: dict[str, int] = {}
        super().__init__(connector, **kwargs)

    def _poll_one(self, request_id: str, token: object, key: str, chunk_id: int) -> bool:
        with self._recv_lock:
            failures_before = self._recv_counts["get_failures"]
        progress = super()._poll_one(request_id, token, key, chunk_id)
        with self._recv_lock:
            if self._tokens.get(request_id) is not token:
                return progress
            if self._recv_counts["get_failures"] == failures_before:
                self._failing.pop(request_id, None)
                return progress
            failing = self._failing[request_id] = self._failing.get(request_id, 0) + 1
            if failing < self.retire_after:
                return progress
            del self._failing[request_id]
            with suppress(ValueError):  # BUG (R13): never polled again
                self._queue.remove((request_id, token))
        self.log.warning(
            "receiver: retiring %s after %d failed gets of %s", request_id, failing, key
        )
        return progress

    def cleanup_receiver(self, request_id: str) -> None:
        super().cleanup_receiver(request_id)
        with self._recv_lock:
            self._failing.pop(request_id, None)


make = factory(RetiringReceiver)
