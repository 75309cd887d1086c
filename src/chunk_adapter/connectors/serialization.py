"""Turning wire values into bytes and back, for the connectors that store bytes.

A :class:`Serializer` is a ``dumps``/``loads`` pair. The default, :data:`SAFE`
(``"safe-msgpack"``), cannot run code when it reads: it is msgpack with ExtType
frames (:mod:`._safe_msgpack`) and stores what pipelines move — ``None``,
``bool``, ``int``, ``float``, ``str``, ``bytes``, ``bytearray``, ``list``,
``tuple``, ``dict`` with any such keys, ``set``, ``frozenset``, dates and times,
``Decimal``, dataclasses, numpy arrays and scalars, torch tensors — giving back
equal values of the same types; a large array costs about what pickle costs.
Bytes planted by another user or a hostile store are data, never code: a
dataclass is rebuilt only as a class the reader has already imported.
:data:`SAFE_JSON` (``"safe-json"``, the default before) is JSON with tags
(:mod:`._safe_json`), for the built-in types only. :data:`PICKLE` handles
everything ``pickle`` does, and runs whatever code the bytes name when it reads
them: pass ``serializer=PICKLE`` only when every writer of the namespace or
Redis database is trusted. Any other pair works too (``Serializer(dumps,
loads)``, a ``(dumps, loads)`` tuple, or an object with ``dumps`` and
``loads``). Sender and receiver must use the same one.

A value the serializer rejects fails the put with :class:`SerializationError`
*before* anything is stored, so "a put that raised stored nothing" holds. It
is a permanent error (R25): the adapter does not retry it.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConnectorError, InvalidType
from ._safe_json import safe_dumps, safe_loads
from ._safe_msgpack import ACCEPTS, msgpack_dumps, msgpack_loads

__all__ = [
    "PICKLE",
    "SAFE",
    "SAFE_JSON",
    "SerializationError",
    "Serializer",
    "as_serializer",
    "check_key",
    "decode_value",
    "encode_value",
]


class SerializationError(ConnectorError):
    """A value could not be turned into bytes, or bytes back into a value.

    Permanent (R25): serialising the same value again fails again.
    """

    permanent = True


def _pickle_dumps(value: Any) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


@dataclass(frozen=True)
class Serializer:
    """``dumps(value) -> bytes`` and ``loads(bytes) -> value``; ``name`` is for messages."""

    dumps: Callable[[Any], bytes | bytearray | memoryview | str]
    loads: Callable[[bytes], Any]
    name: str = "custom"


PICKLE = Serializer(dumps=_pickle_dumps, loads=pickle.loads, name="pickle")
SAFE = Serializer(dumps=msgpack_dumps, loads=msgpack_loads, name="safe-msgpack")
SAFE_JSON = Serializer(dumps=safe_dumps, loads=safe_loads, name="safe-json")


_ACCEPTS = {
    "safe-msgpack": ACCEPTS,
    "safe-json": "None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset",
    "pickle": "no locks, sockets, open files, lambdas or local classes",
}


def as_serializer(obj: object) -> Serializer:
    """Accept a :class:`Serializer`, a ``(dumps, loads)`` pair or an object with both."""
    if isinstance(obj, Serializer):
        return obj
    if isinstance(obj, tuple) and len(obj) == 2 and all(callable(f) for f in obj):
        return Serializer(dumps=obj[0], loads=obj[1])
    dumps, loads = getattr(obj, "dumps", None), getattr(obj, "loads", None)
    if callable(dumps) and callable(loads):
        return Serializer(dumps=dumps, loads=loads, name=getattr(obj, "__name__", "custom"))
    raise InvalidType(
        f"serializer must be a Serializer(dumps, loads), a (dumps, loads) pair or an object "
        f"with dumps and loads methods, got {obj!r}"
    )


def check_key(key: object, op: str) -> str:
    if not isinstance(key, str):
        raise InvalidType(f"{op}: a key is a str, got {type(key).__name__} {key!r}")
    return key


def encode_value(serializer: Serializer, key: str, value: object) -> bytes | bytearray | memoryview:
    """``serializer.dumps(value)`` as a flat buffer of bytes (what dumps returned, not
    copied: a view stays a view), or :class:`SerializationError` naming the fix."""
    try:
        data = serializer.dumps(value)
    except Exception as exc:
        raise SerializationError(
            f"put({key!r}): the {serializer.name} serializer cannot serialise this value "
            f"({type(exc).__name__}: {exc}); nothing was stored. Fix: put only data the "
            f"serializer accepts ({_ACCEPTS.get(serializer.name, 'see its documentation')}; "
            f"convert the rest in build_payload), or pass serializer=Serializer(dumps, loads) "
            f"that handles it (PICKLE only if every writer is trusted: it runs code on load)"
        ) from exc
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray)):
        return data
    if isinstance(data, memoryview):
        if not data.c_contiguous:
            return data.tobytes()
        return data if data.format == "B" and data.ndim == 1 else data.cast("B")
    raise SerializationError(
        f"put({key!r}): the {serializer.name} serializer's dumps returned "
        f"{type(data).__name__}, not bytes; nothing was stored. Fix: make dumps return bytes"
    )


def decode_value(serializer: Serializer, key: str, data: bytes) -> dict[str, Any]:
    """``serializer.loads(data)``, which must be a dict, or :class:`SerializationError`."""
    try:
        value = serializer.loads(data)
    except Exception as exc:
        raise SerializationError(
            f"get({key!r}): the {serializer.name} serializer cannot read the stored bytes "
            f"({type(exc).__name__}: {exc}). Fix: give the sender and the receiver the same "
            f"serializer (and the classes the value uses)"
        ) from exc
    if not isinstance(value, dict):
        raise SerializationError(
            f"get({key!r}): the stored value is a {type(value).__name__}, not the wire dict "
            f"{{'data': ..., 'finished': ...}}. Fix: only put wire dicts under chunk keys"
        )
    return value
