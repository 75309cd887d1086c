"""Injected faults beyond a plain ``InjectedFault``: what R25 and R30 are about.

A build, put or get may raise something an ``except Exception`` does not catch:
``SystemExit``, ``asyncio.CancelledError``, another ``BaseException``; and a put may
raise an error no retry can fix (its ``permanent`` attribute ``True``). The fault
wrappers (:mod:`.faults`, :mod:`.builders`) raise one of these when a fault is armed
with ``raises=`` one of :data:`RAISES`; each is a subclass of the real thing, so an
adapter meets exactly what it would meet in production, and the suite can still
tell its own injection from anything else (:func:`raised_kind` reads a recorded
``repr``). ``KeyboardInterrupt`` is left out on purpose: one that escaped a thread
would end the test session that injected it.
"""

from __future__ import annotations

import asyncio

from ..errors import InjectedFault, InvalidValue

__all__ = [
    "BASE",
    "FATAL",
    "RAISES",
    "InjectedBaseException",
    "InjectedCancel",
    "InjectedExit",
    "InjectedPermanent",
    "check_raises",
    "injected",
    "raised_kind",
]

RAISES: tuple[str, ...] = ("permanent", "exit", "cancelled", "base")
"""What an armed fault may raise besides ``InjectedFault``: an ``InjectedFault`` no retry
can fix (``permanent``, R25), ``SystemExit``, ``asyncio.CancelledError`` or a plain
``BaseException`` (each a subclass)."""
BASE: tuple[str, ...] = ("exit", "cancelled", "base")
"""The kinds that are no ``Exception`` (R30)."""
FATAL: tuple[str, ...] = ("exit", "base")
"""The kinds R30 lets a thread end on, loudly; a cancellation is that call's failure."""


class InjectedPermanent(InjectedFault):
    """An ``InjectedFault`` no retry can fix (``raises="permanent"``, R25): its ``permanent``
    attribute is ``True``, as :class:`~.base.PermanentError`'s."""

    permanent = True


class InjectedExit(SystemExit):
    """``SystemExit`` raised on purpose by a fault wrapper (``raises="exit"``)."""

    injected_fatal = True  # what History.timed records (it lets others through)


class InjectedCancel(asyncio.CancelledError):
    """``asyncio.CancelledError`` raised on purpose by a fault wrapper (``raises="cancelled"``)."""

    injected_fatal = True  # what History.timed records (it lets others through)


class InjectedBaseException(BaseException):
    """A plain ``BaseException`` raised on purpose by a fault wrapper (``raises="base"``)."""

    injected_fatal = True  # what History.timed records (it lets others through)


_CLASSES: dict[str, type[BaseException]] = {
    "permanent": InjectedPermanent,
    "exit": InjectedExit,
    "cancelled": InjectedCancel,
    "base": InjectedBaseException,
}


def injected(raises: str, message: str) -> BaseException:
    """The exception a fault armed with *raises* raises, saying *message*."""
    return _CLASSES[raises](message)


def raised_kind(error: object) -> str | None:
    """Which of :data:`RAISES` a recorded error is (an exception, or its ``repr`` as a
    :class:`~chunk_adapter.history.BuildCall` keeps it); ``None`` for anything else."""
    text = error if isinstance(error, str) else repr(error) if error is not None else ""
    for kind, cls in _CLASSES.items():
        if text.startswith(cls.__name__ + "("):
            return kind
    return None


def check_raises(raises: str | None) -> None:
    """Refuse a *raises* that is not ``None`` or one of :data:`RAISES`, naming them."""
    if raises is not None and raises not in RAISES:
        raise InvalidValue(f"raises={raises!r}: use None (InjectedFault) or one of {RAISES}")
