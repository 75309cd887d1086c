"""A broken adapter with two independent bugs, for ``chunk-adapter verify --all``.

``snapshot_and_swap`` is the reference ChunkAdapter with two bugs at once, one
per side: its ``snapshot`` checks the object can be copied and then queues the
caller's object itself (R4: a mutation after ``save_async`` reaches the
payload), and its receiver's ``poll_ready`` copies the ready lists instead of
swapping them out (R15, as ``broken_stateful:poll_no_swap``). By default
verify reports the first confirmed violation; ``--all`` reports both, each as
a root cause of its own.
"""

from __future__ import annotations

import copy
from typing import Any

from chunk_adapter.adapter import ChunkAdapter
from tests.quality.broken_stateful import PollNoSwap


def checked_but_not_copied(obj: Any) -> Any:
    """Fails at the call for an object that cannot be copied (R21 holds), but returns the
    caller's object, not the copy (BUG: R4)."""
    copy.deepcopy(obj)
    return obj


def snapshot_and_swap(
    connector: Any, *, stage_id: int, src_stage_id: int | None = None, build_payload: Any = None
) -> ChunkAdapter:
    """No snapshot (R4) and no swap in ``poll_ready`` (R15)."""
    return PollNoSwap(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        snapshot=checked_but_not_copied,
    )


ROOT_RULES = ({"R4"}, {"R15", "R14"})
"""The root rule each bug is reported under (R15's stale copies can show as R14 first)."""
