"""Argument checks shared by the adapter's public calls (rules R21, R25).

Each raises at the call that passed the bad value, naming the value and the fix.
Values are shown through :func:`short_repr`, which never builds the full repr
of a huge object: an error message costs microseconds whatever was passed.
"""

from __future__ import annotations

import itertools
import math
import reprlib
from typing import Any

from .errors import InvalidType, InvalidValue

__all__ = [
    "check_final",
    "check_request_id",
    "check_stage",
    "non_negative",
    "optional_positive",
    "positive",
    "short_repr",
]

_REPR_LIMIT = 80


def _int_repr(value: int) -> str:
    if value.bit_length() > 128:  # repr() of over 4300 digits raises; any big one is slow
        return f"<int of {value.bit_length()} bits>"
    return repr(value)


class _Repr(reprlib.Repr):
    """``reprlib.Repr`` without sorting dicts and sets (sorting a million keys is slow)."""

    def repr_int(self, x: int, level: int) -> str:
        return _int_repr(x)

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        items = itertools.islice(x.items(), self.maxdict)
        pieces = [f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}" for k, v in items]
        return "{" + ", ".join(pieces) + (", ...}" if len(x) > self.maxdict else "}")

    def _repr_set(self, x: set[Any] | frozenset[Any], level: int, left: str, right: str) -> str:
        if level <= 0:
            return left + "..." + right
        pieces = [self.repr1(v, level - 1) for v in itertools.islice(x, self.maxset)]
        return left + ", ".join(pieces) + (", ..." if len(x) > self.maxset else "") + right

    def repr_set(self, x: set[Any], level: int) -> str:
        return self._repr_set(x, level, "{", "}") if x else "set()"

    def repr_frozenset(self, x: frozenset[Any], level: int) -> str:
        return self._repr_set(x, level, "frozenset({", "})") if x else "frozenset()"


_REPR = _Repr()
_REPR.maxstring = _REPR.maxother = _REPR_LIMIT
_REPR.maxlong = 40
# Types whose repr reprlib builds piecewise (bounded work). For any other type
# the object's own __repr__ runs, which may be slow or may raise.
_BOUNDED = (str, bytes, bytearray, list, tuple, dict, set, frozenset, float, bool, type(None))
_SIZED = (str, bytes, bytearray, list, tuple, dict, set, frozenset)


def short_repr(value: Any, limit: int = _REPR_LIMIT) -> str:
    """A repr of *value* of at most about *limit* characters, built in bounded time.

    Builtin containers and strings are cut while they are rendered
    (``reprlib``); subclasses of them are described by type and length; a big
    ``int`` by its size (Python refuses to print one of more than 4300
    digits); another object's own ``__repr__`` is used, cut to *limit*, or
    ``<Type object>`` if it raises.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return _int_repr(value)
    if type(value) in _BOUNDED:
        text = _REPR.repr(value)
    elif isinstance(value, _SIZED):  # a subclass: its repr may be the builtin's, unbounded
        return f"<{type(value).__name__} of length {len(value)}>"
    else:
        try:
            text = repr(value)
        except Exception:
            return f"<{type(value).__name__} object>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_request_id(request_id: Any, call: str) -> str:
    if not isinstance(request_id, str):
        raise InvalidType(
            f"{call}: request_id must be a str, got {short_repr(request_id)} "
            f"({type(request_id).__name__}); pass str(request_id) if it is a number"
        )
    return request_id


def check_final(is_final: Any, call: str) -> bool:
    if not isinstance(is_final, bool):
        raise InvalidType(
            f"{call}: is_final must be a bool, got {short_repr(is_final)} "
            f"({type(is_final).__name__}); pass True for the stream's last chunk and False "
            "otherwise"
        )
    return is_final


def check_stage(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidType(
            f"{name} must be an int, got {short_repr(value)} ({type(value).__name__})"
        )
    return value


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidType(
            f"{name} must be a number of seconds, got {short_repr(value)} "
            f"({type(value).__name__}); pass e.g. {name}=0.5"
        )
    try:
        number = float(value)
    except OverflowError:  # an int too big for a float
        number = math.inf
    if not math.isfinite(number):
        raise InvalidValue(
            f"{name} must be a finite number of seconds, got {name}={short_repr(value)}; "
            "a wait that never ends cannot be interrupted by stop(): pass a finite bound "
            "such as 1.0"
        )
    return number


def positive(name: str, value: Any) -> float:
    number = _number(name, value)
    if not number > 0:
        raise InvalidValue(f"{name} must be > 0 seconds, got {name}={short_repr(value)}")
    return number


def non_negative(name: str, value: Any) -> float:
    number = _number(name, value)
    if not number >= 0:
        raise InvalidValue(f"{name} must be >= 0 seconds, got {name}={short_repr(value)}")
    return number


def optional_positive(name: str, value: Any) -> float | None:
    """``None`` (the feature is off) or a finite number of seconds > 0."""
    return None if value is None else positive(name, value)
