"""Adapters with several seeded bugs at once, for ``verify --write-baseline / --baseline``.

``five_bugs`` is the reference ChunkAdapter with five independent bugs of
tests/quality/broken_stateful.py, one per method: a commit without the token
check (R16), ``poll_ready`` without the swap (R15), the chunk id bumped before
the put (R9), ``load_async`` resetting a registration (R12) and a cancelled
final dropped (R6). ``six_bugs`` adds a sixth (no snapshot at ``save_async``,
R4); ``four_bugs`` is ``five_bugs`` with the ``poll_ready`` bug fixed. A
baseline written on ``five_bugs`` must pass it, fail ``six_bugs`` naming only
the snapshot bug, and call the ``poll_ready`` entry stale on ``four_bugs``.
"""

from __future__ import annotations

from tests.quality.broken_stateful import (
    FinalDroppedOnCancel,
    IdBumpedBeforePut,
    LoadNotIdempotent,
    MissingSnapshot,
    MissingTokenCheck,
    PollNoSwap,
    _factory,
)

FOUR = (MissingTokenCheck, IdBumpedBeforePut, LoadNotIdempotent, FinalDroppedOnCancel)


class FourBugs(*FOUR):  # type: ignore[misc]
    """Four of the five: the ``poll_ready`` bug fixed."""


class FiveBugs(PollNoSwap, *FOUR):  # type: ignore[misc]
    """Five independent bugs, one per method (module doc)."""


class SixBugs(MissingSnapshot, FiveBugs):
    """The five and a sixth: no snapshot at ``save_async`` (R4)."""


four_bugs = _factory(FourBugs, "four_bugs")
five_bugs = _factory(FiveBugs, "five_bugs")
six_bugs = _factory(SixBugs, "six_bugs")
