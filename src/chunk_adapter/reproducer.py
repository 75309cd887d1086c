"""One format for the strings ``chunk-adapter replay`` takes: ``KIND:FIELD:...:FIELD``.

Every driver that reports a counterexample registers its kind here once,
with the fields it needs and the function that replays them
(:func:`register`); it formats its strings with :meth:`Kind.format` and its
``reproduce with:`` line with :meth:`Kind.command`, and ``chunk-adapter
replay`` reads any of them back with :func:`parse`. The kinds:

``explore:SCENARIO:SCHEDULE``
    an explorer library scenario under the recorded schedule, step for step
    (:mod:`chunk_adapter.explore.engine.reproduce`);
``stateful:PROFILE:steps.DATA`` and ``stateful:PROFILE:BLOB``
    the state machine's steps as the printed test has them, or Hypothesis's
    example blob (:mod:`chunk_adapter.stateful.reproduce`);
``stress:SCENARIO:SEED``
    one stress scenario with its seed (:mod:`chunk_adapter.stress.reproduce`).

One field takes the rest of the string, so it may hold ``:``; the others may
not. It is the last by default; a kind whose free text comes first (the stress
scenario ``stop: idle``) names it with ``rest`` (the fields after it are read
from the right). Strings printed by earlier versions have this same form, so a string
pasted from an old CI log still replays.

The other reproducers a report prints are full commands or code, not strings
of this family: ``chunk-adapter verify ... --stage examples`` (the examples
stage re-runs as a whole), a stress report's "rerun the test" and "rerun in
Python" lines, the explorer's Python ``replay(...)`` call, and the stateful
counterexample as a pytest file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from .errors import InvalidValue

__all__ = ["Kind", "forms", "kinds", "parse", "register"]

Replay = Callable[[tuple[str, ...], Any, str, TextIO], int]
"""``replay(fields, factory, adapter_spec, out)``: run the counterexample again on the
adapter the factory builds, print what happened to *out*; 1 if it failed again, else 0."""


@dataclass(frozen=True)
class Kind:
    """One kind of reproducer: ``name:FIELD:...`` and how it is replayed."""

    name: str
    fields: tuple[str, ...]
    """The names of the fields, as the error for a bad string shows them."""
    replay: Replay
    forms: tuple[str, ...] = ()
    """How the strings look, when the fields alone do not say it (default: one form)."""
    rest: int = -1
    """The index of the field that may hold ``:`` (default: the last)."""

    @property
    def _free(self) -> int:
        return self.rest % len(self.fields)

    def form(self) -> tuple[str, ...]:
        """The forms of this kind's strings, e.g. ``("stress:SCENARIO:SEED",)``."""
        return self.forms or (":".join((self.name, *self.fields)),)

    def format(self, *fields: object) -> str:
        """The reproducer string for *fields* (one per :attr:`fields`)."""
        values = [str(f) for f in fields]
        if len(values) != len(self.fields):
            raise InvalidValue(
                f"a {self.name} reproducer has {len(self.fields)} fields "
                f"({', '.join(self.fields)}), got {values!r}"
            )
        free = self._free
        bad = [v for i, v in enumerate(values) if not v or (":" in v and i != free)]
        if bad:
            raise InvalidValue(
                f"cannot write a {self.name} reproducer from {values!r}: a field is empty or "
                f"holds ':' (only {self.fields[free]} may); rename it"
            )
        return ":".join((self.name, *values))

    def split(self, text: str) -> tuple[str, ...]:
        """The fields of *text* (a string without its ``KIND:``): the ones before the
        free field split from the left, the ones after it from the right."""
        free = self._free
        head = text.split(":", free) if free else [text]
        tail = head.pop().rsplit(":", len(self.fields) - free - 1)
        return (*head, *tail)

    def command(self, *fields: object, adapter_spec: str, env: str = "") -> str:
        """The ``reproduce with:`` command: ``chunk-adapter replay 'STRING' --adapter SPEC``,
        after *env* (``"NAME=value "``) when the replay needs an environment variable."""
        return f"{env}chunk-adapter replay '{self.format(*fields)}' --adapter {adapter_spec}"


_KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    """Add *kind* to the family (a driver does this once, at import); returns it."""
    known = _KINDS.get(kind.name)
    if known is not None and known != kind:
        raise InvalidValue(f"two reproducer kinds named {kind.name!r}: {known} and {kind}")
    _KINDS[kind.name] = kind
    return kind


def kinds() -> dict[str, Kind]:
    """The registered kinds by name."""
    return dict(_KINDS)


def forms() -> list[str]:
    """Every accepted form, e.g. ``["explore:SCENARIO:SCHEDULE", ...]``."""
    return [form for name in sorted(_KINDS) for form in _KINDS[name].form()]


def parse(string: str) -> tuple[Kind, tuple[str, ...]]:
    """The kind and fields of a reproducer string; :class:`InvalidValue` naming the string
    and the accepted forms when it is not one."""
    text = string.strip()
    name, _, rest = text.partition(":")
    kind = _KINDS.get(name)
    if kind is None:
        why = f"no reproducer kind {name!r}" if rest else "it has no KIND: prefix"
        raise InvalidValue(_cannot_read(string, why))
    fields = kind.split(rest)
    if len(fields) != len(kind.fields) or not all(fields):
        raise InvalidValue(
            _cannot_read(
                string, f"{name} needs {len(kind.fields)} fields: {', '.join(kind.fields)}"
            )
        )
    return kind, fields


def _cannot_read(string: str, why: str) -> str:
    return (
        f"cannot read the replay string {string!r} ({why}); the accepted forms are "
        f"{', '.join(forms())}: paste the string from the report's `reproduce with:` line"
    )
