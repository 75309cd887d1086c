"""Two throughput-stall probes of the examples stage: an adapter that delivers
every chunk, in order and once, but makes some of them wait for no reason.

**Independent builds** (R7, R17). Two adapters made by the same factory in
one process share nothing but the interpreter. While adapter A's
``build_payload`` is held at a gate (a slow build in one stage), adapter B,
given a final to send, must build and put it within :data:`BUILD_BOUND`
seconds (median 4 ms, at most 155 ms, in 165 runs of the reference and the
correct adapters of tests/quality/correct on a loaded 2-core machine). If
B's put comes only after A's build is released, B waited behind A: with B's
own build not even started, ``build_payload`` runs under a lock (or on a
worker) shared between adapters, which R7 forbids ("called outside every
lock"); with B's build done but its put held back, B's SAVE thread waits
behind another adapter's request (R17: no request waits behind another).

**Quiet polling** (R17). Over a polling connector, R17 says a RECV thread
with requests but no progress in a round sleeps about 1 ms — after every
such round, however long nothing has come. An adapter whose pause grows
while nothing arrives (an exponential backoff, a long fixed sleep) keeps
every chunk put after a quiet spell waiting for the next poll. The probe
registers :data:`REQUESTS` requests, lets :data:`QUIET` seconds of quiet go
by, and counts the gets per registered request over the next
:data:`WINDOW` seconds. Rates are a timing measurement on a possibly loaded
machine, so the reference :class:`~chunk_adapter.adapter.ChunkAdapter` is
measured beside the adapter, with the same requests over the same window
(:func:`quiet_rates`): a violation is a rate below the absolute
:data:`FLOOR` (a pause of 50 ms, fifty times the contract's) AND below
:data:`FRACTION` of the reference's rate in that window; when the reference
itself stays under :data:`DECISIVE`, the machine is too starved to tell
and the probe is inconclusive (:func:`judge_quiet_rates`). As for every
finding of the stage, a failure is run once more on fresh adapters and
reported only if it fails again (``run_probes``).
"""

from __future__ import annotations

import threading
import time

from ..adapter import ChunkAdapter
from ..bed.stack import Bed
from ..bed.waiting import Hang, call_bounded, stopping, wait_until
from ..connectors import Gate, GatedBuilder, RecordingConnector
from ..connectors.recording import CountingConnector
from ..examples import ARRIVE, CALL, FACTORY
from ..factory import AdapterFactory, AdapterLike
from ..oracles.violations import ContractViolation
from ..rules import R7, R17, R23
from .leaks import Undecided

__all__ = [
    "BUILD_BOUND",
    "DECISIVE",
    "FLOOR",
    "FRACTION",
    "QUIET",
    "REQUESTS",
    "WINDOW",
    "independent_build_seconds",
    "judge_quiet_rates",
    "probe_independent_builds",
    "probe_quiet_polling",
    "quiet_rates",
]

BUILD_BOUND = 5.0
"""Seconds adapter B may take to put its final while A's build is held (at most 155 ms seen)."""
STOP = 5.0  # s for each stop() at the end (R18's own probes check promptness)

QUIET = 1.0
"""Seconds of quiet before the window: a pause doubling from 1 ms passes 0.25 s within 0.5 s."""
WINDOW = 1.0
"""Seconds over which the gets are counted."""
REQUESTS = 4
"""Requests registered with each receiver (nothing is ever put for them)."""
FLOOR = 20.0
"""Gets per second per registered request below which polling is suspect: a 50 ms pause,
fifty times R17's ~1 ms (correct adapters: 146-704 on a loaded 2-core machine)."""
FRACTION = 0.1
"""...and below this fraction of the reference adapter's rate in the same window."""
DECISIVE = 2 * FLOOR
"""The reference's rate below which the machine is too busy to judge (inconclusive): its
1 ms pause then takes 25 ms (the lowest seen in 195 measurements on a loaded 2-core
machine: 114). Above it, at least 160 of the reference's gets are counted in the window,
so one under a tenth of that is a difference of kind, not scheduling noise."""


def probe_independent_builds(factory: AdapterFactory) -> None:
    """R7, R17: while one adapter's build_payload is held, another adapter of the same
    factory still builds and puts its chunk."""
    independent_build_seconds(factory)


def independent_build_seconds(factory: AdapterFactory, *, bound: float = BUILD_BOUND) -> float:
    """Seconds from adapter B's ``save_async`` to its put while adapter A's build is held;
    :class:`~chunk_adapter.oracles.violations.ContractViolation` of R7 (or R17) when B's
    put waits for A's build."""
    bed = Bed(record=True)
    held = bed.builder(recorded=False)
    free = bed.builder(recorded=False)  # never held: counts B's builds (free.calls)
    gate = held.hold("slow")
    try:
        a = bed.adapter(factory, bound=FACTORY, stage_id=0, build_payload=held)
        with stopping(a, seconds=STOP, first=bed.release_all):
            b = bed.adapter(factory, bound=FACTORY, stage_id=2, build_payload=free)
            with stopping(b, seconds=STOP, first=bed.release_all):
                return _held_and_free(bed.recording, a, b, gate, free, bound)
    finally:
        bed.release_all()


def _held_and_free(
    conn: RecordingConnector,
    a: AdapterLike,
    b: AdapterLike,
    gate: Gate,
    free: GatedBuilder,
    bound: float,
) -> float:
    call_bounded(lambda: a.save_async("slow", 1, True), CALL, "save_async('slow', 1, True)")
    if not gate.wait_started(ARRIVE):
        raise ContractViolation.of(R23, "the build of 'slow' never started")
    start = time.monotonic()
    call_bounded(lambda: b.save_async("free", 2, True), CALL, "save_async('free', 2, True)")
    try:
        wait_until(lambda: "free_2_0" in conn.puts, bound, "the put of free_2_0")
    except Hang:
        built = free.calls > 0
        gate.release()
        released = time.monotonic()
        wait_until(
            lambda: "free_2_0" in conn.puts,
            ARRIVE,
            "the put of free_2_0 (after the other adapter's build was released)",
            rules=(R23,),
        )
        after = time.monotonic() - released
        waited = f"{released - start:.1f} s"
        if built:
            raise ContractViolation.of(
                R17,
                f"adapter B (stage 2, made by the same factory as A) built the final of "
                f"'free' but did not put free_2_0 while adapter A's build_payload of 'slow' was "
                f"held ({waited}, bound {bound:g} s); it put it {after * 1000:.0f} ms after A's "
                "build was released: B's SAVE thread waits behind another adapter's build "
                "(R17: no request waits behind another)",
            ) from None
        raise ContractViolation.of(
            R7,
            f"while adapter A's build_payload of 'slow' was held, adapter B (stage 2, made "
            f"by the same factory) did not even call build_payload for 'free' ({waited}, bound "
            f"{bound:g} s); it built and put free_2_0 {after * 1000:.0f} ms after A's build "
            "was released: build_payload runs under a lock (or on a worker) shared between "
            "adapters, so a slow build in one stage stalls every other (R7: build_payload is "
            "called outside every lock; R17: no request waits behind another)",
            also=(R17,),
        ) from None
    took = time.monotonic() - start
    gate.release()
    wait_until(lambda: "slow_0_0" in conn.puts, ARRIVE, "the put of slow_0_0", rules=(R23,))
    return took


def quiet_rates(
    factory: AdapterFactory,
    *,
    quiet: float = QUIET,
    window: float = WINDOW,
    requests: int = REQUESTS,
) -> tuple[float, float]:
    """Gets per second per registered request of *factory*'s receiver and of the reference
    ChunkAdapter, over one polling connector each, counted over the same *window* seconds
    after *quiet* seconds in which nothing was put."""
    bed, ref_bed = Bed(keep_puts=0), Bed(keep_puts=0)
    conn, ref_conn = bed.wrap(CountingConnector), ref_bed.wrap(CountingConnector)
    rcv = bed.adapter(factory, bound=FACTORY, stage_id=1)
    with stopping(rcv, seconds=STOP):
        ref = ChunkAdapter(ref_conn, stage_id=1)
        with stopping(ref, seconds=STOP):
            for i in range(requests):
                call_bounded(lambda i=i: rcv.load_async(f"q{i}"), CALL, f"load_async('q{i}')")  # type: ignore[misc]
                ref.load_async(f"q{i}")
            wait_until(
                lambda: conn.gets >= requests,
                ARRIVE,
                f"{requests} gets for the {requests} registered requests",
                rules=(R23,),
            )
            try:
                wait_until(lambda: ref_conn.gets >= requests, ARRIVE, "the reference's gets")
            except Hang:  # the yardstick, not the adapter under test: decides nothing
                raise Undecided(
                    f"the reference ChunkAdapter made {ref_conn.gets} gets for its {requests} "
                    f"registered requests in {ARRIVE:g} s: the machine is too busy to measure "
                    "polling rates (not a violation)"
                ) from None
            # The quiet spell and the window are measurement intervals, not waits for
            # something to happen: the caller blocks on an event that nobody sets.
            idle = threading.Event()
            idle.wait(quiet)
            gets0, ref0, t0 = conn.gets, ref_conn.gets, time.monotonic()
            idle.wait(window)
            gets1, ref1, t1 = conn.gets, ref_conn.gets, time.monotonic()
    seconds = t1 - t0
    return (gets1 - gets0) / seconds / requests, (ref1 - ref0) / seconds / requests


def judge_quiet_rates(rate: float, reference: float, *, quiet: float = QUIET) -> None:
    """Pass (return), :class:`~.leaks.Undecided`, or a ``ContractViolation`` of R17, for an
    adapter that polled each registered request *rate* times a second after *quiet*
    seconds of quiet while the reference polled *reference* times a second."""
    if rate >= FLOOR:
        return
    pace = "no get at all" if rate <= 0 else f"one get every {1000 / rate:.0f} ms"
    figures = (
        f"after {quiet:g} s of quiet over a polling connector, the adapter polled each "
        f"registered request {rate:.1f} times a second ({pace}); the reference ChunkAdapter, "
        f"measured beside it in the same window, {reference:.0f} times"
    )
    if reference < DECISIVE:
        raise Undecided(
            f"{figures}: with the reference under {DECISIVE:.0f}/s the machine is too busy "
            "to tell a slow poll from a starved one (not a violation; run again on a "
            "quieter machine)"
        )
    if rate >= FRACTION * reference:
        raise Undecided(
            f"{figures}: under {FLOOR:.0f}/s but not under {FRACTION:g} of the reference's "
            "rate, so not decided (not a violation)"
        )
    raise ContractViolation.of(
        R17,
        f"{figures} (bounds: under {FLOOR:.0f}/s and under {FRACTION:g} of the "
        "reference): the receiver's pause grows while nothing arrives, so a chunk put after "
        "a quiet spell waits for the next poll (R17: with requests but no progress in a "
        "round, the RECV thread sleeps about 1 ms, however long nothing has come)",
    )


def probe_quiet_polling(factory: AdapterFactory) -> None:
    """R17: after a quiet spell, registered requests are still polled at about 1 ms per round
    (judged against the reference adapter measured in the same window)."""
    rate, reference = quiet_rates(factory)
    judge_quiet_rates(rate, reference)
