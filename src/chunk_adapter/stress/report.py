"""What a stress scenario hands back: a :class:`StressReport`, and the seed it ran with.

Every scenario is reproducible from its name, its seed and its parameters. A
report that failed prints all three, as the Python call that reruns it and as
the pytest command line of the test that ran it (taken from
``PYTEST_CURRENT_TEST`` when pytest is running), so a failure is one paste
away from being replayed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidValue
from ..factory import REFERENCE

__all__ = ["DEFAULT_SEED", "SEED_ENV", "StressFailure", "StressReport", "seed_from_env"]

SEED_ENV = "CHUNK_ADAPTER_SEED"
DEFAULT_SEED = 20261130
"""The fixed seed of the default run; ``CHUNK_ADAPTER_SEED=<int>`` overrides it."""


def seed_from_env(default: int = DEFAULT_SEED) -> int:
    """The seed in ``CHUNK_ADAPTER_SEED`` if set (it must be an int), else *default*."""
    raw = os.environ.get(SEED_ENV)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw.strip(), 0)
    except ValueError:
        raise InvalidValue(
            f"{SEED_ENV} must be an integer seed, got {SEED_ENV}={raw!r}; "
            f"unset it to use the default seed {default}"
        ) from None


class StressFailure(AssertionError):
    """A stress scenario found contract violations; the message says how to rerun it."""


@dataclass
class StressReport:
    """The outcome of one scenario run.

    ``failures`` are strings that start with the contract rule they are about
    ("R18: stop() took 2.1 s ..."), or with ``stats`` (a counter disagrees
    with the recording) or ``error`` (a scheduler call raised unexpectedly).
    ``measurements`` are the numbers the scenario took (seconds, rates),
    whether or not it failed.
    """

    scenario: str
    params: dict[str, Any]
    failures: list[str] = field(default_factory=list)
    measurements: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def seed(self) -> int | None:
        seed = self.params.get("seed")
        return seed if isinstance(seed, int) else None

    @property
    def rules(self) -> list[str]:
        """The rule numbers the failures name, in order of first appearance."""
        seen: list[str] = []
        for failure in self.failures:
            rule = failure.split(":", 1)[0].strip()
            if rule not in seen:
                seen.append(rule)
        return seen

    def fail(self, rule: str, message: str) -> None:
        self.failures.append(f"{rule}: {message}")

    def measure(self, name: str, value: float) -> None:
        self.measurements[name] = value

    def python_call(self, adapter_spec: str = REFERENCE) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return (
            "from chunk_adapter.factory import load_factory; "
            f"from chunk_adapter.stress import {self.scenario}; "
            f"print({self.scenario}(load_factory({adapter_spec!r}), {args}).describe())"
        )

    def pytest_command(self, adapter_spec: str = REFERENCE, nodeid: str | None = None) -> str:
        if nodeid is None:
            current = os.environ.get("PYTEST_CURRENT_TEST", "")
            nodeid = current.rsplit(" ", 1)[0] if current else None
        if nodeid is None:
            return "(not run under pytest)"
        seed = f"{SEED_ENV}={self.seed} " if self.seed is not None else ""
        return f"{seed}python -m pytest '{nodeid}' --adapter {adapter_spec}"

    def describe(self, adapter_spec: str = REFERENCE, nodeid: str | None = None) -> str:
        """The whole report, with the reproduction lines when it failed."""
        params = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        lines = [f"stress scenario {self.scenario}({params}): {'ok' if self.ok else 'FAILED'}"]
        lines += [f"  - {failure}" for failure in self.failures]
        if self.measurements:
            shown = ", ".join(f"{k}={v:.6g}" for k, v in self.measurements.items())
            lines.append(f"  measured: {shown}")
        if not self.ok:
            lines.append(f"  seed: {self.seed}")
            lines.append(f"  rerun the test: {self.pytest_command(adapter_spec, nodeid)}")
            lines.append(f"  rerun in Python: {self.python_call(adapter_spec)}")
        return "\n".join(lines)

    def raise_if_failed(self, adapter_spec: str = REFERENCE, nodeid: str | None = None) -> None:
        if not self.ok:
            raise StressFailure(self.describe(adapter_spec, nodeid))
