"""What a stress scenario hands back: a :class:`StressReport`, and the seed it ran with.

Every scenario is reproducible from its name, its seed and its parameters. A
report that failed prints all three, as the Python call that reruns it and as
the pytest command line of the test that ran it (taken from
``PYTEST_CURRENT_TEST`` when pytest is running), so a failure is one paste
away from being replayed.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import InvalidValue
from ..factory import REFERENCE
from ..finding import Finding
from ..outcome import RULES
from ..rules import R3, R18, R22, R23

__all__ = [
    "DEFAULT_SEED",
    "LIVENESS",
    "NOTE",
    "ORACLE",
    "ROOT",
    "SEED_ENV",
    "SYMPTOM",
    "StressFailure",
    "StressReport",
    "seed_from_env",
]

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
    """A stress scenario found contract violations; the message says how to rerun it, and
    ``finding`` is the scenario's :class:`~chunk_adapter.finding.Finding`
    (:meth:`StressReport.finding`)."""

    def __init__(self, message: str, finding: Finding) -> None:
        super().__init__(message)
        self.finding = finding

    def __reduce__(self) -> tuple[object, ...]:  # pickles with its finding
        return (type(self), (str(self), self.finding))


ROOT = 0
"""Rank of a fault seen directly: a thread that died, a scheduler call that raised or
waited, a ``stop()`` that hung or was slow."""
ORACLE = 1
"""Rank of a violation in the recorded history, placed by the event that broke it."""
LIVENESS = 2
"""Rank of an oracle's liveness violation (a chunk never put, never received): usually a
consequence."""
SYMPTOM = 3
"""Rank of what the scenario saw at the end (streams that never completed)."""
NOTE = 4
"""Rank of a ``stats()`` counter that disagrees with the recording (not the contract)."""
_ROOT_RULES = (R3, R18, R22, "error")
_NOT_RULES = ("stats", "error")
"""What a failure may be about besides a contract rule: a counter note, a call that raised."""


@dataclass
class StressReport:
    """The outcome of one scenario run.

    ``findings`` are what failed, one :class:`~chunk_adapter.finding.Finding` each:
    a contract rule broken (its ``rules``), or, naming no rule, of ``kind``
    ``stats`` (a counter disagrees with the recording) or ``error`` (a scheduler
    call raised unexpectedly), **root cause first**: faults seen directly, then
    the oracles' violations in the order of the events that broke them, then what
    never happened, then what the scenario saw at its end, then counter notes.
    ``failures`` are their texts, each starting with its rule or kind
    ("R18: stop() took 2.1 s ...").
    ``measurements`` are the numbers the scenario took (seconds, rates),
    whether or not it failed. ``incomplete`` says why the
    scenario stopped before its planned work (the stage's budget ran out):
    then it has no verdict on what it did not run.
    """

    scenario: str
    params: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    measurements: dict[str, float] = field(default_factory=dict)
    incomplete: str = ""
    set_aside: tuple[str, ...] = ()
    """Under a verify baseline: the accepted rules the scenario's history showed (the
    oracles let it pass so): what else it saw may be their consequence (module
    :mod:`~chunk_adapter.oracles.accepted`), so the scenario tells nothing new."""
    _ranks: list[tuple[int, int, int]] = field(default_factory=list, repr=False)

    @property
    def failures(self) -> list[str]:
        """Each finding's text, in order (its message, then its evidence's lines)."""
        return [_text(f) for f in self.findings]

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def seed(self) -> int | None:
        seed = self.params.get("seed")
        return seed if isinstance(seed, int) else None

    @property
    def rules(self) -> list[str]:
        """The rule of each failure once, in order (root cause first): a contract rule
        (``"R18"``), ``"stats"`` or ``"error"`` (see :meth:`fail`)."""
        return list(dict.fromkeys(f.root or f.kind for f in self.findings))

    @property
    def contract_rules(self) -> tuple[str, ...]:
        """:attr:`rules` without ``stats`` and ``error``: the contract rules broken."""
        return tuple(r for r in self.rules if r in RULES)

    def contract_failures(self) -> list[str]:
        """The failures that are not ``stats`` notes (counters are not the contract)."""
        return [_text(f) for f in self.contract_findings()]

    def contract_findings(self) -> tuple[Finding, ...]:
        """The findings that are not ``stats`` notes, in order."""
        return tuple(f for f in self.findings if f.kind != "stats")

    def finding(
        self,
        adapter_spec: str = REFERENCE,
        *,
        rules: tuple[str, ...] = (),
        reproducer: str | None = None,
    ) -> Finding | None:
        """The scenario's finding (``None``: no contract failure): the contract rules broken
        (else *rules*, the scenario's own), the first failure as its message, the whole
        report (:meth:`describe`) as its evidence, and *reproducer* (by default the Python
        call that reruns it)."""
        failures = self.contract_findings()
        if not failures:
            return None
        return Finding(
            self.contract_rules or rules,
            "",
            failures[0].message,
            self.describe(adapter_spec),
            self.python_call(adapter_spec) if reproducer is None else reproducer,
        )

    def fail(
        self, rule: str, message: str, *, rank: int | None = None, at: int | None = None
    ) -> None:
        """Add a failure; *rank* (:data:`ROOT`, :data:`ORACLE`...) and *at* (a history
        sequence number) place it. By default R3, R18, R22 and ``error`` are
        root faults, R23 a symptom, ``stats`` a note, anything else an oracle's
        finding."""
        if rank is None:
            rank = (
                ROOT
                if rule in _ROOT_RULES
                else SYMPTOM
                if rule == R23
                else NOTE
                if rule == "stats"
                else ORACLE
            )
        self.add(f"{rule}: {message}", rank, at, rule=rule)

    def add(self, text: str, rank: int, at: int | None = None, *, rule: str) -> None:
        """Insert the failure *text* about *rule* at its place (see :meth:`fail`)."""
        key = (rank, at if at is not None else 1 << 62, len(self._ranks))
        i = bisect.bisect(self._ranks, key)
        self._ranks.insert(i, key)
        head, _, rest = text.partition("\n")
        named = rule not in _NOT_RULES
        self.findings.insert(
            i, Finding((rule,) if named else (), "" if named else rule, head, rest)
        )

    def accept(self, rules: tuple[str, ...]) -> None:
        """The history showed *rules*, accepted by a verify baseline (:attr:`set_aside`)."""
        self.set_aside = tuple(dict.fromkeys(self.set_aside + rules))

    def stop_at_budget(self, what: str) -> None:
        """The stage's budget ran out during *what*: no verdict on the rest."""
        self.incomplete = self.incomplete or what

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
        state = "FAILED" if not self.ok else "incomplete" if self.incomplete else "ok"
        lines = [f"stress scenario {self.scenario}({params}): {state}"]
        if self.incomplete:
            lines.append(f"  stopped at the budget: {self.incomplete}")
        lines += [f"  - {failure}" for failure in self.failures]
        if self.measurements:
            shown = ", ".join(f"{k}={v:.6g}" for k, v in self.measurements.items())
            lines.append(f"  measured: {shown}")
        if not self.ok:
            lines.append(f"  seed: {self.seed}")
            rerun = self.pytest_command(adapter_spec, nodeid)
            if not rerun.startswith("("):  # run under pytest: its node id reruns it
                lines.append(f"  rerun the test: {rerun}")
            lines.append(f"  rerun in Python: {self.python_call(adapter_spec)}")
        return "\n".join(lines)

    def raise_if_failed(self, adapter_spec: str = REFERENCE, nodeid: str | None = None) -> None:
        if not self.ok:
            text = self.describe(adapter_spec, nodeid)
            # only counter notes failed: no contract finding, the first note is the finding
            failed = self.finding(adapter_spec) or self.findings[0]
            raise StressFailure(text, replace(failed, evidence=text))


def _text(finding: Finding) -> str:
    """A failure's text as :attr:`StressReport.failures` gives it."""
    return finding.message + ("\n" + finding.evidence if finding.evidence else "")
