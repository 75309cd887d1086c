"""The real threading primitives and clocks, captured when the explorer is imported.

While an exploration runs, :mod:`.patches` replaces attributes of the
``threading``, ``time``, ``queue`` and ``_thread`` modules process-wide. The
explorer's own machinery (batons, the driver's wait, the hand-off watchdog)
must keep the real things whatever is patched, so it takes them from here.
:mod:`.patches` imports this module first, so what is captured here is always
the original.
"""

from __future__ import annotations

import _thread
import queue
import threading
import time

__all__ = [
    "Condition",
    "Event",
    "Lock",
    "LockType",
    "RLock",
    "SimpleQueue",
    "Thread",
    "allocate_lock",
    "get_ident",
    "monotonic",
    "monotonic_ns",
    "perf_counter",
    "perf_counter_ns",
    "sleep",
    "start_new_thread",
    "thread_is_alive",
    "thread_join",
    "thread_start",
    "wall_time",
    "wall_time_ns",
]

LockType = _thread.LockType
allocate_lock = _thread.allocate_lock
get_ident = _thread.get_ident
start_new_thread = _thread.start_new_thread

Lock = threading.Lock
RLock = threading.RLock
Condition = threading.Condition
Event = threading.Event
Thread = threading.Thread
thread_start = threading.Thread.start
thread_join = threading.Thread.join
thread_is_alive = threading.Thread.is_alive

SimpleQueue = queue.SimpleQueue

monotonic = time.monotonic
monotonic_ns = time.monotonic_ns
perf_counter = time.perf_counter
perf_counter_ns = time.perf_counter_ns
wall_time = time.time
wall_time_ns = time.time_ns
sleep = time.sleep
