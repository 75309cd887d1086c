"""Shrinking a counterexample's steps further, and running steps without Hypothesis.

Hypothesis shrinks the choices behind an example, one candidate example per
try; on a machine whose every step waits for two adapter threads to settle
that is slow, and a stage budget often ends it with dozens of steps left.
A step's outcome depends only on the steps before it, so the steps can be
shrunk directly: :func:`minimize` removes chunks of steps, then single steps
(delta debugging), and keeps a removal when the rest still fails with the same
root rule. Every candidate runs with its rules' preconditions checked, so a
shorter sequence is always one the machine itself could have generated.

:func:`run_steps` runs a list of :class:`Step` on a fresh machine, as the
pasteable test does; :func:`encode` / :func:`decode` turn steps into the
replay string ``chunk-adapter replay 'stateful:PROFILE:steps.DATA'``, read
with :mod:`ast` (literals only: a replay string never runs code).
"""

from __future__ import annotations

import ast
import base64
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis.stateful import RULE_MARKER

from ..confirm import PASSED, Run
from ..confirm import same_failure as same
from ..errors import InvalidValue
from ..factory import AdapterFactory
from .budget import finding_of

__all__ = [
    "PREFIX",
    "Minimized",
    "Step",
    "Unrunnable",
    "decode",
    "encode",
    "minimize",
    "parse",
    "run_steps",
    "same_failure",
    "shown",
]

PREFIX = "steps."
"""Marks a replay string's steps (Hypothesis's blobs never start with it)."""


@dataclass(frozen=True)
class Step:
    """One rule call: ``state.name(**kwargs)``; *kwargs* are literals."""

    name: str
    kwargs: tuple[tuple[str, Any], ...]

    def __str__(self) -> str:
        args = ", ".join(f"{key}={value!r}" for key, value in self.kwargs)
        return f"state.{self.name}({args})"


def parse(line: str) -> Step:
    """The :class:`Step` of a printed ``state.rule(key=literal, ...)`` line."""
    try:
        call = ast.parse(line.strip(), mode="eval").body
    except SyntaxError:
        call = None
    if (
        not isinstance(call, ast.Call)
        or not isinstance(call.func, ast.Attribute)
        or not isinstance(call.func.value, ast.Name)
        or call.func.value.id != "state"
        or call.args
    ):
        raise InvalidValue(f"not a machine step (state.rule(key=value, ...)): {line!r}")
    try:
        kwargs = tuple((k.arg or "", ast.literal_eval(k.value)) for k in call.keywords)
    except ValueError:
        raise InvalidValue(f"a step's arguments must be literals: {line!r}") from None
    return Step(call.func.attr, kwargs)


def encode(steps: list[Step]) -> str:
    """*steps* as the ``DATA`` of a ``stateful:PROFILE:steps.DATA`` replay string."""
    text = "\n".join(str(step) for step in steps).encode()
    return PREFIX + base64.urlsafe_b64encode(zlib.compress(text, 9)).decode().rstrip("=")


def decode(data: str) -> list[Step]:
    """The steps of :func:`encode`'s output (raises ``InvalidValue`` on anything else)."""
    if not data.startswith(PREFIX):
        raise InvalidValue(f"not a steps replay string (it starts with {PREFIX!r}): {data!r}")
    raw = data[len(PREFIX) :]
    try:
        text = zlib.decompress(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))).decode()
    except (ValueError, zlib.error):
        raise InvalidValue(f"cannot decode the steps of {data!r}; copy the whole string") from None
    return [parse(line) for line in text.splitlines() if line.strip()]


class Unrunnable(Exception):
    """A step that names no rule of the machine, or whose preconditions do not hold."""


def run_steps(
    factory: AdapterFactory,
    steps: list[Step],
    *,
    liveness_timeout: float,
    put_tries: int = 3,
    reproduce: str = "",
) -> Exception | None:
    """Run *steps* on a fresh machine built from *factory*, then its teardown; the
    exception the run failed with (``None`` if it passed). :class:`Unrunnable` when a
    step's rule does not exist or its preconditions do not hold at that point.
    *reproduce* is the command a violation's message names."""
    from .api import make_machine

    machine = make_machine(
        factory, liveness_timeout=liveness_timeout, put_tries=put_tries, reproduce=reproduce
    )
    try:
        state: Any = machine()
    except Exception as exc:  # the factory raised, or the first load_async failed
        return exc
    error: Exception | None = None
    try:
        for step in steps:
            rule = getattr(getattr(machine, step.name, None), RULE_MARKER, None)
            if rule is None:
                raise Unrunnable(f"the machine has no rule {step.name!r}")
            if not all(ok(state) for ok in rule.preconditions):
                raise Unrunnable(f"{step}: its preconditions do not hold here")
            getattr(state, step.name)(**dict(step.kwargs))
    except Exception as exc:
        error = exc
    finally:
        try:
            state.teardown()
        except Exception as exc:
            error = error or exc
    return error


@dataclass(frozen=True)
class Minimized:
    """What :func:`minimize` got to: the steps, and whether it finished — no single step
    can be removed any more — or was cut short at its deadline."""

    steps: list[Step]
    complete: bool


def minimize(
    steps: list[Step],
    fails: Callable[[list[Step]], bool],
    until: float,
) -> Minimized:
    """The shortest sublist of *steps* found by the ``monotonic()`` time *until* for which
    ``fails(sublist)`` holds (``fails(steps)`` is known). Delta debugging: remove halves,
    quarters, ... down to single steps, from the end first, until no removal fails."""
    current = list(steps)
    if not current:
        return Minimized(current, True)
    size = max(1, len(current) // 2)
    while current and time.monotonic() < until:
        removed = False
        start = len(current) - size
        while start > -size and time.monotonic() < until:
            lo = max(0, start)
            candidate = current[:lo] + current[start + size :]
            if candidate != current and fails(candidate):
                current = candidate
                removed = True
            start -= size
        if size == 1 and not removed and time.monotonic() < until:
            return Minimized(current, True)
        # Nothing removed: try smaller chunks; else the same size again (at most half).
        size = max(1, size // 2) if not removed else min(size, max(1, len(current) // 2))
    return Minimized(current, False)


def shown(error: BaseException | None) -> Run:
    """A run's outcome (the exception it failed with, ``None`` if it passed) as
    :mod:`chunk_adapter.confirm` compares it: a step that could not run shows nothing."""
    if error is None or isinstance(error, Unrunnable):
        return PASSED
    return (finding_of(error),)


def same_failure(first: BaseException, again: BaseException | None) -> bool:
    """*again* is the failure *first* was (:func:`chunk_adapter.confirm.same_failure`: its
    root rule broken again, or for a failure that names no rule, the same exception
    type); never a step that could not run."""
    return same(finding_of(first), shown(again))
