"""The entry points: :func:`explore` a scenario under a strategy, :func:`replay` a schedule.

    report = explore(scenario, DfsStrategy(preemption_bound=2))
    report.raise_if_failed()   # AssertionError with trace + replay string

A failing execution is reported with its violations, a per-thread trace and
the replay string; :func:`replay` with that string runs the same execution
again, step for step.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ...factory import reference_factory
from ...finding import Finding
from ..scenarios.scenario import Scenario
from ..strategies import ReplayStrategy, Strategy
from .checks import default_checker, default_wrap
from .execution import Checker, Setup, Substitute, prepared, run_once
from .result import Execution
from .trace import format_trace

__all__ = ["ExplorationFailed", "Report", "explore", "replay"]

_DEFAULT = object()


class ExplorationFailed(AssertionError):
    """An execution broke the contract, deadlocked, livelocked or crashed; the message is
    the whole report, ``finding`` the failure (:attr:`Report.finding`)."""

    def __init__(self, message: str, finding: Finding) -> None:
        super().__init__(message)
        self.finding = finding

    def __reduce__(self) -> tuple[object, ...]:  # pickles with its finding
        return (type(self), (str(self), self.finding))


@dataclass
class Report:
    """The outcome of one exploration."""

    scenario: Scenario
    strategy: str
    executions: int
    seconds: float
    complete: bool
    failure: Execution | None
    factory_spec: str
    saved_to: str | None = None
    """The file the failure report was written to (``save_failure=True``)."""
    traces: int | None = None
    """DPOR: executions run to their end, one per Mazurkiewicz trace (others were pruned)."""
    proof: bool = False
    """Run under :class:`ProofStrategy`: ``complete`` means every trace was checked."""
    runtime: str = ""
    """What carried the tasks, and why: ``"greenlet (the adapter's threads ...)"``."""
    steps: int = 0
    """Switch points over every execution run."""
    out_of_steps: bool = False
    """The run ended because its ``step_budget`` was spent (a count: the same every run)."""

    @property
    def verdict(self) -> str:
        """``"verified: N traces, complete"`` for a finished proof; else what happened."""
        if self.failure is not None:
            return "FAILED"
        if self.proof:
            if self.complete:
                return f"verified: {self.traces} traces, complete"
            return f"not proved: {self.traces} traces explored, incomplete"
        return "complete" if self.complete else "no failure"

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def per_second(self) -> float:
        return self.executions / self.seconds if self.seconds > 0 else float("inf")

    def summary(self) -> str:
        return (
            f"{self.scenario.name} under {self.strategy}: {self.verdict} after "
            f"{self.executions} executions in {self.seconds:.2f} s "
            f"({self.per_second:.0f}/s)"
            + (f" on the {self.runtime} runtime" if self.runtime else "")
        )

    def describe_failure(self) -> str:
        if self.failure is None:
            return self.summary()
        return describe(self.failure, self.strategy, self.executions, self.factory_spec)

    @property
    def finding(self) -> Finding | None:
        """The failing execution's finding (:attr:`.result.Execution.finding`), the whole
        failure report as its evidence; ``None``: nothing failed."""
        found = None if self.failure is None else self.failure.finding
        return None if found is None else replace(found, evidence=self.describe_failure())

    def raise_if_failed(self) -> None:
        finding = self.finding
        if finding is not None:
            raise ExplorationFailed(finding.evidence, finding)


def describe(execution: Execution, strategy: str, executions: int, factory_spec: str) -> str:
    """The full failure report: what broke, the trace, and how to replay it."""
    lines = [
        f"Scenario {execution.scenario.name!r} failed under {strategy} "
        f"(execution {executions}, {execution.steps} steps, "
        f"virtual t={execution.virtual_time * 1000:.2f} ms):",
    ]
    lines += [f"  [{f.kind}] {f.message}" for f in execution.failures]
    lines += ["", "Trace (one column per thread; t is virtual time):"]
    lines.append(format_trace(execution.trace, execution.task_names))
    factory_arg = f", factory=load_factory({factory_spec!r})" if factory_spec else ""
    if execution.mode == "substitution":
        factory_arg += ", substitute='auto'"
    lines += [
        "",
        f"Replay string: {execution.schedule}",
        "Replay it (same execution, step for step):",
        "    from chunk_adapter.explore import replay",
        "    from chunk_adapter.explore.scenarios.scenario import *",
        "    from chunk_adapter.factory import load_factory",
        f"    scenario = {_indent(execution.scenario.to_python())}",
        f"    print(replay(scenario, {execution.schedule!r}{factory_arg}).failures)",
    ]
    from ..scenarios.library import LIBRARY

    if LIBRARY.get(execution.scenario.name) == execution.scenario:
        adapter = f" --adapter {factory_spec}" if factory_spec else ""
        lines.append(
            f"or: python -m chunk_adapter.explore replay {execution.scenario.name} "
            f"'{execution.schedule}'{adapter}"
        )
    return "\n".join(lines)


def _indent(text: str) -> str:
    return text.replace("\n", "\n    ")


def _factory_spec(factory: Callable[..., Any] | None) -> str:
    """``"module:qualname"`` of a factory, as ``load_factory`` and ``--adapter`` take it."""
    if factory is None:
        return ""
    module = getattr(factory, "__module__", "?")
    name = getattr(factory, "__qualname__", repr(factory))
    return f"{module}:{name}"


def explore(
    scenario: Scenario,
    strategy: Strategy,
    *,
    factory: Callable[..., Any] | None = None,
    checker: Checker | Any | None = _DEFAULT,
    max_executions: int | None = None,
    time_budget: float | None = None,
    step_budget: int | None = None,
    max_steps: int = 50_000,
    wall_timeout: float = 20.0,
    substitute: Substitute = (),
    save_failure: bool = False,
    runtime: str = "auto",
    fails: Callable[[Execution], bool] | None = None,
) -> Report:
    """Run *scenario* under every schedule *strategy* produces; stop at the first failure.

    ``factory`` builds the adapters (default: the reference one). White-box, it
    takes ``runtime=`` and uses it. Otherwise pass ``substitute="auto"``, or the
    adapter's modules or packages (objects or dotted names): every thread the
    adapter starts is then controlled through the standard library's threading
    (:mod:`.control.plan`); the named modules are added to the ones found automatically.
    ``checker`` judges each finished execution (default: the contract oracles;
    ``None``: only deadlocks, livelocks, hangs and crashes fail). The run
    ends when the strategy has no more executions, after ``max_executions``,
    or once ``time_budget`` seconds have passed. ``save_failure`` writes a failure
    report to a new file (never overwriting one: parallel runs keep theirs) in
    ``$CHUNK_ADAPTER_EXPLORE_DIR`` or the temp directory; ``Report.saved_to`` names it.
    ``runtime`` carries the tasks (:mod:`.carriers`): ``"greenlet"``, ``"thread"``, or
    ``"auto"`` (greenlets unless the adapter needs real threads; ``Report.runtime`` says).
    ``fails`` says which executions are the failure that ends the run (default: any with
    a failure); one it does not count is run past like a passing one.
    """
    if not isinstance(scenario, Scenario):
        raise TypeError(f"explore() takes a Scenario, got {scenario!r}")
    if not isinstance(strategy, Strategy):
        raise TypeError(f"explore() takes a Strategy (DfsStrategy(), ...), got {strategy!r}")
    setup = _setup(factory, checker, max_steps, wall_timeout, substitute, runtime)
    executions = steps = 0
    out_of_steps = False
    failure: Execution | None = None
    start = time.perf_counter()
    with prepared(setup):
        while max_executions is None or executions < max_executions:
            if time_budget is not None and time.perf_counter() - start > time_budget:
                break
            if step_budget is not None and steps >= step_budget:
                out_of_steps = True
                break
            if not strategy.start_execution():
                break
            executions += 1
            execution = run_once(scenario, strategy, setup, every_step=strategy.every_step)
            steps += execution.steps
            if not execution.ok and (fails is None or fails(execution)):
                failure = execution
                break
    complete = failure is None and strategy.complete
    report = Report(
        scenario,
        strategy.describe(),
        executions,
        time.perf_counter() - start,
        complete,
        failure,
        _factory_spec(factory),
        traces=strategy.traces,
        proof=strategy.proof,
        runtime=f"{setup.runtime} ({setup.runtime_reason})" if setup.runtime_reason else "",
        steps=steps,
        out_of_steps=out_of_steps,
    )
    if failure is not None and save_failure:
        report.saved_to = _save(report)
    return report


def replay(
    scenario: Scenario,
    schedule: str,
    *,
    factory: Callable[..., Any] | None = None,
    checker: Checker | Any | None = _DEFAULT,
    substitute: Substitute = (),
    max_steps: int = 50_000,
    wall_timeout: float = 20.0,
    runtime: str = "auto",
) -> Execution:
    """Run *scenario* once more under the recorded *schedule* and return that execution
    (a fresh adapter; ``substitute`` and ``runtime`` as for :func:`explore`: a schedule
    replays the same on either runtime)."""
    setup = _setup(factory, checker, max_steps, wall_timeout, substitute, runtime)
    with prepared(setup):
        return run_once(scenario, ReplayStrategy(schedule), setup, every_step=False)


def _save(report: Report) -> str:
    """Write the failure report to a new file (created exclusively) and return its path."""
    directory = os.environ.get("CHUNK_ADAPTER_EXPLORE_DIR") or tempfile.gettempdir()
    fd, path = tempfile.mkstemp(prefix="explore-failure-", suffix=".txt", dir=directory)
    with os.fdopen(fd, "w") as out:
        out.write(report.describe_failure() + "\n")
    return path


def _setup(
    factory: Callable[..., Any] | None,
    checker: Checker | Any | None,
    max_steps: int,
    wall_timeout: float,
    substitute: Substitute,
    runtime: str,
) -> Setup:
    """The :class:`Setup` of :func:`explore` and :func:`replay` (the reference adapter and
    the default checker unless given)."""
    return Setup(
        factory=factory if factory is not None else reference_factory,
        checker=default_checker if checker is _DEFAULT else checker,
        max_steps=max_steps,
        wall_timeout=wall_timeout,
        substitute=substitute,
        wrap=default_wrap(),
        runtime=runtime,
    )
