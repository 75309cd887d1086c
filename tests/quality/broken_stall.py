"""Broken adapters whose throughput collapses while every chunk still arrives (issue 11).

Each is the reference ChunkAdapter with ONE change, exposed as a factory
(``tests.quality.broken_stall:<name>``) for ``--adapter``. All three are
functionally correct — every chunk is put once, in order, and handed out
exactly once — so only a check that measures how long work waits sees them.
``EXPECTED`` maps each factory to the rule a report must name first.

- ``fixed_period_recv``: the RECV thread, after a round that got nothing,
  sleeps a fixed :data:`POLL_PERIOD` (1 s, "polling the store 1000 times a
  second is wasteful") and ignores put notifications. A chunk put after an
  empty get waits out the rest of the period before it is committed,
  although the connector has it: 0.5 s on average, a whole second when it
  comes just after a round. R17: with requests but no progress the RECV
  thread sleeps about 1 ms (and an event-driven one wakes on the put).
- ``backoff_recv``: the same stall grown gradually, the way polling loops are
  usually "optimised": after each round without progress the RECV thread's
  pause doubles, from ``idle_backoff`` (1 ms) up to :data:`BACKOFF_CAP`, and
  a round with progress resets it; put notifications are ignored. A busy
  pipeline sees 1 ms pauses; a request whose chunk comes after a second or
  more of quiet waits up to 0.5 s for it. R17 (about 1 ms, whatever came
  before).
- ``global_build_lock``: the SAVE thread holds a lock shared by every adapter
  in the process (a class attribute meant to make a thread-unsafe
  ``build_payload`` safe) across ``build_payload``. One SAVE thread per
  adapter already orders that adapter's own chunks (R5), but now a slow
  build of one request in one adapter — one stage, one pipeline — stalls the
  SAVE threads of every other adapter in the process: head-of-line blocking
  across requests that share nothing but the interpreter. R7:
  ``build_payload`` is called outside every lock (and R17: no request waits
  behind another).

What ``chunk-adapter verify`` (ci profile) makes of them since issue 11's two
stall probes (examples stage, docs/verify.md; all three in
``test_verify_catalogue.CATALOGUE``), on a 2-core machine, three CLI runs each:

- ``fixed_period_recv``: exit 1, R17 first (examples/prompt hand-off, now run
  before bounded state) in 35-36 s; before, 79-80 s (stress/head-of-line).
- ``backoff_recv``: exit 1, R17 first (examples/quiet polling: 2 gets/s per
  request after 1 s of quiet, the reference beside it over 100) in 14-18 s.
  Before: not caught (exit 3 at 240 s and at 600 s).
- ``global_build_lock``: exit 1, R7 first (examples/independent builds) in
  23-26 s. Before: not caught (no check ran two adapters of one factory
  while a build was held).
"""

from __future__ import annotations

import threading
from typing import Any

from chunk_adapter.adapter import ChunkAdapter
from tests.quality.broken_stateful import _factory

__all__ = [
    "BACKOFF_CAP",
    "EXPECTED",
    "POLL_PERIOD",
    "backoff_recv",
    "fixed_period_recv",
    "global_build_lock",
]

POLL_PERIOD = 1.0
"""Seconds the RECV thread of ``fixed_period_recv`` sleeps after a round without progress:
twice the 0.5 s head-of-line bound of the stress stage, so that a chunk saved just after
a round misses it on any machine, however fast (with 0.5 s it would miss it by the few
milliseconds of one round)."""
BACKOFF_CAP = 0.5
"""The longest idle pause of ``backoff_recv`` (the reference adapter's event-driven re-poll)."""


class FixedPeriodRecv(ChunkAdapter):
    """After a round without progress the RECV thread sleeps a fixed 1 s (R17)."""

    def _idle(self, signal: int) -> bool:
        # BUG: R17 wants ~1 ms here (or a wake-up on the put of an awaited key); a
        # chunk put after an empty get waits up to POLL_PERIOD to be committed.
        # stop() still interrupts the sleep, so R18 holds.
        return self._stop.wait(POLL_PERIOD)


class BackoffRecv(ChunkAdapter):
    """The RECV thread's idle pause doubles up to 0.5 s while nothing arrives (R17)."""

    def __init__(self, connector: Any, **kwargs: Any) -> None:
        super().__init__(connector, **kwargs)
        # The next idle pause; read and written by the RECV thread only (no lock).
        self._pause = self.idle_backoff

    def _recv_round(self, entries: int) -> bool:
        progress = super()._recv_round(entries)
        if progress:
            self._pause = self.idle_backoff
        return progress

    def _idle(self, signal: int) -> bool:
        # BUG: R17 wants ~1 ms after ANY round without progress; after a quiet spell
        # the pause has grown to BACKOFF_CAP and the next chunk waits for it.
        pause, self._pause = self._pause, min(max(self._pause, 0.001) * 2, BACKOFF_CAP)
        return self._stop.wait(pause)


class GlobalBuildLock(ChunkAdapter):
    """Holds one process-wide lock across build_payload: a slow build in one adapter
    stalls the SAVE threads of all the others (R7, R17)."""

    # BUG: one lock for the whole class, so for every adapter in the process. Guards
    # nothing of the adapter's state: it serialises build_payload calls, and the SAVE
    # thread of any adapter holds it for the whole of one build. Nobody waits on it
    # with a condition; it is taken nowhere else.
    _build_lock = threading.Lock()

    def __init__(self, connector: Any, **kwargs: Any) -> None:
        super().__init__(connector, **kwargs)
        build = self.build_payload

        def locked_build(request_id: str, snap: Any, is_final: bool) -> Any:
            with GlobalBuildLock._build_lock:  # BUG: R7, build_payload outside every lock
                return build(request_id, snap, is_final)

        self.build_payload = locked_build


fixed_period_recv = _factory(FixedPeriodRecv, "fixed_period_recv")
backoff_recv = _factory(BackoffRecv, "backoff_recv")
global_build_lock = _factory(GlobalBuildLock, "global_build_lock")

EXPECTED: dict[str, set[str]] = {
    "fixed_period_recv": {"R17"},
    "backoff_recv": {"R17"},
    "global_build_lock": {"R7", "R17"},
}
