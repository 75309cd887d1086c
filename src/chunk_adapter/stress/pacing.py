"""Pacing scenarios (R17): no busy polling, no head-of-line blocking, idle means idle.

These measure the adapters' own threads (a sender and a receiver, as in
:mod:`~chunk_adapter.stress.rig`), so they run over a bare ``MemoryConnector``
with only a cheap get counter around it (the recording wrappers would
dominate the CPU they measure). Their windows are fixed; ``until`` (the
stage's budget) is accepted like every scenario's.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from ..bed.progress import Progress
from ..bed.stack import Bed
from ..connectors.recording import CountingConnector
from ..factory import AdapterFactory
from ..rules import R17, R23
from .measure import measure_window
from .report import DEFAULT_SEED, StressReport
from .rig import Pipeline, make_adapter
from .scheduler import timed_stop
from .verdicts import switch_interval

__all__ = ["head_of_line", "idle_polling"]

IDLE_PAUSE = 0.001
"""The contract's pause between idle polling rounds, about 1 ms (R17), in seconds."""
_SETTLE = 5.0  # seconds allowed for the first polls of freshly registered requests


def _bare(factory: AdapterFactory, notify: bool) -> tuple[Pipeline, CountingConnector, Progress]:
    bed = Bed(notify=notify)
    counting = bed.wrap(CountingConnector)
    watch = bed.wrap(Progress)
    return make_adapter(factory, bed), counting, watch


def idle_polling(
    factory: AdapterFactory,
    *,
    seed: int = DEFAULT_SEED,
    idle_requests: int = 10,
    seconds: float = 1.0,
    notify: bool = False,
    max_cpu_per_second: float = 0.5,
    rate_factor: float = 5.0,
    until: float | None = None,
) -> StressReport:
    """Register *idle_requests* requests that never get data; measure for *seconds*.

    Fails (R17) if the background threads use more than *max_cpu_per_second*
    CPU seconds per second, or poll an idle request more than *rate_factor*
    times per the contract's ~1 ms idle pause (:data:`IDLE_PAUSE`: 5000 gets/s; never
    an adapter attribute: one named ``idle_backoff`` may count milliseconds). With
    ``idle_requests=0`` the adapter must make no get at all and stay under a
    tenth of *max_cpu_per_second*.
    """
    report = StressReport(
        "idle_polling",
        {
            "seed": seed,
            "idle_requests": idle_requests,
            "seconds": seconds,
            "notify": notify,
            "max_cpu_per_second": max_cpu_per_second,
            "rate_factor": rate_factor,
        },
    )
    before = set(threading.enumerate())
    adapter, counting, watch = _bare(factory, notify)

    def threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t not in before and t.is_alive()]

    try:
        rng = random.Random(seed)
        names = [f"idle-{i}" for i in range(idle_requests)]
        rng.shuffle(names)
        for name in names:
            adapter.load_async(name)
        if not watch.wait_for(lambda: counting.gets >= idle_requests, _SETTLE):
            report.fail(
                R23,
                f"only {counting.gets} gets in {_SETTLE}s after registering "
                f"{idle_requests} requests: registered requests are not polled",
            )
        window = measure_window(threads, lambda: counting.gets, seconds)
    finally:
        stopped = timed_stop(adapter.stop, 10.0)
    report.measure("cpu_seconds_per_second", window.cpu_per_second)
    report.measure("gets_per_second", window.gets_per_second)
    if stopped.elapsed is not None:
        report.measure("stop_seconds", stopped.elapsed)
    if idle_requests:
        per_request = window.gets_per_second / idle_requests
        report.measure("gets_per_second_per_request", per_request)
        limit = rate_factor / IDLE_PAUSE
        if per_request > limit:
            report.fail(
                R17,
                f"{per_request:.0f} gets/s per idle request with {idle_requests} idle requests "
                f"(bound {limit:.0f}/s = {rate_factor} per the contract's {IDLE_PAUSE * 1000:g} "
                "ms idle pause): busy polling",
            )
        if window.cpu_per_second > max_cpu_per_second:
            report.fail(
                R17,
                f"background threads used {window.cpu_per_second:.3f} CPU s/s with "
                f"{idle_requests} idle requests (bound {max_cpu_per_second}): busy loop",
            )
    else:
        if window.gets:
            report.fail(R17, f"{window.gets} gets in {seconds}s with no request registered")
        if window.cpu_per_second > max_cpu_per_second / 10:
            report.fail(
                R17,
                f"an adapter with no requests used {window.cpu_per_second:.3f} CPU s/s "
                f"(bound {max_cpu_per_second / 10}): not idle",
            )
    return report


def head_of_line(
    factory: AdapterFactory,
    *,
    seed: int = DEFAULT_SEED,
    idle_requests: int = 200,
    hot_requests: int = 5,
    chunks: int = 3,
    notify: bool = False,
    bound: float = 0.5,
    switch_interval_s: float | None = None,
    until: float | None = None,
) -> StressReport:
    """With *idle_requests* registered and silent, requests that do have data are
    delivered within *bound* seconds of their final save (R17: no request waits
    behind another). Hot requests register after the idle ones, in seeded order.
    """
    report = StressReport(
        "head_of_line",
        {
            "seed": seed,
            "idle_requests": idle_requests,
            "hot_requests": hot_requests,
            "chunks": chunks,
            "notify": notify,
            "bound": bound,
            "switch_interval_s": switch_interval_s,
        },
    )
    with switch_interval(switch_interval_s):
        return _head_of_line(
            factory, report, seed, idle_requests, hot_requests, chunks, notify, bound, until
        )


def _head_of_line(
    factory: AdapterFactory,
    report: StressReport,
    seed: int,
    idle_requests: int,
    hot_requests: int,
    chunks: int,
    notify: bool,
    bound: float,
    until: float | None,
) -> StressReport:
    adapter, counting, watch = _bare(factory, notify)
    rng = random.Random(seed)
    worst = 0.0
    try:
        idle = [f"idle-{i}" for i in range(idle_requests)]
        rng.shuffle(idle)
        for name in idle:
            adapter.load_async(name)
        watch.wait_for(lambda: counting.gets >= idle_requests, _SETTLE)
        received: dict[str, list[Any]] = {}
        for h in range(hot_requests):
            if until is not None and time.monotonic() >= until:
                report.stop_at_budget(f"{h} of {hot_requests} hot requests delivered")
                break
            hot = f"hot-{h}-{rng.randrange(10**6)}"
            if rng.random() < 0.5:
                adapter.load_async(hot)
            for n in range(chunks):
                adapter.save_async(hot, f"{hot}#{n}", n == chunks - 1)
            adapter.load_async(hot)  # idempotent if it was registered above (R12)
            start = time.monotonic()

            def delivered(hot: str = hot) -> bool:
                for rid, values in adapter.poll_ready().items():
                    received.setdefault(rid, []).extend(values)
                got = received.get(hot, [])
                return bool(got) and got[-1].get("finished") is True

            if not watch.wait_for(delivered, bound):
                report.fail(
                    R17,
                    f"request {hot!r} with all {chunks} chunks put was not delivered within "
                    f"{bound}s while {idle_requests} other registered requests had no data "
                    f"(got {len(received.get(hot, []))} chunks): head-of-line blocking",
                )
                break
            worst = max(worst, time.monotonic() - start)
            adapter.cleanup_receiver(hot)
    finally:
        stopped = timed_stop(adapter.stop, 10.0)
    report.measure("worst_delivery_seconds", worst)
    if stopped.elapsed is not None:
        report.measure("stop_seconds", stopped.elapsed)
    return report
