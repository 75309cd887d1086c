"""The controlled runtime itself: virtual time, blocking, and what it reports (issue 5).

These run small programs, not the adapter, so each property of the explorer is
checked on its own: a bug the explorer must report, and the control that must
pass. Rule R20 (waits re-check, never hang) is what the hang and deadlock
reports serve.
"""

from __future__ import annotations

import threading
import time

import pytest

from chunk_adapter.explore import DfsStrategy, RandomStrategy
from chunk_adapter.explore.runtime.controller import ExplorerMisuse
from chunk_adapter.explore.runtime.primitives import ControlledRuntime
from tests.explore._programs import every_execution, run_program

pytestmark = pytest.mark.usefixtures("each_runtime")  # every test on threads and greenlets


def kinds(ctl: object) -> list[str]:
    return [f.kind for f in ctl.failures]  # type: ignore[attr-defined]


@pytest.mark.rule("R20")
def test_sleep_and_timeouts_use_virtual_time() -> None:
    seen: list[tuple[str, float, bool]] = []

    def program(rt: ControlledRuntime) -> None:
        rt.sleep(100.0)
        cond = rt.Condition(rt.Lock())
        with cond:
            notified = cond.wait(0.5)
        seen.append(("waited", rt.monotonic(), notified))

    start = time.perf_counter()
    ctl = run_program(program)
    assert not ctl.failures
    assert seen == [("waited", 100.5, False)]
    assert time.perf_counter() - start < 5.0  # 100 virtual seconds, no real waiting


@pytest.mark.rule("R20")
def test_notify_wakes_a_waiter_before_its_timeout() -> None:
    seen: list[tuple[float, bool]] = []

    def program(rt: ControlledRuntime) -> None:
        cond = rt.Condition(rt.Lock())
        ready: list[bool] = []

        def waiter() -> None:
            with cond:
                while not ready:
                    if not cond.wait(10.0):
                        break
                seen.append((rt.monotonic(), bool(ready)))

        worker = rt.start_thread(waiter, "waiter")
        rt.sleep(1.0)
        with cond:
            ready.append(True)
            cond.notify()
        worker.join(5.0)

    ctl = run_program(program)
    assert not ctl.failures
    assert seen == [(1.0, True)]


def test_dfs_sees_every_interleaving_of_two_threads() -> None:
    orders: set[str] = set()

    def program(rt: ControlledRuntime) -> None:
        out: list[str] = []
        event = rt.Event()  # is_set() is a switch point: two visible steps per thread

        def worker(name: str) -> None:
            for _ in range(2):
                event.is_set()
                out.append(name)

        a = rt.start_thread(lambda: worker("a"), "a")
        b = rt.start_thread(lambda: worker("b"), "b")
        a.join()
        b.join()
        orders.add("".join(out))

    runs = every_execution(program, DfsStrategy(preemption_bound=10))
    assert all(not ctl.failures for ctl in runs)
    assert orders == {"aabb", "abab", "abba", "baab", "baba", "bbaa"}


def test_dfs_finds_a_lost_update_and_a_lock_prevents_it() -> None:
    def counter(locked: bool) -> set[int]:
        results: set[int] = set()

        def program(rt: ControlledRuntime) -> None:
            lock = rt.Lock()
            box = [0]

            def bump() -> None:
                if locked:
                    lock.acquire()
                value = box[0]
                rt.sleep(0)  # a switch point between the read and the write
                box[0] = value + 1
                if locked:
                    lock.release()

            threads = [rt.start_thread(bump, f"t{i}") for i in range(2)]
            for t in threads:
                t.join()
            results.add(box[0])

        every_execution(program, DfsStrategy(preemption_bound=2))
        return results

    assert counter(locked=False) == {1, 2}
    assert counter(locked=True) == {2}


def test_reports_a_deadlock_with_what_each_thread_waits_for() -> None:
    def program(rt: ControlledRuntime) -> None:
        a, b = rt.Lock(), rt.Lock()

        def one() -> None:
            with a, b:
                pass

        def two() -> None:
            with b, a:
                pass

        t1, t2 = rt.start_thread(one, "one"), rt.start_thread(two, "two")
        t1.join()
        t2.join()

    runs = every_execution(program, DfsStrategy(preemption_bound=2))
    deadlocks = [ctl for ctl in runs if "deadlock" in kinds(ctl)]
    assert deadlocks, "DFS missed the lock-order deadlock"
    message = next(f.message for f in deadlocks[0].failures if f.kind == "deadlock")
    assert "'one' in acquire" in message and "'two' in acquire" in message, message
    assert any(not ctl.failures for ctl in runs)  # and most orders are fine


@pytest.mark.rule("R17")
def test_reports_a_busy_loop_as_a_livelock() -> None:
    def program(rt: ControlledRuntime) -> None:
        stop = rt.Event()
        while not stop.is_set():  # nothing ever sets it, and no time passes
            pass

    ctl = run_program(program, max_steps=500)
    assert kinds(ctl) == ["livelock"]
    assert "more than 500 switch points" in ctl.failures[0].message


@pytest.mark.rule("R17")
def test_a_program_that_sleeps_past_the_step_budget_is_long_not_livelocked() -> None:
    """Over max_steps while virtual time keeps moving (a poller that sleeps 1 ms a round):
    the execution is long, which decides nothing. Before, it was a livelock, and the
    explore stage called it R17 (found outside the repo: a ``sched.scheduler`` RECV side
    making many switch points per 1 ms round)."""

    def program(rt: ControlledRuntime) -> None:
        for _ in range(10_000):
            rt.sleep(0.001)

    ctl = run_program(program, max_steps=500)
    assert kinds(ctl) == ["too long"]
    assert "virtual time kept moving" in ctl.failures[0].message


def test_a_thread_waiting_in_real_time_between_switch_points_is_uncontrolled() -> None:
    """``select()`` with a timeout on a pipe (found outside the repo): the thread comes back
    to the explorer every 50 ms of real time, so it never looked stuck, while virtual
    time stood still and the execution never ended (the stage ran out of budget on its
    first scenario). Now it is ``uncontrolled`` after wall_timeout, saying why."""
    import select

    def program(rt: ControlledRuntime) -> None:
        stop = rt.Event()
        while not stop.is_set():  # a switch point, then a real wait the explorer cannot see
            select.select([], [], [], 0.05)

    start = time.monotonic()
    ctl = run_program(program, wall_timeout=1.0)
    assert kinds(ctl) == ["uncontrolled"]
    assert "while virtual time stood still" in ctl.failures[0].message
    assert "select()" in ctl.failures[0].message
    assert time.monotonic() - start < 10.0


def test_a_short_real_wait_between_switch_points_is_not_a_busy_loop() -> None:
    """``select()`` with a 2 ms timeout: the thread comes back often enough never to look
    stuck or crawling, virtual time stands still, and max_steps is reached — a wait the
    explorer cannot see, not a busy loop (before: a livelock, R17 on a correct adapter)."""
    import select

    def program(rt: ControlledRuntime) -> None:
        stop = rt.Event()
        while not stop.is_set():
            select.select([], [], [], 0.002)

    ctl = run_program(program, max_steps=300)
    assert kinds(ctl) == ["uncontrolled"]
    assert "not a busy loop" in ctl.failures[0].message


def test_a_wait_until_a_deadline_on_a_clock_the_explorer_does_not_control_is_uncontrolled() -> None:
    """Found outside the repo: an idle pause written as "wait until a deadline" on
    ``datetime.now()`` (also ``time.clock_gettime``, a ``clock=time.monotonic`` default):
    each timed wait ran out in virtual time while the real deadline barely moved, so
    virtual time ran away, the scenario's settle saw no progress, and the explorer
    reported a lost chunk (R23, confirmed by replay: exit 1 on a correct adapter)."""
    from datetime import datetime, timedelta

    def program(rt: ControlledRuntime) -> None:
        stop = rt.Event()
        until = datetime.now() + timedelta(seconds=0.05)
        while (left := (until - datetime.now()).total_seconds()) > 0:
            stop.wait(left)

    ctl = run_program(program)
    assert kinds(ctl) == ["uncontrolled"]
    assert "datetime.now()" in ctl.failures[0].message


@pytest.mark.parametrize("shape", ["virtual deadline", "constant wait", "work between"])
def test_timed_waits_that_follow_virtual_time_are_not_an_uncontrolled_clock(shape: str) -> None:
    def program(rt: ControlledRuntime) -> None:
        stop, other = rt.Event(), rt.Event()
        if shape == "virtual deadline":  # the second wait would ask for nothing
            for _ in range(5):
                until = rt.monotonic() + 0.01
                while (left := until - rt.monotonic()) > 0:
                    stop.wait(left)
        elif shape == "constant wait":  # an idle loop: exactly as long each time
            for _ in range(10):
                stop.wait(0.01)
        else:  # a poller doing its work between shrinking waits
            for n in range(10):
                other.is_set()
                other.is_set()
                stop.wait(0.01 - n * 0.0001)

    ctl = run_program(program)
    assert kinds(ctl) == []


def test_the_suites_own_sleeps_are_never_taken_for_an_uncontrolled_clock() -> None:
    """Found outside the repo (a correct asyncio adapter, a get worker per registration):
    a connector's random latency, slept by the suite on the worker's behalf, shrank three
    times in a row with no switch point between the gets (an executor's quiet work
    queue), which read as a deadline on a foreign clock: exit 3 for the simulate stage.
    The same waits made by the code under test are still judged."""

    def suite(rt: ControlledRuntime) -> None:
        for n in range(6):
            rt.harness_sleep(0.001 - n * 0.00002)

    def adapter(rt: ControlledRuntime) -> None:
        for n in range(6):
            rt.sleep(0.001 - n * 0.00002)

    assert kinds(run_program(suite)) == []
    assert kinds(run_program(adapter)) == ["uncontrolled"]


def test_the_controlled_condition_and_event_have_threading_s_whole_api() -> None:
    """Found outside the repo: ``concurrent.futures.wait()`` in a correct ``stop()`` takes
    each future's condition with ``acquire()``, which the explorer's condition lacked; the
    script died, the adapter ran on, and that was reported as a livelock (R17, exit 1)."""
    seen: list[bool] = []

    def program(rt: ControlledRuntime) -> None:
        cond, event = rt.Condition(rt.Lock()), rt.Event()
        assert cond.acquire()
        cond.notifyAll()
        cond.release()
        event.set()
        seen.append(event.isSet())

    ctl = run_program(program)
    assert kinds(ctl) == [] and seen == [True]


def test_a_missing_attribute_of_the_explorer_s_stand_in_is_not_a_verdict() -> None:
    def program(rt: ControlledRuntime) -> None:
        rt.Event().no_such_method()  # type: ignore[attr-defined]

    ctl = run_program(program)
    assert kinds(ctl) == ["uncontrolled"]
    assert "stand-in ControlledEvent" in ctl.failures[0].message

    def user_bug(rt: ControlledRuntime) -> None:
        object().no_such_method()  # type: ignore[attr-defined]

    assert kinds(run_program(user_bug)) == ["script"]  # the adapter's own: still a failure


def test_an_execution_over_the_step_budget_is_never_a_verdict() -> None:
    from chunk_adapter.explore.engine.result import KIND_RULES, NOT_CONTROLLED

    assert "too long" in NOT_CONTROLLED and "too long" not in KIND_RULES


@pytest.mark.rule("R20")
def test_reports_a_wait_without_timeout_left_after_the_script_as_a_hang() -> None:
    def program(rt: ControlledRuntime) -> None:
        cond = rt.Condition(rt.Lock())

        def sleeper() -> None:
            with cond:
                cond.wait()  # nobody will ever notify

        rt.start_thread(sleeper, "sleeper")
        rt.sleep(1.0)

    ctl = run_program(program)
    assert kinds(ctl) == ["hang"]
    assert "'sleeper' in wait" in ctl.failures[0].message


@pytest.mark.rule("R22")
def test_reports_a_thread_that_dies() -> None:
    def program(rt: ControlledRuntime) -> None:
        def boom() -> None:
            raise ValueError("boom")

        rt.start_thread(boom, "boom").join()

    ctl = run_program(program)
    assert kinds(ctl) == ["crash"]
    assert "ValueError('boom')" in ctl.failures[0].message


def test_reports_blocking_the_explorer_does_not_control() -> None:
    real = threading.Event()

    def program(rt: ControlledRuntime) -> None:
        real.wait(30)  # a real primitive: the explorer cannot schedule around it

    try:
        ctl = run_program(program, wall_timeout=0.3)
    finally:
        real.set()
    assert kinds(ctl) == ["uncontrolled"]
    assert "Route it through the runtime" in ctl.failures[0].message


def test_primitives_refuse_threads_the_explorer_does_not_run() -> None:
    holder: list[object] = []
    run_program(lambda rt: holder.append(rt.Lock()))
    with pytest.raises(ExplorerMisuse, match="does not run"):
        holder[0].acquire()  # type: ignore[attr-defined]


def test_random_strategy_is_reproducible_from_its_seed() -> None:
    def program(rt: ControlledRuntime) -> None:
        event = rt.Event()
        for name in ("x", "y"):
            rt.start_thread(lambda: [event.is_set() for _ in range(3)] and None, name)
        rt.sleep(1)

    first = [c.decisions for c in every_execution(program, RandomStrategy(seed=7, executions=5))]
    again = [c.decisions for c in every_execution(program, RandomStrategy(seed=7, executions=5))]
    assert first == again
    assert len({tuple(d) for d in first}) > 1  # and the executions differ from each other


def test_a_factory_default_put_tries_that_is_not_a_count_is_unknown() -> None:
    """Found outside the repo: ``put_tries: int = 0`` meaning "the adapter's own default"
    was taken as the tries, and the oracles refused it: the explore stage crashed."""
    from typing import Any

    from chunk_adapter.explore.control.keywords import Keywords

    def zero(connector: Any, *, stage_id: int, put_tries: int = 0, **kw: Any) -> Any: ...

    def five(connector: Any, *, stage_id: int, put_tries: int = 5, **kw: Any) -> Any: ...

    assert Keywords.of(zero).put_tries({}) is None
    assert (
        Keywords.of(five).put_tries({}) == 5 and Keywords.of(zero).put_tries({"put_tries": 2}) == 2
    )


def _orders_of_two_sleepers(slack: float) -> set[tuple[tuple[str, float], ...]]:
    """What two threads sleeping 1.000 s and 1.001 s see, over every DFS schedule."""
    outcomes: set[tuple[tuple[str, float], ...]] = set()

    def program(rt: ControlledRuntime) -> None:
        seen: list[tuple[str, float]] = []

        def sleeper(name: str, seconds: float) -> None:
            rt.sleep(seconds)
            seen.append((name, rt.monotonic()))

        threads = [rt.start_thread(lambda: sleeper("a", 1.0), "a"),
                   rt.start_thread(lambda: sleeper("b", 1.001), "b")]  # fmt: skip
        for t in threads:
            t.join()
        outcomes.add(tuple(seen))

    for ctl in every_execution(program, DfsStrategy(preemption_bound=2), slack=slack):
        assert not ctl.failures, ctl.failures
    return outcomes


def test_without_slack_timeouts_fire_one_at_a_time() -> None:
    assert _orders_of_two_sleepers(0.0) == {(("a", 1.0), ("b", 1.001))}


def test_with_slack_close_deadlines_fire_together_in_either_order_and_never_early() -> None:
    outcomes = _orders_of_two_sleepers(0.002)
    # both woke at the later deadline (a a little late, neither early), in either order
    assert outcomes == {(("a", 1.001), ("b", 1.001)), (("b", 1.001), ("a", 1.001))}


def test_with_a_timer_resolution_shorter_sleeps_last_it_and_longer_ones_are_exact() -> None:
    """Coarse timers (generated worlds, ``simulate.RESOLUTION``): a sleep or timed wait of
    the code under test shorter than the resolution lasts the resolution; a zero timeout
    stays a poll, and a longer one is exact."""
    woke: list[float] = []

    def program(rt: ControlledRuntime) -> None:
        event = rt.Event()

        def sleeper() -> None:
            for seconds in (0.001, 0.0, 0.003, 0.02):
                start = rt.monotonic()
                rt.sleep(seconds)
                woke.append(round(rt.monotonic() - start, 9))
            start = rt.monotonic()
            event.wait(0.001)
            woke.append(round(rt.monotonic() - start, 9))

        thread = rt.start_thread(sleeper, "sleeper")
        thread.join()

    for resolution, expected in ((0.0, [0.001, 0.0, 0.003, 0.02, 0.001]),
                                 (0.005, [0.005, 0.0, 0.005, 0.02, 0.005])):  # fmt: skip
        woke.clear()
        ctl = run_program(program, resolution=resolution)
        assert not ctl.failures, ctl.failures
        assert woke == expected, (resolution, woke)
