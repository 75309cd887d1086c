"""The standard library under the explorer's process-wide routing (issue 5).

Code that uses ``threading``, ``time``, ``queue`` and ``concurrent.futures``
directly runs on controlled primitives and the virtual clock when (and only
when) a task of the execution calls it: no runtime object is passed anywhere
in these programs.
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.thread as cf_thread
import queue
import threading
import time
from collections.abc import Callable

import pytest

from chunk_adapter.explore import DfsStrategy, Strategy
from chunk_adapter.explore.runtime.controller import Controller
from tests.explore._programs import controller, run_patched_on

pytestmark = pytest.mark.usefixtures("each_runtime")  # every test on threads and greenlets


def run_patched(fn: Callable[[], None], strategy: Strategy | None = None) -> Controller:
    strategy = strategy if strategy is not None else DfsStrategy(preemption_bound=0)
    assert strategy.start_execution()
    return run_patched_on(controller(strategy, wall_timeout=10.0), fn)


def every_patched(fn: Callable[[], None], strategy: Strategy) -> list[Controller]:
    out = []
    while True:
        ctl = controller(strategy, wall_timeout=10.0)
        if not strategy.start_execution():
            return out
        out.append(run_patched_on(ctl, fn))


def test_clocks_and_sleep_are_virtual_on_tasks_only() -> None:
    seen: list[float] = []

    def program() -> None:
        seen.extend([time.monotonic(), time.perf_counter(), time.time() % 1e9])
        time.sleep(50.0)
        seen.extend([time.monotonic(), time.perf_counter_ns() / 1e9, time.monotonic_ns() / 1e9])

    start = time.perf_counter()
    ctl = run_patched(program)
    assert not ctl.failures, ctl.failures
    assert seen[:2] == [0.0, 0.0] and seen[3:] == [50.0, 50.0, 50.0]
    assert time.perf_counter() - start < 5.0  # 50 virtual seconds


def test_queue_semaphore_timer_barrier_simplequeue() -> None:
    log: list[object] = []

    def program() -> None:
        q: queue.Queue[int] = queue.Queue()
        lifo: queue.LifoQueue[int] = queue.LifoQueue()
        simple: queue.SimpleQueue[int] = queue.SimpleQueue()
        sem = threading.BoundedSemaphore(1)
        barrier = threading.Barrier(2)
        fired = threading.Event()
        assert isinstance(fired, threading.Event) and isinstance(simple, queue.SimpleQueue)

        def worker() -> None:
            with sem:
                log.append(("got", q.get(timeout=2.0)))
            barrier.wait(timeout=5.0)
            simple.put(7)

        t = threading.Thread(target=worker, name="worker")
        t.start()
        timer = threading.Timer(3.0, fired.set)
        timer.start()
        try:
            q.get(timeout=0.1)
        except queue.Empty:
            log.append(("empty at", time.monotonic()))
        q.put(1)
        for i in (1, 2):
            lifo.put(i)
        log.append(("lifo", lifo.get(), lifo.get()))
        barrier.wait(timeout=5.0)
        log.append(("simple", simple.get(timeout=1.0)))
        try:
            simple.get(timeout=0.5)
        except queue.Empty:
            log.append("simple empty")
        log.append(("timer", fired.wait(10.0), time.monotonic()))
        t.join()
        log.append(("alive", t.is_alive()))

    ctl = run_patched(program)
    assert not ctl.failures, ctl.failures
    assert [t.name for t in ctl.tasks][:2] == ["scheduler", "worker"] and len(ctl.tasks) == 3
    assert sorted(map(repr, log)) == sorted(map(repr, [
        ("empty at", 0.1), ("got", 1), ("lifo", 2, 1), ("simple", 7), "simple empty",
        ("timer", True, 3.0), ("alive", False),
    ]))  # fmt: skip
    assert log[-2:] == [("timer", True, 3.0), ("alive", False)]


def test_a_thread_pool_executor_runs_on_tasks_and_shuts_down() -> None:
    results: list[int] = []

    def program() -> None:
        with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="pool") as ex:
            futures = [ex.submit(lambda i=i: i * i) for i in range(3)]
            results.extend(f.result(timeout=5.0) for f in futures)

    ctl = run_patched(program)
    assert not ctl.failures, ctl.failures
    assert results == [0, 1, 4]
    assert [t.name for t in ctl.tasks] == ["scheduler", "pool_0"]
    assert all(t.state.value == "finished" for t in ctl.tasks)
    assert not any(t.thread in cf_thread._threads_queues for t in ctl.tasks)


def test_a_semaphore_guards_a_read_modify_write_and_dfs_sees_the_difference() -> None:
    def counter(guarded: bool) -> set[int]:
        results: set[int] = set()

        def program() -> None:
            sem = threading.Semaphore(1)
            box = [0]

            def bump() -> None:
                if guarded:
                    sem.acquire()
                value = box[0]
                time.sleep(0)  # a switch point between the read and the write
                box[0] = value + 1
                if guarded:
                    sem.release()

            threads = [threading.Thread(target=bump) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            results.add(box[0])

        assert all(not c.failures for c in every_patched(program, DfsStrategy(2)))
        return results

    assert counter(guarded=False) == {1, 2}
    assert counter(guarded=True) == {2}


def test_other_threads_get_the_real_things_meanwhile() -> None:
    seen: dict[str, object] = {}
    go, done = threading.Event(), threading.Event()  # made here: real

    def bystander() -> None:  # a thread of the process, not of the execution
        go.wait(10.0)
        seen["lock"] = type(threading.Lock()).__name__
        seen["now"] = time.monotonic()
        done.set()

    other = threading.Thread(target=bystander, daemon=True)
    other.start()

    def program() -> None:
        go.set()
        done.wait(10.0)  # a brief real wait: the bystander answers at once
        seen["task lock"] = type(threading.Lock()).__name__

    ctl = run_patched(program)
    other.join(10.0)
    assert not ctl.failures, ctl.failures
    assert seen == {"lock": "lock", "now": seen["now"], "task lock": "ControlledLock"}
    assert seen["now"] != 0.0  # the real clock, not the virtual one
    assert type(threading.Lock()).__name__ == "lock"  # and everything is restored


class _HoldsLocksMadeAtImport:
    lock = threading.Lock()
    rlock = threading.RLock()


def test_locks_made_at_import_get_a_controlled_stand_in_and_are_given_back() -> None:
    """A class's (or a module's) lock made at import: tasks share a controlled one per
    execution, so two tasks contending on it are explored, not blocked for real; once the
    exploration ends the class holds its own lock again."""
    import sys

    from chunk_adapter.explore.control.substitute import rebound

    real_lock, real_rlock = _HoldsLocksMadeAtImport.lock, _HoldsLocksMadeAtImport.rlock
    orders: set[tuple[str, ...]] = set()
    strategy = DfsStrategy(preemption_bound=2)
    with rebound([sys.modules[__name__]]):
        assert _HoldsLocksMadeAtImport.lock is not real_lock
        while strategy.start_execution():
            order: list[str] = []

            def main(order: list[str] = order) -> None:
                def work(name: str) -> None:
                    held = _HoldsLocksMadeAtImport
                    with held.lock, held.rlock:
                        assert held.rlock.acquire()  # re-entered
                        order.append(name)
                        time.sleep(1.0)  # a switch point with both held: virtual time
                        held.rlock.release()

                threads = [threading.Thread(target=work, args=(n,)) for n in "ab"]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()

            ctl = run_patched_on(controller(strategy, wall_timeout=10.0), main)
            assert not ctl.failures, ctl.failures
            orders.add(tuple(order))
        assert not real_lock.locked()  # the tasks never took the real one
    assert orders == {("a", "b"), ("b", "a")}
    assert _HoldsLocksMadeAtImport.lock is real_lock
    assert _HoldsLocksMadeAtImport.rlock is real_rlock
