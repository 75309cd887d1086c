"""Generated simulation: whole worlds run in virtual time, judged, shrunk and replayed.

In the spirit of FoundationDB's simulation testing and TigerBeetle's VOPR,
:func:`simulate` lets Hypothesis draw a whole world (:mod:`.worlds`: the
topology and configuration, the scheduler's program, the faults in virtual
time) and an interleaving for it (sparse preemptions or PCT), and runs it on the
explorer's controlled runtime (:func:`.execution.run_once`): a 60-second outage
costs no wall time. Every execution is judged by the contract oracles, on the
whole history and at the quiescent cut before the final ``stop()``, where
liveness is judged against a virtual deadline (``Scenario.liveness``); a
scheduler call that took virtual time waited (R3). The explorer adds its own
verdicts: deadlock, livelock, a hang in ``stop()``, a crashed thread.

A failing world shrinks, world and schedule together, to the smallest world that
fails the same way (the same root rule). It is then **confirmed**: replayed on a
fresh adapter from its replay string, it must fail the same way again; and run
on the reference adapter, it must pass (else the suite judged wrongly: never a
red). What cannot be decided is counted, never a verdict: a world that outgrew
the step budget is skipped; a thread the explorer cannot control ends the run
as *inconclusive*.

A world that passed while its adapter held closed requests (R24, :mod:`.retained`) is
reduced and repeated once no world failed (:func:`_repeat_leaky`). Over 400 lines, and one
module because the search, its shrinking and that repeat judge every world through the one
``fails`` closure and fill one :class:`Simulation`.
"""

from __future__ import annotations

import contextlib
import random
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, find, settings
from hypothesis import strategies as st
from hypothesis.database import ExampleDatabase
from hypothesis.errors import HypothesisException, HypothesisWarning

from ...factory import AdapterFactory, reference_factory
from ...profiles import seed_only_draws
from ...rules import RECENT_REQUESTS
from ..runtime.controller import Failure
from ..runtime.tasks import signature as failure_signature
from ..scenarios.long_haul import long_worlds
from ..scenarios.scenario import Scenario
from ..scenarios.worlds import schedules_for_worlds, worlds
from ..strategies import (
    DrawnStrategy,
    EffectStrategy,
    PctStrategy,
    RandomStrategy,
    ReplayStrategy,
    SectionStrategy,
    Strategy,
)
from .checks import default_checker, default_wrap
from .execution import Setup, prepared, run_once
from .result import NOT_CONTROLLED, Execution
from .retained import holders
from .shrink import CALLS, reduce_ops

__all__ = [
    "JUDGED_WRONG",
    "NOT_A_VERDICT",
    "STOPS_THE_RUN",
    "Found",
    "Simulation",
    "scheduler_ops",
    "signature",
    "simulate",
]

NOT_A_VERDICT = (*NOT_CONTROLLED, "script")
"""Failure kinds that say nothing about the contract: the explore stage's (not under
control, or over the step budget), and a settle that never saw quiet (skipped, counted)."""
JUDGED_WRONG = "the reference adapter fails it too"
"""Why a failing world was skipped: the suite judged it wrongly (:func:`simulate`)."""
STOPS_THE_RUN = ("uncontrolled", "diverged", "factory")
"""Of those, the ones no other world would escape either: the run ends inconclusive."""

SchedulePick = tuple[str, int, tuple[int, ...]]


@dataclass
class Found:
    """A failing world and the execution that failed it."""

    world: Scenario
    execution: Execution
    pick: SchedulePick = ("drawn", 0, ())
    """How its interleavings were chosen (the same pick replays a smaller world too)."""

    @property
    def size(self) -> tuple[int, int]:
        return (scheduler_ops(self.world), len(self.world.ops))


@dataclass
class Simulation:
    """What :func:`simulate` did."""

    worlds: int = 0
    """Worlds run to a verdict (passing or failing)."""
    skipped: Counter[str] = field(default_factory=Counter)
    """Worlds with no verdict, by the reason (``too long``, ``script``)."""
    first: Found | None = None
    """The first failing world, as drawn."""
    found: Found | None = None
    """The smallest world that failed the same way (shrunk)."""
    leaky: dict[frozenset[tuple[str, str]], Found] = field(default_factory=dict)
    """Passing worlds whose adapters still held closed requests at the cut, the cheapest
    (:func:`_cost`) for each set of records that held them (:func:`.retained.holders`): the
    ones repeated to judge R24 when no world failed."""
    misjudged: Found | None = None
    """The first failing world the reference adapter fails too (skipped: *judged_wrongly*)."""
    stopped: Execution | None = None
    """An execution the explorer could not control: the run stopped there."""
    out_of_time: bool = False
    long_haul: int = 0
    """Long-haul worlds run to a verdict (:mod:`..scenarios.long_haul`), after the sample."""
    long_haul_planned: int = 0
    """Long-haul worlds asked for (``round(examples * long_haul_share)``)."""
    long_haul_cut: bool = False
    """The long-haul worlds were cut short by the deadline (the sample was not)."""
    seconds: float = 0.0
    executions: int = 0
    runtime: str = ""
    """What carried the tasks, and why (:mod:`.carriers`)."""
    last_retained: int = 0
    """Closed requests the last passing world's most retaining member still held."""


def scheduler_ops(world: Scenario) -> int:
    """The scheduler's calls in *world*'s program (faults, pauses and settles not counted)."""
    return sum(op.kind in CALLS for op in world.ops)


def signature(failures: list[Failure]) -> str:
    """What "the same failure" means: the first failure's :func:`.tasks.signature` (the
    explore stage's too)."""
    return failure_signature(failures[0])


SLACK = 0.002
"""Virtual seconds of timer slack in a world (:class:`~.controller.Controller`): calls
take jittered virtual time, so two sleeps rarely end at the same instant and, fired one
at a time, the tasks would never be runnable together; deadlines within 2 ms of the
earliest fire with it (each task at most 2 ms late, as a real timer can be)."""

RESOLUTION = 0.005
"""Virtual seconds: the shortest timed block an adapter gets in a world (a sleep or timed
wait for less lasts this long), as on a kernel with coarse timers, which a correct adapter
must take (the contract's bounds are far above it: R17 0.25 s). An adapter that polls every
1 ms idles through a world in a fifth of the steps: measured on the ci sample at seed 0,
the reference adapter's steps -31 %; at seed 450 an asyncio adapter's time 72 s -> 45 s and
its worlds over the step budget 12 -> 4 (docs/quality.md, seventeenth session)."""

MAX_STEPS = 60_000
"""A world's step budget: a receiver polling every 1 ms takes ~6 000 steps a virtual second,
and a world of long streams and faults in polling mode runs for several virtual seconds."""

SEEDED_RUNS = (2, 12)
"""Executions of a world under a seeded pick (PCT or random), the first that fails counting:
``32 // scheduler ops`` within these bounds. A small world's executions are short, and a
race needs fewer of its steps to line up: it gets more schedules for the same time."""


LONG_HAUL_SHARE = 0.075
"""Long-haul worlds (:mod:`..scenarios.long_haul`; a third of them wide) run after the main
sample passed, as a share of its count (ci: 45 after 600), within the same deadline: a
deadline reached among them leaves the verdict on the sample whole
(:attr:`Simulation.long_haul_cut`)."""


def seeded_runs(world: Scenario) -> int:
    low, high = SEEDED_RUNS
    return max(low, min(high, 32 // max(1, scheduler_ops(world))))


SEEDED: dict[str, type[RandomStrategy] | type[SectionStrategy] | type[EffectStrategy]] = {
    "random": RandomStrategy,
    "sections": SectionStrategy,
    "effects": EffectStrategy,
}
"""The seeded picks whose *k*-th execution can be run alone (``(kind, seed, (k,))``)."""


def strategy_for(pick: SchedulePick, world: Scenario) -> Strategy:
    """The scheduler a drawn pick stands for (:func:`.worlds.schedules_for_worlds`);
    ``("random", seed, (k,))`` is the *k*-th execution of that seed alone (a failing
    world is reduced under the one schedule that failed it)."""
    kind, seed, choices = pick
    if kind == "pct":
        return PctStrategy(seed=seed, depth=3, executions=seeded_runs(world))
    if kind in SEEDED:
        kind_of = SEEDED[kind]
        if choices:
            one = kind_of(seed=seed, executions=choices[0] + 1)
            one.done = choices[0]
            return one
        return kind_of(seed=seed, executions=seeded_runs(world))
    return DrawnStrategy(choices)


def run_world(
    world: Scenario,
    strategy: Strategy,
    setup: Setup,
    fails: Callable[[Execution], bool] | None = None,
) -> list[Execution]:
    """Every execution of *world* under *strategy*, up to the first that fails (inside
    ``prepared(setup)``); ``fails`` says which failing executions count (default: all),
    one it does not count is run past."""
    done: list[Execution] = []
    while strategy.start_execution():
        execution = run_once(world, strategy, setup, every_step=strategy.every_step)
        done.append(execution)
        if execution.failures and (fails is None or fails(execution)):
            break
    return done


def sim_setup(
    factory: AdapterFactory,
    *,
    wall_timeout: float,
    max_steps: int,
    substitute: Any = "auto",
    runtime: str = "auto",
    slack: float | None = None,
    resolution: float | None = None,
) -> Setup:
    """How every world's execution is built and judged (timer slack :data:`SLACK` and
    timer resolution :data:`RESOLUTION` unless *slack*, *resolution* are given)."""
    return Setup(
        factory=factory,
        checker=default_checker,
        max_steps=max_steps,
        wall_timeout=wall_timeout,
        substitute=substitute or "auto",
        wrap=default_wrap(),
        runtime=runtime,
        slack=SLACK if slack is None else slack,
        resolution=RESOLUTION if resolution is None else resolution,
        retained=True,
    )


class _Stop(BaseException):
    """Ends the search at once: an execution the explorer could not control, the time
    budget spent, or the shrinking time. A ``BaseException``, which Hypothesis lets
    through: an ``Exception`` is a failure it would go on shrinking, drawing worlds for
    seconds after every one of them is refused (measured: 4–17 s of a 15 s shrink budget
    on two loaded cores)."""


def simulate(
    factory: AdapterFactory,
    *,
    examples: int,
    deadline: float,
    derandomize: bool = True,
    seed: int = 0,
    database: ExampleDatabase | None = None,
    database_key: bytes = b"chunk-adapter:sim",
    wall_timeout: float = 10.0,
    max_steps: int = MAX_STEPS,
    substitute: Any = "auto",
    options: Callable[[dict[str, Any]], dict[str, Any]] = lambda o: o,
    shrink_seconds: float = 30.0,
    judged_wrongly: Callable[[Scenario], bool] | None = None,
    long_haul_share: float = LONG_HAUL_SHARE,
    reliable: bool = False,
) -> Simulation:
    """Draw up to *examples* worlds and run each once; shrink the first failure. If none
    failed, ``round(examples * long_haul_share)`` long-haul worlds the same way
    (:mod:`..scenarios.long_haul`; what the deadline leaves of them).

    *deadline* is a ``time.monotonic()`` value: no world starts after it. Shrinking
    takes at most *shrink_seconds* after the first failure (half for Hypothesis's
    shrinker, the rest and what it left for removing ops: :mod:`.shrink`); it stops
    where it is then.
    *options* filters each world's adapter options (the stage keeps only those the
    adapter surely gets where the oracles read them). *judged_wrongly* (the stage: "the
    reference adapter fails it too") is asked of a world before its failure is taken as
    the one to shrink: a world it says yes to is skipped and counted (:data:`JUDGED_WRONG`),
    and the search goes on, instead of the whole run ending inconclusive on it.
    *reliable*: the main sample's worlds are judged for R25, R30 and R31 too (``verify
    --reliability``, :mod:`.reliability`).
    """
    sim = Simulation()
    setup = sim_setup(
        factory, wall_timeout=wall_timeout, max_steps=max_steps, substitute=substitute
    )
    target: list[str] = []
    shrink_until = [deadline]  # set when the first failure is found
    start = time.monotonic()

    long_phase: list[bool] = []  # set once the main sample has passed

    def tally() -> None:
        """One more world run to a verdict: the main sample's, or a long-haul one."""
        if long_phase:
            sim.long_haul += 1
        else:
            sim.worlds += 1

    def fails(pair: tuple[Scenario, SchedulePick]) -> bool:
        now = time.monotonic()
        if now > deadline:
            if long_phase and sim.first is None:
                sim.long_haul_cut = True  # the sample is whole: only the extra was cut
            else:
                sim.out_of_time = True
            raise _Stop
        if sim.first is not None and now > shrink_until[0]:
            raise _Stop  # shrinking had its time: what was found stands
        world, pick = pair
        world = replace(world, options=options(dict(world.options)))
        runs = run_world(world, strategy_for(pick, world), setup)
        sim.executions += len(runs)
        execution = runs[-1]
        if not execution.failures:
            if sim.first is None:
                tally()
            sim.last_retained = max(map(len, execution.retained.values()), default=0)
            if execution.retained:
                held, leaky = holders(execution.retained), Found(world, execution, pick)
                if held not in sim.leaky or _cost(leaky) < _cost(sim.leaky[held]):
                    sim.leaky[held] = leaky
            return False
        kinds = {f.kind for f in execution.failures}
        if kinds & set(STOPS_THE_RUN):
            sim.stopped = execution
            raise _Stop
        if kinds & set(NOT_A_VERDICT):
            if sim.first is None:
                sim.skipped[next(k for k in NOT_A_VERDICT if k in kinds)] += 1
            return False
        if pick[0] in SEEDED and not pick[2]:
            pick = (pick[0], pick[1], (len(runs) - 1,))  # the execution that failed
        found = Found(world, execution, pick)
        sig = signature(execution.failures)
        if not target:
            if judged_wrongly is not None and judged_wrongly(world):
                sim.skipped[JUDGED_WRONG] += 1
                sim.misjudged = sim.misjudged or found
                return False
            target.append(sig)
            tally()
            sim.first = sim.found = found
            shrink_until[0] = time.monotonic() + shrink_seconds / 2  # Hypothesis's half
        if sig != target[0]:
            return False
        assert sim.found is not None
        if found.size < sim.found.size:
            sim.found = found
        return True

    chosen = settings(
        max_examples=examples,
        derandomize=derandomize,
        database=None if derandomize else database,
        deadline=None,
        phases=(Phase.generate, Phase.shrink) if derandomize else tuple(Phase),
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        report_multiple_bugs=False,
    )
    sim.long_haul_planned = round(examples * long_haul_share)
    with prepared(setup), seed_only_draws():
        sim.runtime = f"{setup.runtime} ({setup.runtime_reason})"
        for family, count, key, long_haul in (
            (worlds(reliable=reliable), examples, database_key + b":r" * reliable, False),
            (long_worlds(), sim.long_haul_planned, database_key + b":long", True),
        ):
            if sim.first is not None or sim.stopped is not None or sim.out_of_time or not count:
                break
            if long_haul:
                long_phase.append(True)
            # no failing world (NoSuchExample), or stopped: what was seen is in sim either way;
            # a long world's repr is large, which Hypothesis warns of (the report prints
            # the world's replay string, not its repr)
            with contextlib.suppress(_Stop, HypothesisException), warnings.catch_warnings():
                warnings.filterwarnings("ignore", "Generating overly large repr", HypothesisWarning)
                find(
                    st.tuples(family, schedules_for_worlds()),
                    fails,
                    settings=settings(chosen, max_examples=count),
                    # derandomized or not, the seed picks the sample: the same seed, the
                    # same worlds and verdict; another seed, another sample (a bug few
                    # worlds reach is found in some samples and missed in others)
                    random=random.Random(seed),
                    database_key=key,
                )
        if sim.found is not None and sim.stopped is None:
            # the other half, op by op: with what Hypothesis's half left
            shrink_until[0] = max(shrink_until[0], time.monotonic()) + shrink_seconds / 2
            with contextlib.suppress(_Stop):
                _reduce(sim, fails, deadline, shrink_until)
        elif sim.stopped is None:
            with contextlib.suppress(_Stop):
                _repeat_leaky(sim, setup, fails, deadline)
    sim.seconds = time.monotonic() - start
    return sim


def _cost(found: Found) -> tuple[int, int, int]:
    return (found.execution.steps, *found.size)


LEAKY_TRIES = 60
"""At most this many smaller worlds are tried when a world to repeat is reduced."""
LEAKY_RECORDS = 3
"""At most this many leaky worlds are repeated, each showing a record not yet tried: a
bounded record the adapter may keep (the reference's paced log lines of failed calls)
holds closed requests too, and must not hide a leak in another."""


def _repeat_leaky(
    sim: Simulation,
    setup: Setup,
    fails: Callable[[tuple[Scenario, SchedulePick]], bool],
    deadline: float,
) -> None:
    """The cheapest leaky world of each record (the fewest steps: a copy that waits out a
    backoff while a receiver polls costs thousands), reduced and then repeated
    (:func:`_repeated`) under one schedule, until one fails."""
    tried: set[tuple[str, str]] = set()
    for _ in range(LEAKY_RECORDS):
        fresh = [found for held, found in sim.leaky.items() if not held <= tried]
        if not fresh or time.monotonic() > deadline:
            return
        cheapest = min(fresh, key=_cost)
        before = frozenset(tried)
        tried |= holders(cheapest.execution.retained)
        leaky = _smallest_leaky(cheapest, setup, deadline)
        if holders(leaky.execution.retained) <= before:
            continue  # reduced, it shows only records already tried
        pick: SchedulePick = ("random", leaky.pick[1], (0,))
        repeated, start = _repeated(leaky), time.monotonic()
        sim.last_retained = 0  # what the repeated run holds, if it passes to a verdict
        if fails((repeated, pick)):
            return
        more = _more_copies(repeated, sim.last_retained)
        took = time.monotonic() - start
        if more is None or time.monotonic() + took * more.repeat / repeated.repeat >= deadline:
            continue  # nothing more to ask, or no time to ask it
        if fails((more, pick)):
            return


MORE_COPIES = 10
"""At most this many times the copies of a repeated leaky world are run again when some of
them, not enough, held their requests: a leak one copy in twenty shows is still found."""


def _more_copies(repeated: Scenario, held: int) -> Scenario | None:
    """*repeated* with as many more copies as its run asks, where it held *held* closed
    requests, fewer than R24's allowance: a leak on one interleaving of a race shows in a
    share of the copies, and twice the allowance of them is what decides (``None``: it
    held none, so nothing leaks; or as many as a bounded record may)."""
    if not 0 < held < RECENT_REQUESTS:
        return None
    factor = min(MORE_COPIES, -(-2 * RECENT_REQUESTS // held))
    return replace(repeated, repeat=repeated.repeat * factor)


def _smallest_leaky(leaky: Found, setup: Setup, deadline: float) -> Found:
    """*leaky* with every op removed (:func:`.shrink.reduce_ops`) that it still passes and
    holds closed requests without: each copy of the repeated world is then as cheap as it
    can be."""
    kept = [leaky]

    def keeps(smaller: Scenario) -> bool:
        execution = run_world(smaller, strategy_for(leaky.pick, smaller), setup)[-1]
        if execution.failures or not execution.retained:
            return False
        kept.append(Found(smaller, execution, leaky.pick))
        return True

    reduce_ops(leaky.world, keeps, tries=LEAKY_TRIES, until=lambda: deadline)
    return kept[-1]


def _repeated(leaky: Found) -> Scenario:
    """*leaky*'s world repeated until twice the requests R24 allows a record of are closed,
    were each copy to close as many as the world did (:mod:`.retained`): a leak that shows
    in half the copies' interleavings is still seen."""
    held = max(len(names) for names in leaky.execution.retained.values())
    copies = -(-2 * RECENT_REQUESTS // held)
    return replace(leaky.world, repeat=leaky.world.repeat * copies)


REDUCE_RUNS = 300
"""At most this many worlds are tried when the found one is reduced further."""
FALLBACK_PICKS: tuple[SchedulePick, ...] = (("drawn", 0, ()), ("random", 0, ()))
"""Schedules a smaller world is also tried under when the found pick does not fail it:
removing an op shifts every later choice, and most bugs fail under any schedule."""


def _reduce(
    sim: Simulation,
    fails: Callable[[tuple[Scenario, SchedulePick]], bool],
    deadline: float,
    shrink_until: list[float],
) -> None:
    """Shrink the found world further, op by op (:func:`.shrink.reduce_ops`: whole
    requests, members and kinds of op first, then blocks), while it still fails the same
    way under the pick that failed it or a fallback (*fails* keeps the smallest in *sim*)."""
    assert sim.found is not None
    found = sim.found

    def keeps(candidate: Scenario) -> bool:
        pick = (sim.found or found).pick  # the smallest failing world's, as fails() kept it
        return any(fails((candidate, p)) for p in (pick, *FALLBACK_PICKS))

    reduce_ops(found.world, keeps, tries=REDUCE_RUNS, until=lambda: min(deadline, shrink_until[0]))


def replay_world(
    world: Scenario,
    schedule: str,
    factory: AdapterFactory,
    *,
    wall_timeout: float = 10.0,
    max_steps: int = MAX_STEPS,
    substitute: Any = "auto",
    runtime: str = "auto",
    slack: float | None = None,
    resolution: float | None = None,
) -> Execution:
    """*world* once more under the recorded *schedule*, on a fresh adapter (on either
    runtime: a schedule replays the same on both; *slack* and *resolution* 0 for a
    schedule recorded before worlds had timer slack and a timer resolution)."""
    setup = sim_setup(
        factory,
        wall_timeout=wall_timeout,
        max_steps=max_steps,
        substitute=substitute,
        runtime=runtime,
        slack=slack,
        resolution=resolution,
    )
    with prepared(setup):
        return run_world(world, ReplayStrategy(schedule), setup)[-1]


def reference_fails(
    world: Scenario, *, runs: int = 20, wall_timeout: float = 10.0
) -> Execution | None:
    """The first execution of *world* on the reference adapter, under *runs* random
    schedules, that fails with a verdict (the suite would be judging wrongly), or ``None``."""
    setup = sim_setup(reference_factory, wall_timeout=wall_timeout, max_steps=MAX_STEPS)
    # a repeated world is many worlds already: fewer schedules of it
    strategy = RandomStrategy(seed=0, executions=max(2, runs // world.repeat))
    with prepared(setup):
        while strategy.start_execution():
            execution = run_once(world, strategy, setup, every_step=strategy.every_step)
            if execution.failures and not {f.kind for f in execution.failures} & set(NOT_A_VERDICT):
                return execution
    return None
