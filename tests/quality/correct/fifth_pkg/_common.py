"""Small pure helpers shared by the designs (no threads, no clocks here)."""

from __future__ import annotations

import math
from typing import Any


def identity_payload(request_id: str, snapshot: Any, is_final: bool) -> Any:
    """The default ``build_payload``: the snapshot itself."""
    return snapshot


def chunk_key(request_id: str, stage_id: int, chunk_id: int) -> str:
    return f"{request_id}_{stage_id}_{chunk_id}"


def check_request_id(request_id: object, where: str) -> None:
    if not isinstance(request_id, str):
        raise TypeError(f"{where}: request_id must be a str, got {type(request_id).__name__}")


def check_is_final(is_final: object, where: str) -> None:
    if not isinstance(is_final, bool):
        raise TypeError(f"{where}: is_final must be a bool, got {type(is_final).__name__}")


def seconds(name: str, value: object, *, allow_zero: bool = True) -> float:
    """A finite, non-negative number of seconds (ValueError/TypeError otherwise)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {value!r:.40}")
    result = float(value)
    if not math.isfinite(result) or result < 0 or (result == 0 and not allow_zero):
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r:.40}")
    return result


def positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r:.40}")
    return value


def is_final_value(value: Any) -> bool:
    """Whether a received wire value is its stream's final chunk."""
    return isinstance(value, dict) and bool(value.get("finished"))


def factory_for(cls: Any) -> Any:
    """The contract factory for adapter class *cls*: it names the options it takes
    (``put_tries``, ``put_backoff``, ``idle_backoff``, ``wait_timeout``,
    ``join_timeout``) and ignores any other keyword."""

    def make(
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Any = None,
        put_tries: int = 3,
        put_backoff: float = 0.005,
        idle_backoff: float = 0.001,
        wait_timeout: float = 0.1,
        join_timeout: float = 1.0,
        **_ignored: Any,
    ) -> Any:
        return cls(
            connector,
            stage_id=stage_id,
            src_stage_id=src_stage_id,
            build_payload=build_payload,
            put_tries=put_tries,
            put_backoff=put_backoff,
            idle_backoff=idle_backoff,
            wait_timeout=wait_timeout,
            join_timeout=join_timeout,
        )

    make.__qualname__ = make.__name__ = "make"
    make.__doc__ = f"Build a {cls.__name__} (the contract's factory signature)."
    return make
