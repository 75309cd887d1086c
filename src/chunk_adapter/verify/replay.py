"""``chunk-adapter replay STRING``: re-run one reported counterexample.

The string is a reproducer of the family :mod:`chunk_adapter.reproducer`
formats and reads, ``KIND:FIELD:...``; each driver registers its kind, and
this module imports the drivers' kinds so that every one of them is known:

``explore:SCENARIO:SCHEDULE``
    the explorer's library scenario under the recorded schedule, step for step;
``sim:WORLD:SCHEDULE``
    a generated world (the ``simulate`` stage's) under the recorded schedule;
``stateful:PROFILE:BLOB``
    the state machine's shrunk example (Hypothesis's ``@reproduce_failure`` blob);
``stateful:PROFILE:steps.DATA``
    the machine's steps, shrunk further by the stage (the pasteable test's steps);
``stress:SCENARIO:SEED``
    one stress scenario of the suite, with its seed.
"""

from __future__ import annotations

from typing import TextIO

from ..explore.engine.reproduce import EXPLORE, SIM
from ..factory import load_factory
from ..reproducer import Kind, forms, parse
from ..stateful.reproduce import STATEFUL
from ..stress.reproduce import STRESS

__all__ = ["KINDS", "forms", "replay_string"]

KINDS: tuple[Kind, ...] = (EXPLORE, SIM, STATEFUL, STRESS)
"""The kinds ``chunk-adapter replay`` reads (importing them registers them)."""


def replay_string(string: str, adapter_spec: str, out: TextIO) -> int:
    """Replay *string* against the adapter; 0 if it now passes, 1 if it fails again, 3 if
    the replay could not run as recorded (a schedule that diverges: not a verdict).

    Raises ``InvalidValue`` naming the string and the accepted forms when it is not
    a reproducer, before the adapter is loaded."""
    kind, fields = parse(string)
    factory = load_factory(adapter_spec)
    return kind.replay(fields, factory, adapter_spec, out)
