"""The runtime seam: every threading primitive and clock the adapter uses.

The adapter never imports :mod:`threading` or :mod:`time`. It asks a runtime
object for them, with the same names ``threading`` uses, so that the
interleaving explorer (:mod:`chunk_adapter.explore`) can hand it controlled
primitives and a virtual clock instead, and choose which thread runs next.

A runtime provides exactly six things:

``Lock()``
    a non-reentrant mutual-exclusion lock (``acquire``/``release``/``with``).
``Condition(lock)``
    a condition variable over *lock* (``wait(timeout)``, ``notify``,
    ``notify_all``, ``with``). The adapter always passes the lock explicitly and
    always waits with a timeout.
``Event()``
    ``set``, ``is_set``, ``wait(timeout)``.
``start_thread(target, name)``
    start ``target()`` on a new *daemon* thread and return a handle with
    ``join(timeout)``, ``is_alive()`` and ``name``.
``monotonic()``
    seconds from a monotonic clock.
``sleep(seconds)``
    block the calling thread for *seconds*.

That is the whole seam: keep it that small. Anything else an adapter needs
(logging, deepcopy) is not a scheduling point and stays outside it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Protocol, runtime_checkable

__all__ = [
    "ConditionLike",
    "EventLike",
    "LockLike",
    "Runtime",
    "ThreadLike",
    "ThreadingRuntime",
]


@runtime_checkable
class LockLike(Protocol):
    """What ``threading.Lock()`` offers and the adapter uses."""

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool: ...

    def release(self) -> None: ...

    def __enter__(self) -> bool: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class ConditionLike(Protocol):
    """What ``threading.Condition(lock)`` offers and the adapter uses."""

    def wait(self, timeout: float | None = None) -> bool: ...

    def notify(self, n: int = 1) -> None: ...

    def notify_all(self) -> None: ...

    def __enter__(self) -> bool: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class EventLike(Protocol):
    """What ``threading.Event()`` offers and the adapter uses."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


@runtime_checkable
class ThreadLike(Protocol):
    """A started daemon thread, as ``start_thread`` returns it."""

    @property
    def name(self) -> str: ...

    def join(self, timeout: float | None = None) -> None: ...

    def is_alive(self) -> bool: ...


@runtime_checkable
class Runtime(Protocol):
    """The six primitives an adapter takes from its runtime (see module doc)."""

    def Lock(self) -> LockLike: ...

    def Condition(self, lock: LockLike) -> ConditionLike: ...

    def Event(self) -> EventLike: ...

    def start_thread(self, target: Callable[[], None], name: str) -> ThreadLike: ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class ThreadingRuntime:
    """The default runtime: real :mod:`threading` and :mod:`time`."""

    def Lock(self) -> LockLike:
        return threading.Lock()

    def Condition(self, lock: LockLike) -> ConditionLike:
        return threading.Condition(lock)  # type: ignore[arg-type]

    def Event(self) -> EventLike:
        return threading.Event()

    def start_thread(self, target: Callable[[], None], name: str) -> ThreadLike:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        return thread

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def __repr__(self) -> str:
        return "ThreadingRuntime()"
