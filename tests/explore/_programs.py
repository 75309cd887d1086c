"""Run a small function on the controlled runtime, for tests of the explorer itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chunk_adapter.explore import DfsStrategy, Strategy
from chunk_adapter.explore.control.patches import ACTIVE, forget_executor_threads, installed
from chunk_adapter.explore.runtime.controller import Controller
from chunk_adapter.explore.runtime.primitives import ControlledRuntime

RUNTIME = ["thread"]
"""What carries the tasks of the controllers made here (the ``each_runtime`` fixture sets
it, so a test module runs once on threads and once on greenlets)."""


def controller(strategy: Strategy, **kwargs: Any) -> Controller:
    """A controller on :data:`RUNTIME` unless *kwargs* name one."""
    kwargs.setdefault("runtime", RUNTIME[0])
    return Controller(strategy, **kwargs)


def run_program(
    fn: Callable[[ControlledRuntime], None], strategy: Strategy | None = None, **kwargs: Any
) -> Controller:
    """One execution of ``fn(runtime)`` as the scheduler thread; the finished controller."""
    strategy = strategy if strategy is not None else DfsStrategy(preemption_bound=0)
    assert strategy.start_execution()
    ctl = controller(strategy, **kwargs)
    runtime = ControlledRuntime(ctl)
    ctl.run(lambda: fn(runtime))
    return ctl


def every_execution(
    fn: Callable[[ControlledRuntime], None], strategy: Strategy, **kwargs: Any
) -> list[Controller]:
    """Every execution *strategy* produces for ``fn``, as finished controllers."""
    out = []
    while strategy.start_execution():
        ctl = controller(strategy, **kwargs)
        runtime = ControlledRuntime(ctl)
        ctl.run(lambda rt=runtime: fn(rt))  # type: ignore[misc]
        out.append(ctl)
    return out


def run_patched_on(ctl: Controller, fn: Callable[[], None]) -> Controller:
    """One execution of *fn* under the process-wide patches (no runtime passed: the code
    uses ``threading`` itself), as ``run_once`` does it; the finished controller."""
    with installed():
        ACTIVE.runtime = ControlledRuntime(ctl)
        try:
            ctl.run(fn)
        finally:
            ACTIVE.runtime = None
            forget_executor_threads(ctl)  # a no-op unless fn used an executor
    return ctl
