"""Run every oracle over a recorded history."""

from __future__ import annotations

from ..history import History
from .lifecycle import check_lifecycle
from .receiver import check_receiver
from .sender import check_sender
from .timeline import Timeline
from .violations import ContractViolation, Violation

__all__ = ["assert_ok", "check"]


def check(history: History, *, quiescent: bool, put_tries: int | None = None) -> list[Violation]:
    """Every safety violation in *history*; with ``quiescent=True`` the liveness ones too.

    ``quiescent=True`` claims that nothing is in flight or held any more and
    that ``poll_ready`` was called after the last chunk could have arrived:
    then everything that must have arrived has (R11, R14, R23). Liveness is
    not checked for a side whose adapter was stopped. ``put_tries`` is the
    adapter's configured number of put tries (R10); ``None`` checks only that a
    dropped chunk saw at least one failed put.
    """
    if put_tries is not None and (isinstance(put_tries, bool) or put_tries < 1):
        raise ValueError(f"put_tries counts every try and must be >= 1 or None, got {put_tries!r}")
    tl = Timeline.of(history)
    out = check_sender(tl, quiescent=quiescent, put_tries=put_tries)
    out += check_receiver(tl, quiescent=quiescent)
    out += check_lifecycle(tl)
    return out


def assert_ok(
    history: History, *, quiescent: bool, put_tries: int | None = None, context: str = ""
) -> None:
    """Raise :class:`ContractViolation` listing every violation ``check`` finds."""
    violations = check(history, quiescent=quiescent, put_tries=put_tries)
    if violations:
        raise ContractViolation(violations, context)
