"""The stress suite as a list of named runs, for tools that drive it (``chunk-adapter verify``).

``scenarios(seed)`` lists ``(name, rules, run)``: call ``run(factory)`` to get
that scenario's :class:`~chunk_adapter.stress.report.StressReport`. The
parameters are those of the default tier (tests/stress), about 5 s in all for the
reference adapter; ``quick=True`` keeps one representative of each kind
(about 3 s).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from ..factory import AdapterFactory
from .blocked import blocked_work
from .pacing import head_of_line, idle_polling
from .report import StressReport
from .stopping import STATES, prompt_stop
from .streams import build_faults, get_faults, put_faults
from .verdicts import TINY_SWITCH_INTERVAL

__all__ = ["Run", "scenarios"]

Run = Callable[[AdapterFactory], StressReport]


def scenarios(seed: int, *, quick: bool = False) -> list[tuple[str, tuple[str, ...], Run]]:
    """The suite's runs, in order: ``(name, contract rules, run)``."""
    runs: list[tuple[str, tuple[str, ...], Run]] = [
        (
            "put failures 30%",
            ("R9", "R10", "R11", "R14", "R22"),
            partial(put_faults, seed=seed, requests=200, put_rate=0.3),
        ),
        (
            "get failures 30%",
            ("R13", "R14", "R22"),
            partial(get_faults, seed=seed, requests=200, get_rate=0.3),
        ),
        (
            "build failures 20%",
            ("R7", "R8", "R11", "R22"),
            partial(build_faults, seed=seed, requests=200),
        ),
        ("blocked work", ("R3", "R6", "R9", "R11"), partial(blocked_work, seed=seed)),
        ("idle polling", ("R17",), partial(idle_polling, seed=seed, idle_requests=10)),
        ("head-of-line", ("R17",), partial(head_of_line, seed=seed)),
    ]
    states = ("idle", "build_blocked") if quick else STATES
    runs += [
        (f"stop: {state}", ("R18",), partial(prompt_stop, seed=seed, state=state))
        for state in states
    ]
    if not quick:
        runs += [
            (
                "put failures, shaken",
                ("R9", "R10", "R11", "R22"),
                partial(put_faults, seed=seed, requests=60, switch_interval_s=TINY_SWITCH_INTERVAL),
            ),
            (
                "idle adapter",
                ("R17",),
                partial(idle_polling, seed=seed, idle_requests=0),
            ),
        ]
    return runs
