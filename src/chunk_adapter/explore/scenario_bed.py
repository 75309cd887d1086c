"""The bed one run of a scenario stands on, for the explorer and the real-thread baseline.

:class:`ScenarioBed` builds the scenario's :class:`~chunk_adapter.bed.Bed`
(memory with the scenario's ``consume_on_get`` and ``notify``, faulty,
recording, then the driver's outer wrapper), one recording builder per member
of its topology (:mod:`.pipeline`), and runs the script: each op through the
one interpreter (:func:`.pipeline.apply`), with the driver's ``settle()`` and
trace notes, after a tick taken just before the final ``stop()`` of a
quiescent script (:attr:`ScenarioBed.cut`). The explorer
(:mod:`.execution`) and the baseline (:mod:`.threads`) differ only in what
they pass in: the outer wrapper, how the adapters are made, and the hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..bed.stack import Bed
from ..connectors.base import Connector
from ..history import History
from .pipeline import Member, apply, members
from .scenario import Op, Scenario

__all__ = ["RoleHistory", "ScenarioBed"]

Wrap = Callable[[Any, History], Any]
"""How a driver wraps each adapter it drives (e.g. ``oracles.RecordedAdapter``)."""


class RoleHistory(History):
    """The history a member's builder records into: the shared one, noting whose builds."""

    def __init__(self, shared: History, roles: dict[int, str], role: str) -> None:
        super().__init__()
        self.shared, self.roles, self.role = shared, roles, role

    def tick(self) -> int:
        return self.shared.tick()

    def append(self, record: Any) -> None:
        self.shared.append(record)
        self.roles[id(record)] = self.role


class ScenarioBed:
    """The bed, builders and driven adapters of one run of *scenario* (module doc).

    *outer* wraps the recording connector; :attr:`connector` is what the
    factory gets.
    """

    def __init__(self, scenario: Scenario, outer: Callable[[Connector], Connector]) -> None:
        self.scenario = scenario
        self.bed = Bed(
            consume_on_get=scenario.consume_on_get,
            notify=scenario.notify,
            faulty=True,
            record=True,
        )
        self.history = self.bed.history
        self.connector = self.bed.wrap(outer)
        self.layout: list[Member] = members(scenario.topology, scenario.stage_id)
        self.build_roles: dict[int, str] = {}
        """``id(BuildCall) -> role`` of the member whose builder recorded it."""
        self.builders = {
            m.role: self.bed.builder(history=RoleHistory(self.history, self.build_roles, m.role))
            for m in self.layout
        }
        self.adapters: dict[str, Any] = {}
        """``role -> adapter`` as driven (wrapped by the driver's *wrap*, if any)."""
        self.cut: int | None = None

    def drive(self, member: Member, adapter: Any, wrap: Wrap | None) -> None:
        """Drive *adapter* as *member*: wrapped by *wrap*, named after its role when the
        topology has more than one member (a RecordedAdapter's records say whose call)."""
        target = wrap(adapter, self.history) if wrap is not None else adapter
        if len(self.layout) > 1 and hasattr(target, "name"):
            target.name = member.role
        self.adapters[member.role] = target

    def run_script(
        self,
        *,
        settle: Callable[[], object],
        note: Callable[[str], None],
        before: Callable[[Op], None] = lambda op: None,
        after: Callable[[Op], None] = lambda op: None,
    ) -> None:
        """Carry out the script's ops in order, calling *before* and *after* around each
        (the explorer notes the op in its trace and records DPOR's footprints there)."""
        script = self.scenario.script
        for i, op in enumerate(script):
            if op.kind == "stop" and i == len(script) - 1 and self.scenario.quiescent:
                self.cut = self.history.tick()
            before(op)
            self.apply(op, settle, note)
            after(op)

    def apply(self, op: Op, settle: Callable[[], object], note: Callable[[str], None]) -> None:
        """:func:`.pipeline.apply` on this bed's adapters, faults and builders."""
        apply(op, self.adapters, self.bed.faulty, self.builders, settle=settle, note=note)
