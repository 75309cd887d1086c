"""A serializer that cannot run code: msgpack, with ExtType frames for what msgpack lacks.

``msgpack_dumps(value)`` stores ``None``, ``bool``, ``int`` (any size), ``float``
(``nan`` and ``inf`` too), ``str`` (lone surrogates too), ``bytes``,
``bytearray``, ``list``, ``tuple``, ``dict`` (keys of any of these types),
``set``, ``frozenset``, ``datetime``/``date``/``time``/``timedelta`` (with a
fixed-offset or ``zoneinfo`` time zone), ``Decimal``, dataclasses, numpy arrays
(bool and numeric dtypes, any shape and memory order) and numpy scalars, and
torch tensors (dense, on the CPU), nested freely; ``msgpack_loads(bytes)``
gives back a value equal to the one stored, of the same types (arrays come back
writable and in C order). A subclass of one of the built-in types above is
stored as that type (an ``IntEnum`` member comes back an ``int``, a namedtuple
a ``tuple``, an ``OrderedDict`` a ``dict``), as the ``safe-json`` serializer
did. Anything else raises ``TypeError`` naming its type, where it sits in the
value, and the fix.

Reading builds only those types and never runs code: no pickle anywhere, numpy
and torch are imported by their fixed names when a value holds an array, and a
dataclass is rebuilt only as a class already imported in the reading process,
without calling its ``__init__`` (:mod:`._msgpack_values`).

Encoding. msgpack's own types are written as msgpack; each other value is an
``ExtType`` frame whose payload is a small msgpack document of its parts (a
tuple: its items; a datetime: its fields; a dataclass: module, name, fields).
An array's bytes do not go in its frame: they are out-of-band buffers written
once, beside the document (:mod:`._msgpack_frames`, :mod:`._msgpack_arrays`),
so a large array costs one copy on each side, as pickle does.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any

import msgpack
from msgpack import ExtType

from . import _msgpack_values as values
from ._msgpack_arrays import (
    ARRAY,
    SCALAR,
    TENSOR,
    encode_array,
    encode_scalar,
    encode_tensor,
    numpy_kind,
    read_array,
    read_scalar,
    read_tensor,
    torch_tensor,
)
from ._msgpack_frames import read, take, write

__all__ = ["ACCEPTS", "msgpack_dumps", "msgpack_loads"]

ACCEPTS = (
    "None, bool, int, float, str, bytes, bytearray, list, tuple, dict, set, frozenset, "
    "datetime, date, time, timedelta, Decimal, dataclasses, numpy arrays and scalars of "
    "bool and numeric dtypes, CPU torch tensors"
)
TUPLE, SET, FROZENSET, BYTEARRAY, BIGINT, DECIMAL = 1, 2, 3, 4, 5, 6
DATETIME, DATE, TIME, TIMEDELTA, DATACLASS = 7, 8, 9, 10, 11
_NATIVE = frozenset({str, int, float, bool, type(None), bytes})  # msgpack writes these


def _big_int(value: object) -> ExtType:
    """msgpack's ``default``: the encoder hands it only ints beyond 64 bits."""
    if type(value) is int:
        return ExtType(BIGINT, values.int_to_bytes(value))
    raise TypeError(f"unexpected {type(value).__name__} after encoding")  # a bug here


def _packb(tree: Any) -> bytes:
    """A frame's payload: *tree* packed with the settings of :func:`._msgpack_frames.packer`."""
    data: bytes = msgpack.packb(
        tree, default=_big_int, use_bin_type=True, strict_types=True, unicode_errors="surrogatepass"
    )
    return data


class _Refused(TypeError):
    """A value the format cannot store; ``path`` says where it sits (outermost first)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.path: list[str] = []

    def __str__(self) -> str:
        where = f" (at value{''.join(self.path)})" if self.path else ""
        return self.message + where


class _Encoder:
    """Turns a value into msgpack's types and ExtType frames; collects array buffers."""

    def __init__(self) -> None:
        self.buffers: list[memoryview] = []

    def encode(self, v: Any) -> Any:
        kind = type(v)
        if kind in _NATIVE:
            return v
        if kind is list:
            return self.items(v)
        if kind is dict:
            return self.mapping(v)
        method = _EXACT.get(kind)
        try:
            return method(self, v) if method is not None else self.other(v)
        except _Refused:
            raise
        except TypeError as exc:  # the value cannot be stored: say where it is
            raise _Refused(str(exc)) from None

    def items(self, v: Iterable[Any]) -> list[Any]:
        if type(v) is list:
            for x in v:
                if type(x) not in _NATIVE:
                    break
            else:
                return v  # the common case: plain scalars, written by msgpack as they are
        out = []
        for i, x in enumerate(v):
            try:
                out.append(self.encode(x))
            except _Refused as exc:
                exc.path.insert(0, f"[{i}]")
                raise
        return out

    def mapping(self, v: dict[Any, Any]) -> dict[Any, Any]:
        out = {}
        for k, x in v.items():
            try:
                out[k if type(k) in _NATIVE else self.encode(k)] = self.encode(x)
            except _Refused as exc:
                exc.path.insert(0, f"[{k!r}]")
                raise
        return out

    def frame(self, code: int, items: Iterable[Any]) -> ExtType:
        return ExtType(code, _packb(self.items(items)))

    def out_of_band(self, v: bytearray) -> ExtType:
        self.buffers.append(memoryview(v))
        return ExtType(BYTEARRAY, _packb(len(self.buffers) - 1))

    def dataclass(self, v: object) -> ExtType:
        module, qualname = values.dataclass_name(v)
        fields = {}
        for name, x in values.dataclass_fields(v).items():
            try:
                fields[name] = self.encode(x)
            except _Refused as exc:
                exc.path.insert(0, f".{name}")
                raise
        return ExtType(DATACLASS, _packb([module, qualname, fields]))

    def other(self, v: Any) -> Any:
        """A value of no exact type the table knows: arrays, dataclasses, subclasses."""
        kind = numpy_kind(v)
        if kind == "array":
            return encode_array(v, self.buffers, _packb)
        if kind == "scalar":
            frame = encode_scalar(v, _packb)
            if frame is not None:
                return frame
        elif torch_tensor(v):
            return encode_tensor(v, self.buffers, _packb)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return self.dataclass(v)
        for base, as_base in _BASES:
            if isinstance(v, base):
                return self.encode(as_base(v))
        kind_ = type(v)
        raise _Refused(
            f"the safe-msgpack serializer cannot store a {kind_.__module__}.{kind_.__qualname__}"
            f" object; it stores {ACCEPTS}"
        )


_EXACT: dict[type, Callable[[_Encoder, Any], Any]] = {
    tuple: lambda e, v: e.frame(TUPLE, v),
    set: lambda e, v: e.frame(SET, v),
    frozenset: lambda e, v: e.frame(FROZENSET, v),
    bytearray: _Encoder.out_of_band,
    Decimal: lambda e, v: ExtType(DECIMAL, str(v).encode("ascii")),
    dt.datetime: lambda e, v: ExtType(DATETIME, _packb(values.to_datetime(v))),
    dt.date: lambda e, v: ExtType(DATE, _packb(values.to_date(v))),
    dt.time: lambda e, v: ExtType(TIME, _packb(values.to_time(v))),
    dt.timedelta: lambda e, v: ExtType(TIMEDELTA, _packb(values.to_timedelta(v))),
}


def _as_datetime(v: dt.datetime) -> dt.datetime:
    return dt.datetime(
        v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond, v.tzinfo, fold=v.fold
    )


# A subclass of a stored type is stored as that type (datetime before date: it is one).
_BASES: tuple[tuple[type, Callable[[Any], Any]], ...] = (
    (int, int.__int__),
    (float, float.__float__),
    (str, str.__str__),
    (bytes, lambda v: b"" + v),
    (bytearray, bytearray),
    (list, list),
    (tuple, tuple),
    (dict, dict),
    (set, set),
    (frozenset, frozenset),
    (dt.datetime, lambda v: _as_datetime(v)),
    (dt.date, lambda v: dt.date(v.year, v.month, v.day)),
    (dt.time, lambda v: dt.time(v.hour, v.minute, v.second, v.microsecond, v.tzinfo, fold=v.fold)),
    (dt.timedelta, lambda v: dt.timedelta(v.days, v.seconds, v.microseconds)),
    (Decimal, lambda v: Decimal(Decimal.__str__(v))),
)


class _Decoder:
    """Rebuilds a value from its document; each array takes its buffer, once."""

    def __init__(self, buffers: list[memoryview]) -> None:
        self.buffers = buffers
        self.taken: set[int] = set()

    def unpack(self, data: bytes | memoryview) -> Any:
        return msgpack.unpackb(
            data,
            ext_hook=self.ext,
            strict_map_key=False,  # dict keys of any stored type
            unicode_errors="surrogatepass",
            timestamp=3,  # msgpack's own timestamp (never written) reads as a datetime
        )

    def ext(self, code: int, data: bytes) -> Any:
        read_frame = _READERS.get(code)
        if read_frame is None:
            raise ValueError(f"an ExtType frame of code {code}, which this format never writes")
        return read_frame(self, data)

    def items(self, data: bytes) -> list[Any]:
        found = self.unpack(data)
        if type(found) is not list:
            raise ValueError(f"a container frame holds a {type(found).__name__}, not items")
        return found

    def dataclass(self, data: bytes) -> object:
        found = self.unpack(data)
        if type(found) is not list or len(found) != 3:
            raise ValueError("a malformed dataclass frame")
        return values.make_dataclass(*found)


_READERS: dict[int, Callable[[_Decoder, bytes], Any]] = {
    TUPLE: lambda d, b: tuple(d.items(b)),
    SET: lambda d, b: set(d.items(b)),
    FROZENSET: lambda d, b: frozenset(d.items(b)),
    BYTEARRAY: lambda d, b: bytearray(take(d.buffers, d.taken, d.unpack(b))),
    BIGINT: lambda d, b: values.int_from_bytes(b),
    DECIMAL: lambda d, b: values.decimal_from(b),
    DATETIME: lambda d, b: values.from_datetime(d.unpack(b)),
    DATE: lambda d, b: values.from_date(d.unpack(b)),
    TIME: lambda d, b: values.from_time(d.unpack(b)),
    TIMEDELTA: lambda d, b: values.from_timedelta(d.unpack(b)),
    DATACLASS: _Decoder.dataclass,
    ARRAY: lambda d, b: read_array(d.unpack(b), d.buffers, d.taken),
    SCALAR: lambda d, b: read_scalar(d.unpack(b)),
    TENSOR: lambda d, b: read_tensor(d.unpack(b), d.buffers, d.taken),
}


def msgpack_dumps(value: Any) -> memoryview:
    """*value*'s stored form (a read-only view; see module doc); ``TypeError`` naming a
    type it cannot store and where it sits."""
    encoder = _Encoder()
    try:
        tree = encoder.encode(value)
    except _Refused as exc:
        raise TypeError(str(exc)) from None
    return write(tree, encoder.buffers, _big_int)


def msgpack_loads(data: bytes | bytearray | memoryview) -> Any:
    """The value :func:`msgpack_dumps` stored; ``ValueError`` (or another ``Exception``)
    for bytes it did not write, and for a dataclass the reader has not imported."""
    document, buffers = read(data)
    return _Decoder(buffers).unpack(document)
