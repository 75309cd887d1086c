"""An asyncio event loop under the explorer: its selector waits on the virtual clock.

An adapter that runs an asyncio loop in a thread of its own spends that thread's idle
time in ``selector.select(timeout)``: a real ``epoll`` wait, which the explorer could
neither interrupt nor time. While an exploration runs, ``selectors.DefaultSelector``
made by a task (the one ``asyncio.new_event_loop()`` makes) is a
:class:`ControlledSelector`:

* ``select(timeout)`` is a switch point (but for a zero timeout: the loop polls between
  its callbacks, each a switch point already); it returns what the real selector has
  ready at once (a zero-timeout poll), else the task blocks in virtual time until the
  timeout (the loop's next ``call_later`` / ``asyncio.sleep`` / ``wait_for``
  deadline, read from the routed ``time.monotonic``) or until it is woken;
* a ``call_soon_threadsafe`` from any task wakes it: the loop's ``_write_to_self``
  wakes the selector's task instead of writing a byte to the real self-pipe
  (:func:`wake_after_write`), and while the self-pipe is all the loop watches no real
  ``epoll`` is asked at all: three system calls per round trip cost more than the
  rest of the step;
* every ready callback (``Handle._run``) that runs the code under test (a task's step,
  a ``call_soon_threadsafe`` of the adapter's) is a switch point
  (:func:`before_callback`): another task may run between two of them, as another thread
  may between any two bytecodes of the loop's thread; the library's own plumbing
  callbacks are not. Callbacks keep the order asyncio gives them.

``run_in_executor`` and ``asyncio.to_thread`` workers are ``ThreadPoolExecutor``
threads, already tasks (:mod:`..control.patches`); ``asyncio.Queue``, ``Lock``,
``Event`` and ``Condition`` live on one loop and switch only at its callbacks.

The selector any task makes with ``selectors.DefaultSelector()`` is one too, so a thread
woken through a pipe (``os.write`` of a byte to a pipe its ``select`` watches, or an
``eventfd``) is controlled: every ``os.write`` / ``os.eventfd_write`` a task makes ends the
waits of the selectors watching real file descriptors (:func:`after_write`), and each
looks again at what is ready (a wake for another pipe finds nothing and waits on).

Not controlled, and said so: a wait on real I/O the explorer did not see written (a
socket's ``send``, another process, a server) — a selector that reaches its timeout with a
descriptor ready ends the execution as uncontrolled (no verdict), since it would have
woken earlier for real; an event loop written in C (uvloop) never calls this selector,
its thread is reported uncontrolled.
"""

from __future__ import annotations

import selectors
import weakref
from typing import Any

from .controller import Controller
from .tasks import Task

__all__ = ["ControlledSelector", "after_write", "before_callback", "wake_after_write"]

_PLUMBING = ("asyncio.", "concurrent.futures.")
"""Callbacks of the standard library's own plumbing (a future's state copied across, the
self-pipe read): no switch point before them, as between any two of its statements; a
task's step and the code under test's callbacks get one."""

WAIT = "select (asyncio loop: until a timer, call_soon_threadsafe or real I/O)"

_LIVE: weakref.WeakSet[ControlledSelector] = weakref.WeakSet()
"""Every controlled selector not yet collected: what :func:`after_write` wakes. Touched
only by tasks, one at a time (the controller runs one task at a time)."""


class ControlledSelector(selectors.BaseSelector):
    """A real selector whose waits are the explorer's (module doc)."""

    def __init__(self, ctl: Controller, inner: selectors.BaseSelector, name: str) -> None:
        self._ctl = ctl
        self._inner = inner
        self.name = name
        self.key = ("selector", ctl.new_serial())  # what DPOR's footprints call it
        self._waiter: Task | None = None  # the loop's task while it waits in select()
        self._woken = False  # a write to the self-pipe since the last select()
        self._real: set[Any] = set()  # what is registered besides the loop's self-pipe
        self._written = False  # a task wrote to a descriptor while the waiter waited
        _LIVE.add(self)

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = self._inner.register(fileobj, events, data)
        self._note(key)
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        key = self._inner.unregister(fileobj)
        self._real.discard(key.fd)
        return key

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = self._inner.modify(fileobj, events, data)
        self._note(key)
        return key

    def _note(self, key: selectors.SelectorKey) -> None:
        """Whether *key* is real I/O or the loop's self-pipe (its reader is
        ``_read_from_self``; nothing is written to it, :func:`wake_after_write`)."""
        reader = key.data[0] if isinstance(key.data, tuple) and key.data else None
        callback = getattr(reader, "_callback", None)
        if getattr(callback, "__name__", None) == "_read_from_self":
            self._real.discard(key.fd)
        else:
            self._real.add(key.fd)

    def get_map(self) -> Any:
        return self._inner.get_map()

    def close(self) -> None:
        self._inner.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ctl = self._ctl
        me = ctl.me()
        if timeout != 0:  # a zero timeout polls between callbacks, each a switch point
            shown = "none" if timeout is None else f"{timeout:.4g}"
            ctl.switch_point_of(me, f"select {self.name} timeout={shown}")
        ctl.touch(self.key, "w")
        deadline = None if timeout is None else ctl.now + max(0.0, timeout)
        while True:
            ready = self._inner.select(0) if self._real else []
            if ready or self._woken:
                self._woken = False
                return ready
            if deadline is not None and ctl.now >= deadline:
                return []
            self._waiter, self._written = me, False
            try:
                reason = ctl.block(f"{WAIT} {self.name}", deadline)
            finally:
                self._waiter = None
            ctl.touch(self.key, "w")
            unseen = reason == "timeout" and not self._written  # timed out, then written: seen
            if unseen and self._real and self._inner.select(0):
                ctl.give_up(
                    "uncontrolled",
                    f"{self.name} reached its timeout with a file descriptor ready that "
                    "nothing the explorer saw wrote to (a socket's send, another process, "
                    "a server): the wait would have ended earlier for real, so the times "
                    "of this execution say nothing. Wake the thread through an Event or "
                    "Condition, or a pipe written with os.write",
                )

    def look_again(self) -> None:
        """Something was written to a descriptor: a wait on real I/O looks again at what is
        ready (and waits on, to its own deadline, if nothing is)."""
        waiter = self._waiter
        if waiter is not None and self._real:
            self._written = True
            self._ctl.touch(self.key, "w")
            self._ctl.wake(waiter, "written")

    def wake(self) -> None:
        """Something was written to the loop's self-pipe: end its wait."""
        self._woken = True
        self._ctl.touch(self.key, "w")
        waiter = self._waiter
        if waiter is not None:
            self._ctl.wake(waiter, "woken")


def after_write(original: Any, active: Any) -> Any:
    """``os.write`` (or ``os.eventfd_write``) that, made by a task of the execution in
    progress (*active*: :data:`..control.patches.ACTIVE`), makes every selector of that
    execution waiting on real I/O look again (:meth:`ControlledSelector.look_again`)."""

    def write(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        rt = active.runtime
        if rt is not None and rt.ctl.is_task():
            for selector in list(_LIVE):
                if selector._ctl is rt.ctl:
                    selector.look_again()
        return result

    return write


def wake_after_write(original: Any) -> Any:
    """``BaseSelectorEventLoop._write_to_self`` that wakes a controlled selector instead of
    writing to the self-pipe (which it never reads: :meth:`ControlledSelector.select`)."""

    def _write_to_self(loop: Any) -> None:
        selector = getattr(loop, "_selector", None)
        if isinstance(selector, ControlledSelector):
            selector.wake()
        else:
            original(loop)

    return _write_to_self


def before_callback(original: Any, active: Any) -> Any:
    """``asyncio.events.Handle._run`` with a switch point before the callback, on a task
    of the execution in progress (*active*: :data:`..control.patches.ACTIVE`)."""

    def _run(handle: Any) -> None:
        rt = active.runtime
        if rt is not None and rt.ctl.is_task():
            callback = getattr(handle, "_callback", None)
            home = getattr(callback, "__module__", None) or ""
            if not home.startswith(_PLUMBING):  # a task's step, the code under test's
                name = getattr(callback, "__qualname__", None) or type(callback).__name__
                rt.ctl.switch_point(f"asyncio callback {name}")
        original(handle)

    return _run
