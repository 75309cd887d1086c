"""Small helpers the three holdout6 designs share: option checks, keys, defaults."""

from __future__ import annotations

import copy
import logging
import math
from typing import Any

LOG = logging.getLogger("holdout6")


def default_build(request_id: str, snapshot: Any, is_final: bool) -> Any:
    return snapshot


def check_rid(request_id: object) -> None:
    if not isinstance(request_id, str):
        raise TypeError(f"request_id must be a str, got {type(request_id).__name__}")


def check_final(is_final: object) -> None:
    if not isinstance(is_final, bool):
        raise TypeError(f"is_final must be a bool, got {type(is_final).__name__}")


def check_stage(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    return value


def seconds(name: str, value: object, *, zero_ok: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {type(value).__name__}")
    try:
        f = float(value)
    except OverflowError:
        raise ValueError(f"{name} is too large") from None
    if not math.isfinite(f) or f < 0 or (f == 0 and not zero_ok):
        raise ValueError(f"{name} must be a finite number of seconds > 0, got {f!r}")
    return f


def tries(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"put_tries must be an int >= 1, got {value!r}")
    return value


class Settings:
    """The options every design takes, checked once (bad ones refused at construction)."""

    def __init__(
        self,
        connector: Any,
        stage_id: object,
        src_stage_id: object,
        build_payload: object,
        *,
        wait_timeout: object = 0.1,
        idle_backoff: object = 0.001,
        join_timeout: object = 1.0,
        put_tries: object = 3,
        put_backoff: object = 0.005,
        put_backoff_max: object = 0.1,
        snapshot: object = None,
        logger: object = None,
    ) -> None:
        if not (
            callable(getattr(connector, "put", None)) and callable(getattr(connector, "get", None))
        ):
            raise TypeError("connector needs put(key, value) and get(key)")
        self.connector = connector
        self.stage_id = check_stage("stage_id", stage_id)
        self.src_stage_id = (
            self.stage_id - 1 if src_stage_id is None else check_stage("src_stage_id", src_stage_id)
        )
        if build_payload is not None and not callable(build_payload):
            raise TypeError("build_payload must be callable or None")
        self.build = build_payload if build_payload is not None else default_build
        self.wait_timeout = seconds("wait_timeout", wait_timeout)
        self.idle_backoff = seconds("idle_backoff", idle_backoff, zero_ok=True)
        self.join_timeout = seconds("join_timeout", join_timeout)
        self.put_tries = tries(put_tries)
        self.put_backoff = seconds("put_backoff", put_backoff, zero_ok=True)
        self.put_backoff_max = seconds("put_backoff_max", put_backoff_max, zero_ok=True)
        if snapshot is not None and not callable(snapshot):
            raise TypeError("snapshot must be callable or None")
        self.snapshot = snapshot if snapshot is not None else copy.deepcopy
        if logger is not None and not all(
            callable(getattr(logger, m, None)) for m in ("warning", "exception")
        ):
            raise TypeError("logger needs warning() and exception() (a logging.Logger)")
        self.log = logger if logger is not None else LOG

    def send_key(self, request_id: str, chunk_id: int) -> str:
        return f"{request_id}_{self.stage_id}_{chunk_id}"

    def recv_key(self, request_id: str, chunk_id: int) -> str:
        return f"{request_id}_{self.src_stage_id}_{chunk_id}"

    def backoff(self, failures: int) -> float:
        """Pause before try number ``failures + 1`` (doubling, capped; no overflow)."""
        return min(self.put_backoff * (2 ** min(failures - 1, 30)), self.put_backoff_max)
