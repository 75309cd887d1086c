"""Opt-in pytest plugin: which tests leave threads, processes or memory behind.

Load it with ``-p tests._crowding``::

    python -m pytest -p tests._crowding tests/unit
    CROWDING_GC=1 CROWDING_JSON=/tmp/unit.json python -m pytest -p tests._crowding tests/unit

After every test (setup, call and teardown done) it records the live threads
(``threading.enumerate()``), the process's children (psutil), the entries in
/dev/shm, the resident set size (VmRSS and VmHWM from /proc/self/status) and,
with ``CROWDING_GC=1``, the number of objects the garbage collector tracks
after a full collection. At the end of the session it prints the 20 tests that
added the most threads, and the 20 that added the most RSS, with the names of
the threads left, and the figures at the end of the run. ``CROWDING_JSON``
names a file to which every test's figures are written, for comparing runs.

A test's figure is the difference between the snapshot after it and the
snapshot after the test before it, so a thread that a test leaves and the next
test ends is charged to the first test and credited to the second.
"""

from __future__ import annotations

import gc
import json
import os
import threading
import time
from collections.abc import Generator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil
import pytest

__all__ = ["Snapshot", "snapshot"]

TOP = 20


@dataclass(frozen=True)
class Snapshot:
    """The process's crowding at one moment."""

    threads: int
    non_daemon: int
    names: tuple[str, ...]
    children: tuple[str, ...]
    shm: int
    rss_kb: int
    hwm_kb: int
    gc_objects: int = -1


def _status_kb(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return -1


def _children() -> tuple[str, ...]:
    found: list[str] = []
    for child in psutil.Process().children(recursive=True):
        try:
            found.append(f"{child.pid}:{child.name()}")
        except psutil.Error:
            continue
    return tuple(found)


def _shm_entries() -> int:
    try:
        return len(os.listdir("/dev/shm"))
    except OSError:
        return -1


def snapshot(count_objects: bool = False) -> Snapshot:
    """The figures now; ``count_objects`` runs a full collection first (slow)."""
    threads = threading.enumerate()
    gc_objects = -1
    if count_objects:
        gc.collect()
        gc_objects = len(gc.get_objects())
    return Snapshot(
        threads=len(threads),
        non_daemon=sum(1 for t in threads if not t.daemon),
        names=tuple(sorted(t.name for t in threads)),
        children=_children(),
        shm=_shm_entries(),
        rss_kb=_status_kb("VmRSS"),
        hwm_kb=_status_kb("VmHWM"),
        gc_objects=gc_objects,
    )


def _short(nodeid: str) -> str:
    """A node id cut to one line (a parametrize id can be a megabyte of payload)."""
    return nodeid if len(nodeid) <= 150 else nodeid[:147] + "..."


def _added_names(before: tuple[str, ...], after: tuple[str, ...]) -> list[str]:
    left = list(before)
    added: list[str] = []
    for name in after:
        if name in left:
            left.remove(name)
        else:
            added.append(name)
    return added


@dataclass
class _Row:
    nodeid: str
    seconds: float
    after: Snapshot
    d_threads: int
    d_children: int
    d_shm: int
    d_rss_kb: int
    d_gc: int
    new_threads: list[str] = field(default_factory=list)


class CrowdingRecorder:
    """Takes a snapshot after each test and reports the worst tests at the end."""

    def __init__(self, count_objects: bool, json_path: str | None) -> None:
        self.count_objects = count_objects
        self.json_path = json_path
        self.first = snapshot(count_objects)
        self.last = self.first
        self.collected = self.first
        self.rows: list[_Row] = []

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Collection (imports, parametrize values) is measured apart from the first test."""
        self.collected = self.last = snapshot(self.count_objects)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        start = time.monotonic()
        result = yield
        now = snapshot(self.count_objects)
        before = self.last
        self.rows.append(
            _Row(
                nodeid=_short(item.nodeid),
                seconds=time.monotonic() - start,
                after=now,
                d_threads=now.threads - before.threads,
                d_children=len(now.children) - len(before.children),
                d_shm=now.shm - before.shm,
                d_rss_kb=now.rss_kb - before.rss_kb,
                d_gc=(now.gc_objects - before.gc_objects) if self.count_objects else 0,
                new_threads=_added_names(before.names, now.names),
            )
        )
        self.last = now
        return result

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        write = terminalreporter.write_line
        terminalreporter.section("crowding (tests._crowding)")
        end = snapshot(self.count_objects)
        write(
            f"start: threads={self.first.threads} rss={self.first.rss_kb // 1024} MB; "
            f"after collection: threads={self.collected.threads} "
            f"rss={self.collected.rss_kb // 1024} MB; "
            f"end: threads={end.threads} (non-daemon {end.non_daemon}) "
            f"children={len(end.children)} shm={end.shm} rss={end.rss_kb // 1024} MB "
            f"peak rss={end.hwm_kb // 1024} MB"
            + (f" gc objects={end.gc_objects}" if self.count_objects else "")
        )
        if end.threads > 1:
            counts: dict[str, int] = {}
            for name in end.names:
                key = name.rstrip("0123456789")
                counts[key] = counts.get(key, 0) + 1
            write("threads alive at the end: " + ", ".join(f"{k}x{v}" for k, v in counts.items()))
        if end.children:
            write(f"children alive at the end: {list(end.children)}")
        write(f"-- top {TOP} tests by threads added --")
        for row in sorted(self.rows, key=lambda r: r.d_threads, reverse=True)[:TOP]:
            if row.d_threads <= 0:
                break
            names = ", ".join(row.new_threads[:6]) + (" ..." if len(row.new_threads) > 6 else "")
            now = row.after.threads
            write(f"  +{row.d_threads:3d} threads (now {now}) {_short(row.nodeid)}  [{names}]")
        write(f"-- top {TOP} tests by RSS added --")
        for row in sorted(self.rows, key=lambda r: r.d_rss_kb, reverse=True)[:TOP]:
            if row.d_rss_kb <= 0:
                break
            write(
                f"  +{row.d_rss_kb / 1024:7.1f} MB (now {row.after.rss_kb // 1024} MB) "
                f"{row.seconds:6.1f}s {_short(row.nodeid)}"
            )
        if self.count_objects:
            write(f"-- top {TOP} tests by gc objects added --")
            for row in sorted(self.rows, key=lambda r: r.d_gc, reverse=True)[:TOP]:
                if row.d_gc <= 0:
                    break
                write(f"  +{row.d_gc:8d} objects (now {row.after.gc_objects}) {_short(row.nodeid)}")
        leaks = [r for r in self.rows if r.d_children > 0 or r.d_shm > 0]
        if leaks:
            write("-- tests that added child processes or /dev/shm entries --")
            for row in leaks[:TOP]:
                write(f"  children {row.d_children:+d} shm {row.d_shm:+d} {_short(row.nodeid)}")
        if self.json_path:
            Path(self.json_path).write_text(
                json.dumps(
                    {
                        "start": asdict(self.first),
                        "collected": asdict(self.collected),
                        "end": asdict(end),
                        "tests": [asdict(r) for r in self.rows],
                    }
                )
            )
            write(f"per-test figures written to {self.json_path}")


def pytest_configure(config: pytest.Config) -> None:
    recorder = CrowdingRecorder(
        count_objects=os.environ.get("CROWDING_GC", "") not in ("", "0"),
        json_path=os.environ.get("CROWDING_JSON") or None,
    )
    config.pluginmanager.register(recorder, "crowding-recorder")
