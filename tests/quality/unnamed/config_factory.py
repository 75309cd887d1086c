"""The reference adapter behind a factory that normalises its stage settings.

The team's deployment config writes ``0`` (or leaves the field out) for a setting it
does not set, so the factory reads "falsy" as "use the default" for every numeric
setting it is handed, ``src_stage_id`` included.

BUG (R1): ``src_stage_id or None`` turns an explicit ``src_stage_id=0`` into "not
given", and the reference then reads ``stage_id - 1``. With consecutive stages (a
stage-1 receiver of stage 0, or a loopback adapter) that is the same stage, so
nothing shows; a stage-2 (or later) receiver told to read stage 0 gets the keys of
stage 1 instead and never receives a chunk (the stream never completes: R23).
"""

from __future__ import annotations

from typing import Any

from chunk_adapter.adapter import ChunkAdapter

from ._reference import reference_options

__all__ = ["make"]


def _setting(value: int | None) -> int | None:
    """A stage setting from the config: ``0`` and ``None`` both mean "not set"."""
    return value or None  # BUG: src_stage_id=0 is a real stage, not "not set"


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Any = None,
    **options: Any,
) -> ChunkAdapter:
    """The reference ChunkAdapter, its source stage read through the config normaliser."""
    return ChunkAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=_setting(src_stage_id),
        build_payload=build_payload,
        **reference_options(options),
    )
