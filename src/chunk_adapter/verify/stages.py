"""The verify stages, in the order they run, and what each needs to run.

A stage is a function ``run(factory, ctx) -> Iterable[CheckResult]`` (a
generator, so results are reported as they come); it runs in a
worker process of its own (:mod:`chunk_adapter.verify.worker`), so an adapter
that hangs, spins or leaks threads cannot touch the next stage or the tool.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..factory import AdapterFactory
from ..outcome import CheckResult, StageContext

__all__ = ["STAGES", "Stage", "StageContext", "stage_names"]


StageFn = Callable[[AdapterFactory, StageContext], Iterable[CheckResult]]


@dataclass(frozen=True)
class Stage:
    name: str
    target: str  # "module:function", imported in the worker only
    share: float  # share of the remaining budget this stage may use
    what: str
    plan_target: str = ""
    """``"module:function"``: profile -> the checks it runs, each a name or a
    ``(name, rules)`` pair (the rules the check can find broken)."""
    floor: float = 0.0  # seconds it may take whatever its share (a cap, not a cost)

    def load(self) -> StageFn:
        module, attr = self.target.split(":")
        fn: StageFn = getattr(importlib.import_module(module), attr)
        return fn

    def plan(self, profile: str) -> list[str]:
        """The names of the checks this stage runs under *profile*, in order ([] if unknown)."""
        return [name for name, _ in self.planned(profile)]

    def planned(self, profile: str) -> list[tuple[str, tuple[str, ...]]]:
        """``(name, rules)`` of each check this stage runs under *profile*, in order: what a
        "not reached" line names, so the rule table can say which rules were not reached."""
        if not self.plan_target:
            return []
        module, attr = self.plan_target.split(":")
        items: list[str | tuple[str, tuple[str, ...]]] = getattr(
            importlib.import_module(module), attr
        )(profile)
        return [
            (item, ()) if isinstance(item, str) else (item[0], tuple(item[1])) for item in items
        ]


STAGES: tuple[Stage, ...] = (
    Stage(
        "examples",
        "chunk_adapter.verify.stage_fns:examples",
        0.10,
        "worked examples and per-rule probes",
        "chunk_adapter.verify.stage_fns:examples_plan",
        # A lost final costs a check its 10 s wait, twice (to confirm it): a 10 % share
        # of 240 s left a broken adapter inconclusive on a loaded machine. A correct
        # adapter takes ~2 s, and what the stage does not use goes to the next ones.
        floor=45.0,
    ),
    Stage(
        "simulate",
        "chunk_adapter.explore.stages.simulate:run_stage",
        0.6,
        "generated worlds in virtual time",
        "chunk_adapter.explore.stages.simulate:plan",
    ),
    Stage(
        "stress",
        "chunk_adapter.stress.stage:run_stage",
        0.30,
        "stress and fault injection",
        "chunk_adapter.stress.stage:plan",
    ),
    Stage(
        "stateful",
        "chunk_adapter.stateful.stage:run_stage",
        0.45,
        "Hypothesis state machines",
        "chunk_adapter.stateful.stage:plan",
    ),
    Stage(
        "explore",
        "chunk_adapter.explore.stages.explore:run_stage",
        1.0,
        "interleaving explorer",
        "chunk_adapter.explore.stages.explore:plan",
    ),
)
"""The examples first (cheap, and each probe names its rule), then the generated worlds:
the main engine, which reaches most bugs in virtual time within seconds and gets most of the
budget; then what simulation cannot see (stress: real time, real threads, CPU; the state
machines on real threads) and the explorer's library with the rest. On the reference adapter
examples take ~5 s, the worlds ~16 s, stress ~4 s, the machines ~14 s (47 s in all, measured
on 1e574b9). (Measured over tests/quality: moving the worlds before stress and the machines
took the median time to verdict from 14.3 s to 13.0 s, each finding still naming its
adapter's rule; docs/quality.md)"""


def stage_names() -> list[str]:
    return [stage.name for stage in STAGES]
