"""Root causes a baseline accepts, as the judge sees them inside a verify worker.

Under ``verify --baseline`` a known bug must not hide a new one: a check that
stopped at the first violation of an accepted root cause would never get to
the next. So the worker installs the accepted signatures here
(:func:`install`) and :func:`~.check.check` treats a history whose root
violation (the first, :func:`~.violations.root_first`) is accepted as one that
tells nothing new: no violation, the search goes on. Its consequences in the
same history go with it. Each such history is counted (:func:`seen`), so the
report can tell an entry still seen from a stale one. Nothing is installed
outside a worker run with a baseline: every violation counts.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .causes import cause_of, signature
from .violations import Violation

__all__ = ["Accepted", "covers", "install", "seen", "total"]


@dataclass(frozen=True)
class Accepted:
    """Signatures (``"R16: chunk … handed out …"``) and whole rules (waivers) accepted."""

    signatures: frozenset[str] = frozenset()
    rules: frozenset[str] = frozenset()

    @classmethod
    def of(cls, signatures: Iterable[str], rules: Iterable[str]) -> Accepted:
        return cls(frozenset(signatures), frozenset(rules))


# _lock guards _accepted and _seen: install() writes them from the worker's main thread,
# covers() is called by whatever thread judges a history (the explorer's driver, a
# state machine, a stress scenario's checker).
_lock = threading.Lock()
_accepted = Accepted()
_seen: Counter[str] = Counter()  # signature -> histories whose root it accepted


def install(accepted: Accepted) -> None:
    """Accept *accepted* from now on in this process (and forget what was seen)."""
    global _accepted
    with _lock:
        _accepted = accepted
        _seen.clear()


def covers(violations: Sequence[Violation]) -> bool:
    """Whether the root violation of *violations* (the first) is accepted; counted if so."""
    if not violations:
        return False
    with _lock:
        accepted = _accepted
    if not accepted.signatures and not accepted.rules:
        return False
    root = violations[0]
    key = signature(root.rule, cause_of(str(root)))
    if key not in accepted.signatures and root.rule not in accepted.rules:
        return False
    with _lock:
        _seen[key] += 1
    return True


def seen() -> dict[str, int]:
    """Signature -> how many histories had it as their accepted root, since :func:`install`."""
    with _lock:
        return dict(_seen)


def total() -> int:
    """How many histories :func:`covers` accepted so far (a mark to compare with later)."""
    with _lock:
        return sum(_seen.values())
