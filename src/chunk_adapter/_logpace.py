"""Paced log lines: at most one line per kind and key per interval (issue 27 point 8).

A key whose get fails forever logged one line per failure (~850 a second); a
long outage did the same for every put. :class:`LogPace` lets one line through
per ``(what, key)`` per :data:`INTERVAL` seconds and counts the rest, and the
next line that gets through says how many it stands for. The counters in
``stats()`` count every failure whatever the log shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .rules import RECENT_REQUESTS

__all__ = ["INTERVAL", "LogPace", "more"]

INTERVAL = 1.0
"""Seconds between two lines of one kind about one key."""
KEEP = RECENT_REQUESTS // 2
"""Keys remembered before the forgettable ones are dropped: at most ``KEEP + 1`` keys, so
fewer requests than the record of recent ones R24 allows (it was 1,024 until the
``simulate`` stage's R24 check found the reference holding 600 closed requests here)."""


class LogPace:
    """Which log lines of a kind and key may be written now (module doc).

    Used by one thread only (each side of the adapter has its own): no lock."""

    def __init__(self, clock: Callable[[], float], interval: float = INTERVAL) -> None:
        self._clock = clock
        self.interval = interval
        # (what, key) -> (when its last line was written, lines held back since)
        self._last: dict[tuple[str, str], tuple[float, int]] = {}

    def admit(self, what: str, key: str) -> int | None:
        """``None``: hold this line back (counted); else write it, saying it stands for
        that many lines held back since the previous one."""
        now = self._clock()
        entry = self._last.get((what, key))
        if entry is not None and now - entry[0] < self.interval:
            self._last[(what, key)] = (entry[0], entry[1] + 1)
            return None
        self._last[(what, key)] = (now, 0)
        if len(self._last) > KEEP:
            self._forget(now)
        return 0 if entry is None else entry[1]

    def say(
        self, write: Callable[..., None], what: str, key: str, message: str, *args: Any
    ) -> None:
        """``write(message, *args)`` (a logger method) unless held back; a line written
        after some were held back says how many (``message`` gets a trailing ``%s``)."""
        held = self.admit(what, key)
        if held is not None:
            write(message + "%s", *args, more(held))

    def _forget(self, now: float) -> None:
        """Drop the keys whose interval passed with nothing held back (their next line
        is written anyway); if that is not enough, keep the most recent half."""
        live = {k: v for k, v in self._last.items() if v[1] or now - v[0] < self.interval}
        if len(live) > KEEP:
            newest = sorted(live.items(), key=lambda item: item[1][0])[-(KEEP // 2) :]
            live = dict(newest)
        self._last = live


def more(held_back: int) -> str:
    """The suffix of a line that stands for *held_back* others."""
    if not held_back:
        return ""
    return f" ({held_back} more like it held back since the last line)"
