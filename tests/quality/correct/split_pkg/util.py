"""Helpers of the split_pkg adapter: keys, argument checks, the wire value, backoff delays."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def chunk_key(request_id: str, stage_id: int, chunk_id: int) -> str:
    """The connector key of one chunk: ``{request_id}_{stage_id}_{chunk_id}``."""
    return f"{request_id}_{stage_id}_{chunk_id}"


def need_request_id(request_id: object) -> str:
    if not isinstance(request_id, str):
        raise TypeError(f"request_id must be a str, not {type(request_id).__name__}")
    return request_id


def need_flag(is_final: object) -> bool:
    if not isinstance(is_final, bool):
        raise TypeError(f"is_final must be a bool, not {type(is_final).__name__}")
    return is_final


def wire_value(payload: Any, is_final: bool) -> dict[str, Any]:
    """Exactly what goes to the connector."""
    return {"data": payload, "finished": is_final}


def is_last(value: Any) -> bool:
    """Whether a value fetched from the connector closes its stream."""
    return isinstance(value, dict) and bool(value.get("finished"))


def backoff(first: float = 0.001, ceiling: float = 0.05) -> Iterator[float]:
    """Doubling delays between put tries, capped at *ceiling*."""
    delay = first
    while True:
        yield delay
        delay = min(delay * 2.0, ceiling)


def same_payload(request_id: str, snapshot: Any, is_final: bool) -> Any:
    """The default build_payload: the snapshot itself."""
    return snapshot
