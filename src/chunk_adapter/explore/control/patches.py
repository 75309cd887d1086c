"""Process-wide patches that put every thread the adapter starts under the explorer.

While :func:`installed` is active, attributes of the real ``threading``,
``time``, ``queue``, ``_thread`` and ``concurrent.futures.thread`` modules are
*routers*: called from a task of the execution in progress (``ACTIVE``) they
return controlled primitives and virtual time; called from any other thread
they return the real thing. So a lock, a queue or a ``ThreadPoolExecutor`` made
anywhere in the adapter's code, in any module, is controlled when (and only
when) the adapter's threads make it.

Routed: ``threading.Lock/RLock/Condition/Event``, ``queue.SimpleQueue``,
``time.monotonic/perf_counter/time/sleep`` and their ``_ns`` variants,
``_thread.start_new_thread``, ``threading.current_thread/get_ident`` (a greenlet task
sees its own ``Thread`` object and ident, :mod:`.carriers`), and
``threading.Thread.start/join/is_alive`` on the real class (so ``Thread``
subclasses and ``threading.Timer`` started by a task become tasks); for an asyncio
loop a task runs, ``selectors.DefaultSelector``, the loop's ``_write_to_self`` and
``Handle._run`` (:mod:`..runtime.loops`: the loop waits in virtual time, woken by
``call_soon_threadsafe``; each callback a switch point); ``os.write`` and
``os.eventfd_write``, which wake a task's selector waiting on the pipe written to.
``Semaphore``, ``BoundedSemaphore``, ``Barrier``, ``Timer`` and ``queue.Queue``
are the standard library's own Python classes, controlled through the
primitives they build; the clocks they captured at import (``threading._time``,
``queue.time``) are routed too.

Not routed, on purpose: calls from module-level code (an import made by a task
must not leave a controlled primitive in a module for the next execution), from
``logging`` and from the explorer's own machinery (history, connectors,
oracles). Names bound by ``from threading import Lock`` elsewhere are rebound by
:mod:`.substitute`.

Over 400 lines, and one module because every router installed and the one
``installed()`` that puts them in place and takes them out must be read together: a
router left out of the table or out of the undo is a patch that leaks into the next
execution.
"""

from __future__ import annotations

import _thread
import asyncio.events
import asyncio.selector_events
import concurrent.futures.thread as cf_thread
import logging
import os
import queue
import selectors
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import Any

from ..runtime import real
from ..runtime.loops import ControlledSelector, after_write, before_callback, wake_after_write
from ..runtime.primitives import (
    ControlledCondition,
    ControlledEvent,
    ControlledRuntime,
    ControlledThread,
)
from ..runtime.queues import ControlledSimpleQueue
from ..runtime.tasks import Aborted, Task

__all__ = ["ACTIVE", "REPLACEMENTS", "controlling", "installed", "routed_lock"]

_THREADING = vars(threading)
# Code in threading.py that builds primitives a task must get controlled: the
# synchronisation classes written on top of Condition/Lock/Event.
_THREADING_BUILDERS = frozenset(
    f.__code__
    for f in (
        threading.Timer.__init__,
        threading.Semaphore.__init__,
        threading.Barrier.__init__,
    )
)
# Callers that always get real primitives, even on a task.
REAL_ONLY = (
    "logging",
    "chunk_adapter.explore",
    "chunk_adapter.history",
    "chunk_adapter.connectors",
    "chunk_adapter.oracles",
)


class _Active:
    """The execution in progress: its runtime; for detection, the adapter's modules and
    the threads that were alive before it began (theirs are not the adapter's doing)."""

    runtime: ControlledRuntime | None = None
    candidates: frozenset[str] = frozenset()
    baseline: frozenset[int] = frozenset()


ACTIVE = _Active()


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def controlling(depth: int = 2) -> ControlledRuntime | None:
    """The runtime to build from for the code *depth* frames up, or ``None``: real."""
    rt = ACTIVE.runtime
    if rt is None:
        return None
    frame = sys._getframe(depth)
    if not rt.ctl.is_task():
        _foreign(rt, frame)
        return None
    if frame.f_globals is _THREADING:
        return rt if frame.f_code in _THREADING_BUILDERS else None
    if frame.f_code.co_name == "<module>":
        return None
    name = frame.f_globals.get("__name__")
    if isinstance(name, str) and _under(name, REAL_ONLY):
        return None
    return rt


def _clock() -> ControlledRuntime | None:
    rt = ACTIVE.runtime
    if rt is None:
        return None
    if rt.ctl.is_task():
        return rt
    _foreign(rt, sys._getframe(2))
    return None


def _foreign(rt: ControlledRuntime, frame: FrameType) -> None:
    """A thread the explorer does not run called a router from the adapter's code."""
    module = frame.f_globals.get("__name__")
    if module in ACTIVE.candidates and real.get_ident() not in ACTIVE.baseline:
        name = threading.current_thread().name
        rt.ctl.note_foreign(f"thread {name!r} ran {module}.{frame.f_code.co_name}")


# -- routers -------------------------------------------------------------------


QUIET = ("concurrent.futures", "asyncio")
"""Standard-library packages whose own locks are taken without a switch point when free
(``ControlledLock.quiet``), and whose ``SimpleQueue`` (an executor's work queue) is put to
and got from without one unless the get must wait: a ``Future`` takes its condition's
lock a few times per result, an event loop's executor round trip a dozen times, and a
polling asyncio adapter ran out of the step budget on them; their waits and notifies
stay switch points."""


def _quiet(lock: Any, depth: int = 2) -> Any:
    """*lock*, quiet when the code that made it is in a :data:`QUIET` package (through
    ``threading``'s own builders: the idle ``Semaphore`` of a ``ThreadPoolExecutor``)."""
    frame: FrameType | None = sys._getframe(depth)
    while frame is not None and frame.f_globals is _THREADING:
        frame = frame.f_back
    name = frame.f_globals.get("__name__") if frame is not None else None
    if isinstance(name, str) and _under(name, QUIET):
        lock.quiet = True
    return lock


def Lock() -> Any:
    rt = controlling()
    return _quiet(rt.Lock()) if rt is not None else real.Lock()


def RLock(*args: Any, **kwargs: Any) -> Any:
    rt = controlling()
    return _quiet(rt.RLock()) if rt is not None else real.RLock(*args, **kwargs)


class _Routed(type):
    """Metaclass of the routing classes: ``isinstance`` accepts real and controlled ones."""

    _kinds: tuple[type, ...] = ()

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, cls._kinds)


class Condition(metaclass=_Routed):
    def __new__(cls, lock: Any = None) -> Any:
        rt = controlling()
        if rt is None:
            return real.Condition(lock)
        condition = rt.Condition(lock)
        if lock is None:
            _quiet(condition.lock)
        return condition


class Event(metaclass=_Routed):
    def __new__(cls) -> Any:
        rt = controlling()
        return rt.Event() if rt is not None else real.Event()


class SimpleQueue(metaclass=_Routed):
    def __new__(cls) -> Any:
        rt = controlling()
        if rt is None:
            return real.SimpleQueue()
        return _quiet(ControlledSimpleQueue(rt.ctl, rt._name("SimpleQueue")))


_REAL_SELECTOR = selectors.DefaultSelector
_SELECTOR_LOOP = asyncio.selector_events.BaseSelectorEventLoop


class DefaultSelector(metaclass=_Routed):
    """The selector ``asyncio.new_event_loop()`` makes: a task's waits in virtual time
    (:mod:`..runtime.loops`)."""

    def __new__(cls) -> Any:
        rt = controlling()
        inner = _REAL_SELECTOR()
        return inner if rt is None else ControlledSelector(rt.ctl, inner, rt._name("selector"))


def monotonic() -> float:
    rt = _clock()
    return rt.ctl.now if rt is not None else real.monotonic()


def monotonic_ns() -> int:
    rt = _clock()
    return int(rt.ctl.now * 1e9) if rt is not None else real.monotonic_ns()


def perf_counter() -> float:
    rt = _clock()
    return rt.ctl.now if rt is not None else real.perf_counter()


def perf_counter_ns() -> int:
    rt = _clock()
    return int(rt.ctl.now * 1e9) if rt is not None else real.perf_counter_ns()


EPOCH = 1_700_000_000.0  # what time.time() reads at virtual t=0


def wall_time() -> float:
    rt = _clock()
    return EPOCH + rt.ctl.now if rt is not None else real.wall_time()


def wall_time_ns() -> int:
    rt = _clock()
    return int((EPOCH + rt.ctl.now) * 1e9) if rt is not None else real.wall_time_ns()


def sleep(seconds: float) -> None:
    rt = _clock()
    if rt is not None:
        rt.sleep(seconds)
    else:
        real.sleep(seconds)


def current_thread() -> threading.Thread:
    task = _green_task()
    return task.thread if task is not None and task.thread is not None else real.current_thread()


def get_ident() -> int:
    task = _green_task()
    if task is not None and task.thread is not None and task.thread.ident is not None:
        return task.thread.ident
    return real.get_ident()


def _green_task() -> Task | None:
    """The greenlet task calling, if any: its OS thread is the hub, shared with every task,
    so the thread identity code sees is the task's (threads keep their own)."""
    rt = ACTIVE.runtime
    if rt is None or rt.ctl.runtime != "greenlet":
        return None
    return rt.ctl.task_here()


def start_new_thread(function: Callable[..., Any], args: Any, kwargs: Any = None) -> int:
    rt = controlling()
    if rt is None:
        if kwargs is None:
            return real.start_new_thread(function, args)
        return real.start_new_thread(function, args, kwargs)
    name = getattr(function, "__qualname__", "thread")
    handle = rt.start_thread(lambda: function(*args, **(kwargs or {})), name)
    return handle.ident or 0


# -- Thread.start / join / is_alive on the real class ---------------------------

# A Thread object the code under test started from a task carries (its controller's
# runtime, task) in this attribute. Not a table keyed by the thread: the task holds
# the thread, so a weak-keyed entry never expired and kept every execution's
# controller alive for the life of the process; on the thread, it goes with it.
_ADOPTED = "_chunk_adapter_adopted"


def _adopted(thread: threading.Thread) -> tuple[ControlledRuntime, Task] | None:
    entry: tuple[ControlledRuntime, Task] | None = getattr(thread, _ADOPTED, None)
    return entry


def _start(self: threading.Thread) -> None:
    rt = controlling()
    if rt is None:
        real.thread_start(self)
        return
    if _adopted(self) is not None:
        raise RuntimeError("threads can only be started once")
    target = self.run
    task = rt.ctl.spawn(target, self.name, thread=self)
    setattr(self, _ADOPTED, (rt, task))
    rt.ctl.switch_point(f"started {task.role + ':' if task.role else ''}{self.name!r}")


def _handle(thread: threading.Thread) -> ControlledThread | None:
    entry = _adopted(thread)
    if entry is None or not entry[0].ctl.is_task():
        return None
    return ControlledThread(entry[0].ctl, entry[1])


def _join(self: threading.Thread, timeout: float | None = None) -> None:
    handle = _handle(self)
    if handle is None:
        real.thread_join(self, timeout)
    else:
        handle.join(timeout)


def _is_alive(self: threading.Thread) -> bool:
    handle = _handle(self)
    return real.thread_is_alive(self) if handle is None else handle.is_alive()


# -- concurrent.futures.thread's module-level lock --------------------------------


class _RoutedLock:
    """Stands in for a real lock made before the execution (at import: a module's or a
    class's lock): tasks share one controlled lock per execution (a real lock held
    across a switch point would block for real); other threads use the real one."""

    def __init__(
        self, inner: Any, reentrant: bool = False, name: str = "", quiet: bool = False
    ) -> None:
        self.inner = inner
        self.reentrant = reentrant
        self.quiet = quiet  # the controlled one is quiet (QUIET: the standard library's)
        self.name = name  # where it was found ("Class._lock"), for the traces and reports
        self._per_execution: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    def _lock(self) -> Any:
        rt = ACTIVE.runtime
        if rt is None or not rt.ctl.is_task():
            return self.inner
        lock = self._per_execution.get(rt.ctl)
        if lock is None:
            lock = self._per_execution[rt.ctl] = rt.RLock() if self.reentrant else rt.Lock()
            if self.name:
                lock.name = self.name
            lock.quiet = self.quiet
        return lock

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return bool(self._lock().acquire(blocking, timeout))

    def release(self) -> None:
        self._lock().release()

    def locked(self) -> bool:
        return bool(self._lock().locked())

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # _at_fork_reinit and friends


_RLOCK_TYPES = (type(real.RLock()), threading._PyRLock)  # type: ignore[attr-defined]


def routed_lock(value: Any, name: str = "") -> _RoutedLock | None:
    """A stand-in for *value* if it is a real ``Lock`` or ``RLock`` (:class:`_RoutedLock`),
    else ``None``: what :mod:`.substitute` puts where a module or a class keeps a lock it
    made at import (*name*: where, as the traces show it)."""
    if isinstance(value, real.LockType):
        return _RoutedLock(value, name=name)
    if isinstance(value, _RLOCK_TYPES):
        return _RoutedLock(value, reentrant=True, name=name)
    return None


class _DropAborted(logging.Filter):
    """ThreadPoolExecutor's worker logs every BaseException; an aborted task is not news."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, Aborted)


Condition._kinds = (real.Condition, ControlledCondition)
Event._kinds = (real.Event, ControlledEvent)
SimpleQueue._kinds = (real.SimpleQueue, ControlledSimpleQueue)
DefaultSelector._kinds = (_REAL_SELECTOR, ControlledSelector)

_PATCHES: list[tuple[Any, str, Any]] = [
    (threading, "Lock", Lock),
    (threading, "RLock", RLock),
    (threading, "Condition", Condition),
    (threading, "Event", Event),
    (threading, "_time", monotonic),
    (threading, "current_thread", current_thread),
    (threading, "get_ident", get_ident),
    (_thread, "get_ident", get_ident),
    (threading.Thread, "start", _start),
    (threading.Thread, "join", _join),
    (threading.Thread, "is_alive", _is_alive),
    (time, "monotonic", monotonic),
    (time, "monotonic_ns", monotonic_ns),
    (time, "perf_counter", perf_counter),
    (time, "perf_counter_ns", perf_counter_ns),
    (time, "time", wall_time),
    (time, "time_ns", wall_time_ns),
    (time, "sleep", sleep),
    (queue, "SimpleQueue", SimpleQueue),
    (queue, "time", monotonic),
    (_thread, "start_new_thread", start_new_thread),
    (cf_thread, "_global_shutdown_lock", _RoutedLock(cf_thread._global_shutdown_lock, quiet=True)),
    (selectors, "DefaultSelector", DefaultSelector),
    (_SELECTOR_LOOP, "_write_to_self", wake_after_write(vars(_SELECTOR_LOOP)["_write_to_self"])),
    (asyncio.events.Handle, "_run", before_callback(asyncio.events.Handle._run, ACTIVE)),
    (os, "write", after_write(os.write, ACTIVE)),
    *(
        [(os, "eventfd_write", after_write(os.eventfd_write, ACTIVE))]
        if hasattr(os, "eventfd_write")
        else []
    ),
]

REPLACEMENTS: dict[int, tuple[Any, Any]] = {
    id(original): (original, router)
    for original, router in [
        (real.Lock, Lock),
        (real.RLock, RLock),
        (real.Condition, Condition),
        (real.Event, Event),
        (real.SimpleQueue, SimpleQueue),
        (real.monotonic, monotonic),
        (real.monotonic_ns, monotonic_ns),
        (real.perf_counter, perf_counter),
        (real.perf_counter_ns, perf_counter_ns),
        (real.wall_time, wall_time),
        (real.wall_time_ns, wall_time_ns),
        (real.sleep, sleep),
        (real.start_new_thread, start_new_thread),
        (real.current_thread, current_thread),
        (real.get_ident, get_ident),
    ]
}
"""``id(real object) -> (real object, router)``: what :mod:`.substitute` rebinds in modules
that imported the real object by name."""

# _state_lock guards _installs and _saved: install/uninstall from any thread;
# held only while attributes are swapped, nobody waits on it for long.
_state_lock = real.allocate_lock()
_installs = 0
_saved: list[tuple[Any, str, Any]] = []
_filter = _DropAborted()


@contextmanager
def installed() -> Iterator[None]:
    """Route the standard library's threading and time (see module doc), then restore."""
    global _installs
    with _state_lock:
        _installs += 1
        if _installs == 1:
            for owner, name, router in _PATCHES:
                if name in vars(owner):  # e.g. threading._time is gone in some versions
                    _saved.append((owner, name, vars(owner)[name]))
                    setattr(owner, name, router)
            logging.getLogger("concurrent.futures").addFilter(_filter)
    try:
        yield
    finally:
        with _state_lock:
            _installs -= 1
            if _installs == 0:
                for owner, name, original in reversed(_saved):
                    setattr(owner, name, original)
                _saved.clear()
                logging.getLogger("concurrent.futures").removeFilter(_filter)


def forget_executor_threads(ctl: Any) -> None:
    """Drop this execution's worker threads from ``concurrent.futures.thread``'s exit list,
    so interpreter exit never joins a task of an execution that is over."""
    queues: Any = cf_thread._threads_queues
    for thread in list(queues):
        entry = _adopted(thread)
        if entry is not None and entry[0].ctl is ctl:
            queues.pop(thread, None)
