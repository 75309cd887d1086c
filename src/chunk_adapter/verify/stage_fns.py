"""The ``examples`` stage function (imported only inside a worker process)."""

from __future__ import annotations

from collections.abc import Iterator

from ..examples import EXAMPLE_RULES, EXAMPLES
from ..factory import AdapterFactory
from ..outcome import CheckResult, StageContext
from .probes import PROBES, run_probes

__all__ = ["examples", "examples_plan"]


def examples(factory: AdapterFactory, ctx: StageContext) -> Iterator[CheckResult]:
    yield from run_probes(
        factory,
        f"{ctx.replay_prefix} --stage examples",
        ctx.announce,
        wants=ctx.wants,
        keep_going=ctx.run_all,
    )


def examples_plan(profile: str) -> list[str | tuple[str, tuple[str, ...]]]:
    """The checks the examples stage runs, in order (the same under every profile), each
    with the rules it checks."""
    examples: list[str | tuple[str, tuple[str, ...]]] = [
        (e.__name__.replace("_", " "), EXAMPLE_RULES[e.__name__]) for e in EXAMPLES
    ]
    return examples + [(name, rules) for name, rules, _ in PROBES]
