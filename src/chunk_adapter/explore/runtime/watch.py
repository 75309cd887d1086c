"""The adapter's own attributes in DPOR's footprints (see :mod:`.footprint`).

:func:`watch_state` gives the adapter instance a subclass that notes every read and
write of an attribute in its ``__dict__`` as a footprint (:meth:`Controller.touch`).
Values whose operations are switch points of their own (the controlled primitives,
queues and connector wrappers, noted there) are not noted again on a read. This sits
above those types, so the tracker below them never imports them.
"""

from __future__ import annotations

import logging
from typing import Any

from ...connectors.base import ConnectorWrapper
from .primitives import (
    ControlledCondition,
    ControlledEvent,
    ControlledLock,
    ControlledRuntime,
    ControlledThread,
)
from .queues import ControlledSimpleQueue
from .wrappers import ExplorerBuilder

__all__ = ["unwatch_state", "watch_state"]

_IMMUTABLE = (bool, int, float, complex, str, bytes, type(None), frozenset, range)
_WATCHED: dict[type, type] = {}
_SKIP_TYPES: tuple[type, ...] = (
    ControlledLock,
    ControlledCondition,
    ControlledEvent,
    ControlledThread,
    ControlledRuntime,
    ControlledSimpleQueue,
    ConnectorWrapper,
    ExplorerBuilder,
    logging.Logger,
)
"""Values whose operations are switch points of their own (noted there)."""


def _watched_class(cls: type) -> type:
    made = _WATCHED.get(cls)
    if made is not None:
        return made
    skip = _SKIP_TYPES
    get = object.__getattribute__
    setattr_of: Any = cls.__setattr__

    def __getattribute__(self: Any, name: str) -> Any:
        value = get(self, name)
        state = get(self, "__dict__")
        if name in state and name != "__chunk_adapter_watch__":
            watch = state.get("__chunk_adapter_watch__")
            if watch is not None and not isinstance(value, skip):
                ctl, serial = watch
                mode = "r" if isinstance(value, _IMMUTABLE) or callable(value) else "w"
                ctl.access(("attr", serial, name), mode)
        return value

    def __setattr__(self: Any, name: str, value: Any) -> None:
        watch = get(self, "__dict__").get("__chunk_adapter_watch__")
        if watch is not None:
            watch[0].access(("attr", watch[1], name), "w")
        setattr_of(self, name, value)

    made = type(
        cls.__name__,
        (cls,),
        {
            "__getattribute__": __getattribute__,
            "__setattr__": __setattr__,
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
        },
    )
    _WATCHED[cls] = made
    return made


def watch_state(adapter: Any, ctl: Any) -> bool:
    """Note every read and write of *adapter*'s instance attributes in *ctl*'s footprints.

    Returns ``False`` when the instance cannot be watched (no ``__dict__``, a class
    that forbids it): the caller must then treat every step as conflicting."""
    try:
        cls = type(adapter)
        if "__getattribute__" in vars(cls) or not hasattr(adapter, "__dict__"):
            return False
        watched = _watched_class(cls)
        adapter.__class__ = watched
        adapter.__dict__["__chunk_adapter_watch__"] = (ctl, ctl.new_serial())
    except (TypeError, AttributeError):
        return False
    return True


def unwatch_state(adapter: Any) -> None:
    """Stop noting (the execution is over; a late thread must not reach the controller)."""
    state = getattr(adapter, "__dict__", None)
    if isinstance(state, dict):
        state.pop("__chunk_adapter_watch__", None)
