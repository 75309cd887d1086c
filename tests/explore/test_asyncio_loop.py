"""An asyncio event loop in a thread of the code under test runs under the explorer
(``runtime.loops``): its waits are on the virtual clock, ``call_soon_threadsafe`` wakes
it, ``run_in_executor`` workers are tasks, and every ready callback is a switch point.

Issue 26: before, such a loop's thread sat in a real ``epoll`` wait and the explorer
gave up on it as uncontrolled (exit 3 for every asyncio adapter).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from chunk_adapter.explore import RandomStrategy, Strategy
from chunk_adapter.explore.runtime.controller import Controller
from chunk_adapter.explore.strategies import ReplayStrategy
from chunk_adapter.explore.strategies.schedule import encode
from tests.explore._programs import controller, run_patched_on


def _run(program: Any, strategy: Strategy) -> Controller:
    # an asyncio loop keeps its running loop per OS thread: tasks on real threads
    return run_patched_on(controller(strategy, wall_timeout=10.0, runtime="thread"), program)


def _loop_thread() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="loop")
    thread.start()
    return loop, thread


def _close(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5.0)
    loop.close()


def test_a_loop_thread_sleeps_in_virtual_time_and_its_executor_runs_on_tasks() -> None:
    """``asyncio.sleep(30)`` costs no wall time; ``run_in_executor`` results come back
    through ``call_soon_threadsafe``; a loop stopped from another thread ends; the
    executor's idle workers left behind are not a hang."""
    seen: list[Any] = []

    def program() -> None:
        loop, thread = _loop_thread()

        async def work(i: int) -> int:
            await asyncio.sleep(30.0)
            squared: int = await loop.run_in_executor(None, lambda: i * i)
            seen.append((i, loop.time()))
            return squared

        futures = [asyncio.run_coroutine_threadsafe(work(i), loop) for i in range(3)]
        seen.append([f.result(timeout=100.0) for f in futures])
        _close(loop, thread)
        seen.append(("alive", thread.is_alive(), time.monotonic()))

    strategy = RandomStrategy(seed=0, executions=5)
    start = time.perf_counter()
    while strategy.start_execution():
        seen.clear()
        ctl = _run(program, strategy)
        assert not ctl.failures, ctl.failures
        assert sorted(seen[:3]) == [(0, 30.0), (1, 30.0), (2, 30.0)], seen
        assert seen[3:] == [[0, 1, 4], ("alive", False, 30.0)], seen
        assert "loop" in [t.name for t in ctl.tasks]
    assert time.perf_counter() - start < 20.0  # 5 x 30 virtual seconds


WORK = 10
"""Switch points of other work the scheduler thread does before its increment."""


def _lost_update(seen: list[int]) -> Any:
    """A coroutine reads a counter, awaits, writes it back; the scheduler thread adds
    one under a lock meanwhile. The ``await`` is a callback boundary: a switch point."""

    def program() -> None:
        loop, thread = _loop_thread()
        box = [0]
        lock = threading.Lock()

        async def add() -> None:
            with lock:
                value = box[0]
            await asyncio.sleep(0)
            with lock:
                box[0] = value + 1

        future = asyncio.run_coroutine_threadsafe(add(), loop)
        other = threading.Lock()
        for _ in range(WORK):  # other work first: switch points
            with other:
                pass
        with lock:
            box[0] += 1
        future.result(timeout=10.0)
        _close(loop, thread)
        seen.append(box[0])

    return program


def test_the_strategy_interleaves_a_thread_between_two_callbacks_and_replays_it() -> None:
    """A lost update across the loop's ``await`` and another thread is found by random
    schedules, and its schedule replays to the same result; most schedules keep both."""
    seen: list[int] = []
    strategy = RandomStrategy(seed=0, executions=40)
    lost = None
    while strategy.start_execution():
        ctl = _run(_lost_update(seen), strategy)
        assert not ctl.failures, ctl.failures
        if seen[-1] == 1 and lost is None:
            lost = encode(ctl.decisions)
    assert lost is not None and 2 in seen, seen
    again: list[int] = []
    replayer = ReplayStrategy(lost)
    assert replayer.start_execution()
    run_patched_on(controller(replayer, wall_timeout=10.0, runtime="thread"), _lost_update(again))
    assert again == [1]


def test_a_loop_made_before_the_exploration_is_named_as_not_controlled() -> None:
    """A loop made outside the execution keeps its real selector: its thread blocks in a
    real ``epoll`` wait, and the report says so and how to proceed (not the generic
    "something the explorer does not control")."""
    outside = asyncio.new_event_loop()
    started: list[threading.Thread] = []

    def program() -> None:
        thread = threading.Thread(target=outside.run_forever, name="loop")
        started.append(thread)
        thread.start()
        thread.join()

    strategy = RandomStrategy(seed=0, executions=1)
    assert strategy.start_execution()
    try:
        ctl = run_patched_on(controller(strategy, wall_timeout=1.0, runtime="thread"), program)
    finally:
        outside.call_soon_threadsafe(outside.stop)
        for thread in started:
            thread.join(5.0)  # the real join: the execution is over
        outside.close()
    kinds = [f.kind for f in ctl.failures]
    assert kinds == ["uncontrolled"], ctl.failures
    assert "asyncio event loop whose selector is a real one" in ctl.failures[0].message
    assert "asyncio.new_event_loop()" in ctl.failures[0].message
