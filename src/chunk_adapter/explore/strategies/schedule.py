"""A schedule as one short string, and back.

A schedule is the list of decisions an execution made: at every point where
more than one thread could run, the id of the thread that ran (threads are
numbered in the order they started: 0 is the scheduler thread, then the
adapter's threads); and every random number handed to the code under test.

Encoding (version 1)::

    1:<decisions>:<body>
    1r:<decisions>:<body>
    1e:<decisions>:<body>

``body`` writes a thread choice as a letter (``a`` = thread 0, ``b`` = 1, ...
``z`` = 25; a thread from 26 on as ``{<id>}``; the choice that lets virtual time
pass for the running thread, :data:`~..runtime.tasks.TIME_PASSES`, as ``_``) followed by
a repeat count when it repeats (``a12`` = twelve times thread 0), and a random number
as ``~<hex>.``. ``decisions`` is the number of decisions, so a truncated string
is caught. Example: ``1:17:a9cb2a5``. ``1r`` marks a schedule recorded with race points
as switch points (:attr:`~..runtime.controller.Controller.races`: a strategy that watches
critical sections); a replay of it must make them switch points too, or every decision
after the first of them lands on another step (:func:`with_race_points`). ``1e`` marks one
recorded where time may pass at an adapter thread's put, get or build (an effect-delaying
strategy, :mod:`.effects`): a replay offers it there too (:func:`with_effect_points`).
"""

from __future__ import annotations

import re

from ...errors import InvalidValue
from ..runtime.tasks import TIME_PASSES

__all__ = ["Decision", "decode", "encode", "with_effect_points", "with_race_points"]

Decision = tuple[str, int]  # ("t", thread id) or ("r", random value)

_VERSION = "1"
_RACES = "r"  # the version's mark for a schedule recorded with race points
_EFFECTS = "e"  # the version's mark for one recorded with effect points
_LETTERS = 26
_HEADERS = (_VERSION, _VERSION + _RACES, _VERSION + _EFFECTS)
_TOKEN = re.compile(r"([a-z_]|\{\d+\})(\d*)|~([0-9a-f]+)\.")
_PASS = "_"  # TIME_PASSES in a body


def encode(decisions: list[Decision], *, races: bool = False, effects: bool = False) -> str:
    """The string form of *decisions* (see module doc); *races*: recorded with race points;
    *effects*: with effect points (never both: one strategy watches one of them)."""
    parts: list[str] = []
    i = 0
    while i < len(decisions):
        kind, value = decisions[i]
        if kind == "r":
            parts.append(f"~{value:x}.")
            i += 1
            continue
        if value < 0:
            raise InvalidValue(f"a thread id in a schedule is >= 0, got {value}")
        run = 1
        while i + run < len(decisions) and decisions[i + run] == ("t", value):
            run += 1
        if value == TIME_PASSES:
            name = _PASS
        elif value < _LETTERS:
            name = chr(ord("a") + value)
        else:
            name = f"{{{value}}}"
        parts.append(name + (str(run) if run > 1 else ""))
        i += run
    version = _VERSION + (_RACES if races else _EFFECTS if effects else "")
    return f"{version}:{len(decisions)}:{''.join(parts)}"


def _marked(text: str, mark: str) -> bool:
    """Whether the schedule string *text*'s version field is ``1`` with *mark*."""
    return isinstance(text, str) and text.strip().split(":", 1)[0] == _VERSION + mark


def with_race_points(text: str) -> bool:
    """Whether the schedule string *text* was recorded with race points as switch points
    (its version field is ``1r``)."""
    return _marked(text, _RACES)


def with_effect_points(text: str) -> bool:
    """Whether the schedule string *text* was recorded where time may pass at an adapter
    thread's put, get or build (its version field is ``1e``)."""
    return _marked(text, _EFFECTS)


def decode(text: str) -> list[Decision]:
    """Parse a string made by :func:`encode`; errors say what is wrong with it."""
    if not isinstance(text, str):
        raise InvalidValue(f"a schedule is a string like '1:3:a2b', got {text!r}")
    fields = text.strip().split(":")
    if len(fields) != 3 or fields[0] not in _HEADERS or not fields[1].isdigit():
        raise InvalidValue(
            f"not a version-{_VERSION} schedule string: {text!r} "
            "(expected '1:<count>:<body>', as printed by a failing exploration)"
        )
    body = fields[2]
    decisions: list[Decision] = []
    pos = 0
    while pos < len(body):
        match = _TOKEN.match(body, pos)
        if match is None:
            raise InvalidValue(
                f"bad schedule body at character {pos} of {body!r} in {text!r}; "
                "copy the whole replay string from the failure report"
            )
        if match.group(3) is not None:
            decisions.append(("r", int(match.group(3), 16)))
        else:
            letter = match.group(1)
            if letter == _PASS:
                tid = TIME_PASSES
            elif letter[0] == "{":
                tid = int(letter[1:-1])
            else:
                tid = ord(letter) - ord("a")
            decisions.extend([("t", tid)] * int(match.group(2) or "1"))
        pos = match.end()
    if len(decisions) != int(fields[1]):
        raise InvalidValue(
            f"schedule {text!r} declares {fields[1]} decisions but holds "
            f"{len(decisions)}: it was truncated or edited; copy it again"
        )
    return decisions
