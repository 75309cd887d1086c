"""The ``explore`` stage of ``chunk-adapter verify``: the library's pipelines, seeded.

Every scenario of :data:`~.library.VERIFY` runs under PCT, uniform random and
atomicity-directed schedules (:mod:`..strategies.sections`: a thread preempted
between two critical sections of one lock), a fixed number of executions each
(by profile), planned
inside the stage's deadline. A red must mean a bug, so:

* the adapter is controlled as :mod:`.control.plan` decides (white-box through
  ``runtime=``, or substitution: every thread it starts through ``threading``
  is controlled, whatever module it lives in);
* a thread the explorer cannot control, or a block on something it does not
  see (``uncontrolled``), makes the stage *inconclusive*, naming the thread and
  the fix — never a violation; so does a schedule that diverges on replay;
* a failure is replayed once from its replay string on a fresh adapter, on real
  threads (the runs use greenlets when they can, :mod:`.carriers`), before it
  is reported: a ``fail`` only if it fails again the same way, else
  *inconclusive* (the run was not deterministic);
* each scenario run that was cut short by the time budget is *inconclusive*,
  with its coverage ("57 of 120 executions (time budget)");
* the executions of one scenario run share a budget of switch points
  (:data:`STEPS_PER_EXECUTION` each on average): a count, like the executions,
  so a run that spends it (an adapter polling every millisecond through a long
  idle takes ~40,000 switch points per execution where most take under 2,000)
  passes with fewer executions, the same number on every machine, and says so
  ("16 of 60 executions (step budget: ...)").
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

from ...confirm import PASSED, Run, confirm
from ...errors import InvalidValue
from ...factory import AdapterFactory
from ...finding import first_line, rules_of
from ...oracles import accepted
from ...outcome import CheckResult, StageContext
from ...profiles import current_profile
from ...rules import R3, R4, R5, R6, R7, R8, R9, R10, R13, R14, R15, R16, R17, R18, R20
from ..control.plan import Control, plan_control
from ..engine.explorer import Report, explore, replay
from ..engine.reproduce import EXPLORE
from ..engine.result import NOT_CONTROLLED, Execution, failure_members
from ..runtime.carriers import CONFIRM_RUNTIME
from ..runtime.tasks import shown
from ..scenarios.library import LIBRARY, VERIFY
from ..strategies import PctStrategy, RandomStrategy, SectionStrategy, Strategy
from .cause import Passes, in_explorer, root_of
from .proofs import proof_plan, proof_reserve, prove_stage

__all__ = ["plan", "run_stage"]

RESERVE = 0.1  # share of the time left kept for confirming a failure and reporting
STRATEGIES = ("pct", "random", "sections")
STEPS_PER_EXECUTION = 20_000
"""Switch points per execution, on average over a scenario run (module doc); the
library's scenarios take 50 to 4,000 on the reference and the catalogue's adapters, up
to 30,000 for the long idle of ``q6-idle-event-driven`` on a polling one."""


def _label(name: str, kind: str) -> str:
    return f"{name} / {kind}"  # stable across profiles and seeds (CI test history)


def plan(profile: str) -> list[tuple[str, tuple[str, ...]]]:
    """``(check name, rules)`` of every scenario run this stage plans (for "not reached")."""
    seeded = [
        (_label(name, kind), _scenario_rules(LIBRARY[name].question))
        for name in VERIFY
        for kind in STRATEGIES
    ]
    return seeded + proof_plan(profile, _scenario_rules)  # proofs: hunt only


def run_stage(factory: AdapterFactory, ctx: StageContext) -> Iterator[CheckResult]:
    """Every :data:`VERIFY` scenario under PCT, uniform random and section schedules, seeded."""
    substitute = tuple(ctx.substitute)
    try:
        control = plan_control(factory, substitute, timeout=max(1.0, min(10.0, ctx.left() / 10)))
    except InvalidValue as exc:
        yield CheckResult(
            "explore", "control", (), "inconclusive", str(exc), coverage="not started"
        )
        return
    runs = current_profile(ctx.profile).explore_runs  # a count per profile: profiles.py
    plan = [(n, k) for n in VERIFY for k in STRATEGIES if ctx.wants(_label(n, k))]
    took: list[float] = []  # seconds each finished scenario run took
    keep = proof_reserve(ctx, RESERVE)  # for the proofs after them (hunt)
    for index, (name, kind) in enumerate(plan):
        left = (ctx.left() - keep) * (1 - RESERVE) - 1.0
        if left <= 0.5:
            yield _not_started(plan[index:], runs)
            break  # to the proofs, if time was kept for them
        strategy = _strategy(kind, ctx.seed, runs)
        label = _label(name, kind)
        ctx.announce(label)
        wall = max(2.0, min(20.0, left / 4))
        report = explore(
            LIBRARY[name],
            strategy,
            factory=factory,
            substitute=substitute or "auto",
            time_budget=_share(left, len(plan) - index, took),
            step_budget=runs * STEPS_PER_EXECUTION,
            wall_timeout=wall,
        )
        took.append(report.seconds)
        again = _again(kind, runs, factory, ctx, wall, keep)
        result = _judge(report, label, runs, control, ctx, wall, factory, again)
        yield result
        if result.verdict == "fail" and (ctx.run_all or accepted.accepts(result.rules[0])):
            # verify --all: every scenario runs, whatever the others found; and a root
            # cause a baseline accepts must not hide the next (its history showed only
            # the symptoms the counterfactual traced to it, so the judge did not set it aside)
            continue
        if result.verdict == "fail" or _uncontrolled(report.failure):
            if index + 1 < len(plan) and result.verdict != "fail":
                yield _not_started(plan[index + 1 :], runs, control)
            return
    # Then, when the profile and the deadline allow, proofs of the small scenarios.
    yield from prove_stage(
        factory,
        ctx,
        _scenario_rules,
        lambda report, label, wall: _judge(
            report, label, report.executions, control, ctx, wall, factory
        ),
        substitute,
        RESERVE,
    )


def _again(
    kind: str, runs: int, factory: AdapterFactory, ctx: StageContext, wall: float, keep: float
) -> Passes:
    """How a counterfactual script is run (:mod:`.cause`): the failing run's strategy,
    seed and count of executions, within a tenth of the stage's time left."""
    return in_explorer(
        lambda: _strategy(kind, ctx.seed, runs),
        runs,
        factory=factory,
        substitute=tuple(ctx.substitute) or "auto",
        time_budget=lambda: max(1.0, (ctx.left() - keep) * RESERVE),
        step_budget=runs * STEPS_PER_EXECUTION,
        wall=wall,
    )


def _share(left: float, remaining: int, took: list[float]) -> float:
    """Seconds the next scenario run may take: what is left minus what the runs after
    it are expected to need (the mean so far), and never less than an even share."""
    expected = sum(took) / len(took) if took else left / remaining
    return max(left / remaining, left - (remaining - 1) * expected)


def _strategy(kind: str, seed: int, runs: int) -> Strategy:
    if kind == "pct":
        return PctStrategy(seed=seed, depth=3, executions=runs)
    if kind == "sections":
        return SectionStrategy(seed=seed, executions=runs)
    return RandomStrategy(seed=seed, executions=runs)


def _uncontrolled(execution: Execution | None) -> bool:
    return execution is not None and any(f.kind == "uncontrolled" for f in execution.failures)


def _judge(
    report: Report,
    label: str,
    runs: int,
    control: Control,
    ctx: StageContext,
    wall: float,
    factory: AdapterFactory,
    again: Passes | None = None,
) -> CheckResult:
    """The verdict on one scenario run: pass, a confirmed fail (its root rule asked of the
    counterfactual scripts through *again*, :mod:`.cause`), or inconclusive."""
    scenario = report.scenario
    rules = _scenario_rules(scenario.question)
    done = f"{report.executions} of {runs} executions"
    failed = report.failure
    if failed is None:
        if report.executions >= runs or report.out_of_steps:
            spent = f" (step budget: {report.steps:,} switch points)" if report.out_of_steps else ""
            return CheckResult(
                "explore", label, rules, "pass", f"{report.summary()}{spent}; {control.mode}",
                seconds=report.seconds, coverage=done + spent,
            )  # fmt: skip
        return CheckResult(
            "explore", label, rules, "inconclusive",
            f"no failure in {done}: the time budget ran out first; give verify more time "
            f"(--max-seconds) to run them all{_slow(report)}", seconds=report.seconds,
            coverage=f"{done} (time budget)",
        )  # fmt: skip
    first = failed.failures[0]
    coverage = f"{done} (stopped at the first failure)"
    if any(f.kind in NOT_CONTROLLED for f in failed.failures):
        why = next(f for f in failed.failures if f.kind in NOT_CONTROLLED)
        return CheckResult(
            "explore", label, (), "inconclusive",
            f"[{why.kind}] not a verdict on the adapter: {first_line(why.message)} "
            f"(control: {control.describe()})",
            detail=report.describe_failure(), seconds=report.seconds,
            coverage=f"{done} (stopped at an execution it could not control)",
        )  # fmt: skip
    command = _replay_command(scenario.name, failed.schedule, ctx)
    found = report.finding
    assert found is not None  # the report failed
    finding = replace(found, reproducer=command)
    start = time.perf_counter()
    replays: list[Execution] = []

    def rerun() -> Run | None:
        again = replay(
            scenario,
            failed.schedule,
            factory=factory,
            substitute=tuple(ctx.substitute) or "auto",
            wall_timeout=wall,
            runtime=CONFIRM_RUNTIME,
        )
        replays.append(again)
        if any(f.kind == "uncontrolled" for f in again.failures):
            return None  # a thread it cannot control: the replay decides nothing
        return shown(again.failures)

    # no reference: a schedule is exact
    judged = confirm(shown(failed.failures[:1])[0], rerun)
    seconds = report.seconds + time.perf_counter() - start
    lost = next((f for f in replays[-1].failures if f.kind == "uncontrolled"), None)
    if lost is not None:  # the replay saw what the run did not: a thread it cannot control
        return CheckResult.of_finding(
            "explore", label, "inconclusive", finding, rules=(),
            evidence=f"[{lost.kind}] not a verdict on the adapter: {first_line(lost.message)} "
            f"(seen when the failure was replayed on threads; control: {control.describe()})",
            seconds=seconds, confirmation=f"replayed once on {CONFIRM_RUNTIME}s: {lost.kind}",
            coverage=f"{done} (stopped at an execution it could not control)",
        )  # fmt: skip
    if judged.verdict != "fail":
        shown_again = judged.again or PASSED
        kinds = [f.kind for f in shown_again if not f.rules]  # failures without a rule
        got = ", ".join((*rules_of(shown_again), *dict.fromkeys(kinds))) or "no failure"
        return CheckResult.of_finding(
            "explore", label, "inconclusive", finding, rules=(),
            evidence=f"[{first.kind}] did not reproduce on replay (got {got}): nondeterminism "
            "outside the explorer's control, e.g. a thread it does not run, real time or "
            f"randomness in the adapter (control: {control.describe()}); first run: "
            f"{first_line(first.message)}",
            seconds=seconds,
            confirmation=f"replayed once on {CONFIRM_RUNTIME}s: did not fail the same way",
            coverage=f"{done} (stopped at a failure that did not replay)",
        )  # fmt: skip
    members = failure_members(failed.failures)
    root = root_of(scenario, finding.rules, again or (lambda script, only: None), members)
    seconds = report.seconds + time.perf_counter() - start
    return CheckResult.of_finding(
        "explore", label, "fail", replace(finding, rules=root.rules),
        evidence=root.evidence(finding.message), seconds=seconds,
        confirmation=f"replayed once on {CONFIRM_RUNTIME}s: failed again", coverage=coverage,
    )  # fmt: skip


def _slow(report: Report) -> str:
    """A hint when executions took real seconds each: the adapter may wait for real."""
    each = report.seconds / max(1, report.executions)
    if each < 1.0:
        return ""
    return (
        f" (each execution took {each:.1f} s of real time: the adapter may wait on something "
        "the explorer cannot see, such as a primitive made at import or a socket)"
    )


def _replay_command(name: str, schedule: str, ctx: StageContext) -> str:
    env = f"CHUNK_ADAPTER_SUBSTITUTE={','.join(ctx.substitute)} " if ctx.substitute else ""
    return EXPLORE.command(name, schedule, adapter_spec=ctx.adapter_spec, env=env)


def _not_started(
    rest: list[tuple[str, str]], runs: int, control: Control | None = None
) -> CheckResult:
    names = sorted({name for name, _ in rest})
    why = (
        "the explorer cannot control this adapter (see above)"
        if control is not None
        else "no time left before the stage's deadline; give verify more time (--max-seconds)"
    )
    return CheckResult(
        "explore", "scenarios not run", (), "inconclusive",
        f"{len(rest)} scenario runs not started ({', '.join(names)}): {why}",
        coverage=f"0 of {runs * len(rest)} executions",
    )  # fmt: skip


def _scenario_rules(question: str) -> tuple[str, ...]:
    """The rules a library scenario is about, from the key question it asks."""
    by_question = {
        "1": (R3, R4, R5),
        "2": (R9, R10),
        "3": (R6, R7, R8),
        "4": (R13, R15),
        "5": (R16,),
        "6": (R17,),
        "7": (R18, R20),
    }
    return by_question.get(question.split(":", 1)[0], (R14, R17))
