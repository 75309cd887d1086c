"""The ``simulate`` stage of ``chunk-adapter verify``: generated worlds (:mod:`.simulate`).

It runs a fixed count of generated worlds per profile (``Profile.sim_worlds``),
derandomized under ``quick`` and ``ci`` (the same worlds and the same verdict on
every run) and random, saved to the example database, under ``hunt``. A red
must mean a bug, so a failing world is reported only once it is

* **shrunk** (world and schedule together, to the fewest scheduler ops that
  still fail with the same root rule),
* **replayed** from its replay string on a fresh adapter, on real threads
  (:data:`~.carriers.CONFIRM_RUNTIME`; the worlds run on greenlets when they can),
  and seen to fail the same way again (:func:`chunk_adapter.confirm.same_failure`: its
  root rule broken again), and
* **passed by the reference adapter** (twenty random schedules of the same
  world): a world the reference fails too is the suite judging wrongly, and
  says so, *inconclusive*.

A thread the explorer cannot control, or a run that ends before its worlds,
is *inconclusive* with the reason and its coverage, never a violation.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from ...bed.waiting import call_in_thread
from ...confirm import same_failure
from ...connectors import MemoryConnector, chunk_key
from ...errors import InvalidValue
from ...factory import (
    AdapterFactory,
    calibration_reference,
    declares_keyword,
    known_options,
    reference_factory,
)
from ...finding import Finding, first_line
from ...history import ConnectorOp
from ...outcome import PASTE_BEGIN, PASTE_END, REFERENCE_PASSED, CheckResult, StageContext
from ...profiles import current_profile, example_database
from ...rules import ORACLE, R21, R24, RELIABLE
from ..control.plan import plan_control
from ..engine.execution import prepared
from ..engine.explorer import describe
from ..engine.reproduce import SIM
from ..engine.result import Execution, failure_members, failure_rules
from ..engine.simulate import (
    JUDGED_WRONG,
    STOPS_THE_RUN,
    Found,
    Simulation,
    reference_fails,
    replay_world,
    run_world,
    sim_setup,
    simulate,
)
from ..runtime.carriers import CONFIRM_RUNTIME
from ..runtime.tasks import Failure, shown
from ..scenarios.codec import encode
from ..scenarios.scenario import Scenario, fail_put, load, save, settle, stop
from ..strategies import RandomStrategy
from .cause import in_worlds, root_of

__all__ = ["CHECK", "RULES", "as_pytest", "plan", "run_stage"]

CHECK = "generated worlds"
RULES: tuple[str, ...] = (*ORACLE, R21, R24)  # the oracles' rules, the rejects', R24 at the cut
"""What a generated world can find broken: every rule a history, the virtual clock or the
explorer can show, R21 by its calls with a wrong argument (:func:`..scenarios.scenario.reject`:
each must raise at the call and change nothing), and R24 by what the adapters still hold
of closed requests at a world's quiescent cut (:mod:`..engine.retained`)."""
OPTION_STOP = 2.0
"""Seconds the adapter built to see its options gets to stop (then it is abandoned)."""
RESERVE = 0.2
"""Share of the stage's time kept for confirming a failure and running the reference."""


def plan(profile: str) -> list[tuple[str, tuple[str, ...]]]:
    return [(CHECK, RULES)]


def _options(factory: AdapterFactory) -> Any:
    """A world's options as this factory gets them: ``put_tries`` (which the oracles judge
    R10 by) only where the adapter surely gets it (:func:`~chunk_adapter.factory.
    known_options`: the factory names it, or an adapter built with it shows it; or it is
    seen to take effect: :func:`_put_tries_observed`)."""
    sure = (
        factory is reference_factory
        or _surely_gets(factory, "put_tries", 2)
        or _put_tries_observed(factory)
    )

    def keep(options: dict[str, Any]) -> dict[str, Any]:
        if not sure:
            options.pop("put_tries", None)
        return options

    return keep


OBSERVED_TRIES = (2, 4)
"""The ``put_tries`` values :func:`_put_tries_observed` builds with."""


def _put_tries_observed(factory: AdapterFactory) -> bool:
    """Whether ``put_tries=N`` is seen to take effect: with each of :data:`OBSERVED_TRIES`,
    a non-final chunk whose put always fails is tried exactly N times (one world in
    virtual time). A ``**options`` factory that maps the option onto a setting of its
    own (``retries = put_tries - 1``) shows no attribute of that name, but its puts
    show it; then the worlds pass ``put_tries`` and R10 is judged by it."""
    key = chunk_key("o", 0, 0)
    setup = sim_setup(factory, wall_timeout=OPTION_STOP, max_steps=30_000)
    try:
        with prepared(setup):
            for tries in OBSERVED_TRIES:
                world = Scenario(
                    "option-check/put_tries",
                    (load("o"), fail_put(key, times=100), save("o", 0), settle(), stop()),
                    options={"put_tries": tries},
                )
                run = run_world(world, RandomStrategy(seed=0, executions=1), setup)[-1]
                puts = [op for op in run.history.records(ConnectorOp) if op.op == "put"]
                if [op.key for op in puts] != [key] * tries:
                    return False
    except Exception:  # it cannot be run so: not sure
        return False
    return True


def _surely_gets(factory: AdapterFactory, name: str, value: Any) -> bool:
    """Whether an adapter the factory builds with ``name=value`` surely gets it."""
    if declares_keyword(factory, name):
        return True
    built: Any = None
    try:
        built = factory(MemoryConnector(), stage_id=0, **{name: value})
        return name in known_options(factory, {name: value}, built)
    except Exception:  # it cannot be built so: not sure
        return False
    finally:
        stop = getattr(built, "stop", None)
        if callable(stop):  # bounded: a stop() that hangs is for the worlds to judge (R18)
            call_in_thread(stop, OPTION_STOP, "stop-after-option-check")


def run_stage(factory: AdapterFactory, ctx: StageContext) -> Iterator[CheckResult]:
    """The profile's count of generated worlds, each run once in virtual time."""
    if not ctx.wants(CHECK):
        return
    ctx.announce(CHECK)
    try:
        control = plan_control(
            factory, tuple(ctx.substitute), timeout=max(1.0, min(10.0, ctx.left() / 10))
        )
    except InvalidValue as exc:
        yield CheckResult("simulate", CHECK, (), "inconclusive", str(exc), coverage="not started")
        return
    profile = current_profile(ctx.profile)
    planned = profile.sim_worlds
    keep = max(5.0, ctx.left() * RESERVE)
    wall = max(2.0, min(10.0, ctx.left() / 10))
    sim = simulate(
        factory,
        examples=planned,
        deadline=time.monotonic() + ctx.left() - keep,
        derandomize=profile.derandomize,
        seed=ctx.seed,
        database=None if profile.derandomize else example_database(),
        database_key=f"chunk-adapter:sim:{ctx.adapter_spec}".encode(),
        wall_timeout=wall,
        substitute=tuple(ctx.substitute) or "auto",
        options=_options(factory),
        judged_wrongly=(
            None
            if calibration_reference(factory) is None
            else lambda world: reference_fails(world, wall_timeout=wall) is not None
        ),
        reliable=ctx.reliability,
    )
    coverage = _coverage(sim, planned)
    if sim.stopped is not None:
        why = next(f for f in sim.stopped.failures if f.kind in STOPS_THE_RUN)
        yield CheckResult(
            "simulate", CHECK, (), "inconclusive",
            f"[{why.kind}] not a verdict on the adapter: {first_line(why.message)} "
            f"(control: {control.describe()})",
            detail=_describe(sim.stopped, ctx), seconds=sim.seconds, coverage=coverage,
        )  # fmt: skip
        return
    if sim.found is None:
        yield _no_failure(sim, planned, coverage, ctx.adapter_spec, ctx.reliability)
        return
    yield _judge(sim, factory, ctx, wall, coverage)


def _coverage(sim: Simulation, planned: int) -> str:
    skipped = sum(sim.skipped.values())
    why = ", ".join(f"{n} {k}" for k, n in sorted(sim.skipped.items()))
    text = f"{sim.worlds} of {planned} worlds"
    if sim.long_haul or sim.long_haul_cut:
        extra = sim.long_haul_planned
        cut = " (time budget)" if sim.long_haul_cut else ""
        # Hypothesis may run one draw past max_examples; the count planned is what it ran
        text += f" and {min(sim.long_haul, extra)} of {extra} long-haul worlds{cut}"
    text += f" ({sim.executions} executions)"
    text += f" on the {sim.runtime} runtime" if sim.runtime else ""
    return text + (f"; {skipped} skipped ({why})" if skipped else "")


def _no_failure(
    sim: Simulation, planned: int, coverage: str, spec: str, reliable: bool = False
) -> CheckResult:
    skipped = sum(sim.skipped.values())
    if sim.misjudged is not None:
        bad = sim.misjudged
        return CheckResult(
            "simulate", CHECK, (), "inconclusive",
            f"no confirmed failure, but the adapter failed {sim.skipped[JUDGED_WRONG]} "
            "world(s) that the reference adapter fails too: the suite judged them wrongly, "
            "so they decide nothing; please report the replay string. The first: "
            f"{first_line(bad.execution.failures[0].message)}",
            replay=SIM.command(encode(bad.world), bad.execution.schedule, adapter_spec=spec),
            seconds=sim.seconds, coverage=coverage,
        )  # fmt: skip
    if sim.out_of_time:
        return CheckResult(
            "simulate", CHECK, (), "inconclusive",
            f"no failure in {sim.worlds} worlds, but the time budget ran out before the "
            f"{planned} planned; give verify more time (--max-seconds) to run them all",
            seconds=sim.seconds, coverage=coverage + " (time budget)",
        )  # fmt: skip
    if skipped > sim.worlds:
        return CheckResult(
            "simulate", CHECK, (), "inconclusive",
            f"no failure, but most worlds could not be run to their end ({skipped} of "
            f"{skipped + sim.worlds}: {dict(sim.skipped)}); the adapter may poll far faster "
            "than every 1 ms, or keep putting without end",
            seconds=sim.seconds, coverage=coverage,
        )  # fmt: skip
    return CheckResult(
        "simulate", CHECK, (*RULES, *RELIABLE) if reliable else RULES, "pass",
        f"no violation in {sim.worlds} generated worlds ({sim.executions} executions in "
        f"virtual time, {sim.seconds:.1f} s)",
        seconds=sim.seconds, coverage=coverage,
    )  # fmt: skip


def _judge(
    sim: Simulation, factory: AdapterFactory, ctx: StageContext, wall: float, coverage: str
) -> CheckResult:
    """Confirm the smallest failing world (module doc) and build the result."""
    assert sim.found is not None and sim.first is not None
    start = time.monotonic()
    substitute = tuple(ctx.substitute) or "auto"
    confirmed: Found | None = None
    lost: Failure | None = None  # a replay saw a thread the explorer cannot control
    for candidate in (sim.found, sim.first):
        again = replay_world(
            candidate.world, candidate.execution.schedule, factory,
            wall_timeout=wall, substitute=substitute, runtime=CONFIRM_RUNTIME,
        )  # fmt: skip
        if same_failure(shown(candidate.execution.failures[:1])[0], shown(again.failures)):
            confirmed = candidate
            break
        lost = lost or next((f for f in again.failures if f.kind == "uncontrolled"), None)
    seconds = sim.seconds + time.monotonic() - start
    failed = (confirmed or sim.found).execution
    first = failed.failures[0]
    world = (confirmed or sim.found).world
    command = SIM.command(encode(world), failed.schedule, adapter_spec=ctx.adapter_spec)

    def found(detail: str | None = None) -> Finding:
        """The failure as it stands (calibrating may pick the world as drawn instead)."""
        finding = failed.finding
        assert finding is not None  # a failing world's execution
        detail = _describe(failed, ctx) if detail is None else detail
        return replace(finding, evidence=detail, reproducer=command)

    if confirmed is None and lost is not None:
        return CheckResult.of_finding(
            "simulate", CHECK, "inconclusive", found(), rules=(),
            evidence=f"[{lost.kind}] not a verdict on the adapter: {first_line(lost.message)} "
            f"(seen when the failure was replayed on {CONFIRM_RUNTIME}s)",
            seconds=seconds, confirmation=f"replayed on {CONFIRM_RUNTIME}s: {lost.kind}",
            coverage=coverage,
        )  # fmt: skip
    if confirmed is None:
        return CheckResult.of_finding(
            "simulate", CHECK, "inconclusive", found(), rules=(),
            evidence=f"[{first.kind}] did not reproduce on replay: nondeterminism outside the "
            f"explorer's control (real time, a thread it does not run, randomness in the "
            f"adapter); first run: {first_line(first.message)}",
            seconds=seconds,
            confirmation=f"replayed on {CONFIRM_RUNTIME}s: did not fail the same way",
            coverage=coverage,
        )  # fmt: skip
    confirmation = f"replayed once on {CONFIRM_RUNTIME}s: failed again"
    if calibration_reference(factory) is not None:
        # the reference must pass the world: the shrunk one, else the world as drawn
        bad = reference_fails(world, wall_timeout=wall)
        if bad is not None and confirmed is not sim.first:
            again = replay_world(
                sim.first.world, sim.first.execution.schedule, factory,
                wall_timeout=wall, substitute=substitute, runtime=CONFIRM_RUNTIME,
            )  # fmt: skip
            if (
                same_failure(shown(sim.first.execution.failures[:1])[0], shown(again.failures))
                and reference_fails(sim.first.world, wall_timeout=wall) is None
            ):
                bad, confirmed = None, sim.first
                failed, world = confirmed.execution, confirmed.world
                first = failed.failures[0]
                command = SIM.command(encode(world), failed.schedule, adapter_spec=ctx.adapter_spec)
        seconds = sim.seconds + time.monotonic() - start
        if bad is not None:
            return CheckResult.of_finding(
                "simulate", CHECK, "inconclusive", found(), rules=(),
                evidence="not a verdict on the adapter: the reference adapter fails the same "
                f"world ([{bad.failures[0].kind}] {first_line(bad.failures[0].message)}), so "
                "the suite judged this world wrongly; please report it with the replay "
                f"string. The adapter's failure: {first_line(first.message)}",
                seconds=seconds, confirmation=confirmation, coverage=coverage,
            )  # fmt: skip
        confirmation += REFERENCE_PASSED
    ops = _sizes(sim)
    counter = in_worlds(world, factory, seed=ctx.seed, substitute=tuple(ctx.substitute), wall=wall)
    root = root_of(world, failure_rules(failed.failures), counter, failure_members(failed.failures))
    finding = found(_describe(failed, ctx, world, ops, root.rules))
    seconds = sim.seconds + time.monotonic() - start
    return CheckResult.of_finding(
        "simulate", CHECK, "fail", replace(finding, rules=root.rules),
        evidence=root.evidence(finding.message), seconds=seconds,
        confirmation=confirmation, coverage=coverage,
        extra={"scheduler_ops": confirmed.size[0], "first_ops": sim.first.size[0]},
    )  # fmt: skip


def _sizes(sim: Simulation) -> str:
    assert sim.found is not None and sim.first is not None
    return (
        f"shrunk from {sim.first.size[0]} scheduler ops ({sim.first.size[1]} ops with faults "
        f"and pauses) to {sim.found.size[0]} ({sim.found.size[1]})"
    )


def _describe(
    execution: Execution,
    ctx: StageContext,
    world: Scenario | None = None,
    sizes: str = "",
    rules: tuple[str, ...] = (),
) -> str:
    """The failure's detail: the execution, and the world as a test marked with *rules*'
    root (the one the check reports: a counterfactual's, where one showed it)."""
    parts = [describe(execution, "a generated world", 1, ctx.adapter_spec)]
    if world is not None:
        parts += [
            "",
            f"The world ({sizes}), as a test to paste into `tests/test_world.py` (it fails "
            "while the bug is there):",
            f"{PASTE_BEGIN}test_world.py -----",
            as_pytest(
                world,
                execution.schedule,
                ctx.adapter_spec,
                rules or failure_rules(execution.failures),
            ),
            PASTE_END,
        ]
    return "\n".join(parts)


def as_pytest(world: Scenario, schedule: str, adapter_spec: str, rules: tuple[str, ...]) -> str:
    """*world* under *schedule* as a pytest test that fails while the bug is there."""
    name = "_".join(rules[:1]) or "world"
    body = world.to_python().replace("\n", "\n    ")
    return "\n".join(
        [
            "import pytest",
            "",
            "from chunk_adapter.explore.scenarios.scenario import *  # noqa: F403",
            "from chunk_adapter.explore.engine.simulate import replay_world",
            "from chunk_adapter.factory import load_factory",
            "",
            "",
            f"@pytest.mark.rule({rules[0]!r})" if rules else "",
            f"def test_generated_world_{name}() -> None:",
            f"    world = {body}",
            f"    execution = replay_world(world, {schedule!r}, load_factory({adapter_spec!r}))",
            "    failures = [f'[{f.kind}] {f.message}' for f in execution.failures]",
            '    assert execution.ok, "\\n".join(failures)',
        ]
    )
