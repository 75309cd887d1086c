"""Small helpers the three holdout7 designs share: option checks, keys, input checks.

No threads and no shared state here; each design does its own synchronisation.
"""

from __future__ import annotations

import copy
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

DEFAULTS = {
    "wait_timeout": 0.1,
    "idle_backoff": 0.001,
    "join_timeout": 1.0,
    "put_tries": 3,
    "put_backoff": 0.005,
    "put_backoff_max": 0.1,
}


def default_build(request_id: str, snapshot: Any, is_final: bool) -> Any:
    return snapshot


def _positive(name: str, value: Any, *, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"{name} must be a finite number of seconds, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return float(value)


class Settings:
    """The options every design takes (anything else: TypeError at the factory)."""

    def __init__(
        self,
        connector: Any,
        stage_id: Any,
        src_stage_id: Any,
        build_payload: Any,
        wait_timeout: float = DEFAULTS["wait_timeout"],
        idle_backoff: float = DEFAULTS["idle_backoff"],
        join_timeout: float = DEFAULTS["join_timeout"],
        put_tries: int = DEFAULTS["put_tries"],
        put_backoff: float = DEFAULTS["put_backoff"],
        put_backoff_max: float = DEFAULTS["put_backoff_max"],
        snapshot: Callable[[Any], Any] | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        if not (
            callable(getattr(connector, "put", None)) and callable(getattr(connector, "get", None))
        ):
            raise TypeError(f"connector needs put(key, value) and get(key), got {connector!r}")
        if isinstance(stage_id, bool) or not isinstance(stage_id, int):
            raise TypeError(f"stage_id must be an int, got {stage_id!r}")
        if src_stage_id is None:
            src_stage_id = stage_id - 1
        elif isinstance(src_stage_id, bool) or not isinstance(src_stage_id, int):
            raise TypeError(f"src_stage_id must be an int or None, got {src_stage_id!r}")
        if build_payload is not None and not callable(build_payload):
            raise TypeError(f"build_payload must be callable, got {build_payload!r}")
        if isinstance(put_tries, bool) or not isinstance(put_tries, int):
            raise TypeError(f"put_tries must be an int, got {put_tries!r}")
        if put_tries < 1:
            raise ValueError(f"put_tries must be >= 1, got {put_tries!r}")
        if snapshot is not None and not callable(snapshot):
            raise TypeError(f"snapshot must be callable, got {snapshot!r}")
        self.connector = connector
        self.stage_id = stage_id
        self.src_stage_id = src_stage_id
        self.build_payload = build_payload or default_build
        self.wait_timeout = _positive("wait_timeout", wait_timeout)
        self.idle_backoff = _positive("idle_backoff", idle_backoff, allow_zero=True)
        self.join_timeout = _positive("join_timeout", join_timeout, allow_zero=True)
        self.put_tries = put_tries
        self.put_backoff = _positive("put_backoff", put_backoff, allow_zero=True)
        self.put_backoff_max = max(
            self.put_backoff, _positive("put_backoff_max", put_backoff_max, allow_zero=True)
        )
        self.snapshot = snapshot or copy.deepcopy
        self.logger = logger or logging.getLogger("holdout7")


def send_key(s: Settings, request_id: str, chunk_id: int) -> str:
    return f"{request_id}_{s.stage_id}_{chunk_id}"


def recv_key(s: Settings, request_id: str, chunk_id: int) -> str:
    return f"{request_id}_{s.src_stage_id}_{chunk_id}"


def check_id(request_id: Any) -> None:
    if not isinstance(request_id, str):
        raise TypeError(
            f"request_id must be a str, got {type(request_id).__name__}: {request_id!r}"
        )


def check_final(is_final: Any) -> None:
    if not isinstance(is_final, bool):
        raise TypeError(f"is_final must be a bool, got {type(is_final).__name__}: {is_final!r}")


def is_finished(value: Any) -> bool:
    try:
        return value.get("finished") is True
    except Exception:  # not a dict: never a final
        return False


def join_all(threads: list[threading.Thread], timeout: float) -> None:
    """Join every thread against ONE shared deadline (R18)."""
    deadline = time.monotonic() + timeout
    me = threading.current_thread()
    for t in threads:
        if t is me or t is None:
            continue
        t.join(max(0.0, deadline - time.monotonic()))


class Counters:
    """Plain counters; each is written by one thread only (the side that owns it)."""

    def __init__(self, *names: str) -> None:
        for n in names:
            setattr(self, n, 0)

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


def expose_options(adapter: Any, s: Settings) -> None:
    """Show the settings in use under the options' names (seconds, tries)."""
    for name in (
        "wait_timeout",
        "idle_backoff",
        "join_timeout",
        "put_tries",
        "put_backoff",
        "put_backoff_max",
    ):
        setattr(adapter, name, getattr(s, name))
