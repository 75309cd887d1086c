"""Argument checks shared by the adapter's public calls (rule R21).

Each raises at the call that passed the bad value, naming the value and the fix.
"""

from __future__ import annotations

from typing import Any

from .errors import InvalidType, InvalidValue

__all__ = ["check_final", "check_request_id", "check_stage", "non_negative", "positive"]


def check_request_id(request_id: Any, call: str) -> str:
    if not isinstance(request_id, str):
        raise InvalidType(
            f"{call}: request_id must be a str, got {request_id!r} "
            f"({type(request_id).__name__}); pass str(request_id) if it is a number"
        )
    return request_id


def check_final(is_final: Any, call: str) -> bool:
    if not isinstance(is_final, bool):
        raise InvalidType(
            f"{call}: is_final must be a bool, got {is_final!r} ({type(is_final).__name__}); "
            "pass True for the stream's last chunk and False otherwise"
        )
    return is_final


def check_stage(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidType(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    return value


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidType(f"{name} must be a number of seconds, got {value!r}")
    return float(value)


def positive(name: str, value: Any) -> float:
    number = _number(name, value)
    if not number > 0:
        raise InvalidValue(f"{name} must be > 0 seconds, got {name}={value!r}")
    return number


def non_negative(name: str, value: Any) -> float:
    number = _number(name, value)
    if not number >= 0:
        raise InvalidValue(f"{name} must be >= 0 seconds, got {name}={value!r}")
    return number
