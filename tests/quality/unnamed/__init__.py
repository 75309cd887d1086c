"""Twelve deliberately broken adapters of bug kinds tests/quality had no adapter for.

Each module holds one adapter with ONE bug and exposes it as
``make(connector, *, stage_id, src_stage_id=None, build_payload=None, **options)``.
They are meant for measuring the suite blind: nothing in the suite was written to
find these particular bugs. Four are written from scratch on ``threading``
(``queue_worker``, ``records``, ``evented``, ``keyed_inbox``); the others change one
part of the reference ChunkAdapter. Each module's docstring says what the bug is and
when it shows; ``test_unnamed_demos.py`` shows each one happening on a scripted run
and each adapter passing the plain happy path. docs/quality.md lists them.

``UNNAMED`` maps each factory's spec to the rules a correct report may name: the rule
the bug breaks, and the rules its symptom may show up under first.
"""

from __future__ import annotations

__all__ = ["UNNAMED"]

UNNAMED: dict[str, set[str]] = {
    # (a) shows only in a configuration the usual checks rarely use
    "tests.quality.unnamed.config_factory:make": {"R1", "R23"},
    "tests.quality.unnamed.queue_worker:make": {"R10", "R9"},
    "tests.quality.unnamed.evented:make": {"R17", "R20", "R23"},
    # (b) shows only under a fault longer than a short one
    "tests.quality.unnamed.patient:make": {"R10", "R11", "R23"},
    "tests.quality.unnamed.records:make": {"R10", "R9", "R23"},
    "tests.quality.unnamed.retiring:make": {"R13", "R22", "R23"},
    "tests.quality.unnamed.timed_build:make": {"R7", "R5", "R23"},
    # (c) a race between two lock sections
    "tests.quality.unnamed.two_step_commit:make": {"R16", "R24"},
    "tests.quality.unnamed.burst:make": {"R15", "R14", "R23"},
    "tests.quality.unnamed.batched:make": {"R6"},
    # (d) other
    "tests.quality.unnamed.keyed_inbox:make": {"R15", "R14"},
    "tests.quality.unnamed.lazy_cancel:make": {"R6", "R27"},
}
