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

import copy
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ...bed.stack import Bed
from ...connectors.base import Connector
from ...connectors.timed import keyed_random
from ...history import History
from .pipeline import DRAIN_ROUNDS, Member, apply, drain_round, members
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
        self.layout: list[Member] = members(*scenario.layout)
        self.build_roles: dict[int, str] = {}
        """``id(BuildCall) -> role`` of the member whose builder recorded it."""
        self.builders = {
            m.role: self.bed.builder(history=RoleHistory(self.history, self.build_roles, m.role))
            for m in self.layout
        }
        self.adapters: dict[str, Any] = {}
        """``role -> adapter`` as driven (wrapped by the driver's *wrap*, if any)."""
        self.built: dict[str, Any] = {}
        """The adapters as the factory built them, by the name their calls are recorded
        under (the role; ``"adapter"`` when the topology has one member)."""
        self.cut: int | None = None
        self.saved: list[Any] = []
        """The objects handed to ``save_async``, in order (``mutate()`` changes them)."""
        self.sleep: Callable[[float], None] = self.bed.faulty.timed.sleep
        self.clock: Callable[[], float] = self.bed.faulty.timed.clock
        for i, timed in enumerate(self.timed):
            timed.set_latency(scenario.latency, scenario.timing_seed * len(self.timed) + i)
        self._paced: Counter[tuple[str, str | None, str | None]] = Counter()
        """Ops carried out so far by (kind, request, member): an op's think time and busy
        steps are keyed on that and ``Scenario.timing_seed``."""
        self.spin: Callable[[], None] = lambda: None
        """One step of the scheduler's own work (``Scenario.busy``): a switch point under
        the explorer, nothing on real threads."""

    @property
    def timed(self) -> list[Any]:
        """Every :class:`~chunk_adapter.connectors.timed.TimedFaults` of this bed."""
        return [self.bed.faulty.timed, *(b.timed for b in self.builders.values())]

    def use_clock(
        self,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
        spin: Callable[[], None] | None = None,
    ) -> None:
        """Run timed faults and ``pause()`` on *clock* and *sleep* (the explorer's), and the
        scheduler's busy steps on *spin*."""
        self.clock, self.sleep = clock, sleep
        if spin is not None:
            self.spin = spin
        for timed in self.timed:
            timed.use_clock(clock, sleep)

    def faults_end(self) -> float:
        """When the last outage or slow call started so far ends (``-inf``: none)."""
        return max(float(timed.ends) for timed in self.timed)

    def drive(self, member: Member, adapter: Any, wrap: Wrap | None) -> None:
        """Drive *adapter* as *member*: wrapped by *wrap*, named after its role when the
        topology has more than one member (a RecordedAdapter's records say whose call)."""
        target = wrap(adapter, self.history) if wrap is not None else adapter
        if len(self.layout) > 1 and hasattr(target, "name"):
            target.name = member.role
        self.adapters[member.role] = target
        self.built[member.role if len(self.layout) > 1 else "adapter"] = adapter

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
            if op.kind == "drain":
                self._drain(settle, note, before, after)
                continue
            before(op)
            self.apply(op, settle, note)
            after(op)
            if op.kind in ("settle", "stop", "pause"):
                continue
            which = (op.kind, op.request_id, op.on)
            n, seed = self._paced[which], self.scenario.timing_seed
            self._paced[which] += 1
            if self.scenario.think:
                self.sleep(keyed_random("think", seed, *which, n) * self.scenario.think)
            if self.scenario.busy:
                steps = int(keyed_random("busy", seed, *which, n) * (self.scenario.busy + 1))
                for _ in range(steps):
                    self.spin()

    def _drain(
        self,
        settle: Callable[[], object],
        note: Callable[[str], None],
        before: Callable[[Op], None],
        after: Callable[[Op], None],
    ) -> None:
        """``drain()``: rounds of :func:`.pipeline.drain_round`, each op noted and timed as
        any other, until a round hands out nothing."""
        ops = drain_round(tuple(self.adapters))
        for _ in range(DRAIN_ROUNDS):
            handed = 0
            for op in ops:
                before(op)
                handed += self.apply(op, settle, note)
                after(op)
            if not handed:
                return

    def apply(self, op: Op, settle: Callable[[], object], note: Callable[[str], None]) -> int:
        """:func:`.pipeline.apply` on this bed's adapters, faults and builders; the ops on
        time and on saved objects here. Returns the chunks a poll was handed."""
        kind = op.kind
        if kind == "save":
            obj = copy.deepcopy(op.obj)  # each run mutates its own
            self.saved.append(obj)
            op = replace(op, obj=obj)
        elif kind == "mutate":
            if self.saved:
                target = self.saved[-1 - op.back % len(self.saved)]
                note(f"  mutated {mutate_in_place(target, op.depth)}")
            return 0
        elif kind == "pause":
            self.sleep(op.seconds)
            return 0
        elif kind in ("outage", "slow"):
            self._timed_fault(op)
            return 0
        return apply(op, self.adapters, self.bed.faulty, self.builders, settle=settle, note=note)

    def _timed_fault(self, op: Op) -> None:
        what = str(op.what)
        targets = (
            [b.timed for b in self.builders.values()]
            if what == "build"
            else [self.bed.faulty.timed]
        )
        for timed in targets:
            if op.kind == "outage":
                timed.outage(what, op.key, op.seconds)
            else:
                timed.slow(what, op.key, op.seconds, op.times)


_MUTABLE = (list, dict, bytearray, set)
"""The containers a world's payload may hold that change in place (:func:`_change`)."""


def mutate_in_place(obj: Any, depth: int) -> str:
    """Change in place every mutable container *obj* holds at nesting *depth* or deeper
    (the deepest ones, if none is that deep), through tuples too (immutable, what they
    hold need not be): a snapshot that shares anything there shows it (R4). Returns
    where; what cannot be changed in place (a number, a string) is left alone."""
    found: list[tuple[int, str, Any]] = []

    def walk(value: Any, path: str, level: int) -> None:
        for key, child in _children(value):
            walk(child, f"{path}[{key!r}]", level + (not isinstance(value, tuple)))
        if isinstance(value, _MUTABLE):
            found.append((level, path, value))

    walk(obj, "obj", 0)
    if not found:
        return f"nothing (a {type(obj).__name__})"
    level = min(depth, max(at for at, _, _ in found))
    changed = [path for at, path, value in found if at >= level and _change(value)]
    more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
    return ", ".join(changed[:3]) + more


def _change(target: Any) -> bool:
    """Change *target* in place (``False``: it is not a container that can be)."""
    if isinstance(target, list):
        target.append("mutated")
    elif isinstance(target, dict):
        target["mutated"] = True
    elif isinstance(target, bytearray):
        target.extend(b"!")
    elif isinstance(target, set):
        target.add("mutated")
    else:
        return False
    return True


def _children(container: Any) -> list[tuple[Any, Any]]:
    """The elements of *container* that are, or hold, a mutable container."""
    if isinstance(container, (list, tuple)):
        items = list(enumerate(container))
    elif isinstance(container, dict):
        items = list(container.items())
    else:
        return []
    return [(key, value) for key, value in items if _holds_mutable(value)]


def _holds_mutable(value: Any) -> bool:
    if isinstance(value, _MUTABLE):
        return True
    return isinstance(value, tuple) and any(_holds_mutable(item) for item in value)
