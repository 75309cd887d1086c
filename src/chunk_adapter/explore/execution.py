"""One execution: build the adapter on the controlled runtime, run the script, check.

:func:`run_once` is the unit every strategy repeats. It gives the factory a
connector stack ``ExplorerConnector(RecordingConnector(FaultyConnector(
MemoryConnector)))`` and a recording builder, both sharing one
:class:`~chunk_adapter.history.History`; runs the scenario's script as the
scheduler thread; and hands the history to the checker.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ..connectors import FaultyConnector, GatedBuilder, MemoryConnector, RecordingConnector
from ..factory import accepts_runtime, reference_factory
from ..history import History
from .controller import Controller, ExplorerMisuse, Failure, Scheduler, Step
from .primitives import ControlledCondition, ControlledEvent, ControlledLock, ControlledRuntime
from .scenario import Op, Scenario
from .schedule import encode
from .substitute import ACTIVE, substituted
from .wrappers import ExplorerBuilder, ExplorerConnector

__all__ = ["QUIET", "Checker", "Execution", "Setup", "run_once"]

QUIET = logging.getLogger("chunk_adapter.explore.adapter")
"""The logger the explored adapter gets: records go nowhere (many executions log faults)."""
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False

Checker = Callable[["Execution"], list[str]]
"""Checks one finished execution (its history, scenario and quiescent cut); returns messages."""


@dataclass
class Setup:
    """How executions are built and judged (the same for every execution of a run)."""

    factory: Callable[..., Any]
    checker: Checker | None = None
    max_steps: int = 50_000
    wall_timeout: float = 20.0
    substitute: Sequence[ModuleType] = ()
    wrap: Callable[[Any, History], Any] | None = None  # e.g. oracles.RecordedAdapter


@dataclass
class Execution:
    """What one execution did and whether it failed."""

    scenario: Scenario
    schedule: str
    task_names: list[str]
    trace: list[Step]
    steps: int
    virtual_time: float
    history: History
    failures: list[Failure] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    """The scenario options the factory took (those it has no parameter for are left out)."""
    put_tries: int | None = None
    """The adapter's put tries (from the options or the factory's default; None: unknown)."""
    cut: int | None = None
    """A history sequence number taken just before the final ``stop()`` of a script that
    settled and polled first: everything up to it is a quiescent, still-running history."""

    @property
    def ok(self) -> bool:
        return not self.failures


@contextmanager
def prepared(setup: Setup) -> Iterator[None]:
    """Check that the factory can be explored, and substitute modules if asked."""
    if setup.substitute:
        with substituted(setup.substitute):
            yield
        return
    if not accepts_runtime(setup.factory):
        raise ExplorerMisuse(
            f"factory {setup.factory!r} takes no runtime=, so the explorer cannot control "
            "its threads. Give it a runtime= keyword (see chunk_adapter.runtime), or "
            "explore it in substitution mode: substitute=[the adapter's module]"
        )
    yield


def run_once(
    scenario: Scenario, scheduler: Scheduler, setup: Setup, *, every_step: bool
) -> Execution:
    """Run *scenario* once under *scheduler*; the result carries the replay string."""
    ctl = Controller(
        scheduler, max_steps=setup.max_steps, wall_timeout=setup.wall_timeout, every_step=every_step
    )
    runtime = ControlledRuntime(ctl)
    history = History()
    memory = MemoryConnector(consume_on_get=scenario.consume_on_get, notify=scenario.notify)
    faulty = FaultyConnector(memory)
    builder = GatedBuilder(history=history)
    connector = ExplorerConnector(RecordingConnector(faulty, history), ctl)
    quiescent_at: list[int | None] = [None]

    options = {k: v for k, v in scenario.options.items() if _takes(setup.factory, k)}

    def main() -> None:
        kwargs: dict[str, Any] = dict(options)
        if not setup.substitute:
            kwargs["runtime"] = runtime
        if "logger" not in kwargs and _takes(setup.factory, "logger"):
            kwargs["logger"] = QUIET  # expected faults are logged; keep test output clean
        adapter = setup.factory(
            connector,
            stage_id=scenario.stage_id,
            src_stage_id=scenario.stage_id,
            build_payload=ExplorerBuilder(builder, ctl),
            **kwargs,
        )
        _name_primitives(adapter)
        target = setup.wrap(adapter, history) if setup.wrap is not None else adapter
        script = scenario.script
        for i, op in enumerate(script):
            if op.kind == "stop" and i == len(script) - 1 and scenario.quiescent:
                quiescent_at[0] = history.tick()
            ctl.note(str(op))
            _apply(op, target, ctl, runtime, scenario, faulty, builder)

    ACTIVE.runtime = runtime
    try:
        ctl.run(main)
    finally:
        ACTIVE.runtime = None
    execution = Execution(
        scenario=scenario,
        schedule=encode(ctl.decisions),
        task_names=[t.name for t in ctl.tasks],
        trace=ctl.trace,
        steps=ctl.steps,
        virtual_time=ctl.now,
        history=history,
        failures=list(ctl.failures),
        cut=quiescent_at[0],
        options=options,
        put_tries=_put_tries(setup.factory, options),
    )
    if execution.ok and setup.checker is not None:
        execution.failures.extend(
            Failure("violation", message) for message in setup.checker(execution)
        )
    return execution


def _apply(
    op: Op,
    target: Any,
    ctl: Controller,
    runtime: ControlledRuntime,
    scenario: Scenario,
    faulty: FaultyConnector,
    builder: GatedBuilder,
) -> None:
    kind = op.kind
    if kind == "fail_put" or kind == "fail_get":
        faulty.fail_next("put" if kind == "fail_put" else "get", op.key, op.times)
        return
    if kind == "fail_build":
        builder.fail(op.request_id, times=op.times)
        return
    if kind == "settle":
        _settle(ctl, runtime, scenario)
        return
    try:
        if kind == "save":
            target.save_async(op.request_id, op.obj, op.final)
        elif kind == "cancel":
            target.cancel_sender(op.request_id)
        elif kind == "load":
            target.load_async(op.request_id)
        elif kind == "cleanup":
            target.cleanup_receiver(op.request_id)
        elif kind == "poll":
            ctl.note(f"  poll_ready() -> {target.poll_ready()!r}")
        elif kind == "stop":
            target.stop()
    except RuntimeError as exc:  # a call after stop(): the contract says it raises
        ctl.note(f"  {op} raised {exc!r}")


def _settle(ctl: Controller, runtime: ControlledRuntime, scenario: Scenario) -> None:
    """Sleep (virtual time) until nothing happened for ``scenario.idle`` seconds."""
    quantum = scenario.idle / 4
    start = last_change = ctl.now
    seen = ctl.progress
    while ctl.now - last_change < scenario.idle:
        if ctl.now - start > scenario.settle_limit:
            raise ExplorerMisuse(
                f"settle(): still busy after {scenario.settle_limit} virtual seconds "
                f"(progress counter {ctl.progress}); something keeps putting or building"
            )
        runtime.sleep(quantum)
        if ctl.progress != seen:
            seen, last_change = ctl.progress, ctl.now


def _takes(factory: Callable[..., Any], name: str) -> bool:
    """Whether *factory* takes keyword *name* (or any keyword, through ``**kwargs``)."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _put_tries(factory: Callable[..., Any], options: dict[str, Any]) -> int | None:
    """The put tries the adapter runs with: the option, else the factory's default."""
    if "put_tries" in options:
        return int(options["put_tries"])
    if factory is reference_factory:
        from ..adapter import ChunkAdapter

        factory = ChunkAdapter
    try:
        param = inspect.signature(factory).parameters.get("put_tries")
    except (TypeError, ValueError):
        return None
    if param is None or not isinstance(param.default, int):
        return None
    return param.default


def _name_primitives(adapter: Any) -> None:
    """Call each controlled lock, condition and event after the adapter attribute
    holding it (``_send_lock``...), so the trace reads like the adapter's code."""
    for attr, value in getattr(adapter, "__dict__", {}).items():
        if isinstance(value, (ControlledLock, ControlledCondition, ControlledEvent)):
            value.name = attr
