"""A scenario as one short string, and back: how a generated world travels in a replay string.

``encode(scenario)`` is the scenario's fields and ops as compact JSON,
compressed and written in URL-safe base64 (no ``:``, so it is one field of a
``sim:WORLD:SCHEDULE`` reproducer). Payloads are JSON values plus ``bytes``,
``bytearray`` and tuples (the worlds' are: ints, strings, bytes, ``None``, lists,
tuples and string-keyed dicts), written as ``{"__bytes__": hex}``,
``{"__bytearray__": hex}`` and ``{"__tuple__": [...]}`` (JSON would make a tuple a
list, and a world replayed with a list in its place is another world).
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from dataclasses import fields
from typing import Any

from ...errors import InvalidValue
from .scenario import Op, Scenario

__all__ = ["decode", "encode"]

_OP_DEFAULTS = {f.name: f.default for f in fields(Op)}
_SCENARIO_SKIP = ("ops", "name", "question")


def encode(scenario: Scenario) -> str:
    """*scenario* as a URL-safe string (module doc)."""
    ops = [
        {
            k: _tagged(getattr(op, k))
            for k, v in _OP_DEFAULTS.items()
            if getattr(op, k) != v or k == "kind"
        }
        for op in scenario.ops
    ]
    data: dict[str, Any] = {"ops": ops, "name": scenario.name}
    for f in fields(Scenario):
        if f.name not in _SCENARIO_SKIP:
            value = getattr(scenario, f.name)
            data[f.name] = list(value) if isinstance(value, tuple) else value
    raw = json.dumps(data, separators=(",", ":"), sort_keys=True, default=_bytes).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


def decode(text: str) -> Scenario:
    """The scenario :func:`encode` wrote; :class:`InvalidValue` naming the fix otherwise."""
    try:
        raw = zlib.decompress(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        data = json.loads(raw, object_hook=_unbytes)
        ops = tuple(Op(**op) for op in data.pop("ops"))
        data["stage_ids"] = tuple(data.get("stage_ids", ()))
        return Scenario(ops=ops, **data)
    except (ValueError, TypeError, KeyError, binascii.Error, zlib.error) as exc:
        raise InvalidValue(
            f"cannot read the world {text[:40]!r}... ({exc}); paste the whole replay string "
            "from the report's `reproduce with:` line"
        ) from None


def _tagged(value: Any) -> Any:
    """*value* with every tuple in it written as ``{"__tuple__": [...]}``."""
    if isinstance(value, tuple):
        return {"__tuple__": [_tagged(item) for item in value]}
    if isinstance(value, list):
        return [_tagged(item) for item in value]
    if isinstance(value, dict):
        return {key: _tagged(item) for key, item in value.items()}
    return value


def _bytes(value: Any) -> dict[str, str]:
    if isinstance(value, (bytes, bytearray)):
        return {f"__{type(value).__name__}__": value.hex()}
    raise TypeError(f"a world's payload must be JSON or bytes, got {value!r}")


def _unbytes(obj: dict[str, Any]) -> Any:
    if len(obj) == 1:
        if "__bytes__" in obj:
            return bytes.fromhex(obj["__bytes__"])
        if "__bytearray__" in obj:
            return bytearray.fromhex(obj["__bytearray__"])
        if "__tuple__" in obj:
            return tuple(obj["__tuple__"])
    return obj
