"""The ``safe-msgpack`` frames of dates and times, ``Decimal``, big ints and
dataclasses: what each stores, and how reading rebuilds it without running code.

Dates and times are stored field by field (``datetime`` as year … microsecond,
``fold`` and its time zone). A time zone is kept when it is a fixed offset
(``datetime.timezone``, its name too) or a ``zoneinfo.ZoneInfo`` (by key); any
other ``tzinfo`` (pytz, dateutil) is refused at put, since it would come back
another type. ``Decimal`` is its string (``NaN``, ``-0``, ``sNaN`` included); an
int outside msgpack's 64 bits is its two's-complement bytes.

A dataclass is stored as its module, its qualified name and its fields (those
``dataclasses.fields`` lists; other attributes are not stored). Reading rebuilds
it only as a class the reading process has *already imported*: the module is
looked up in ``sys.modules`` (never imported), the name in the ``__dict__`` of
the module and of each enclosing class (no ``__getattr__`` runs), and what is
found must be a dataclass whose fields are the stored ones. The object is made
with ``object.__new__`` and its fields set with ``object.__setattr__``:
``__init__`` and ``__post_init__`` do not run, and frozen dataclasses work.
A class defined inside a function (``<locals>`` in its qualified name) cannot
be looked up that way, so it is refused at put. A class of ``__main__`` is
looked up in the reader's ``__main__``: it is found when the reader runs the
same script (threads, a forked child), otherwise get fails naming the class —
define such classes in a module both sides import.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import sys
from decimal import Decimal
from typing import Any

__all__ = [
    "dataclass_fields",
    "dataclass_name",
    "decimal_from",
    "from_date",
    "from_datetime",
    "from_time",
    "from_timedelta",
    "int_from_bytes",
    "int_to_bytes",
    "make_dataclass",
    "to_date",
    "to_datetime",
    "to_time",
    "to_timedelta",
]

_FIX_CLASS = "define the dataclass at module level, in a module both sides import"


# ------------------------------------------------------------ dates and times
def to_datetime(v: dt.datetime) -> list[Any]:
    return [v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond, v.fold,
            _zone(v.tzinfo)]  # fmt: skip


def from_datetime(m: list[Any]) -> dt.datetime:
    y, mo, d, h, mi, s, us, fold, zone = _items(m, 9, "datetime")
    return dt.datetime(y, mo, d, h, mi, s, us, tzinfo=_tzinfo(zone), fold=fold)


def to_date(v: dt.date) -> list[Any]:
    return [v.year, v.month, v.day]


def from_date(m: list[Any]) -> dt.date:
    return dt.date(*_items(m, 3, "date"))


def to_time(v: dt.time) -> list[Any]:
    return [v.hour, v.minute, v.second, v.microsecond, v.fold, _zone(v.tzinfo)]


def from_time(m: list[Any]) -> dt.time:
    h, mi, s, us, fold, zone = _items(m, 6, "time")
    return dt.time(h, mi, s, us, tzinfo=_tzinfo(zone), fold=fold)


def to_timedelta(v: dt.timedelta) -> list[Any]:
    return [v.days, v.seconds, v.microseconds]


def from_timedelta(m: list[Any]) -> dt.timedelta:
    return dt.timedelta(*_items(m, 3, "timedelta"))


def _zone(tz: dt.tzinfo | None) -> list[Any] | None:
    if tz is None:
        return None
    if type(tz) is dt.timezone:
        offset = tz.utcoffset(None)
        name = tz.tzname(None)
        plain = dt.timezone(offset)
        return ["fixed", *to_timedelta(offset), None if name == plain.tzname(None) else name]
    zoneinfo = sys.modules.get("zoneinfo")
    key = getattr(tz, "key", None)
    if zoneinfo is not None and type(tz) is zoneinfo.ZoneInfo and isinstance(key, str):
        return ["zone", key]
    kind = type(tz)
    raise TypeError(
        f"the safe-msgpack serializer cannot store a time zone of type {kind.__module__}."
        f"{kind.__qualname__} ({tz!r}); it stores datetime.timezone and zoneinfo.ZoneInfo. "
        "Fix: convert with .astimezone(datetime.timezone.utc) or use zoneinfo.ZoneInfo"
    )


def _tzinfo(zone: object) -> dt.tzinfo | None:
    if zone is None:
        return None
    if isinstance(zone, list) and len(zone) == 5 and zone[0] == "fixed":
        offset = from_timedelta(zone[1:4])
        return dt.timezone(offset) if zone[4] is None else dt.timezone(offset, zone[4])
    if isinstance(zone, list) and len(zone) == 2 and zone[0] == "zone":
        import zoneinfo  # the standard library's, by this fixed name

        if not isinstance(zone[1], str):
            raise ValueError(f"a zoneinfo key {zone[1]!r}")
        return zoneinfo.ZoneInfo(zone[1])
    raise ValueError(f"a malformed time zone {zone!r}")


# ---------------------------------------------------------- numbers
def int_to_bytes(v: int) -> bytes:
    return v.to_bytes(v.bit_length() // 8 + 1, "big", signed=True)


def int_from_bytes(data: bytes) -> int:
    return int.from_bytes(data, "big", signed=True)


def decimal_from(data: bytes) -> Decimal:
    return Decimal(data.decode("ascii"))


# -------------------------------------------------------------- dataclasses
def dataclass_name(v: object) -> tuple[str, str]:
    """The module and qualified name *v*'s class is stored under; ``TypeError`` for a
    class the reader could never look up (one defined inside a function)."""
    kind = type(v)
    module, qualname = kind.__module__, kind.__qualname__
    if "<locals>" in qualname:
        raise TypeError(
            f"the safe-msgpack serializer cannot store a {module}.{qualname}: a dataclass "
            f"defined inside a function cannot be found by the reader. Fix: {_FIX_CLASS}"
        )
    return module, qualname


def dataclass_fields(v: object) -> dict[str, Any]:
    """The values of *v*'s fields by name (``dataclasses.fields``: ``init=False`` too)."""
    return {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}  # type: ignore[arg-type]


def make_dataclass(module: object, qualname: object, values: object) -> object:
    """An instance of the already-imported dataclass *module*.*qualname* with *values*
    as its fields, made without running its code (see module doc)."""
    if not (isinstance(module, str) and isinstance(qualname, str) and isinstance(values, dict)):
        raise ValueError("a malformed dataclass frame")
    where = f"{module}.{qualname}"
    found: object = sys.modules.get(module)
    if found is None:
        raise ValueError(
            f"the value holds a {where} and module {module!r} is not imported in this "
            f"process (reading never imports a module). Fix: import {module} in the "
            f"reader before get(), or {_FIX_CLASS}"
        )
    for part in qualname.split("."):
        space = getattr(found, "__dict__", None)
        found = space.get(part) if isinstance(space, (dict, type(type.__dict__))) else None
        if found is None:
            raise ValueError(
                f"the value holds a {where} and this process has no class of that name "
                f"in {module!r} (is it defined only in the writer's __main__?). "
                f"Fix: {_FIX_CLASS}"
            )
    if not (isinstance(found, type) and dataclasses.is_dataclass(found)):
        raise ValueError(
            f"the value names {where}, which here is a {type(found).__name__}, not a "
            "dataclass: it is not rebuilt. Fix: give both sides the same code"
        )
    names = {f.name for f in dataclasses.fields(found)}
    if set(values) != names:
        raise ValueError(
            f"{where} has the fields {sorted(names)} here but the stored value has "
            f"{sorted(values)}. Fix: give the sender and the receiver the same version of it"
        )
    obj = object.__new__(found)
    for name, value in values.items():
        object.__setattr__(obj, name, value)
    return obj


def _items(meta: object, n: int, what: str) -> list[Any]:
    if not isinstance(meta, list) or len(meta) != n:
        raise ValueError(f"a malformed {what} frame")
    return meta
