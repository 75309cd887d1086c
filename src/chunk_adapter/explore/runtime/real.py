"""The real threading primitives and clocks, captured when the explorer is imported.

While an exploration runs, :mod:`.patches` replaces attributes of the
``threading``, ``time``, ``queue`` and ``_thread`` modules process-wide. The
explorer's own machinery (batons, the driver's wait, the hand-off watchdog)
must keep the real things whatever is patched, so it takes them from here.
:mod:`.patches` imports this module first, so what is captured here is always
the original.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from _thread import LockType, allocate_lock, get_ident, start_new_thread
from _thread import _local as local_type
from queue import SimpleQueue
from threading import Condition, Event, Lock, RLock, Thread, current_thread
from time import monotonic, monotonic_ns, perf_counter, perf_counter_ns, process_time, sleep
from typing import Any

__all__ = [
    "Condition",
    "Event",
    "Lock",
    "LockType",
    "RLock",
    "SimpleQueue",
    "Thread",
    "allocate_lock",
    "current_thread",
    "get_ident",
    "local_type",
    "monotonic",
    "monotonic_ns",
    "perf_counter",
    "perf_counter_ns",
    "process_time",
    "sleep",
    "start_new_thread",
    "thread_frames",
    "thread_is_alive",
    "thread_join",
    "thread_start",
    "wall_time",
    "wall_time_ns",
]

thread_start = threading.Thread.start
thread_join = threading.Thread.join
thread_is_alive = threading.Thread.is_alive
wall_time = time.time
wall_time_ns = time.time_ns


def thread_frames() -> dict[int, Any]:
    """``sys._current_frames()`` with the garbage collector held off while it runs.

    CPython before 3.11.9 and 3.12.3 (gh-106883) holds the interpreter's thread-list lock
    while it builds that dict; a collection started by one of its allocations may free a
    ``threading.local`` caught in a reference cycle, whose ``local_clear`` takes the same
    lock, and the process deadlocks in C (gh-102126). Seen here: a verify worker stuck for
    good between two executions, its stage reported inconclusive after its whole budget."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return sys._current_frames()
    finally:
        if enabled:
            gc.enable()
