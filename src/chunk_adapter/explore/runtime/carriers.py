"""What carries the controller's tasks: OS threads handed a baton, or greenlets in one thread.

The controller decides which task runs; a *carrier* makes that task run and
the others wait. Both carriers give the same order of everything for the same
decisions, so a replay string replays the same on either.

* :class:`ThreadCarrier`: each task is a real :class:`threading.Thread` that runs
  only while it holds its *baton* (a real lock used as a binary semaphore); a
  hand-off releases the next task's baton and waits for its own (an OS-level
  wake-up, a few microseconds, far more on a loaded machine).
* :class:`GreenletCarrier`: every task is a :mod:`greenlet` on one *hub* OS
  thread; a hand-off is a greenlet switch (a fraction of a microsecond). The
  driver thread keeps watching the hub: a task that blocks in C blocks the hub,
  the hand-offs stop, and the watchdog reports it as uncontrolled, as it does for
  a thread. Tasks keep the thread identity code sees (``current_thread()``,
  ``get_ident()``: :mod:`.patches` routes them to the task's ``Thread`` object).

:func:`choose` picks the greenlet carrier unless the code under test needs real
threads (thread-local storage, which greenlets of one thread would share) or
``greenlet`` is not installed, and says why in one line.

Over 400 lines, and one module because the two carriers implement one small protocol and
must give the same order for the same decisions; side by side, a change to one is seen
against the other.
"""

from __future__ import annotations

import asyncio.events
import contextlib
import functools
import itertools
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from types import CodeType, FunctionType, ModuleType
from typing import Any, ClassVar, Protocol

from . import real
from .tasks import Task, TaskState

_greenlet: Any
try:
    import greenlet as _greenlet  # type: ignore[import-untyped,no-redef,unused-ignore]
except ImportError:  # pragma: no cover - greenlet is a dependency; a broken install falls back
    _greenlet = None

__all__ = [
    "CONFIRM_RUNTIME",
    "RUNTIMES",
    "RUNTIME_ENV",
    "Carrier",
    "ControllerView",
    "GreenletCarrier",
    "ThreadCarrier",
    "choose",
    "make_carrier",
]

RUNTIMES = ("greenlet", "thread")
"""The runtimes a caller may ask for (``"auto"``: :func:`choose`)."""

RUNTIME_ENV = "CHUNK_ADAPTER_RUNTIME"
"""``auto`` (the default), ``greenlet`` or ``thread``: what ``"auto"`` resolves to when set
(``chunk-adapter verify --runtime`` sets it for its workers)."""

CONFIRM_RUNTIME = "thread"
"""What verify's stages replay a failure on before they report it: real threads, the
adapter's own way of running, so a failure found on greenlets is seen again without them
(and a disagreement between the runtimes would be inconclusive, never a red)."""

_FINISHED = TaskState.FINISHED  # read at every hand-off (an Enum class attribute is slow)
# asyncio keeps the running event loop per OS thread: greenlets on one hub thread would
# share it, so every switch puts in the loop of the task it switches to (Task.loop).
_running_loop = asyncio.events._get_running_loop
_set_running_loop = asyncio.events._set_running_loop

_FAKE_IDENTS = itertools.count(1 << 48)
"""Thread idents for greenlet tasks (no OS thread has one this large)."""


class ControllerView(Protocol):
    """What a carrier reads and sets of the controller (:class:`~.controller.Controller`,
    which sits above the carriers and hands them itself)."""

    wall_timeout: float
    tasks: list[Task]
    current: Task | None
    idents: set[int]

    @property
    def done(self) -> bool: ...

    @property
    def aborting(self) -> bool: ...

    def spawn(
        self,
        target: Callable[[], None],
        name: str,
        *,
        is_main: bool = False,
        thread: threading.Thread | None = None,
    ) -> Task: ...


class Carrier:
    """The hand-off between the controller's tasks (one carrier per execution)."""

    name = ""

    def key(self) -> Any:
        """What identifies the running task (the table :meth:`Controller.me` reads)."""
        raise NotImplementedError

    def key_function(self) -> Callable[[], Any]:
        """:meth:`key` as the controller calls it at every step: the function underneath
        where there is one (no method call in between), else the bound method."""
        return self.key

    def spawn(self, ctl: ControllerView, task: Task, body: Callable[[], None],
              thread: threading.Thread | None) -> None:  # fmt: skip
        """Give *task* something to run *body* on; it starts when first handed the turn."""
        raise NotImplementedError

    def enter(self, task: Task) -> None:
        """Called first thing in a task's body: wait for the first turn."""

    def run(self, ctl: ControllerView, main: Callable[[], None]) -> None:
        """Start the execution with *main* as the scheduler task (returns at once)."""
        raise NotImplementedError

    def hand(self, ctl: ControllerView, me: Task, nxt: Task | None) -> None:
        """*me* gives up the turn to *nxt* (``None``: nobody runs: the execution is over)
        and, unless it finished, waits until it is handed the turn again."""
        raise NotImplementedError

    def abort(self, ctl: ControllerView, stuck: bool) -> None:
        """Unwind every unfinished task (each raises :class:`Aborted` where it waits);
        *stuck*: the running task did not come back, do not wait long for it."""
        raise NotImplementedError


class ThreadCarrier(Carrier):
    """Each task on its own OS thread, running while it holds its baton."""

    name = "thread"

    def key(self) -> Any:
        return real.get_ident()

    def key_function(self) -> Callable[[], Any]:
        return real.get_ident

    def spawn(self, ctl: ControllerView, task: Task, body: Callable[[], None],
              thread: threading.Thread | None) -> None:  # fmt: skip
        task.baton = real.allocate_lock()
        task.baton.acquire()
        if thread is None:
            thread = real.Thread(target=body, name=task.name, daemon=True)
        else:
            thread.run = body  # type: ignore[method-assign]
            thread.daemon = True  # an abandoned task must never keep the process alive
        task.thread = thread
        real.thread_start(thread)

    def enter(self, task: Task) -> None:
        assert task.baton is not None
        task.baton.acquire()

    def run(self, ctl: ControllerView, main: Callable[[], None]) -> None:
        task = ctl.spawn(main, "scheduler", is_main=True)
        ctl.current = task
        assert task.baton is not None
        task.baton.release()

    def hand(self, ctl: ControllerView, me: Task, nxt: Task | None) -> None:
        if nxt is not None:
            assert nxt.baton is not None
            nxt.baton.release()
        if me.state is _FINISHED:
            return
        assert me.baton is not None
        me.baton.acquire()

    def abort(self, ctl: ControllerView, stuck: bool) -> None:
        for task in ctl.tasks:
            if task.state is TaskState.FINISHED or task.thread is None or task.baton is None:
                continue
            # A blocked task wakes and raises Aborted; a free baton (RuntimeError) means
            # the task is about to take it, and raises Aborted once it has.
            with contextlib.suppress(RuntimeError):
                task.baton.release()
            wait = 0.05 if stuck and task is ctl.current else ctl.wall_timeout
            real.thread_join(task.thread, wait)


class GreenletCarrier(Carrier):
    """Every task a greenlet on one hub thread; a hand-off is a switch."""

    name = "greenlet"

    def __init__(self) -> None:
        assert _greenlet is not None
        self._getcurrent = _greenlet.getcurrent
        self._hub: Any = None  # the hub thread's own greenlet: where a finished task returns
        self._thread: _HubThread | None = None
        # _unwind: set once by the driver when the execution is over and frozen; the hub
        # waits on it before it unwinds the tasks it still holds.
        self._unwind = real.Event()
        # _finished: set by the hub once this execution's tasks are unwound; the driver
        # waits on it (the hub thread itself lives on for the next execution).
        self._finished = real.Event()

    def key(self) -> Any:
        return self._getcurrent()

    def key_function(self) -> Callable[[], Any]:
        return self._getcurrent  # type: ignore[no-any-return]

    def spawn(self, ctl: ControllerView, task: Task, body: Callable[[], None],
              thread: threading.Thread | None) -> None:  # fmt: skip
        if thread is None:
            thread = real.Thread(target=None, name=task.name, daemon=True)  # never started
        else:
            thread.daemon = True
        # What thread.ident, get_ident() and current_thread() give inside the task.
        thread._ident = next(_FAKE_IDENTS)  # type: ignore[attr-defined]
        task.thread = thread
        task.glet = _greenlet.greenlet(body, parent=self._hub)

    def run(self, ctl: ControllerView, main: Callable[[], None]) -> None:
        self._thread = _HubThread.take()
        self._thread.submit(functools.partial(self._hub_job, ctl, main))

    def _hub_job(self, ctl: ControllerView, main: Callable[[], None]) -> None:
        try:
            self._hub_main(ctl, main)
        except BaseException:
            if self._thread is not None:
                self._thread.abandon()  # before _finished: abort() must not give it back
            raise
        finally:
            self._finished.set()

    def _hub_main(self, ctl: ControllerView, main: Callable[[], None]) -> None:
        self._hub = self._getcurrent()
        ctl.idents.add(real.get_ident())
        ctl.current = ctl.spawn(main, "scheduler", is_main=True)
        # The tasks switch to one another directly; the hub gets the turn back when a
        # task finishes (it set ctl.current to the next) or nobody may run any more.
        while not (ctl.done or ctl.aborting):
            task = ctl.current
            if task is None or task.state is TaskState.FINISHED or task.glet is None:
                break
            _set_running_loop(task.loop)
            task.glet.switch()
        while not self._unwind.wait(1.0):
            pass
        for task in ctl.tasks:
            glet = task.glet
            if glet is None or glet.dead:
                continue
            if not glet:  # never ran: nothing to unwind
                task.state = TaskState.FINISHED
                continue
            _set_running_loop(task.loop)
            glet.switch()  # it raises Aborted where it waits, and unwinds
        _set_running_loop(None)

    def hand(self, ctl: ControllerView, me: Task, nxt: Task | None) -> None:
        if me.state is _FINISHED:
            return  # its greenlet ends: the hub switches to ctl.current
        me.loop = _running_loop()
        if nxt is not None:
            assert nxt.glet is not None
            _set_running_loop(nxt.loop)
            nxt.glet.switch()
        else:
            _set_running_loop(None)
            self._hub.switch()

    def abort(self, ctl: ControllerView, stuck: bool) -> None:
        self._unwind.set()
        hub = self._thread
        if hub is not None:
            if self._finished.wait(0.05 if stuck else ctl.wall_timeout):
                hub.give_back()
            else:
                hub.abandon()  # blocked in C: never given another execution


class _HubThread:
    """An OS thread greenlet executions run on, kept from one execution to the next:
    starting and joining a thread per execution cost a fifth of an explorer run's wall
    time on a busy machine (the start waits for the new thread to be scheduled). Idle
    hubs wait in a pool (executions may run at once: ``verify --jobs``); a hub runs one
    execution at a time; one whose execution did not end in time (a task blocked in C)
    is abandoned and ends when that execution does; an idle one ends after :data:`IDLE`
    seconds."""

    IDLE = 30.0
    # _pool_lock guards _pool (the idle hubs) and every hub's state; held only to take,
    # return or drop a hub, never while one runs an execution.
    _pool_lock = real.Lock()
    _pool: ClassVar[list[_HubThread]] = []

    def __init__(self) -> None:
        self.state = "taken"  # "idle" (in the pool), "taken" (an execution's) or "abandoned"
        # _ready: set by submit() when a job is waiting; the hub clears it as it takes it.
        self._ready = real.Event()
        self._job: Callable[[], None] | None = None
        self.thread = real.Thread(target=self._loop, name="chunk-adapter-explore-hub", daemon=True)
        real.thread_start(self.thread)

    @classmethod
    def take(cls) -> _HubThread:
        """An idle hub from the pool, else a new one; the caller's until it gives it back."""
        with cls._pool_lock:
            if cls._pool:
                hub = cls._pool.pop()
                hub.state = "taken"
                return hub
        return cls()

    def give_back(self) -> None:
        """Its execution ended and unwound: idle again, for the next one (unless its job
        raised: that thread is ending)."""
        with self._pool_lock:
            if self.state == "taken":
                self.state = "idle"
                self._pool.append(self)

    def abandon(self) -> None:
        """Its execution is stuck: it ends when that does, and is never taken again."""
        with self._pool_lock:
            self.state = "abandoned"

    def submit(self, job: Callable[[], None]) -> None:
        self._job = job  # one owner at a time: only the execution that took this hub
        self._ready.set()

    def _loop(self) -> None:
        while True:
            while not self._ready.wait(self.IDLE):
                with self._pool_lock:
                    if self.state == "taken":
                        continue  # its execution is about to submit
                    if self.state == "idle":  # idle too long: take() makes a new hub
                        self._pool.remove(self)
                    self.state = "abandoned"
                    return
            self._ready.clear()
            job, self._job = self._job, None
            if job is not None:
                job()  # if it raises, this thread ends (printed); it abandoned the hub first
            with self._pool_lock:
                if self.state == "abandoned":
                    return


def make_carrier(runtime: str) -> Carrier:
    """The carrier for *runtime* (``"greenlet"`` or ``"thread"``)."""
    _check(runtime, "runtime")
    return GreenletCarrier() if runtime == "greenlet" else ThreadCarrier()


def _check(runtime: str, given_as: str) -> None:
    """Raise ``ValueError`` naming *given_as* unless *runtime* can be run on here."""
    if runtime not in RUNTIMES:
        raise ValueError(f"{given_as} must be one of {RUNTIMES} or 'auto', got {runtime!r}")
    if runtime == "greenlet" and _greenlet is None:
        raise ValueError("runtime='greenlet' needs the greenlet package: pip install greenlet")


def choose(runtime: str, modules: Iterable[ModuleType]) -> tuple[str, str]:
    """The runtime to run on and why (one line): *runtime* when one is named (else
    ``$CHUNK_ADAPTER_RUNTIME``), else the greenlet runtime unless the code under test
    (*modules*) needs real threads."""
    named, why = runtime, "asked for"
    if named == "auto":
        named, why = os.environ.get(RUNTIME_ENV, "auto") or "auto", f"${RUNTIME_ENV}"
    if named != "auto":
        _check(named, "runtime" if why == "asked for" else f"${RUNTIME_ENV}")
        return named, why
    if _greenlet is None:
        return "thread", "greenlet is not installed"
    for module in modules:
        if _uses_thread_locals(module):
            return "thread", (
                f"{module.__name__} uses thread-local storage, which greenlets on one "
                "thread would share"
            )
    return "greenlet", "the adapter's threads become greenlets"


def _uses_thread_locals(module: ModuleType) -> bool:
    """Whether *module* holds thread-local storage or its code names ``local`` (as in
    ``threading.local()``): a conservative look, a false yes only costs speed."""
    local_type = real.local_type
    for value in list(vars(module).values()):
        if isinstance(value, local_type) or (
            isinstance(value, type) and issubclass(value, local_type)
        ):
            return True
    return any("local" in code.co_names for code in _codes(module))


def _codes(module: ModuleType) -> Iterator[CodeType]:
    """Every code object defined in *module* (functions, methods, nested code)."""
    name = module.__name__
    seen: set[int] = set()
    stack: list[Any] = list(vars(module).values())
    while stack:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, (staticmethod, classmethod)):
            stack.append(value.__func__)
        elif isinstance(value, property):
            stack += [value.fget, value.fset, value.fdel]
        elif isinstance(value, FunctionType) and value.__module__ == name:
            stack.append(value.__code__)
        elif isinstance(value, type) and value.__module__ == name:
            stack += list(vars(value).values())
        elif isinstance(value, CodeType):
            yield value
            stack += [c for c in value.co_consts if isinstance(c, CodeType)]
