"""What one execution did (:class:`Execution`), which failures are no verdict on the
adapter (:data:`NOT_CONTROLLED`), and which rules its failures break (:func:`failure_rules`):
the record every part of the engine and the stages read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...finding import Finding, first_line, rules_of
from ...history import History
from ...rules import R17, R18, R20, R22
from ..runtime.controller import Failure, Step
from ..scenarios.pipeline import Hop
from ..scenarios.scenario import Scenario

__all__ = ["KIND_RULES", "NOT_CONTROLLED", "Execution", "failure_members", "failure_rules"]

NOT_CONTROLLED = ("uncontrolled", "diverged", "factory", "too long")
"""Failure kinds that say the run was not under the explorer's control, that the factory
could not build the adapter (nothing was driven yet), or that an execution outgrew the step
budget while the adapter kept sleeping at its pace: never a violation."""
KIND_RULES = {"deadlock": R20, "hang": R18, "livelock": R17, "crash": R22}
"""The rule of each explorer failure that is not an oracle's violation (those carry theirs)."""


def failure_rules(failures: list[Failure]) -> tuple[str, ...]:
    """The rules *failures* break, root first: the oracles' (carried by each violation),
    else the rule of each failure kind (:data:`KIND_RULES`)."""
    found = rules_of(f.finding for f in failures)
    if not found:
        found = tuple(dict.fromkeys(KIND_RULES[f.kind] for f in failures if f.kind in KIND_RULES))
    return found


def failure_members(failures: list[Failure]) -> tuple[str, ...]:
    """The members of the hop that showed the root of *failures* (the first rule of
    :func:`failure_rules`): the first failure naming rules; ``()``: the whole history."""
    return next((f.members for f in failures if f.rules), ())


@dataclass
class Execution:
    """What one execution did and whether it failed."""

    scenario: Scenario
    schedule: str
    task_names: list[str]
    trace: list[Step]
    steps: int
    virtual_time: float
    history: History
    failures: list[Failure] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    """The scenario options the factory took (those it has no parameter for are left out)."""
    put_tries: int | None = None
    """The adapter's put tries (from the options or the factory's default; None: unknown)."""
    cut: int | None = None
    """A history sequence number taken just before the final ``stop()`` of a script that
    settled and polled first: everything up to it is a quiescent, still-running history."""
    hops: tuple[Hop, ...] = ()
    """The links of the topology; the checker judges each on its own records."""
    build_roles: dict[int, str] = field(default_factory=dict)
    """``id(BuildCall) -> role`` of the member whose builder recorded it."""
    mode: str = "white-box"
    """How the adapters were controlled: ``"white-box"`` or ``"substitution"``."""
    pruned: bool = False
    """The strategy ended it early as redundant (DPOR): not checked, not a trace."""
    retained: dict[str, dict[str, str]] = field(default_factory=dict)
    """``member -> {closed request: where}`` its adapter still held at the cut
    (:mod:`.retained`; only where the setup asks for it)."""

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def finding(self) -> Finding | None:
        """The execution's failure as every driver reports one (``None``: it passed): the
        rules of all its failures (:func:`failure_rules`), the first one's kind and message
        (``"[deadlock] ..."``), every failure's text as the evidence, and the schedule that
        replays it (with the scenario: :func:`.explorer.replay`)."""
        if not self.failures:
            return None
        first = self.failures[0]
        return Finding(
            failure_rules(self.failures),
            first.kind,
            f"[{first.kind}] {first_line(first.message)}",
            "\n".join(f"[{f.kind}] {f.message}" for f in self.failures),
            self.schedule,
        )
