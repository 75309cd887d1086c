"""Faults in time: outages and slow calls, on any clock.

:class:`TimedFaults` is what :class:`~.faults.FaultyConnector` (puts and gets)
and :class:`~.builders.GatedBuilder` (builds) consult before each call:

* an **outage** makes every matching call that starts in ``[start, end)``
  fail (the wrapper raises ``InjectedFault``), however many there are;
* a **slow** entry makes the next *times* matching calls take *seconds*
  longer (the wrapper sleeps before the call);
* a **latency** makes every call take a random time up to that bound, drawn
  from the seed, the call and how many such calls on its key came before it
  (:meth:`TimedFaults.set_latency`, :func:`keyed_random`), so the same calls take
  the same times, and a call keeps its time when unrelated calls come and go.

Times are read from ``clock`` and slept with ``sleep``: real time by default;
the explorer passes its virtual clock and sleep, so a 60-second outage costs no
wall time and replays exactly (:meth:`TimedFaults.use_clock`).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import InvalidValue

__all__ = ["TimedFaults", "hits", "keyed_random", "stream_of"]


def stream_of(pattern: str | None) -> str | None:
    """The stream a key pattern names (``"r_0"`` for ``"r_0_*"``: request ``r``, stage 0),
    or ``None`` for a single key or no key."""
    return pattern[:-2] if pattern is not None and pattern.endswith("_*") else None


def hits(pattern: str | None, key: str) -> bool:
    """Whether an outage or slow call on *pattern* applies to *key*: ``None`` to every
    key, ``"r_0_*"`` to every key of that stream (:func:`stream_of`), any other pattern
    to that key only."""
    if pattern is None or pattern == key:
        return True
    stream = stream_of(pattern)
    return stream is not None and key.rsplit("_", 1)[0] == stream


@dataclass
class _Window:
    op: str
    key: str | None  # None: any key (or request id, for builds)
    start: float
    end: float


@dataclass
class _Slow:
    op: str
    key: str | None
    seconds: float
    times: int


class TimedFaults:
    """Outages and slow calls for one wrapper (module doc)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.clock, self.sleep = clock, sleep
        # Guards _windows, _slow and _last_end: every call consults them. Never held
        # while sleeping or calling the wrapped connector; nobody waits on it.
        self._lock = threading.Lock()
        # Outages not over yet and slow entries not used up: each call drops the spent
        # ones, so a long run (a world repeated a thousand times) scans only live ones.
        self._windows: list[_Window] = []
        self._slow: list[_Slow] = []
        self._last_end = float("-inf")  # when the last outage ever begun ends
        self._busy_until = float("-inf")  # when the slow calls begun so far end
        self._latency = 0.0
        self._seed = 0
        self._calls: dict[tuple[str, str], int] = {}  # (op, key) -> latencies drawn

    def use_clock(self, clock: Callable[[], float], sleep: Callable[[float], None]) -> None:
        """Read time from *clock* and wait with *sleep* from now on (the explorer's)."""
        self.clock, self.sleep = clock, sleep

    def set_latency(self, seconds: float, seed: int) -> None:
        """Make every call take up to *seconds* longer, the delays drawn from *seed*."""
        if not 0 <= seconds < float("inf"):
            raise InvalidValue(f"a latency is a finite time >= 0 s, got seconds={seconds!r}")
        with self._lock:
            self._latency, self._seed = seconds, seed
            self._calls.clear()  # the draws start over, as a new stream would

    def outage(self, op: str, key: str | None, seconds: float) -> float:
        """Fail every *op* call (on *key*, a stream's keys, or any: :func:`hits`) for
        *seconds* from now; returns the end."""
        _check(op, seconds)
        start = self.clock()
        with self._lock:
            self._windows.append(_Window(op, key, start, start + seconds))
            self._last_end = max(self._last_end, start + seconds)
        return start + seconds

    def slow(self, op: str, key: str | None, seconds: float, times: int = 1) -> None:
        """Make the next *times* *op* calls (on *key*, or any) take *seconds* longer."""
        _check(op, seconds)
        if times < 1:
            raise InvalidValue(f"slow(): times counts calls from 1, got times={times!r}")
        with self._lock:
            self._slow.append(_Slow(op, key, seconds, times))

    @property
    def ends(self) -> float:
        """When the last outage, or the last slow call begun so far, ends (the clock's
        time; ``-inf`` with none)."""
        with self._lock:
            return max(self._busy_until, self._last_end)

    def _jitter(self, op: str, key: str) -> float:
        """A number in [0, 1) for the *n*-th *op* call on *key* (under the lock)."""
        n = self._calls.get((op, key), 0)
        self._calls[(op, key)] = n + 1
        return keyed_random(self._seed, op, key, n)

    def before(self, op: str, key: str) -> bool:
        """Called before each *op* call on *key*: waits out a slow entry, then says
        whether an outage fails the call."""
        with self._lock:
            if not self._windows and not self._slow and not self._latency:
                return False
            delay = self._jitter(op, key) * self._latency if self._latency else 0.0
            for slow in self._slow:
                if slow.op == op and hits(slow.key, key):
                    slow.times -= 1
                    delay += slow.seconds
                    if slow.times <= 0:
                        self._slow.remove(slow)
                    break
            if delay > 0:
                self._busy_until = max(self._busy_until, self.clock() + delay)
        if delay > 0:
            self.sleep(delay)
        with self._lock:
            # the time read under the lock: a call that read it earlier and waited for the
            # lock meanwhile must not find an outage dropped that was still on at its time
            now = self.clock()
            if any(w.end <= now for w in self._windows):  # over: no later call meets them
                self._windows = [w for w in self._windows if w.end > now]
            return any(
                w.op == op and hits(w.key, key) and w.start <= now < w.end for w in self._windows
            )


def keyed_random(*parts: object) -> float:
    """A number in [0, 1) fixed by *parts* (their ``str``): the same call draws the same
    number whatever else was drawn before it, so a world with an op removed keeps every
    other op's timing (a shared stream would shift every later draw, and a race that
    needed those timings would be lost while the world shrinks)."""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _check(op: str, seconds: float) -> None:
    if op not in ("put", "get", "build"):
        raise InvalidValue(f"a timed fault is for 'put', 'get' or 'build', got op={op!r}")
    if not seconds > 0 or seconds == float("inf"):
        raise InvalidValue(f"a timed fault lasts a finite time > 0 s, got seconds={seconds!r}")
