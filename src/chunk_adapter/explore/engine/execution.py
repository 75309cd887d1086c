"""One execution: build the adapters on the controlled runtime, run the script, check.

:func:`run_once` is the unit every strategy repeats. It gives the factory a
:class:`~.scenario_bed.ScenarioBed`, ``ExplorerConnector(RecordingConnector(
FaultyConnector(MemoryConnector)))``, shared by every member of the scenario's topology
(:mod:`.pipeline`), and each member a recording builder, all recording into one
:class:`~chunk_adapter.history.History`; runs the scenario's script as the
scheduler thread; and hands the history to the checker.

Over 400 lines, and one module because :func:`run_once`'s steps (build the members, run
the script, settle, read what they hold at the cut, judge) share one controller, one bed
and one call clock through its closures; the helpers below are those steps.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ...bed.waiting import blocked_stop_bound, join_bound
from ...factory import loaded
from ...history import History
from ...oracles import accepted
from ..control.keywords import Keywords
from ..control.patches import ACTIVE, forget_executor_threads
from ..control.plan import Control, controlled, plan_control
from ..runtime.carriers import choose
from ..runtime.controller import Controller, ExplorerMisuse, Failure, Scheduler
from ..runtime.footprint import CALL_SIDE, HIST_ALL, PROGRESS, hist
from ..runtime.primitives import (
    ControlledCondition,
    ControlledEvent,
    ControlledLock,
    ControlledRuntime,
)
from ..runtime.real import thread_frames
from ..runtime.tasks import FactoryFailed, as_failure
from ..runtime.watch import watch_state
from ..runtime.wrappers import ExplorerBuilder, ExplorerConnector
from ..scenarios.pipeline import hops, roles_for
from ..scenarios.scenario import Op, Scenario
from ..scenarios.scenario_bed import ScenarioBed
from ..strategies.schedule import encode
from .behind import behind_failures
from .checks import Owed
from .held import lock_failures
from .latency import latency_failures
from .reliability import hol_failures, judge_death
from .result import Execution
from .retained import retained, retained_failures
from .timing import CallClock, held_failures, judged

__all__ = [
    "QUIET",
    "Checker",
    "SettleTimeout",
    "Setup",
    "Substitute",
    "prepared",
    "run_once",
]

REPEAT_BUDGETS = 4
"""A repeated world (``Scenario.repeat``) gets this many times the step budget of one world
for each :data:`COPIES_PER_BUDGETS` copies it runs, or part of them (past it: too long,
skipped, not a verdict)."""
COPIES_PER_BUDGETS = 1_000
"""Copies of a repeated world that :data:`REPEAT_BUDGETS` step budgets cover: a leaky world
is repeated until about a thousand requests are closed, and again with up to ten times as
many copies where too few of them held theirs (:mod:`.simulate`)."""
UNFINISHED = ("livelock", "too long")
"""Executions cut at the step budget: a busy loop (R17), or time kept moving (no verdict)."""
QUIET = logging.getLogger("chunk_adapter.explore.adapter")
"""The logger the explored adapter gets: records go nowhere (many executions log faults)."""
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False

Checker = Callable[["Execution"], Sequence["str | Failure"]]
"""Checks one finished execution (its history, scenario and quiescent cut); returns messages
or :class:`Failure` values (which carry their rules)."""


class SettleTimeout(RuntimeError):
    """``settle()`` never saw the adapters go quiet (reported as a ``script`` failure)."""


Substitute = Sequence[ModuleType | str] | str
"""What ``substitute=`` takes: modules or dotted names (a package: all of it), or ``"auto"``."""


@dataclass
class Setup:
    """How executions are built and judged (the same for every execution of a run)."""

    factory: Callable[..., Any]
    checker: Checker | None = None
    max_steps: int = 50_000
    wall_timeout: float = 20.0
    substitute: Substitute = ()
    wrap: Callable[[Any, History], Any] | None = None  # e.g. oracles.RecordedAdapter
    control: Control | None = None
    """Set by :func:`prepared`; without it the factory gets ``runtime=`` unless substituting."""
    runtime: str = "auto"
    """What carries the tasks (:mod:`.carriers`): ``"greenlet"``, ``"thread"``, or
    ``"auto"``, which :func:`prepared` resolves once it knows the adapter's modules."""
    runtime_reason: str = ""
    """Why :attr:`runtime` is what it is (one line, set by :func:`prepared`)."""
    slack: float = 0.0
    """Timer slack of every execution (:class:`~.controller.Controller`): 0 for the library
    scenarios and proofs (timeouts fire one at a time), a little for generated worlds."""
    resolution: float = 0.0
    """The shortest timed block of the code under test (:class:`~.controller.Controller`):
    0 (exact) for the library scenarios and proofs, a few ms for generated worlds."""
    retained: bool = False
    """Read, at the quiescent cut, which closed requests each adapter still holds (R24,
    :mod:`.retained`; generated worlds)."""
    keywords: Keywords = field(init=False)
    """What the factory's signature says, read once for the run (:mod:`.keywords`)."""

    def __post_init__(self) -> None:
        self.factory = loaded(self.factory)  # optional keywords it refuses are left out
        self.keywords = Keywords.of(self.factory)


def _names(substitute: Substitute) -> tuple[ModuleType | str, ...]:
    return () if isinstance(substitute, str) else tuple(substitute)


@contextmanager
def prepared(setup: Setup) -> Iterator[Control]:
    """Decide how to control the factory's adapters (:mod:`.control.plan`), then keep every
    thread they start under the explorer while the block runs."""
    auto = bool(setup.substitute)
    if setup.control is None and not auto and not setup.keywords.takes("runtime"):
        raise ExplorerMisuse(
            f"factory {setup.factory!r} takes no runtime=, so the explorer cannot control "
            "its threads white-box. Give it a runtime= keyword (see chunk_adapter.runtime), "
            "or explore it in substitution mode: substitute='auto' (or substitute=[the "
            "adapter's modules])"
        )
    control = setup.control or plan_control(
        setup.factory, _names(setup.substitute), keywords=setup.keywords
    )
    if control.mode != "white-box" and not auto:
        raise ExplorerMisuse(
            f"factory {setup.factory!r} cannot be explored white-box: {control.evidence}. "
            "Give it a runtime= keyword it uses (see chunk_adapter.runtime), or explore it "
            "in substitution mode: substitute='auto' (or substitute=[the adapter's modules])"
        )
    setup.control = control
    if setup.runtime == "auto" or not setup.runtime_reason:
        setup.runtime, setup.runtime_reason = choose(setup.runtime, control.modules)
    with controlled(control):
        yield control


def _budgets(repeat: int) -> int:
    """How many step budgets of one world a world of *repeat* copies gets."""
    return min(repeat, REPEAT_BUDGETS * -(-repeat // COPIES_PER_BUDGETS))


def run_once(
    scenario: Scenario, scheduler: Scheduler, setup: Setup, *, every_step: bool
) -> Execution:
    """Run *scenario* once under *scheduler*; the result carries the replay string."""
    ctl = Controller(
        scheduler,
        max_steps=setup.max_steps * _budgets(scenario.repeat),
        wall_timeout=setup.wall_timeout,
        every_step=every_step,
        runtime="thread" if setup.runtime == "auto" else setup.runtime,
        slack=setup.slack,
        resolution=setup.resolution,
        early_timers=0.0 if scheduler.observes else scenario.preempt,
    )
    runtime = ControlledRuntime(ctl)
    stand = ScenarioBed(scenario, lambda inner: ExplorerConnector(inner, ctl))
    works = functools.partial(ctl.switch_point, "scheduler works")  # busy steps: switch points
    stand.use_clock(runtime.monotonic, runtime.harness_sleep, works)  # faults, pauses: virtual
    history = stand.history
    keywords = setup.keywords
    options = {k: v for k, v in scenario.options.items() if keywords.takes(k)}
    pass_runtime = setup.control.pass_runtime if setup.control else not setup.substitute

    clock = CallClock(scenario, runtime.monotonic, history)  # R3 and R18 on the virtual clock
    if judged(scenario):
        history.clock = runtime.monotonic  # each record's virtual time (R17)

    def probe(cut: int | None) -> Execution:
        """The execution so far, as :func:`~.checks.owed_now` judges it at *cut*."""
        return Execution(
            scenario=scenario, schedule="", task_names=[], trace=[], steps=0,
            virtual_time=ctl.now, history=history, cut=cut,
            put_tries=keywords.put_tries(options), hops=tuple(hops(*scenario.layout)),
            build_roles=stand.build_roles,
        )  # fmt: skip

    owed_so_far = Owed(probe)  # each hop's records kept up to date between settles
    if setup.checker is not None and accepted.active():
        checker = setup.checker

        def shows_accepted() -> bool:
            """Whether the history so far shows a violation a verify baseline accepts: the
            execution is set aside then, whatever comes after (safety holds for prefixes)."""
            mark = accepted.total()
            checker(probe(None))
            return accepted.total() != mark

        ctl.checkpoint = shows_accepted

    def owed() -> bool:
        """Whether, were the run to stop now, something would still be owed (liveness)."""
        return owed_so_far(history.tick())

    roles = tuple(m.role for m in stand.layout) if len(stand.layout) > 1 else ()
    kept: dict[str, dict[str, str]] = {}  # R24: closed requests each member still holds

    def before(op: Op) -> None:
        if setup.retained and op.kind == "stop" and stand.cut is not None and not kept:
            kept.update(retained(stand.built, history))  # at the cut, before stop()
        _before(op, ctl, clock, roles)

    def main() -> None:
        for m in stand.layout:
            ctl.role = m.role if roles else ""  # threads it starts are that member's
            kwargs: dict[str, Any] = dict(options)
            if pass_runtime:
                kwargs["runtime"] = runtime
            if "logger" not in kwargs and keywords.takes("logger"):
                kwargs["logger"] = QUIET  # expected faults are logged; keep test output clean
            try:
                adapter = setup.factory(
                    stand.connector,
                    stage_id=m.stage_id,
                    src_stage_id=m.src_stage_id,
                    build_payload=ExplorerBuilder(stand.builders[m.role], ctl),
                    **kwargs,
                )
            except Exception as exc:
                raise FactoryFailed(_factory_failed(setup.factory, m, kwargs, exc)) from exc
            _name_primitives(adapter, "" if len(stand.layout) == 1 else f"{m.role}.")
            clock.member_bounds[m.role] = _stop_bound(keywords, options, adapter)
            watch = ctl.races or (ctl.tracking and pass_runtime)  # race points, footprints
            if ((watch and not watch_state(adapter, ctl)) or not pass_runtime) and ctl.tracking:
                ctl.opaque = True  # state DPOR cannot see: every step conflicts
            stand.drive(m, adapter, setup.wrap)
        ctl.role = ""
        # the script's stop() stops every member in turn: each may take its own bound
        clock.stop_bound = sum(clock.member_bounds.values()) or clock.stop_bound
        stand.run_script(
            settle=lambda: _settle(ctl, runtime, scenario, stand.faults_end, owed),
            note=ctl.note,
            before=before,
            after=lambda op: _after(op, ctl, clock),
        )

    baseline = frozenset(thread_frames())
    ctl.before_finish = lambda: _scan_threads(ctl, baseline)
    ACTIVE.runtime = runtime
    ACTIVE.candidates = setup.control.module_names if setup.control else frozenset()
    ACTIVE.baseline = baseline
    try:
        ctl.run(main)
    finally:
        ACTIVE.runtime, ACTIVE.candidates, ACTIVE.baseline = None, frozenset(), frozenset()
        forget_executor_threads(ctl)
    execution = Execution(
        scenario=scenario,
        schedule=encode(ctl.decisions, races=ctl.races, effects=ctl.effects),
        task_names=[f"{t.role}:{t.name}" if t.role else t.name for t in ctl.tasks],
        trace=ctl.trace,
        steps=ctl.steps,
        virtual_time=ctl.now,
        history=history,
        failures=list(ctl.failures),
        cut=stand.cut,
        options=options,
        # the options the adapter was built with: a refused put_tries= was left out
        put_tries=keywords.put_tries({k: v for k, v in options.items() if keywords.takes(k)}),
        hops=tuple(hops(*scenario.layout)),
        build_roles=stand.build_roles,
        mode=setup.control.mode if setup.control else "white-box",
        pruned=ctl.pruned,
        retained=kept,
    )
    mark = accepted.total()
    if execution.ok and setup.checker is not None and not ctl.pruned:
        execution.failures.extend(as_failure(found) for found in setup.checker(execution))
        execution.failures.extend(retained_failures(execution))
    elif setup.checker is not None and any(f.kind in UNFINISHED for f in execution.failures):
        _livelock_root(execution, setup.checker)
    execution.failures.extend(clock.failures)
    if any(f.kind in UNFINISHED for f in execution.failures):
        stuck = clock.never_returned()  # the scheduler stuck in a call: that is the root
        if stuck is not None:
            execution.failures = [stuck]
    if setup.checker is not None and not ctl.pruned and not ctl.failures:
        # a chunk fetched late (R17) is the root of its "never handed out" (R14, R23)
        late = latency_failures(history, scenario, execution.hops, stand.cut)
        held = held_failures(history, scenario, execution.hops, stand.build_roles)
        execution.failures[:0] = lock_failures(ctl) + held + late
        # a request waiting behind another's backlog is a pacing symptom of a history
        # whose violations (a registration polled twice a round, say) come first
        execution.failures += behind_failures(history, scenario, execution.hops)
        execution.failures += hol_failures(history, scenario, execution.hops, stand.build_roles)
    if setup.checker is not None and not ctl.pruned:
        judge_death(execution, scenario, setup.checker)  # R30: what a fault's end means
    if accepted.total() != mark:
        # Under a verify baseline the oracles found a root cause it accepts in this history:
        # what else it shows (state kept for a final the accepted bug never put, R24; a
        # chunk fetched late behind it, R17) may be that bug's doing: the execution tells
        # nothing new (oracles.accepted), like every history the judge sets aside.
        execution.failures = []
    return execution


def _livelock_root(execution: Execution, checker: Checker) -> None:
    """A busy loop, or an execution that ran past its step budget, is often the
    consequence of a violation the history already shows (a registration polled past
    its final, forever; a stage forwarding the chunks a ``poll_ready`` without the swap
    hands out again and again): judge the history up to the cut, and put what the
    oracles find first — the livelock after it; a long execution's "no verdict" goes,
    as the prefix holds one. Only safety can be judged there (nothing settled), and it
    holds for any prefix of a history. A history whose violation a verify baseline
    accepts (:mod:`~..oracles.accepted`) has none here, and :func:`run_once` sets the
    execution aside with it."""
    found = [as_failure(f) for f in checker(execution)]
    if found:
        kept = [f for f in execution.failures if f.kind != "too long"]
        execution.failures = found + kept


def _scan_threads(ctl: Controller, baseline: frozenset[int]) -> None:
    """Note threads that appeared during the execution, are not tasks, and run the
    adapter's code (a thread started where the patches could not see it)."""
    candidates = ACTIVE.candidates
    if not candidates:
        return
    for ident, frame in thread_frames().items():
        if ident in baseline or ident in ctl.idents:
            continue
        f: Any = frame
        while f is not None:
            module = f.f_globals.get("__name__")
            if module in candidates:
                thread = threading._active.get(ident)  # type: ignore[attr-defined]
                name = thread.name if thread is not None else f"ident {ident}"
                ctl.note_foreign(f"thread {name!r} (not started under the explorer) runs {module}")
                break
            f = f.f_back


def _before(op: Op, ctl: Controller, clock: CallClock, roles: tuple[str, ...]) -> None:
    """Note *op* in the trace and when it began; DPOR's footprints: the call is recorded
    (on its side of the request's history), faults are armed. A thread the call starts
    is its member's (*roles*: the pipeline's members; empty for one adapter)."""
    called = roles_for(op, roles) if roles else ()
    ctl.role = called[0] if len(called) == 1 else ""
    ctl.note(str(op))
    ctl.calling = op.kind
    clock.before(op)
    if ctl.tracking:
        for recorded in hist(op.request_id, CALL_SIDE.get(op.kind)):
            ctl.touch(recorded, "w")
        ctl.touch(("faults", op.kind[5:]) if op.kind.startswith("fail_") else HIST_ALL, "r")


def _after(op: Op, ctl: Controller, clock: CallClock) -> None:
    """The op's timing (:mod:`.timing`); DPOR's footprints of a finished op."""
    ctl.calling = ""
    clock.after(op)
    if ctl.tracking:
        for recorded in hist(op.request_id, CALL_SIDE.get(op.kind)):
            ctl.touch(recorded, "w")
        if op.kind.startswith("fail_"):
            ctl.touch(("faults", op.kind[5:]), "w")


def _settle(
    ctl: Controller,
    runtime: ControlledRuntime,
    scenario: Scenario,
    faults_end: Callable[[], float],
    owed: Callable[[], bool],
) -> None:
    """Sleep (virtual time) until every outage and slow call has ended and then nothing
    happened for ``scenario.idle`` seconds. With ``scenario.liveness``, go on while
    something is still owed (a chunk saved and not put, put and not handed out), up to
    that many virtual seconds after the faults ended: the liveness deadline."""
    quantum = scenario.idle / 4
    deadline: float | None = None
    while True:
        end = faults_end()
        if end > ctl.now:
            _own_sleep(ctl, runtime, end - ctl.now)  # the adapter's threads run meanwhile
            continue
        start = last_change = ctl.now
        seen = ctl.progress
        while ctl.now - last_change < scenario.idle:
            if ctl.now - start > scenario.settle_limit:
                raise SettleTimeout(
                    f"settle(): still busy after {scenario.settle_limit} virtual seconds "
                    f"(progress counter {ctl.progress}); something keeps putting or building"
                )
            _own_sleep(ctl, runtime, quantum)
            if ctl.tracking:
                ctl.touch(PROGRESS, "r")
            if ctl.progress != seen:
                seen, last_change = ctl.progress, ctl.now
        if faults_end() > ctl.now:
            continue  # a slow call began while it was quiet
        if not scenario.liveness:
            return
        if deadline is None:
            deadline = ctl.now + scenario.liveness
        if ctl.now >= deadline or not owed():
            return


def _stop_bound(keywords: Keywords, options: dict[str, Any], adapter: Any) -> float:
    """How long *adapter*'s ``stop()`` may take with work blocked (R18): from the
    ``join_timeout`` the world passed when the adapter surely got it
    (:meth:`~..control.keywords.Keywords.known`: a world may draw one), else from what it
    shows, never tighter than the contract's default allows
    (:func:`~chunk_adapter.bed.waiting.join_bound`)."""
    given = keywords.known(options, adapter).get("join_timeout")
    if isinstance(given, (int, float)) and not isinstance(given, bool):
        return blocked_stop_bound(float(given))
    return join_bound(adapter)


def _own_sleep(ctl: Controller, runtime: ControlledRuntime, seconds: float) -> None:
    """The script's own sleep while it settles: its deadline comes from the explorer's
    clock, so it never counts towards a "deadline on a clock the explorer does not
    control" (:func:`~.tasks.creeping_deadline`; a settle that sleeps until a slow call
    ends, again and again, asks for almost as long each time)."""
    runtime.sleep(seconds)
    ctl.me().waited = None


def _factory_failed(factory: Any, member: Any, kwargs: dict[str, Any], exc: Exception) -> str:
    keywords = ", ".join(["stage_id", "src_stage_id", "build_payload", *sorted(kwargs)])
    return (
        f"the factory {factory!r} raised {exc!r} when the explorer built the {member.role} "
        f"(stage_id={member.stage_id}) with keywords {keywords}: the adapter was never "
        "driven. Let the factory take (or ignore, with **kwargs) the optional keywords "
        "it is given"
    )


def _name_primitives(adapter: Any, prefix: str) -> None:
    """Call each controlled lock, condition and event after the adapter attribute
    holding it (``_send_lock``...), so the trace reads like the adapter's code."""
    for attr, value in getattr(adapter, "__dict__", {}).items():
        if isinstance(value, (ControlledLock, ControlledCondition, ControlledEvent)):
            value.name = prefix + attr
