"""Choices and replay strings do not depend on CPU load or wall time (issue 5).

The explorer once printed, under CPU load, a replay string that ``replay``
rejected ("declares 20 decisions but holds 17"): the execution was abandoned on
a *wall-clock* timeout while a slow task was still running, and that task kept
appending decisions while the string was being encoded. Now the wall clock only
bounds a single hand-off (a task that never comes back), and the decisions are
frozen when the execution ends. These tests run the same explorations with and
without a CPU hog (busy processes, no sleeps) and compare every schedule.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chunk_adapter.explore import LIBRARY, DfsStrategy, PctStrategy, Strategy
from chunk_adapter.explore.engine.checks import default_checker, default_wrap
from chunk_adapter.explore.engine.execution import Setup, prepared, run_once
from chunk_adapter.explore.runtime.primitives import ControlledRuntime
from chunk_adapter.explore.strategies.schedule import decode, encode
from chunk_adapter.factory import load_factory, reference_factory
from tests.explore._programs import run_program

ROOT = Path(__file__).resolve().parents[2]


HOG = "while True:\n    pass\n"


@pytest.fixture
def cpu_hog() -> Iterator[None]:
    """Busy processes on every core (and one more) for the duration of the test."""
    procs = [
        subprocess.Popen([sys.executable, "-c", HOG]) for _ in range((os.cpu_count() or 1) + 1)
    ]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def schedules(name: str, strategy: Strategy, factory: Any, count: int) -> list[str]:
    setup = Setup(factory=factory, checker=default_checker, wrap=default_wrap(), substitute="auto")
    out = []
    with prepared(setup):
        while len(out) < count and strategy.start_execution():
            execution = run_once(LIBRARY[name], strategy, setup, every_step=strategy.every_step)
            assert execution.ok, execution.failures
            assert decode(execution.schedule)  # every string is well formed
            out.append(execution.schedule)
    return out


def explorations() -> list[list[str]]:
    shape = load_factory("tests.explore.shapes.queue_fifo:make")
    return [
        schedules("pipeline/q5-cleanup-inflight-get", DfsStrategy(1), reference_factory, 60),
        schedules("pipeline/q4-receiver-finished", PctStrategy(seed=5), reference_factory, 30),
        schedules("pipeline/q5-cleanup-inflight-get", PctStrategy(seed=2), shape, 30),
        schedules("pipeline/three-stage", DfsStrategy(1), shape, 15),
    ]


@pytest.fixture(scope="module")
def quiet_run() -> list[list[str]]:
    return explorations()


def test_the_same_exploration_gives_the_same_schedules_under_cpu_load(
    quiet_run: list[list[str]], cpu_hog: None
) -> None:
    assert all(len(set(run)) > 1 for run in quiet_run), "each exploration varies its schedules"
    loaded = explorations()
    for quiet, busy in zip(quiet_run, loaded, strict=True):
        assert busy == quiet


def test_a_task_that_comes_back_after_the_execution_ended_changes_nothing() -> None:
    """The original bug, made deterministic: a task blocked on a real primitive past the
    hand-off bound comes back after the execution was reported, and tries to go on."""
    gate = threading.Event()  # real: the explorer cannot see it
    resumed = threading.Event()

    def program(rt: ControlledRuntime) -> None:
        event = rt.Event()

        def worker() -> None:
            for _ in range(3):
                event.is_set()

        rt.start_thread(worker, "w1")
        rt.start_thread(worker, "w2")
        rt.sleep(0)
        gate.wait(10)  # past the hand-off bound: the execution is abandoned here
        resumed.set()
        for _ in range(5):
            rt.ctl.random_u64()  # each a decision, were the execution still going

    from chunk_adapter.explore import RandomStrategy

    ctl = run_program(program, RandomStrategy(seed=1), wall_timeout=0.5)
    assert [f.kind for f in ctl.failures] == ["uncontrolled"], ctl.failures
    frozen = list(ctl.decisions)
    text = encode(ctl.decisions)
    gate.set()
    assert resumed.wait(10)
    ctl.tasks[0].thread.join(10)  # type: ignore[union-attr]
    assert ctl.decisions == frozen
    assert decode(text) == frozen
    assert [f.kind for f in ctl.failures] == ["uncontrolled"]


def test_a_slow_execution_is_not_cut_short_by_the_wall_clock() -> None:
    """The wall clock bounds one hand-off, not the execution: 1 s for a program whose
    every step is quick but that takes three times that in all."""
    import time

    def program(rt: ControlledRuntime) -> None:
        event = rt.Event()
        for _ in range(60):
            end = time.perf_counter() + 0.05  # real work between switch points: the CPU
            while time.perf_counter() < end:  # is busy (patches are off: real time)
                pass
            event.is_set()

    ctl = run_program(program, wall_timeout=1.0)
    assert not ctl.failures, ctl.failures
