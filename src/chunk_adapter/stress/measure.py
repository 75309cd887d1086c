"""Measuring an adapter's background threads: CPU time per thread, and gets counted cheaply.

CPU time comes from :mod:`psutil` per OS thread (``Process().threads()``),
matched to the adapter's threads by ``native_id``; ``time.thread_time`` only
sees the calling thread. The resolution is the kernel's clock tick (10 ms on
Linux), so windows are a second or more.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..errors import InvalidValue

__all__ = ["Window", "measure_window", "thread_cpu"]


def thread_cpu(threads: Iterable[threading.Thread]) -> float:
    """User + system CPU seconds used so far by *threads* (those still alive).

    Needs :mod:`psutil` (``pip install chunk-adapter[test]``), imported here so
    that the rest of the package does not depend on it.
    """
    try:
        psutil = importlib.import_module("psutil")
    except ImportError:
        raise InvalidValue(
            "measuring per-thread CPU time needs psutil: pip install psutil "
            "(or install chunk-adapter[test])"
        ) from None
    ids = {t.native_id for t in threads if t.native_id is not None}
    return float(
        sum(t.user_time + t.system_time for t in psutil.Process().threads() if t.id in ids)
    )


@dataclass(frozen=True)
class Window:
    """One measurement window over an adapter's threads."""

    seconds: float
    cpu: float
    gets: int

    @property
    def cpu_per_second(self) -> float:
        return self.cpu / self.seconds

    @property
    def gets_per_second(self) -> float:
        return self.gets / self.seconds


def measure_window(
    threads: Callable[[], Iterable[threading.Thread]], gets: Callable[[], int], seconds: float
) -> Window:
    """CPU used and gets made by *threads* over *seconds* of the caller doing nothing.

    The caller's thread blocks on an event that nobody sets: this is the
    measurement interval itself, not a wait for something to happen.
    """
    idle = threading.Event()
    cpu0, gets0, t0 = thread_cpu(threads()), gets(), time.monotonic()
    idle.wait(seconds)
    cpu1, gets1, t1 = thread_cpu(threads()), gets(), time.monotonic()
    return Window(t1 - t0, max(0.0, cpu1 - cpu0), gets1 - gets0)
