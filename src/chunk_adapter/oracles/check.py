"""Run every oracle over a recorded history; report the root cause first."""

from __future__ import annotations

from ..history import History
from . import accepted
from .inline import check_inline
from .inputs import check_inputs
from .lifecycle import check_lifecycle
from .receiver import check_receiver
from .sender import check_sender
from .timeline import Timeline
from .violations import ContractViolation, Violation, root_first

__all__ = ["assert_ok", "check", "check_aside", "collapse"]


def check(history: History, *, quiescent: bool, put_tries: int | None = None) -> list[Violation]:
    """Every safety violation in *history*; with ``quiescent=True`` the liveness ones too.

    ``quiescent=True`` claims that nothing is in flight or held any more and
    that ``poll_ready`` was called after the last chunk could have arrived:
    then everything that must have arrived has (R11, R14, R23). Liveness is
    not checked for a side whose adapter was stopped. ``put_tries`` is the
    adapter's configured number of put tries (R10); ``None`` checks only that a
    dropped chunk saw at least one failed put.

    The list is ordered root cause first (:func:`~.violations.root_first`:
    by the sequence number of the event that breaks each rule, liveness
    last), and consequences of one fault on one chunk are reported once
    (:func:`collapse`). Empty when one of them is a root cause a verify
    baseline accepts (:mod:`.accepted`; only in a verify worker run with one).
    """
    if put_tries is not None and (isinstance(put_tries, bool) or put_tries < 1):
        raise ValueError(f"put_tries counts every try and must be >= 1 or None, got {put_tries!r}")
    tl = Timeline.of(history)
    out = list(check_inline(tl.inline))
    out += check_sender(tl, quiescent=quiescent, put_tries=put_tries)
    out += check_receiver(tl, quiescent=quiescent)
    out += check_lifecycle(tl)
    out += check_inputs(tl)
    found = collapse(root_first(out))
    return [] if accepted.covers(found) else found


def check_aside(
    history: History, *, quiescent: bool, put_tries: int | None = None
) -> tuple[list[Violation], tuple[str, ...]]:
    """:func:`check`, and the rules a verify baseline accepts that it set the history
    aside for (``()``: none; always, outside a verify worker run with a baseline)."""
    mark = accepted.seen()
    violations = check(history, quiescent=quiescent, put_tries=put_tries)
    return violations, accepted.since(mark)


def collapse(violations: list[Violation]) -> list[Violation]:
    """Drop a liveness violation about a chunk that a safety violation already names.

    A chunk put under the wrong id or with the wrong value (the root cause,
    with an ``at``) is then also "never received" or "never handed out" for
    the registration waiting for it: one fault, reported once, under the
    rule it breaks first.
    """
    named = {(v.request_id, v.key) for v in violations if v.at is not None and v.key is not None}
    return [v for v in violations if v.at is not None or (v.request_id, v.key) not in named]


def assert_ok(
    history: History, *, quiescent: bool, put_tries: int | None = None, context: str = ""
) -> None:
    """Raise :class:`ContractViolation` listing every violation ``check`` finds, root first."""
    violations = check(history, quiescent=quiescent, put_tries=put_tries)
    if violations:
        raise ContractViolation(violations, context)
