"""A :class:`History` the harness can wait on, with the counts it waits for.

Every append updates running counts (successful puts and gets per key, failed
puts, builds per request, gets per key) and wakes waiters, so the harness
waits for "the model's expected counts are reached" on a condition instead of
re-scanning the whole history in a sleep loop.

It also counts **quiet rounds** of the RECV thread: the gets of a sentinel
registration (a request nobody sends to) mark the thread's rounds over its
polling queue, and a round between two sentinel gets in which every get found
nothing (no value, no failure) shows the receiver has nothing left to fetch.
``quiet_since`` is the sequence number at which the latest quiet round began:
a quiet round that began after time *t* proves every registration was polled
after *t* and found nothing.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from ..history import BuildCall, ConnectorOp, History

__all__ = ["Counts", "WatchedHistory"]

_SLICE = 0.05  # a lost wake-up costs at most this much latency


class Counts:
    """Running counts of what the connector and the builder have seen."""

    def __init__(self) -> None:
        self.ok_puts: Counter[str] = Counter()
        self.failed_puts = 0
        self.builds: Counter[str] = Counter()
        self.ok_gets: Counter[str] = Counter()
        self.gets: Counter[str] = Counter()  # every get, whatever its outcome
        self.sentinel_key: str | None = None
        self.quiet_rounds = 0
        self.quiet_since = 0  # begin tick of the sentinel get opening the last quiet round
        self._ok_gets = 0
        self._failed_gets = 0
        self._at_last_sentinel: tuple[int, int] | None = None
        self._last_sentinel_begin = 0

    def add(self, record: Any) -> None:
        if isinstance(record, ConnectorOp):
            if record.op == "put":
                if record.outcome == "ok":
                    self.ok_puts[record.key] += 1
                else:
                    self.failed_puts += 1
            else:
                self.gets[record.key] += 1
                if record.outcome == "ok":
                    self.ok_gets[record.key] += 1
                    self._ok_gets += 1
                elif record.outcome == "error":
                    self._failed_gets += 1
                if record.key == self.sentinel_key:
                    now = (self._ok_gets, self._failed_gets)
                    if now == self._at_last_sentinel and record.outcome == "none":
                        self.quiet_rounds += 1
                        self.quiet_since = self._last_sentinel_begin
                    self._at_last_sentinel = now
                    self._last_sentinel_begin = record.begin
        elif isinstance(record, BuildCall):
            self.builds[record.request_id] += 1


class WatchedHistory(History):
    """A History whose appends update :attr:`counts` and wake :meth:`wait_for` callers."""

    def __init__(self) -> None:
        super().__init__()
        # Guards `counts`; notified (notify_all) after every append. Waiters
        # hold it only to evaluate their predicate; nobody calls out under it.
        self._changed = threading.Condition()
        self.counts = Counts()

    def append(self, record: Any) -> None:
        super().append(record)
        with self._changed:
            self.counts.add(record)
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[Counts], bool], timeout: float) -> bool:
        """Wait until ``predicate(counts)`` holds; ``False`` after *timeout* seconds.

        The predicate is re-evaluated after every append and at least every
        50 ms. This is the harness's one bounded wait.
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self.counts):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(min(remaining, _SLICE))
            return True

    def wait_for_append(self, timeout: float) -> bool:
        """Wait until at least one more record is appended; ``False`` after *timeout*."""
        start = len(self)
        return self.wait_for(lambda _: len(self) > start, timeout)

    def counts_copy(self) -> Counts:
        """A copy of the counts, for messages."""
        with self._changed:
            c = Counts()
            c.ok_puts = Counter(self.counts.ok_puts)
            c.failed_puts = self.counts.failed_puts
            c.builds = Counter(self.counts.builds)
            c.ok_gets = Counter(self.counts.ok_gets)
            c.gets = Counter(self.counts.gets)
            c.quiet_rounds = self.counts.quiet_rounds
            c.quiet_since = self.counts.quiet_since
            return c
