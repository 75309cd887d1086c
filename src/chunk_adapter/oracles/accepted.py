"""Root causes a baseline accepts, as the judge sees them inside a verify worker.

Under ``verify --baseline`` a known bug must not hide a new one: a check that
stopped at the first violation of an accepted root cause would never get to
the next. A root cause is its rule (:mod:`chunk_adapter.verify.groups`), so the
worker installs the rules a baseline's entries and waivers accept here
(:func:`install`), and :func:`~.check.check` treats a history in which any
violation is of an accepted rule as one that tells nothing new: no violation,
the search goes on. Any, not only the root (the first,
:func:`~.violations.root_first`): one defect shows through more than one check,
and the one that fires first varies from history to history, while a new,
independent defect also shows in histories free of the accepted ones. Each such
history is counted (:func:`seen`, under the rule of its first accepted
violation), so the report can tell an entry still seen from a stale one.
Nothing is installed outside a worker run with a baseline: every violation
counts.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .violations import Violation

__all__ = [
    "Accepted",
    "accepts",
    "accepts_all",
    "active",
    "covers",
    "install",
    "seen",
    "since",
    "total",
]


@dataclass(frozen=True)
class Accepted:
    """The rules accepted: a baseline entry's or a waiver's (``"R16"``)."""

    rules: frozenset[str] = frozenset()

    @classmethod
    def of(cls, rules: Iterable[str]) -> Accepted:
        return cls(frozenset(rules))


# _lock guards _accepted and _seen: install() writes them from the worker's main thread,
# covers() is called by whatever thread judges a history (the explorer's driver, a
# state machine, a stress scenario's checker).
_lock = threading.Lock()
_accepted = Accepted()
_seen: Counter[str] = Counter()  # rule -> histories it set aside


def install(accepted: Accepted) -> None:
    """Accept *accepted* from now on in this process (and forget what was seen)."""
    global _accepted
    with _lock:
        _accepted = accepted
        _seen.clear()


def covers(violations: Sequence[Violation]) -> bool:
    """Whether any of *violations* (one history's) is accepted; counted if so."""
    if not violations:
        return False
    with _lock:
        accepted = _accepted
    if not accepted.rules:
        return False
    for violation in violations:
        if violation.rule in accepted.rules:
            with _lock:
                _seen[violation.rule] += 1
            return True
    return False


def active() -> bool:
    """Whether any rule is accepted in this process (a verify worker with a baseline)."""
    with _lock:
        return bool(_accepted.rules)


def accepts(rule: str) -> bool:
    """Whether *rule* is accepted in this process (not counted: a stage asking whether
    to go on past a finding whose root, named after the history was judged, is accepted)."""
    with _lock:
        return rule in _accepted.rules


def accepts_all(rules: Sequence[str]) -> bool:
    """Whether *rules* are some rules, every one accepted (:func:`accepts`): what breaks
    them can never be a red under this baseline."""
    return bool(rules) and all(accepts(rule) for rule in rules)


def seen() -> dict[str, int]:
    """Rule -> how many histories it set aside (its violation the first accepted one),
    since :func:`install`."""
    with _lock:
        return dict(_seen)


def since(mark: dict[str, int]) -> tuple[str, ...]:
    """The rules that set a history aside after *mark* (an earlier :func:`seen`), sorted:
    what a judge that ran in between found, under a baseline, and let pass."""
    now = seen()
    return tuple(sorted(rule for rule, count in now.items() if count > mark.get(rule, 0)))


def total() -> int:
    """How many histories :func:`covers` accepted so far (a mark to compare with later)."""
    with _lock:
        return sum(_seen.values())
