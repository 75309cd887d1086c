"""The explorer's kinds of reproducer (:mod:`chunk_adapter.reproducer`):
``explore:SCENARIO:SCHEDULE`` for a library scenario, ``sim:WORLD:SCHEDULE`` for a
generated world (:mod:`.simulate`; the world written by :mod:`.codec`)."""

from __future__ import annotations

from typing import Any, TextIO

from ...errors import InvalidValue
from ...reproducer import Kind, register

__all__ = ["EXPLORE", "SIM"]


def _replay(fields: tuple[str, ...], factory: Any, spec: str, out: TextIO) -> int:
    """The library scenario under the recorded schedule, step for step; 1 if it fails."""
    from ..control.plan import substitute_from_env
    from ..scenarios.library import LIBRARY
    from .explorer import replay

    name, schedule = fields
    if name not in LIBRARY:
        raise InvalidValue(f"no explorer scenario {name!r}; choose one of {sorted(LIBRARY)}")
    # The same control as the verify stage: white-box or substitution as observed,
    # plus the modules $CHUNK_ADAPTER_SUBSTITUTE names (verify's --substitute).
    execution = replay(LIBRARY[name], schedule, factory=factory, substitute=substitute_from_env())
    return _told(execution, f"explore {name}", schedule, spec, out)


def _told(execution: Any, what: str, schedule: str, spec: str, out: TextIO) -> int:
    """Print how the replayed *execution* went; 1 if it failed, 3 if it could not be run
    under control (diverged from the schedule, an uncontrolled thread, over the step
    budget, the factory raised: :data:`.result.NOT_CONTROLLED`) — not a verdict, never a
    red: a string recorded by another version or for another adapter diverges."""
    from .explorer import describe
    from .result import NOT_CONTROLLED

    if execution.ok:
        print(f"{what} under {schedule}: no failure ({execution.steps} steps)", file=out)
        return 0
    print(describe(execution, "replay", 1, spec), file=out)
    if all(f.kind in NOT_CONTROLLED for f in execution.failures):
        print("not a verdict on the adapter: the replay did not run as recorded (exit 3)", file=out)
        return 3
    return 1


EXPLORE = register(Kind("explore", ("SCENARIO", "SCHEDULE"), _replay))
"""A library scenario (:data:`~.library.LIBRARY`) and a schedule (:mod:`.schedule`)."""


def _replay_world(fields: tuple[str, ...], factory: Any, spec: str, out: TextIO) -> int:
    """The generated world under the recorded schedule, step for step; 1 if it fails."""
    from ..control.plan import substitute_from_env
    from ..scenarios.codec import decode
    from .simulate import replay_world

    text, schedule = fields
    world = decode(text)
    execution = replay_world(world, schedule, factory, substitute=substitute_from_env() or "auto")
    return _told(execution, "sim world", schedule, spec, out)


SIM = register(Kind("sim", ("WORLD", "SCHEDULE"), _replay_world))
"""A generated world (:mod:`.codec`) and a schedule (:mod:`.schedule`)."""
