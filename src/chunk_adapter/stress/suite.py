"""The stress suite as a list of named runs, for tools that drive it (``chunk-adapter verify``).

``scenarios(seed)`` lists ``(name, rules, run)``: call ``run(factory)`` (or
``run(factory, until=monotonic_deadline)`` within a budget) to get that
scenario's :class:`~chunk_adapter.stress.report.StressReport`. The parameters
are those of the default tier (tests/stress). Each run carries ``seconds``,
what it takes a correct adapter on a loaded machine (the reference adapter,
two verifies at once on two cores, rounded up), so a stage can plan its
budget; ``quick=True`` keeps one representative of each kind.

Order: the fault scenarios first (they find the most), then prompt stop from
every state, then the timing scenarios, whose windows are fixed. The last run,
``put failures, loopback``, drives one adapter that receives its own chunks
(``advisory``): the contract does not require an adapter to work that way —
one may rightly share per-request state between its send and receive sides —
so what it finds is a note, never a verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..factory import AdapterFactory
from ..rules import R3, R6, R7, R8, R9, R10, R11, R13, R14, R17, R18, R22, R23
from .blocked import blocked_work
from .pacing import head_of_line, idle_polling
from .report import StressReport
from .stopping import STATES, prompt_stop
from .streams import build_faults, get_faults, put_faults
from .verdicts import TINY_SWITCH_INTERVAL

__all__ = ["STALL", "Run", "Scenario", "scenarios"]

STALL = 10.0
"""Seconds with nothing handed out before the streams still missing are reported (R23)."""


@dataclass(frozen=True)
class Scenario:
    """One run of the suite: a scenario function with its parameters, and its planned cost."""

    fn: Callable[..., StressReport]
    kwargs: dict[str, Any] = field(default_factory=dict)
    seconds: float = 1.0
    advisory: bool = False

    def __call__(self, factory: AdapterFactory, *, until: float | None = None) -> StressReport:
        """Run it; *until* (a ``time.monotonic()`` value) is the budget it may not pass."""
        return self.fn(factory, until=until, **self.kwargs)


Run = Scenario


def _stop(seed: int, state: str) -> tuple[str, tuple[str, ...], Scenario]:
    """Prompt stop from *state*. With every thread of one adapter stuck at once
    (``all_blocked``) stop() has one deadline for all of them: at the contract's 1 s join
    timeout, joining each thread in turn (2 s) is past the bound (1.75 s); at the default
    0.3 s it is not (0.6 s against 0.7 s)."""
    if state == "all_blocked":
        kwargs = {"seed": seed, "state": state, "join_timeout": 1.0}
        return (f"stop: {state}", (R18,), Scenario(prompt_stop, kwargs, 3.0))
    return (f"stop: {state}", (R18,), Scenario(prompt_stop, {"seed": seed, "state": state}, 2.0))


def scenarios(seed: int, *, quick: bool = False) -> list[tuple[str, tuple[str, ...], Scenario]]:
    """The suite's runs, in order: ``(name, contract rules, run)``."""
    # A stream missing once nothing new was handed out for STALL seconds is lost
    # (R23): ample for a correct adapter's slowest retry backoff, short enough that
    # a finding can be re-run to confirm it within the stage's budget.
    streams: dict[str, Any] = {"seed": seed, "deadline": STALL}
    runs: list[tuple[str, tuple[str, ...], Scenario]] = [
        (
            "put failures 30%",
            (R9, R10, R11, R14, R22),
            Scenario(put_faults, {**streams, "requests": 200, "put_rate": 0.3}, 4.0),
        ),
        (
            "get failures 30%",
            (R13, R14, R22),
            Scenario(get_faults, {**streams, "requests": 200, "get_rate": 0.3}, 2.0),
        ),
        (
            "build failures 20%",
            (R7, R8, R11, R22),
            Scenario(build_faults, {**streams, "requests": 200}, 2.0),
        ),
        ("blocked work", (R3, R6, R9, R11), Scenario(blocked_work, streams, 2.0)),
    ]
    states = ("idle", "build_blocked") if quick else STATES
    runs += [_stop(seed, state) for state in states]
    runs += [
        ("head-of-line", (R17,), Scenario(head_of_line, {"seed": seed}, 1.5)),
        (
            "idle polling",
            (R17,),
            Scenario(idle_polling, {"seed": seed, "idle_requests": 10}, 2.5),
        ),
    ]
    if not quick:
        runs += [
            (
                # The same episodes with a backlog of its own size: 1,000 calls while one
                # build is held, so a queue bounded anywhere below that (a save_async that
                # waits for room, or drops) shows; 40 calls an episode do not fill one of 256.
                "blocked work, deep backlog",
                (R3, R11, R23),
                Scenario(
                    blocked_work,
                    {**streams, "requests": 300, "episodes": 1, "calls_while_blocked": 1000},
                    2.0,
                ),
            ),
            (
                "put failures, shaken",
                (R9, R10, R11, R22),
                Scenario(
                    put_faults,
                    {**streams, "requests": 60, "switch_interval_s": TINY_SWITCH_INTERVAL},
                    2.0,
                ),
            ),
            (
                "idle adapter",
                (R17,),
                Scenario(idle_polling, {"seed": seed, "idle_requests": 0}, 2.5),
            ),
            (
                "put failures, loopback",
                (R9, R10, R11, R14, R22),
                Scenario(
                    put_faults,
                    {
                        **streams,
                        "requests": 100,
                        "put_rate": 0.3,
                        "loopback": True,
                        "deadline": 3.0,
                    },
                    3.0,
                    advisory=True,
                ),
            ),
        ]
    return runs
