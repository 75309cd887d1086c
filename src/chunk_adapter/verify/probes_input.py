"""The bad-input probe (R21): calls with a wrong argument fail at the call, and change nothing.

Bad ids, bad finals and an object the snapshot function rejects must raise from the
call itself (``TypeError``, or any exception for the snapshot); nothing is queued,
registered or changed, so a good final saved after them is put, first, as chunk 0 of its
stream. When that put never comes, the probe asks a fresh adapter the same without the
bad calls: a put there means a rejected call changed the adapter (R21), not a lost put.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..bed.stack import Bed
from ..bed.waiting import Hang, call_bounded, stopping, wait_until
from ..examples import ARRIVE, CALL, FACTORY
from ..factory import AdapterFactory
from ..oracles.violations import ContractViolation
from ..rules import R21

__all__ = ["probe_bad_input"]


def probe_bad_input(factory: AdapterFactory) -> None:
    """R21: bad ids, bad finals and un-snapshottable objects fail at the call; nothing queued,
    nothing changed: a good final saved after them is put (when it is not, but it is on a
    fresh adapter asked nothing bad first, the rejected calls changed the adapter: R21)."""
    try:
        _bad_input(factory, bad=True)
    except Hang as hang:
        if hang.call:
            raise
        try:
            _bad_input(factory, bad=False)
        except Hang:
            raise hang from None  # no put without the bad calls either: not theirs
        raise ContractViolation.of(
            R21,
            f"{hang.what} did not happen after the rejected calls, and does on a fresh "
            "adapter asked nothing bad first: a call that raised changed the adapter",
        ) from None


def _bad_input(factory: AdapterFactory, *, bad: bool) -> None:
    bed = Bed(record=True)
    conn = bed.recording
    snd = bed.adapter(factory, bound=FACTORY, stage_id=0)
    with stopping(snd, seconds=CALL):
        calls: list[tuple[str, Callable[[], Any], type[BaseException]]] = [
            ("save_async(123, 'x', False)", lambda: snd.save_async(123, "x", False), TypeError),  # type: ignore[arg-type]
            ("save_async('b', 'x', 1)", lambda: snd.save_async("b", "x", 1), TypeError),  # type: ignore[arg-type]
            ("cancel_sender(None)", lambda: snd.cancel_sender(None), TypeError),  # type: ignore[arg-type]
            ("load_async(4.5)", lambda: snd.load_async(4.5), TypeError),  # type: ignore[arg-type]
            ("cleanup_receiver(b'r')", lambda: snd.cleanup_receiver(b"r"), TypeError),  # type: ignore[arg-type]
            (
                "save_async('b', <a lock>, False)",
                lambda: snd.save_async("b", threading.Lock(), False),
                Exception,
            ),
        ]
        for text, call, expected in calls if bad else []:
            try:
                call_bounded(call, CALL, text)
            except expected:
                continue
            raise ContractViolation.of(R21, f"{text} did not raise {expected.__name__} at the call")
        call_bounded(
            lambda: snd.save_async("b", "good", True), CALL, "save_async('b', 'good', True)"
        )
        wait_until(lambda: bool(conn.puts), ARRIVE, "the put of b's good final")
        if conn.puts[0] != "b_0_0":
            raise ContractViolation.of(
                R21,
                f"after rejected calls the first put was {conn.puts[0]!r}, not 'b_0_0': "
                "a rejected save_async queued something",
            )
