"""The same scenario on plain real threads: the baseline the explorer is compared with.

:func:`run_threads` runs a scenario's script on the calling thread against an
adapter on :class:`~chunk_adapter.runtime.ThreadingRuntime` (the OS schedules
everything), with the same :class:`~.scenario_bed.ScenarioBed` (connector stack,
builders, op interpreter) and checker as the explorer, a
:class:`~chunk_adapter.bed.progress.Progress` on top. ``settle()`` waits in real
time until nothing has changed for ``idle`` seconds. After ``stop()`` a thread
still alive counts as a hang. Nothing here is deterministic: it is what "run it
200 times in CI" finds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...bed.crashes import thread_crashes
from ...bed.progress import Progress
from ...factory import reference_factory
from ..control.keywords import Keywords
from ..runtime.controller import Failure
from ..scenarios.pipeline import hops
from ..scenarios.scenario import Scenario
from ..scenarios.scenario_bed import ScenarioBed
from .checks import default_checker, default_wrap
from .execution import QUIET
from .result import Execution

__all__ = ["ThreadRun", "run_threads"]


@dataclass
class ThreadRun:
    """One real-thread run: what went wrong (if anything) and how long it took."""

    failures: list[Failure] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures


def run_threads(
    scenario: Scenario,
    *,
    factory: Callable[..., Any] | None = None,
    idle: float = 0.15,
    settle_limit: float = 10.0,
) -> ThreadRun:
    """Run *scenario* once on real threads and check it like the explorer does."""
    factory = factory if factory is not None else reference_factory
    start = time.perf_counter()
    stand = ScenarioBed(scenario, Progress)
    progress = stand.connector
    assert isinstance(progress, Progress)
    keywords = Keywords.of(factory)
    options = keywords.accepted(scenario.options)
    kwargs: dict[str, Any] = dict(options)
    if keywords.takes("logger"):
        kwargs["logger"] = QUIET
    wrap = default_wrap()
    raw: list[Any] = []
    for m in stand.layout:
        adapter = factory(
            progress,
            stage_id=m.stage_id,
            src_stage_id=m.src_stage_id,
            build_payload=stand.builders[m.role],
            **kwargs,
        )
        raw.append(adapter)
        stand.drive(m, adapter, wrap)
    run = ThreadRun()
    with thread_crashes(chain=False) as died:
        stand.run_script(
            settle=lambda: progress.wait_quiet(idle, settle_limit), note=lambda line: None
        )
    run.failures += [Failure("crash", f"thread {name!r} raised {exc!r}") for name, exc in died]
    stuck = [t.name for a in raw for t in getattr(a, "threads", list)() if t.is_alive()]
    if stuck:
        run.failures.append(Failure("hang", f"threads still alive after stop(): {stuck}"))
    execution = Execution(
        scenario=scenario,
        schedule="",
        task_names=[],
        trace=[],
        steps=0,
        virtual_time=0.0,
        history=stand.history,
        cut=stand.cut,
        options=options,
        put_tries=keywords.put_tries(options),
        hops=tuple(hops(*scenario.layout)),
        build_roles=stand.build_roles,
    )
    run.failures += default_checker(execution)
    run.seconds = time.perf_counter() - start
    return run
