"""The same scenario on plain real threads: the baseline the explorer is compared with.

:func:`run_threads` runs a scenario's script on the calling thread against an
adapter on :class:`~chunk_adapter.runtime.ThreadingRuntime` (the OS schedules
everything), with the same :class:`~chunk_adapter.bed.Bed`, op interpreter
(:func:`.pipeline.apply`) and checker as the explorer, a
:class:`~chunk_adapter.bed.progress.Progress` on top. ``settle()`` waits in real
time until nothing has changed for ``idle`` seconds. After ``stop()`` a thread
still alive counts as a hang. Nothing here is deterministic: it is what "run it
200 times in CI" finds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..bed.progress import Progress
from ..bed.stack import Bed
from ..factory import accepted_options, reference_factory, takes_keyword
from .checks import default_checker, default_wrap
from .controller import Failure
from .execution import QUIET, Execution, _put_tries, _RoleHistory
from .pipeline import apply, hops, members
from .scenario import Scenario

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
    bed = Bed(
        consume_on_get=scenario.consume_on_get, notify=scenario.notify, faulty=True, record=True
    )
    history = bed.history
    progress = bed.wrap(Progress)
    layout = members(scenario.topology, scenario.stage_id)
    build_roles: dict[int, str] = {}
    builders = {
        m.role: bed.builder(history=_RoleHistory(history, build_roles, m.role)) for m in layout
    }
    options = accepted_options(factory, scenario.options)
    kwargs: dict[str, Any] = dict(options)
    if takes_keyword(factory, "logger"):
        kwargs["logger"] = QUIET
    wrap = default_wrap()
    raw: list[Any] = []
    adapters: dict[str, Any] = {}
    for m in layout:
        adapter = factory(
            progress,
            stage_id=m.stage_id,
            src_stage_id=m.src_stage_id,
            build_payload=builders[m.role],
            **kwargs,
        )
        raw.append(adapter)
        target = wrap(adapter, history) if wrap is not None else adapter
        if len(layout) > 1 and hasattr(target, "name"):
            target.name = m.role
        adapters[m.role] = target
    run = ThreadRun()
    cut: int | None = None
    script = scenario.script
    with _crashes() as died:
        for i, op in enumerate(script):
            if op.kind == "stop" and i == len(script) - 1 and scenario.quiescent:
                cut = history.tick()
            apply(
                op,
                adapters,
                bed.faulty,
                builders,
                settle=lambda: progress.wait_quiet(idle, settle_limit),
                note=lambda line: None,
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
        history=history,
        cut=cut,
        options=options,
        put_tries=_put_tries(factory, options),
        hops=tuple(hops(scenario.topology, scenario.stage_id)),
        build_roles=build_roles,
    )
    run.failures += [Failure("violation", m) for m in default_checker(execution)]
    run.seconds = time.perf_counter() - start
    return run


@contextmanager
def _crashes() -> Iterator[list[tuple[str, BaseException | None]]]:
    """Collect uncaught exceptions of threads (as the explorer's ``crash``) while active."""
    died: list[tuple[str, BaseException | None]] = []
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        name = args.thread.name if args.thread is not None else "?"
        died.append((name, args.exc_value))

    threading.excepthook = hook
    try:
        yield died
    finally:
        threading.excepthook = previous
