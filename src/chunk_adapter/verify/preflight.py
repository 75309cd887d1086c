"""The pre-flight: can this factory build adapters at all? Run before any stage.

A factory that raises, hangs, or returns something without the six contract
methods is a usage problem (exit 2, one line naming the fix), not a contract
violation: nothing about the contract has been tested yet. A ``stop()`` that
hangs here is not judged; the examples stage will find it (R18).
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from ..bed.stack import FACTORY, Bed
from ..bed.waiting import Hang, call_bounded
from ..factory import AdapterFactory

__all__ = ["BUILD_BOUND", "METHODS", "preflight"]

METHODS = ("save_async", "cancel_sender", "load_async", "poll_ready", "cleanup_receiver", "stop")
"""The six calls of the contract (docs/verify.md, "The factory")."""

BUILD_BOUND = FACTORY
"""Seconds the factory may take to build one adapter here."""


def preflight(factory: AdapterFactory, spec: str) -> str | None:
    """``None`` when the factory builds usable adapters; else the usage message."""
    bed = Bed()
    built: list[Any] = []
    try:
        for stage_id in (0, 1):
            call = f"factory(connector, stage_id={stage_id})"
            try:
                adapter = bed.adapter(factory, bound=BUILD_BOUND, what=call, stage_id=stage_id)
            except Hang:
                return (
                    f"the factory {spec} did not return within {BUILD_BOUND:g} s when called as "
                    f"{call}; it must build the adapter and return (start the threads, do not "
                    "wait for them)"
                )
            except Exception as exc:
                return (
                    f"the factory {spec} raised {exc!r} when called as {call}; fix the factory "
                    "so that it builds an adapter from a connector and these keywords"
                )
            built.append(adapter)
            missing = [m for m in METHODS if not callable(getattr(adapter, m, None))]
            if missing:
                return (
                    f"the factory {spec} returned a {type(adapter).__qualname__} without "
                    f"{', '.join(missing)}; an adapter needs the six contract methods "
                    f"{', '.join(METHODS)} (docs/verify.md, 'The factory')"
                )
    finally:
        # A hang or a raise in stop() is the examples stage's to judge (R18), not ours:
        # give both stops a short shared bound and leave the rest to the process's exit.
        with suppress(Exception):
            call_bounded(lambda: [getattr(a, "stop", lambda: None)() for a in built], 3.0, "stop()")
    return None
