"""The ``examples`` stage function (imported only inside a worker process)."""

from __future__ import annotations

from collections.abc import Iterator

from ..factory import AdapterFactory
from ..outcome import CheckResult, StageContext
from .probes import run_probes

__all__ = ["examples"]


def examples(factory: AdapterFactory, ctx: StageContext) -> Iterator[CheckResult]:
    yield from run_probes(factory, f"{ctx.replay_prefix} --stage examples", ctx.announce)
