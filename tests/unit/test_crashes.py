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


def _raises(exc: BaseException, name: str) -> None:
    def run() -> None:
        raise exc

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    thread.join(10)


@pytest.mark.rule("R22")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_thread_ending_with_systemexit_is_no_death() -> None:
    """SystemExit ends a thread quietly, as Python's own hook reads it."""
    with thread_crashes(chain=False, since_now=True) as deaths:
        _raises(SystemExit(0), "exits")
        _raises(ValueError("boom"), "dies")
    assert [name for name, _ in deaths] == ["dies"], deaths


@pytest.mark.rule("R22")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_collectors_closed_out_of_order_each_see_only_their_time() -> None:
    """Two collectors open at once, the first closed first: the second still collects, the
    first collects nothing more, and neither collects once both are closed."""
    first = thread_crashes(chain=False)
    second = thread_crashes(chain=False)
    a = first.__enter__()
    b = second.__enter__()
    first.__exit__(None, None, None)
    _raises(ValueError("after the first closed"), "late")
    second.__exit__(None, None, None)
    assert a == [] and [name for name, _ in b] == ["late"], (a, b)
    _raises(ValueError("after both"), "after")
    assert a == [] and len(b) == 1


@pytest.mark.rule("R22")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_world_judges_the_deaths_before_stop_only() -> None:
    """The machines judge a thread death before stop() began (as stress does); one while
    the adapters are being stopped, or after, breaks nothing the contract says."""
    from chunk_adapter.factory import REFERENCE, load_factory
    from chunk_adapter.stateful.world import World

    world = World.build(load_factory(REFERENCE))
    try:
        _raises(ValueError("while running"), "running")
        world.stopping()
        _raises(ValueError("while stopping"), "stopping")
        assert [name for name, _ in world.deaths] == ["running"], world.deaths
        assert len(world.crashes) == 2
    finally:
        world.close()
