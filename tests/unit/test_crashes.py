"""Thread deaths are collected through ``threading.excepthook`` (R22): bed/crashes.py."""

from __future__ import annotations

import threading

import pytest

from chunk_adapter.bed.crashes import thread_crashes


def _dies(go: threading.Event, name: str) -> threading.Thread:
    def run() -> None:
        go.wait(10)
        raise ValueError(name)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


@pytest.mark.rule("R22")
def test_only_threads_started_since_entering_are_collected_when_asked() -> None:
    """A thread left over from an earlier run that dies now is not this run's death."""
    go = threading.Event()
    old = _dies(go, "left-over")
    with thread_crashes(chain=False, since_now=True) as deaths:
        new = _dies(go, "this-run")
        go.set()
        old.join(10)
        new.join(10)
    assert [name for name, _ in deaths] == ["this-run"], deaths
    assert isinstance(deaths[0][1], ValueError)


@pytest.mark.rule("R22")
def test_every_thread_is_collected_by_default() -> None:
    go = threading.Event()
    old = _dies(go, "left-over")
    with thread_crashes(chain=False) as deaths:
        go.set()
        old.join(10)
    assert [name for name, _ in deaths] == ["left-over"], deaths
