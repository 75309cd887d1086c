"""What one execution did (:class:`Execution`), and which failures are no verdict on the
adapter (:data:`NOT_CONTROLLED`): the record every part of the engine and the stages read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...history import History
from ..runtime.controller import Failure, Step
from ..scenarios.pipeline import Hop
from ..scenarios.scenario import Scenario

__all__ = ["NOT_CONTROLLED", "Execution"]

NOT_CONTROLLED = ("uncontrolled", "diverged", "factory", "too long")
"""Failure kinds that say the run was not under the explorer's control, that the factory
could not build the adapter (nothing was driven yet), or that an execution outgrew the step
budget while the adapter kept sleeping at its pace: never a violation."""


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
