"""A broken adapter with two independent bugs, for ``chunk-adapter verify --all``.

``snapshot_and_swap`` is the reference ChunkAdapter with two of the catalogue's
single bugs at once, one per side: the sender queues the caller's object
instead of a snapshot (R4, ``broken_stateful:missing_snapshot``) and the
receiver's ``poll_ready`` copies the ready lists instead of swapping them out
(R15, ``broken_stateful:poll_no_swap``). By default verify reports the first
confirmed violation; ``--all`` must report both, as two root causes.
"""

from __future__ import annotations

from tests.quality.broken_stateful import MissingSnapshot, PollNoSwap, _factory


class SnapshotAndSwap(MissingSnapshot, PollNoSwap):
    """No snapshot in ``save_async`` (R4) and no swap in ``poll_ready`` (R15)."""


snapshot_and_swap = _factory(SnapshotAndSwap, "snapshot_and_swap")

ROOT_RULES = ({"R4"}, {"R15", "R14"})
"""The root rule each bug is reported under (R15's stale copies show as R14 too)."""
