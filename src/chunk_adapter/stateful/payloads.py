"""The objects the machines save, and how they mutate them after ``save_async`` (R4).

A snapshot must be deep: the payload is built from the object as it was at
the call, whatever the scheduler does to it afterwards, at any depth. So
besides the flat list ``["a", 3]`` the machines save **nested** objects —
a list holding a dict of lists, a ``bytearray``, a :class:`Frame` (an
object with its own ``__deepcopy__``, like a tensor wrapper) and a tuple
holding a list — and :func:`mutate` changes every level in place: the outer
list, the inner list, the dict, the ``bytearray``'s bytes, the frame's own
list and the list inside the tuple. A
snapshot by ``copy.copy`` shares the inner parts, one that copies lists and
dicts but not other objects shares the ``bytearray`` and the frame: either
way the mutation reaches what is put, and the recorded put no longer equals
the model's (R4).
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["KINDS", "MUTATION", "Frame", "make", "mutate"]

MUTATION = "<mutated after save_async>"
KINDS = ("list", "nested", "none")
"""``list``: ``[rid, serial]``; ``nested``: see :func:`make`; ``none``: ``None`` (R8)."""


class Frame:
    """A mutable object with its own ``__deepcopy__`` (as tensors and buffers have).

    Equal by value; its repr is what a counterexample shows.
    """

    def __init__(self, values: list[Any], raw: bytearray) -> None:
        self.values = values
        self.raw = raw

    def __deepcopy__(self, memo: dict[int, Any]) -> Frame:
        return Frame(copy.deepcopy(self.values, memo), bytearray(self.raw))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Frame):
            return NotImplemented
        return self.values == other.values and self.raw == other.raw

    __hash__ = None  # type: ignore[assignment]  # mutable: not hashable

    def __repr__(self) -> str:
        return f"Frame({self.values!r}, {self.raw!r})"


def make(rid: str, serial: int, kind: str) -> Any:
    """The object a save step passes: *kind* is one of :data:`KINDS`."""
    if kind == "none":
        return None
    if kind == "list":
        return [rid, serial]
    if kind == "nested":
        return [
            rid,
            {"ids": [serial, [serial]], "blob": bytearray(b"%d" % serial)},
            Frame([serial], bytearray(b"f")),
            ("record", [serial]),  # immutable, holding what is not
        ]
    raise ValueError(f"payload kind must be one of {KINDS}, got {kind!r}")


def mutate(obj: Any) -> None:
    """Change *obj* in place at every level :func:`make` built (no-op for ``None``)."""
    if not isinstance(obj, list):
        return
    for part in obj:
        if isinstance(part, dict):
            ids = part["ids"]
            ids[1].append(MUTATION)  # a list in a list in a dict
            ids.append(MUTATION)
            part["blob"][0:1] = b"X"  # a mutable leaf, changed in place
            part[MUTATION] = True
        elif isinstance(part, Frame):
            part.values.append(MUTATION)
            part.raw[0:1] = b"Y"
        elif isinstance(part, tuple):
            part[1].append(MUTATION)  # through the tuple
    obj.append(MUTATION)
