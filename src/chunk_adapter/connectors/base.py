"""The connector protocol: what an adapter talks to.

A connector is a key-value store with two operations::

    put(key: str, value: dict) -> None    # may raise; a put that raised stored nothing
    get(key: str) -> dict | None          # None: nothing under that key (yet)

A ``get`` may consume the value (shared-memory connectors do). Keys never
collide across requests, stages or chunks: see :func:`chunk_key`.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["Connector", "chunk_key"]


@runtime_checkable
class Connector(Protocol):
    """Anything with ``put(key, value)`` and ``get(key)`` (see module doc)."""

    def put(self, key: str, value: dict[str, Any]) -> None: ...

    def get(self, key: str) -> dict[str, Any] | None: ...


def chunk_key(request_id: str, stage_id: int, chunk_id: int) -> str:
    """The key of one chunk: ``f"{request_id}_{stage_id}_{chunk_id}"`` (rule R1).

    The sender passes its own ``stage_id``; the receiver passes its
    ``src_stage_id``, so both name the same chunk with the same key.
    """
    return f"{request_id}_{stage_id}_{chunk_id}"
