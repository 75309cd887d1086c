"""The prompt hand-off probe (R17) of the examples stage.

The stress stage's pacing scenarios measure many requests at once over a
polling connector; none measures one chunk's way through an otherwise idle
pipeline. Mutants of the reference adapter that make every chunk wait out the
0.5 s re-poll — a lost put subscription, a wake-up on the wrong keys, a
polling connector taken for a notifying one, a pause after a round that made
progress — were caught only in the explore stage, minutes in, as R23 (the
consequence). This probe catches them in seconds under the rule they break
(docs/quality.md).

The probe sends one chunk at a time (save, wait until ``poll_ready`` hands it
out, save the next), over a polling and over a notifying connector. R17: with
requests but no progress the RECV thread sleeps about 1 ms, and after progress
it starts the next round at once; so the FASTEST of :data:`HOPS` hand-offs
taking :data:`HOP_BOUND` seconds (250 times that sleep) is a violation. A
loaded machine slows some hand-offs of a correct adapter, not all of them:
the fastest one stays far under the bound (0.5-6 ms for the reference and the
ten correct adapters of tests/quality/correct at a load of 13 on 2 cores, the
slowest under 50 ms), while each hand-off of those mutants takes ~0.5 s.
"""

from __future__ import annotations

import time
from typing import Any

from ..bed.stack import Bed
from ..bed.waiting import call_bounded, stopping, wait_until
from ..examples import ARRIVE, CALL, FACTORY
from ..factory import AdapterFactory
from ..oracles.violations import ContractViolation
from ..rules import R14, R15, R17

__all__ = ["HOPS", "HOP_BOUND", "handoff_times", "probe_prompt_handoff"]

HOPS = 6  # hand-offs measured (after a first one that includes start-up)
HOP_BOUND = 0.25  # s: the fastest hand-off may not take this long (R17's sleep is ~1 ms)
STOP = 5.0  # s for stop() at the end (R18's own probes check promptness)


def handoff_times(factory: AdapterFactory, *, notify: bool, hops: int = HOPS) -> list[float]:
    """Seconds from ``save_async`` to ``poll_ready`` handing the chunk out, one chunk at a
    time, for *hops* chunks after a first (start-up) one. Raises
    :class:`~chunk_adapter.oracles.violations.ContractViolation` if a chunk comes back
    wrong (R14), or again (R15: handed out by an earlier hop already)."""
    bed = Bed(notify=notify)
    snd = bed.adapter(factory, bound=FACTORY, stage_id=0)
    rcv = bed.adapter(factory, bound=FACTORY, stage_id=1)
    times: list[float] = []
    before: list[Any] = []  # every chunk handed out by an earlier hop
    with stopping(snd, rcv, seconds=STOP):
        call_bounded(lambda: rcv.load_async("h"), CALL, "load_async('h')")
        for i in range(hops + 1):
            final = i == hops
            got: list[Any] = []

            def arrived(got: list[Any] = got) -> bool:
                got.extend(call_bounded(rcv.poll_ready, CALL, "poll_ready()").get("h", []))
                return bool(got)

            start = time.monotonic()
            call_bounded(
                lambda i=i, final=final: snd.save_async("h", i, final),  # type: ignore[misc]
                CALL,
                f"save_async('h', {i}, {final})",
            )
            wait_until(arrived, ARRIVE, f"chunk {i} of 'h' handed out by poll_ready")
            times.append(time.monotonic() - start)
            expected = [{"data": i, "finished": final}]
            again = [c for c in got if c in before]
            if again:  # handed out a second time: poll_ready did not swap it out
                raise ContractViolation.of(
                    R15,
                    f"poll_ready handed out {again} for 'h' again, with {got}; expected "
                    f"{expected} (poll_ready must swap out what it returns)",
                    also=(R14,),
                )
            if got != expected:
                raise ContractViolation.of(
                    R14, f"poll_ready handed out {got} for 'h', expected {expected}"
                )
            before += got
    return times[1:]


def _probe_handoff(factory: AdapterFactory, notify: bool) -> None:
    times = handoff_times(factory, notify=notify)
    fastest = min(times)
    kind = "a notifying" if notify else "a polling"
    if fastest >= HOP_BOUND:
        raise ContractViolation.of(
            R17,
            f"over {kind} connector, the fastest of {len(times)} chunks sent one at a time "
            f"took {fastest:.3f} s from save_async to poll_ready (all: "
            f"{', '.join(f'{t:.3f}' for t in times)}; bound {HOP_BOUND} s): the receiver "
            "pauses while a chunk waits (R17: about 1 ms without progress, none after it)",
        )


def probe_prompt_handoff(factory: AdapterFactory) -> None:
    """R17: a chunk sent alone reaches poll_ready promptly, polling and notifying connectors."""
    for notify in (False, True):
        _probe_handoff(factory, notify)
