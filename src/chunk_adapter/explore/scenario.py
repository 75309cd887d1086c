"""Scenarios: a short scheduler-thread script the explorer runs under every schedule.

A :class:`Scenario` is a list of :class:`Op` s the scheduler thread performs on
the adapters of its ``topology`` (:mod:`.pipeline`): by default a *sender*
(``stage_id``) that gets ``save``/``cancel`` and a *receiver* (``stage_id + 1``,
reading ``stage_id``) that gets ``load``/``poll``/``cleanup``; ``"three-stage"``
adds a *middle* adapter that ``relay()`` re-sends through; ``"loopback"`` is one
adapter reading its own stage. Unless the script ends with ``stop()`` itself,
the runner appends ``settle()``, ``poll()`` and ``stop()``, so every execution
ends quiescent and stopped and can be checked in full.

Ops (``str(op)`` is how the trace and failure reports print them)::

    save(rid, obj, final=False)   cancel(rid)   load(rid)   poll()   cleanup(rid)
    fail_put(key=None, times=1)   fail_get(key=None, times=1)   fail_build(rid, times=1)
    settle()                      stop()        relay()

Any adapter call takes ``on="sender" | "middle" | "receiver"`` to go to another
member than its default (``load("r", on="middle")``).

``fail_*`` are fault decisions taken at that point of the script: the next
*times* matching connector calls (or builds) raise ``InjectedFault``.
``settle()`` lets the background threads run, in virtual time, until nothing
has happened for ``Scenario.idle`` seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidValue

__all__ = [
    "TOPOLOGIES",
    "Op",
    "Scenario",
    "cancel",
    "cleanup",
    "fail_build",
    "fail_get",
    "fail_put",
    "load",
    "poll",
    "relay",
    "save",
    "settle",
    "stop",
]

_KINDS = (
    "save",
    "cancel",
    "load",
    "poll",
    "cleanup",
    "fail_put",
    "fail_get",
    "fail_build",
    "settle",
    "stop",
    "relay",
)
TOPOLOGIES: dict[str, tuple[str, ...]] = {
    "pipeline": ("sender", "receiver"),
    "three-stage": ("sender", "middle", "receiver"),
    "loopback": ("adapter",),
}


@dataclass(frozen=True)
class Op:
    """One scheduler-thread call of a scenario script."""

    kind: str
    request_id: str | None = None
    obj: Any = None
    final: bool = False
    key: str | None = None
    times: int = 1
    on: str | None = None
    """The member the call goes to (``"sender"``, ``"middle"``...); ``None``: the default."""

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise InvalidValue(f"unknown scenario op {self.kind!r}; use one of {_KINDS}")

    def __str__(self) -> str:
        k, rid = self.kind, self.request_id
        on = "" if self.on is None else f", on={self.on!r}"
        if k == "save":
            return f"save({rid!r}, {self.obj!r}, final={self.final}{on})"
        if k in ("cancel", "load", "cleanup"):
            return f"{k}({rid!r}{on})"
        if k in ("fail_put", "fail_get"):
            return f"{k}(key={self.key!r}, times={self.times})"
        if k == "fail_build":
            return f"fail_build({rid!r}, times={self.times}{on})"
        return f"{k}({on[2:]})"


def save(request_id: str, obj: Any, final: bool = False, on: str | None = None) -> Op:
    return Op("save", request_id, obj, final, on=on)


def cancel(request_id: str, on: str | None = None) -> Op:
    return Op("cancel", request_id, on=on)


def load(request_id: str, on: str | None = None) -> Op:
    return Op("load", request_id, on=on)


def poll(on: str | None = None) -> Op:
    return Op("poll", on=on)


def cleanup(request_id: str, on: str | None = None) -> Op:
    return Op("cleanup", request_id, on=on)


def relay() -> Op:
    """The middle adapter of a three-stage scenario polls and re-sends what it got."""
    return Op("relay")


def fail_put(key: str | None = None, times: int = 1) -> Op:
    return Op("fail_put", key=key, times=times)


def fail_get(key: str | None = None, times: int = 1) -> Op:
    return Op("fail_get", key=key, times=times)


def fail_build(request_id: str, times: int = 1, on: str | None = None) -> Op:
    return Op("fail_build", request_id, times=times, on=on)


def settle() -> Op:
    return Op("settle")


def stop(on: str | None = None) -> Op:
    return Op("stop", on=on)


@dataclass(frozen=True)
class Scenario:
    """A named script plus how to build the adapter for it.

    ``options`` are extra keyword arguments for the adapter factory (e.g.
    ``{"put_tries": 2}``); ``consume_on_get`` and ``notify`` configure the
    embedded :class:`~chunk_adapter.connectors.MemoryConnector` (``notify``
    offers ``subscribe``, which switches the reference adapter to event-driven
    receive). ``idle`` is how long (virtual seconds) ``settle()`` waits with
    nothing happening; ``settle_limit`` caps a single settle. ``topology`` and
    ``stage_id`` (the first member's stage) lay out the adapters (:mod:`.pipeline`).
    """

    name: str
    ops: tuple[Op, ...]
    question: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    consume_on_get: bool = True
    notify: bool = False
    stage_id: int = 0
    idle: float = 0.25
    settle_limit: float = 20.0
    topology: str = "pipeline"

    def __post_init__(self) -> None:
        if not isinstance(self.ops, tuple) or not all(isinstance(o, Op) for o in self.ops):
            raise InvalidValue(
                f"Scenario {self.name!r}: ops must be a tuple of Op (made with save(), "
                f"load(), ...), got {self.ops!r}"
            )
        roles = TOPOLOGIES.get(self.topology)
        if roles is None:
            raise InvalidValue(
                f"Scenario {self.name!r}: unknown topology {self.topology!r}; "
                f"use one of {sorted(TOPOLOGIES)}"
            )
        for op in self.ops:
            if op.on is not None and op.on not in roles:
                raise InvalidValue(
                    f"Scenario {self.name!r}: {op} names {op.on!r}, but a {self.topology} "
                    f"has only {list(roles)}"
                )
            if op.kind == "relay" and "middle" not in roles:
                raise InvalidValue(
                    f"Scenario {self.name!r}: relay() needs a middle adapter; "
                    "use topology='three-stage'"
                )

    @property
    def script(self) -> tuple[Op, ...]:
        """The ops as run: the given ones plus settle/poll/stop unless it stops itself."""
        if self.ops and self.ops[-1].kind == "stop":
            return self.ops
        return (*self.ops, settle(), poll(), stop())

    @property
    def quiescent(self) -> bool:
        """Whether the script ends ``settle(), poll(), stop()``: everything that must
        have arrived has, when ``stop()`` begins."""
        tail = [op.kind for op in self.script[-3:]]
        return tail == ["settle", "poll", "stop"]

    def to_python(self) -> str:
        """The scenario as Python (``from chunk_adapter.explore.scenario import *`` first)."""
        ops = ",\n        ".join(str(op) for op in self.ops)
        extra = ""
        if self.options:
            extra += f", options={self.options!r}"
        if not self.consume_on_get:
            extra += ", consume_on_get=False"
        if self.notify:
            extra += ", notify=True"
        if self.topology != "pipeline":
            extra += f", topology={self.topology!r}"
        if self.stage_id != 0:
            extra += f", stage_id={self.stage_id}"
        return f"Scenario(\n    {self.name!r},\n    (\n        {ops},\n    ){extra},\n)"

    def __str__(self) -> str:
        return f"{self.name}: " + "; ".join(str(op) for op in self.ops)
