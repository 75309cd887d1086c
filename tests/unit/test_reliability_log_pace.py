"""Issue 27 point 8: repeated log lines are paced, at most one per kind and key per second.

Before: a key whose get failed forever logged one line per failure (~850 a
second). Now :class:`~chunk_adapter._logpace.LogPace` lets one line through per
kind and key per second and the next line says how many it stands for; the
stats counters still count every failure.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from chunk_adapter import ChunkAdapter, MemoryConnector
from chunk_adapter._logpace import KEEP, LogPace, more
from chunk_adapter.errors import InjectedFault


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_kind_and_key_per_interval_and_the_next_counts_the_rest() -> None:
    clock = Clock()
    pace = LogPace(clock, interval=1.0)
    assert pace.admit("get", "k") == 0
    assert [pace.admit("get", "k") for _ in range(5)] == [None] * 5
    assert pace.admit("get", "other") == 0, "another key has its own pace"
    assert pace.admit("put", "k") == 0, "another kind has its own pace"
    clock.now = 0.999
    assert pace.admit("get", "k") is None
    clock.now = 1.0
    assert pace.admit("get", "k") == 6, "the line after the interval stands for six"
    assert more(6) == " (6 more like it held back since the last line)" and more(0) == ""


def test_the_keys_remembered_stay_bounded() -> None:
    clock = Clock()
    pace = LogPace(clock, interval=1.0)
    for i in range(10 * KEEP):
        clock.now = i * 0.01
        pace.admit("get", f"k{i}")
    assert len(pace._last) <= KEEP + 1


class FailingGets(MemoryConnector):
    """Every get of *key* fails; after *count* failures it sets ``enough``."""

    def __init__(self, key: str, count: int) -> None:
        super().__init__()
        self.key, self.count, self.failures = key, count, 0
        self.enough = threading.Event()  # set by the RECV thread's count-th get of key

    def get(self, key: str) -> dict[str, Any] | None:
        if key == self.key:
            self.failures += 1
            if self.failures >= self.count:
                self.enough.set()
            raise InjectedFault(f"get({key!r}) fails for good")
        return super().get(key)


def test_a_get_failing_forever_logs_about_once_a_second(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="chunk_adapter")
    conn = FailingGets("r_0_0", count=200)
    rcv = ChunkAdapter(conn, stage_id=1, event_driven=False, idle_backoff=0.001)
    start = time.monotonic()
    try:
        rcv.load_async("r")
        assert conn.enough.wait(60.0), f"only {conn.failures} failed gets in 60 s"
        elapsed = time.monotonic() - start
    finally:
        rcv.stop()
    lines = [r for r in caplog.records if "get r_0_0 failed" in r.getMessage()]
    assert 1 <= len(lines) <= elapsed + 2, (
        f"{len(lines)} lines for {conn.failures} failed gets in {elapsed:.2f} s: "
        "more than one a second"
    )
    assert rcv.stats().get_failures >= 200, "the counter counts every failure"
