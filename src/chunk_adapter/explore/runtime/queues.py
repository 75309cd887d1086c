"""A controlled ``queue.SimpleQueue``: the one queue of the standard library written in C.

``queue.Queue``, ``LifoQueue`` and ``PriorityQueue`` are Python: they build
their lock and conditions from ``threading`` when they are made, so under the
explorer's patches (:mod:`.patches`) they are controlled as they are.
``SimpleQueue`` is C and blocks inside the interpreter, so a task that made one
gets :class:`ControlledSimpleQueue` instead (``concurrent.futures``'s
``ThreadPoolExecutor`` hands its work to its workers through one).
"""

from __future__ import annotations

import queue
from collections import deque
from typing import Any

from .controller import Controller
from .tasks import Task

__all__ = ["ControlledSimpleQueue"]


class ControlledSimpleQueue:
    """FIFO with modelled blocking: ``put`` and ``get`` are switch points; an empty
    ``get`` blocks the task (until a ``put``, or its virtual timeout)."""

    def __init__(self, ctl: Controller, name: str) -> None:
        self._ctl = ctl
        self.name = name
        self.key = ("queue", ctl.new_serial())  # what DPOR's footprints call it
        self._items: deque[Any] = deque()
        self._getters: list[Task] = []  # tasks blocked in get(); a put wakes them all
        # quiet: a put, and a get that finds an item, are no switch points (the work queue
        # of a ThreadPoolExecutor: the standard library's plumbing, .control.patches.QUIET)
        self.quiet = False

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        ctl = self._ctl
        if not ctl.is_task():
            # Not from this execution: a weakref callback or interpreter exit putting
            # the wake-up None after the execution ended. Nobody is left to wake.
            self._items.append(item)
            return
        if not self.quiet or ctl.tracking:  # quiet: no switch point (but for DPOR)
            ctl.switch_point(f"put {self.name}")
        ctl.touch(self.key, "w")
        self._items.append(item)
        getters, self._getters = self._getters, []
        for task in getters:
            ctl.wake(task, "notified")

    def put_nowait(self, item: Any) -> None:
        self.put(item, block=False)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        ctl = self._ctl
        if not self.quiet or not self._items or ctl.tracking:  # quiet, and an item: none
            ctl.switch_point(f"get {self.name} timeout={timeout}")
        ctl.touch(self.key, "w")
        if timeout is not None and timeout < 0:
            raise ValueError(f"'timeout' must be a non-negative number, got {timeout!r}")
        deadline = None if timeout is None else ctl.now + timeout
        me = ctl.me()
        while not self._items:
            if not block or (deadline is not None and ctl.now >= deadline):
                raise queue.Empty
            self._getters.append(me)
            ctl.block(f"get {self.name}", deadline)
            ctl.touch(self.key, "w")
            if me in self._getters:
                self._getters.remove(me)
        return self._items.popleft()

    def get_nowait(self) -> Any:
        return self.get(block=False)

    def empty(self) -> bool:
        if self._ctl.is_task():
            self._ctl.switch_point(f"empty {self.name}")
            self._ctl.touch(self.key, "r")
        return not self._items

    def qsize(self) -> int:
        if self._ctl.is_task():
            self._ctl.switch_point(f"qsize {self.name}")
            self._ctl.touch(self.key, "r")
        return len(self._items)

    def __repr__(self) -> str:
        return f"<{self.name} items={len(self._items)}>"
