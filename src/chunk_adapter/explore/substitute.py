"""Substitution mode: explore an adapter that uses ``threading``/``time`` directly.

A third-party adapter may take no runtime and call ``threading.Lock()``,
``threading.Condition()``, ``threading.Thread(...).start()``,
``threading.Event()``, ``time.monotonic()`` and ``time.sleep()`` itself. While
such an adapter is explored, :func:`substituted` rebinds those names *in the
adapter's module* to stand-ins that build the explorer's controlled primitives
(for the execution that is running) and restores them afterwards.

What is replaced, per module given: a global bound to the ``threading`` or
``time`` module (``import threading``) becomes a stand-in module whose
``Lock``, ``RLock``, ``Condition``, ``Event``, ``Thread``, ``monotonic``,
``perf_counter``, ``time`` and ``sleep`` are controlled; every other attribute
is the real one. A global bound to one of those functions or classes
(``from threading import Lock``) is replaced by its stand-in. See
docs/explorer.md, "Substitution mode", for what this cannot reach.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from .primitives import ControlledRuntime, ControlledThread

__all__ = ["ACTIVE", "substituted"]


class _Active:
    """The controlled runtime of the execution in progress (``None`` between executions)."""

    runtime: ControlledRuntime | None = None


ACTIVE = _Active()


def _rt() -> ControlledRuntime | None:
    return ACTIVE.runtime


def Lock() -> Any:
    rt = _rt()
    return rt.Lock() if rt is not None else threading.Lock()


def RLock() -> Any:
    rt = _rt()
    return rt.RLock() if rt is not None else threading.RLock()


def Condition(lock: Any = None) -> Any:
    rt = _rt()
    return rt.Condition(lock) if rt is not None else threading.Condition(lock)


def Event() -> Any:
    rt = _rt()
    return rt.Event() if rt is not None else threading.Event()


class Thread:
    """Stands in for ``threading.Thread``: ``start`` hands the thread to the explorer."""

    def __init__(
        self,
        group: None = None,
        target: Callable[..., Any] | None = None,
        name: str | None = None,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
        *,
        daemon: bool | None = None,
    ) -> None:
        self._target = target
        self._args = tuple(args)
        self._kwargs = dict(kwargs or {})
        self.name = name or f"Thread-{id(self):x}"
        self.daemon = bool(daemon)
        self._handle: Any = None

    def run(self) -> None:
        if self._target is not None:
            self._target(*self._args, **self._kwargs)

    def start(self) -> None:
        if self._handle is not None:
            raise RuntimeError("threads can only be started once")
        rt = _rt()
        if rt is None:
            real = threading.Thread(target=self.run, name=self.name, daemon=self.daemon)
            real.start()
            self._handle = real
        else:
            self._handle = rt.start_thread(self.run, self.name)

    def join(self, timeout: float | None = None) -> None:
        if self._handle is None:
            raise RuntimeError("cannot join thread before it is started")
        self._handle.join(timeout)

    def is_alive(self) -> bool:
        if self._handle is None:
            return False
        alive: bool = self._handle.is_alive()
        return alive

    def __repr__(self) -> str:
        controlled = isinstance(self._handle, ControlledThread)
        return f"<substituted Thread {self.name!r} controlled={controlled}>"


def monotonic() -> float:
    rt = _rt()
    return rt.monotonic() if rt is not None else time.monotonic()


def perf_counter() -> float:
    return monotonic()


def wall_time() -> float:
    rt = _rt()
    return 1_700_000_000.0 + rt.monotonic() if rt is not None else time.time()


def sleep(seconds: float) -> None:
    rt = _rt()
    if rt is not None:
        rt.sleep(seconds)
    else:
        time.sleep(seconds)


class _StandIn(ModuleType):
    """A module object: the given overrides, then everything else from the real module."""

    def __init__(self, real: ModuleType, overrides: dict[str, Any]) -> None:
        super().__init__(real.__name__, real.__doc__)
        self._real = real
        self.__dict__.update(overrides)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


THREADING = _StandIn(
    threading,
    {"Lock": Lock, "RLock": RLock, "Condition": Condition, "Event": Event, "Thread": Thread},
)
TIME = _StandIn(
    time, {"monotonic": monotonic, "perf_counter": perf_counter, "time": wall_time, "sleep": sleep}
)
_REPLACE: dict[int, Any] = {
    id(threading): THREADING,
    id(time): TIME,
    id(threading.Lock): Lock,
    id(threading.RLock): RLock,
    id(threading.Condition): Condition,
    id(threading.Event): Event,
    id(threading.Thread): Thread,
    id(time.monotonic): monotonic,
    id(time.perf_counter): perf_counter,
    id(time.time): wall_time,
    id(time.sleep): sleep,
}


@contextmanager
def substituted(modules: Sequence[ModuleType]) -> Iterator[None]:
    """Rebind the threading/time names of *modules* to controlled stand-ins, then restore."""
    saved: list[tuple[ModuleType, str, Any]] = []
    try:
        for module in modules:
            if not isinstance(module, ModuleType):
                raise TypeError(
                    f"substitute= takes modules (e.g. [my_adapter_module]), got {module!r}"
                )
            for name, value in list(vars(module).items()):
                stand_in = _REPLACE.get(id(value))
                if stand_in is not None:
                    saved.append((module, name, value))
                    setattr(module, name, stand_in)
        yield
    finally:
        for module, name, value in reversed(saved):
            setattr(module, name, value)
