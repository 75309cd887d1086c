"""The stress kind of reproducer: ``stress:SCENARIO:SEED`` (:mod:`chunk_adapter.reproducer`)."""

from __future__ import annotations

from typing import Any, TextIO

from ..errors import InvalidValue
from ..reproducer import Kind, register

__all__ = ["STRESS"]


def _replay(fields: tuple[str, ...], factory: Any, spec: str, out: TextIO) -> int:
    """Run the scenario named in *fields* with its seed; 1 if it fails again."""
    from .suite import scenarios

    name, seed = fields
    try:
        seed_value = int(seed)
    except ValueError:
        raise InvalidValue(f"the stress seed must be an integer, got {seed!r}") from None
    runs = {label: run for label, _, run in scenarios(seed_value)}
    if name not in runs:
        raise InvalidValue(f"no stress scenario {name!r}; choose one of {sorted(runs)}")
    report = runs[name](factory)
    print(report.describe(spec), file=out)
    return 0 if report.ok else 1


STRESS = register(Kind("stress", ("SCENARIO", "SEED"), _replay, rest=0))
"""One stress scenario of :func:`~.suite.scenarios`, with its seed; the scenario's name
may hold ``:`` (``stress:stop: idle:0``)."""
