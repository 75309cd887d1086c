"""The same scenario on plain real threads: the baseline the explorer is compared with.

:func:`run_threads` runs a scenario's script on the calling thread against an
adapter on :class:`~chunk_adapter.runtime.ThreadingRuntime` (the OS schedules
everything), with the same connector stack, recording and checker as the
explorer. ``settle()`` waits in real time until nothing has happened for
``idle`` seconds. After ``stop()`` a thread still alive counts as a hang.
Nothing here is deterministic: it is what "run it 200 times in CI" finds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..connectors import FaultyConnector, GatedBuilder, MemoryConnector, RecordingConnector
from ..connectors.base import Connector, ConnectorWrapper
from ..factory import accepted_options, reference_factory, takes_keyword
from ..history import History
from .checks import default_checker, default_wrap
from .controller import Failure
from .execution import QUIET, Execution, _put_tries, _RoleHistory
from .pipeline import call, hops, members, roles_for
from .scenario import Op, Scenario

__all__ = ["ThreadRun", "run_threads"]


class _Progress(ConnectorWrapper):
    """Counts puts and values got, for a real-time ``settle()``."""

    def __init__(self, inner: Connector) -> None:
        super().__init__(inner)
        # Guards count; taken for one increment; nobody waits on it.
        self._lock = threading.Lock()
        self.count = 0

    def _bump(self) -> None:
        with self._lock:
            self.count += 1

    def put(self, key: str, value: dict[str, Any]) -> None:
        self._bump()
        self.inner.put(key, value)

    def get(self, key: str) -> dict[str, Any] | None:
        value = self.inner.get(key)
        if value is not None:
            self._bump()
        return value


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
    history = History()
    faulty = FaultyConnector(
        MemoryConnector(consume_on_get=scenario.consume_on_get, notify=scenario.notify)
    )
    progress = _Progress(RecordingConnector(faulty, history))
    layout = members(scenario.topology, scenario.stage_id)
    build_roles: dict[int, str] = {}
    builders = {
        m.role: GatedBuilder(history=_RoleHistory(history, build_roles, m.role)) for m in layout
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
            _apply(op, adapters, faulty, builders, progress, idle, settle_limit)
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
    run.failures += default_checker(execution)
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


def _apply(
    op: Op,
    adapters: dict[str, Any],
    faulty: FaultyConnector,
    builders: dict[str, GatedBuilder],
    progress: _Progress,
    idle: float,
    settle_limit: float,
) -> None:
    kind = op.kind
    if kind in ("fail_put", "fail_get"):
        faulty.fail_next("put" if kind == "fail_put" else "get", op.key, op.times)
    elif kind == "fail_build":
        for role in roles_for(op, tuple(adapters)):
            builders[role].fail(op.request_id, times=op.times)
    elif kind == "settle":
        deadline = time.monotonic() + settle_limit
        seen, quiet_since = progress.count, time.monotonic()
        while time.monotonic() - quiet_since < idle and time.monotonic() < deadline:
            time.sleep(idle / 10)  # real threads: settling is waiting for real
            if progress.count != seen:
                seen, quiet_since = progress.count, time.monotonic()
    else:
        call(op, adapters, lambda line: None)
