"""A serializer that cannot run code: JSON, with tags for the types JSON lacks.

``safe_dumps(value) -> bytes`` accepts ``None``, ``bool``, ``int``, ``float``
(``nan`` and ``inf`` too), ``str``, ``bytes``, ``bytearray``, ``list``,
``tuple``, ``dict`` (keys of any of these types), ``set`` and ``frozenset``,
nested freely, and raises ``TypeError`` naming the first other type it meets.
``safe_loads(bytes)`` gives back a value equal to the one dumped, of the same
types. Reading builds only those types: bytes from an untrusted writer are
data, never code (unlike ``pickle``).

Encoding. JSON-native values are written as JSON (lists of plain scalars take
a fast path). A value of another type is a *tagged object*, a JSON object
whose first key is ``"\\u0000"`` (a key no plain dict of this format has)::

    {"\\u0000": "t", "v": [...]}          tuple
    {"\\u0000": "b", "v": "<base64>"}     bytes (``"B"``: bytearray)
    {"\\u0000": "s", "v": [...]}          set (``"f"``: frozenset)
    {"\\u0000": "d", "v": [[k, v], ...]}  a dict whose keys are not all str,
                                         or that has the key "\\u0000"
"""

from __future__ import annotations

import base64
import json
from typing import Any

__all__ = ["safe_dumps", "safe_loads"]

TAG = "\u0000"
_SCALARS = (str, int, float, bool, type(None))
_ENCODER = json.JSONEncoder(ensure_ascii=False, check_circular=False, separators=(",", ":"))


def _enc(value: Any) -> Any:
    # Inner values are decoded first (object_hook runs bottom-up), so a tuple is a
    # tuple again before the set or dict that holds it is built.
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, list):
        if all(type(x) in _SCALARS for x in value):
            return value
        return [_enc(x) for x in value]
    if isinstance(value, dict):
        if all(type(k) is str for k in value) and TAG not in value:
            return {k: _enc(v) for k, v in value.items()}
        return {TAG: "d", "v": [[_enc(k), _enc(v)] for k, v in value.items()]}
    if isinstance(value, tuple):
        return {TAG: "t", "v": [_enc(x) for x in value]}
    if isinstance(value, bytes):
        return {TAG: "b", "v": base64.b64encode(value).decode("ascii")}
    if isinstance(value, bytearray):
        return {TAG: "B", "v": base64.b64encode(value).decode("ascii")}
    if isinstance(value, frozenset):
        return {TAG: "f", "v": [_enc(x) for x in value]}
    if isinstance(value, set):
        return {TAG: "s", "v": [_enc(x) for x in value]}
    kind = type(value)
    raise TypeError(
        f"the safe-json serializer cannot store a {kind.__module__}.{kind.__qualname__} "
        "object; it stores None, bool, int, float, str, bytes, list, tuple, dict, set and "
        "frozenset"
    )


def _hook(obj: dict[str, Any]) -> Any:
    tag = obj.get(TAG)
    if tag is None:
        return obj
    if len(obj) != 2 or "v" not in obj:
        raise ValueError(f"malformed tagged object with keys {sorted(obj)[:4]}")
    v = obj["v"]
    if tag == "t":
        return tuple(v)
    if tag == "b":
        return base64.b64decode(v, validate=True)
    if tag == "B":
        return bytearray(base64.b64decode(v, validate=True))
    if tag == "s":
        return set(v)
    if tag == "f":
        return frozenset(v)
    if tag == "d":
        return {k: item for k, item in v}
    raise ValueError(f"unknown tag {tag!r}")


def safe_dumps(value: Any) -> bytes:
    """*value* as UTF-8 JSON (see module doc); ``TypeError`` for a type it cannot store."""
    return _ENCODER.encode(_enc(value)).encode("utf-8", "surrogatepass")


def safe_loads(data: bytes) -> Any:
    """The value :func:`safe_dumps` wrote; ``ValueError`` for bytes it did not write."""
    return json.loads(data.decode("utf-8", "surrogatepass"), object_hook=_hook)
