"""A correct ChunkAdapter split over a package: factory here, class in core, helpers in util."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .core import StreamBridge

__all__ = ["StreamBridge", "make"]


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Callable[[str, Any, bool], Any] | None = None,
    **options: Any,
) -> StreamBridge:
    """Build a StreamBridge; honours ``put_tries`` and ``join_timeout``, ignores other options."""
    known = {k: options[k] for k in ("put_tries", "join_timeout") if k in options}
    return StreamBridge(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **known,
    )
