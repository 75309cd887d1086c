"""Which threads died of an uncaught exception while a run was under way.

A thread the adapter started may end for two reasons: an exception nobody
caught (R22 forbids that for put, get and build failures) or because its work
is done (a ``threading.Timer`` round, a short-lived worker). Only the first is
a finding, so the drivers judge thread deaths by :func:`thread_crashes`, not by
which threads are still alive: a RECV side re-armed as one ``Timer`` per round
is correct, and a side that stops working without an exception is what R23's
liveness checks see.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Crash", "died", "thread_crashes"]

Crash = tuple[str, BaseException | None]
"""``(thread name, the exception it died of)``."""


def died(crash: Crash) -> str:
    """What a thread's death breaks, in words (R22): the one wording every driver uses."""
    name, exc = crash
    return (
        f"the adapter's thread {name!r} died of {exc!r}: an exception from put, get or build "
        "(or the adapter's own code) must never end a background thread"
    )


@contextmanager
def thread_crashes(*, chain: bool, since_now: bool = False) -> Iterator[list[Crash]]:
    """Collect the uncaught exceptions of every thread while active (``threading.excepthook``).

    With *chain*, the hook that was installed before still runs (by default it prints
    the traceback to stderr); without, the exceptions are only collected. With
    *since_now*, only threads started after entering are collected (a thread left over
    from an earlier run is not this run's). The list is appended to from the dying
    threads; appending is atomic, so no lock is needed.
    """
    died: list[Crash] = []
    previous = threading.excepthook
    before = set(threading.enumerate()) if since_now else set()  # by identity: ids are reused
    active = [True]  # cleared on exit: a hook left installed (see below) collects nothing more

    def hook(args: threading.ExceptHookArgs) -> None:
        thread = args.thread
        ours = thread is None or thread not in before
        # SystemExit ends a thread as Python's own hook reads it: quietly, no crash
        if active[0] and ours and not isinstance(args.exc_value, SystemExit):
            died.append((thread.name if thread is not None else "?", args.exc_value))
        if chain or not active[0]:
            previous(args)

    threading.excepthook = hook
    try:
        yield died
    finally:
        active[0] = False
        if threading.excepthook is hook:  # else a later collector chains to this one: stay
            threading.excepthook = previous
