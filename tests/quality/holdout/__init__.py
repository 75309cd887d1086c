"""Ten hold-out broken adapters (one bug each), written from the contract alone.

A separate author wrote them, with three correct adapters now in the correct catalogue
(``tests/quality/correct/pq_sequenced.py``, ``request_objects.py``, ``due_heap.py``),
from docs/contract.md, SPEC.md, the README and the correct catalogue's factories only,
never from the suite's checks: so verify's kill rate on them measures what it finds
without a check written for it (docs/quality.md, "Ten hold-out bugs"). Each broken
module is a whole copy of one of those designs with ONE bug (its docstring's first line
says which, and the rule); ``HOLDOUT`` maps each to the rules a correct report may name.
"""

from __future__ import annotations

HOLDOUT: dict[str, set[str]] = {
    "tests.quality.holdout.pq_first_chunk_priority:make": {"R5", "R9", "R11"},
    "tests.quality.holdout.pq_src_plus_one:make": {"R1"},
    "tests.quality.holdout.pq_snapshot_depth2:make": {"R4"},
    "tests.quality.holdout.obj_cancel_builds_final:make": {"R6"},
    "tests.quality.holdout.obj_cancel_stats_leak:make": {"R24"},
    "tests.quality.holdout.obj_lock_across_get:make": {"R3"},
    "tests.quality.holdout.heap_fixed_rate_rounds:make": {"R17"},
    "tests.quality.holdout.heap_retry_budget:make": {"R10"},
    "tests.quality.holdout.heap_handoff_inflight:make": {"R16", "R13"},
    "tests.quality.holdout.heap_drop_keeps_position:make": {"R9", "R10", "R23"},
}
MISSED = {
    "tests.quality.holdout.heap_fixed_rate_rounds:make": (
        "the idle pause is counted from the start of a round, so only rounds of 1 ms or "
        "more skip it; then the gets per request per second are those of a correct "
        "per-request pacing (tests/quality/correct/due_heap.py), which no generic check "
        "can tell apart"
    ),
}
"""Bugs verify does not find, and why (each an ``xfail(strict=True)``: a find is news)."""

__all__ = ["HOLDOUT", "MISSED"]
