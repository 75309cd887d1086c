"""A broken adapter from outside the suite's own shapes: the first draft of
tests/quality/correct/forwarding_pkg, as it was written.

``stale_round_get``: the RECV round reads the registrations once, then fetches
for each without asking whether it is still current. After ``cleanup_receiver``
and ``load_async`` of the same id during the round, the round's get for the old
registration takes (on a consuming connector) the new registration's chunk 0
and throws it away as stale: the new registration then waits for chunk 0
forever and never receives the rest (R23; the spec's RECV step 1 reads the
token under the lock before every get, R16).
"""

from __future__ import annotations

from typing import Any

from tests.quality.correct.forwarding_pkg.bridge import StreamBridge

__all__ = ["stale_round_get"]


class _StaleRound(StreamBridge):
    def _still_current(self, rid: str, reg: Any, cid: int) -> bool:
        return True  # the bug: no re-check before the get


stale_round_get = _StaleRound.create
