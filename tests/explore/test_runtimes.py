"""The greenlet and the thread runtime run every schedule the same (issue 25).

A schedule is a pure function of the strategy's choices, whatever carries the
tasks: the same random strategy (same seed) on both runtimes must give the
same replay string, the same trace step by step and the same failures, for the
reference adapter (white-box), an adapter on plain ``threading`` (substitution:
its ``Thread`` objects adopted) and broken adapters whose failures must come out
the same. The default tier runs a few schedules per library scenario;
``-m slow`` runs 200.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from chunk_adapter.explore import LIBRARY, DfsStrategy, RandomStrategy, replay
from chunk_adapter.explore.engine.checks import default_checker, default_wrap
from chunk_adapter.explore.engine.execution import Execution, Setup, prepared, run_once
from chunk_adapter.explore.runtime.carriers import choose
from chunk_adapter.explore.runtime.controller import Controller
from chunk_adapter.factory import load_factory, reference_factory
from tests.explore._programs import run_patched_on
from tests.quality import broken_explore as broken

QUEUE_FIFO = "tests.explore.shapes.queue_fifo:make"


def _runs(name: str, factory: Any, runtime: str, seeds: range) -> list[Execution]:
    setup = Setup(
        factory=factory,
        checker=default_checker,
        wrap=default_wrap(),
        substitute="auto",
        runtime=runtime,
    )
    out = []
    with prepared(setup):
        assert setup.runtime == runtime
        for seed in seeds:
            strategy = RandomStrategy(seed=seed, executions=1)
            assert strategy.start_execution()
            out.append(run_once(LIBRARY[name], strategy, setup, every_step=False))
    return out


def _seen(execution: Execution) -> tuple[Any, ...]:
    steps = tuple((s.tid, s.time, s.label) for s in execution.trace)
    failures = tuple((f.kind, f.message.split("\n", 1)[0], f.rules) for f in execution.failures)
    return execution.schedule, tuple(execution.task_names), steps, failures


def _same_on_both(name: str, factory: Any, seeds: range) -> list[Execution]:
    on_threads = _runs(name, factory, "thread", seeds)
    on_greenlets = _runs(name, factory, "greenlet", seeds)
    for seed, (a, b) in enumerate(zip(on_threads, on_greenlets, strict=True), seeds.start):
        assert _seen(a) == _seen(b), (
            f"{name} seed {seed}: the runtimes disagree; replay on each with "
            f"python -m chunk_adapter.explore replay {name} {a.schedule!r} --runtime thread"
        )
    return on_threads


FEW = range(0, 4)
MANY = range(0, 200)


@pytest.mark.parametrize("name", list(LIBRARY))
def test_the_reference_runs_the_same_on_both_runtimes(name: str) -> None:
    _same_on_both(name, reference_factory, FEW)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LIBRARY))
def test_200_schedules_per_scenario_run_the_same_on_both_runtimes(name: str) -> None:
    _same_on_both(name, reference_factory, MANY)


@pytest.mark.parametrize(
    "name", ["q5-cleanup-inflight-get", "pipeline/q4-receiver-finished", "pipeline/three-stage"]
)
def test_adopted_threads_run_the_same_on_both_runtimes(name: str) -> None:
    _same_on_both(name, load_factory(QUEUE_FIFO), range(0, 8))


@pytest.mark.parametrize(
    ("adapter", "name"),
    [
        (broken.NoTokenCheck, "q5-cleanup-inflight-get"),
        (broken.TwoSaveThreads, "q1-save-snapshot-enqueue"),
        (broken.LostWakeup, "q1-save-snapshot-enqueue"),
    ],
)
def test_broken_adapters_fail_the_same_on_both_runtimes(adapter: Any, name: str) -> None:
    runs = _same_on_both(name, adapter, range(0, 40))
    assert any(not e.ok for e in runs), "no schedule failed: the comparison proves nothing"


def test_a_failure_found_on_greenlets_replays_on_threads() -> None:
    found = _runs("q5-cleanup-inflight-get", broken.NoTokenCheck, "greenlet", range(0, 40))
    failed = next(e for e in found if not e.ok)
    again = replay(
        LIBRARY["q5-cleanup-inflight-get"], failed.schedule, factory=broken.NoTokenCheck,
        runtime="thread",
    )  # fmt: skip
    assert [f.rules for f in again.failures] == [f.rules for f in failed.failures]


def _identity(record: Callable[[], Any]) -> list[Any]:
    """What *record* returns in two threads a greenlet task starts; last: those threads."""
    seen: list[Any] = []

    def program() -> None:
        def body() -> None:
            seen.append(record())

        threads = [threading.Thread(target=body, name=f"worker-{i}") for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seen.append(threads)

    strategy = DfsStrategy(preemption_bound=0)
    assert strategy.start_execution()
    ctl = run_patched_on(Controller(strategy, runtime="greenlet", wall_timeout=10.0), program)
    assert not ctl.failures, ctl.failures
    return seen


def test_a_greenlet_task_sees_its_own_thread_and_ident() -> None:
    seen = _identity(lambda: (threading.current_thread(), threading.get_ident()))
    threads = seen.pop()
    assert [t for t, _ in seen] == threads  # current_thread() is the Thread started
    idents = [ident for _, ident in seen]
    assert len(set(idents)) == 2 and idents == [t.ident for t in threads]
    assert threading.get_ident() not in idents


def test_auto_keeps_threads_for_thread_local_storage() -> None:
    import types

    module = types.ModuleType("adapter_with_locals")
    exec(
        "import threading\n"
        "class A:\n"
        "    def __init__(self):\n"
        "        self.mine = threading.local()\n",
        module.__dict__,
    )
    runtime, why = choose("auto", [module])
    assert runtime == "thread" and "thread-local" in why
    plain = types.ModuleType("adapter_plain")
    exec("import threading\nclass A:\n    def f(self):\n        return threading.Lock()\n",
         plain.__dict__)  # fmt: skip
    assert choose("auto", [plain])[0] == "greenlet"


def test_a_bad_runtime_name_is_refused_where_it_is_given() -> None:
    with pytest.raises(ValueError, match="runtime must be one of"):
        choose("fibres", [])


def test_greenlet_executions_share_one_hub_thread_and_a_stuck_one_gets_a_new_hub() -> None:
    """The hub OS thread is kept between executions (starting one per execution cost a
    fifth of the wall time); one left blocked in C by its execution is never reused."""
    from tests.explore._programs import run_program

    def ran_on(box: list[int]) -> Callable[[Any], None]:
        return lambda rt: box.append(threading.get_native_id())

    first: list[int] = []
    for _ in range(5):
        assert not run_program(ran_on(first), runtime="greenlet").failures
    assert len(set(first)) == 1  # every execution on the same OS thread
    blocker = threading.Event()
    try:
        stuck = run_program(lambda rt: blocker.wait(30), runtime="greenlet", wall_timeout=0.3)
        assert [f.kind for f in stuck.failures] == ["uncontrolled"]
        after: list[int] = []
        assert not run_program(ran_on(after), runtime="greenlet").failures
        assert after[0] != first[0]  # not the hub that is still blocked
    finally:
        blocker.set()


def test_a_hub_whose_execution_raised_is_not_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception that escapes the hub's execution ends its thread: the next execution
    must get a new hub, not wait for one that is gone."""
    from chunk_adapter.explore.runtime.carriers import GreenletCarrier
    from tests.explore._programs import run_program

    def boom(self: Any, ctl: Any, main: Any) -> None:
        raise RuntimeError("hub broke")

    with monkeypatch.context() as patched:
        patched.setattr(GreenletCarrier, "_hub_main", boom)
        patched.setattr(threading, "excepthook", lambda args: None)  # the expected traceback
        run_program(lambda rt: None, runtime="greenlet", wall_timeout=0.3)
    ran: list[int] = []
    ctl = run_program(lambda rt: ran.append(threading.get_native_id()), runtime="greenlet")
    assert not ctl.failures and ran
