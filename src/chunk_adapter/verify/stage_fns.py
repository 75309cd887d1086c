"""The stage functions themselves (imported only inside a worker process)."""

from __future__ import annotations

from collections.abc import Iterator

from ..factory import AdapterFactory
from .probes import run_probes
from .result import CheckResult
from .stages import StageContext

__all__ = ["examples", "explore", "stateful", "stress"]


def examples(factory: AdapterFactory, ctx: StageContext) -> Iterator[CheckResult]:
    yield from run_probes(factory, f"{ctx.replay_prefix} --stage examples", ctx.announce)


def stateful(factory: AdapterFactory, ctx: StageContext) -> list[CheckResult]:
    return [CheckResult("stateful", "machines", (), "skip", "not wired yet")]


def stress(factory: AdapterFactory, ctx: StageContext) -> list[CheckResult]:
    return [CheckResult("stress", "scenarios", (), "skip", "not wired yet")]


def explore(factory: AdapterFactory, ctx: StageContext) -> list[CheckResult]:
    return [CheckResult("explore", "scenarios", (), "skip", "not wired yet")]
