"""The measurements of ``chunk-adapter bench``, each against a baseline taken in the same run.

All timings are wall-clock ``perf_counter`` seconds; a result is always
reported next to its baseline, as a ratio, because absolute numbers on a
shared 2-core machine mean little. Each measurement builds its adapters with a
factory (``factory(connector, *, stage_id)``, the reference adapter by
default), so ``chunk-adapter bench --adapter`` measures a user's adapter too.
"""

from __future__ import annotations

import copy
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..adapter import ChunkAdapter
from ..connectors.base import Connector
from ..connectors.recording import CountingConnector
from ..factory import AdapterFactory, AdapterLike, reference_factory

__all__ = [
    "handoff_latency",
    "idle_cost",
    "save_cost",
    "save_to_ready_latency",
    "throughput",
]

ConnectorMaker = Callable[[], Connector]
REFERENCES: tuple[Any, ...] = (ChunkAdapter, reference_factory)
"""Factories that take ``event_driven=`` (the reference adapter's own switch)."""


@contextmanager
def built(
    factory: AdapterFactory, conn: Connector, stage_id: int, event_driven: bool | None = None
) -> Iterator[AdapterLike]:
    """An adapter from *factory*, stopped on the way out.

    *event_driven* reaches the reference adapter only; any other adapter is
    told nothing, and decides from its connector (``notify=True`` offers
    ``subscribe``) as it would in production.
    """
    options = {"event_driven": event_driven} if event_driven is not None else {}
    adapter = factory(conn, stage_id=stage_id, **(options if factory in REFERENCES else {}))
    try:
        yield adapter
    finally:
        adapter.stop()


PAYLOAD: dict[str, Any] = {"tokens": list(range(64)), "text": "x" * 256, "meta": {"step": 1}}


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50": statistics.median(ordered),
        "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "n": float(len(ordered)),
    }


def _observe(flag: Callable[[], bool], deadline: float = 10.0) -> float:
    """Spin (yielding the GIL each turn) until *flag*; the time it turned true."""
    end = time.perf_counter() + deadline
    while not flag():
        if time.perf_counter() > end:
            raise TimeoutError("bench: a hand-off did not complete within 10 s")
        time.sleep(0)
    return time.perf_counter()


def handoff_latency(n: int) -> dict[str, float]:
    """Baseline: a bare ``threading.Condition`` hand-off, seen by the same polling loop.

    The main thread notifies a waiting thread, which sets a flag; the main
    thread polls the flag exactly as the adapter benchmark polls ``poll_ready``.
    """
    cond = threading.Condition()  # guards pending/done; main notifies, worker waits
    state = {"pending": 0, "done": 0, "stop": False}

    def worker() -> None:
        with cond:
            while not state["stop"]:
                while state["pending"] == state["done"] and not state["stop"]:
                    cond.wait(1.0)
                state["done"] = state["pending"]

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    samples = []
    for i in range(1, n + 1):
        start = time.perf_counter()
        with cond:
            state["pending"] = i
            cond.notify()
        samples.append(_observe(lambda: state["done"] >= state["pending"]) - start)
    with cond:
        state["stop"] = True
        cond.notify()
    thread.join(2.0)
    return _percentiles(samples)


def save_to_ready_latency(
    make: ConnectorMaker, n: int, event_driven: bool, factory: AdapterFactory = ChunkAdapter
) -> dict[str, float]:
    """From ``save_async`` to the chunk showing up in ``poll_ready`` (one stream)."""
    conn = make()
    samples = []
    with built(factory, conn, 0) as snd, built(factory, conn, 1, event_driven) as rcv:
        rcv.load_async("lat")
        for i in range(n):
            start = time.perf_counter()
            snd.save_async("lat", i, False)
            samples.append(_observe(lambda: bool(rcv.poll_ready())) - start)
    return _percentiles(samples)


def save_cost(
    make: ConnectorMaker, n: int, factory: AdapterFactory = ChunkAdapter
) -> dict[str, float]:
    """Per-call cost of ``save_async`` against ``copy.deepcopy`` of the same object."""
    start = time.perf_counter()
    for _ in range(n):
        copy.deepcopy(PAYLOAD)
    snapshot = (time.perf_counter() - start) / n
    with built(factory, make(), 0) as snd:
        start = time.perf_counter()
        for i in range(n):
            snd.save_async(f"s{i % 16}", PAYLOAD, False)
        call = (time.perf_counter() - start) / n
    return {"save_async_s": call, "deepcopy_s": snapshot, "ratio": call / snapshot}


def throughput(
    make: ConnectorMaker,
    streams: int,
    chunks: int,
    event_driven: bool,
    factory: AdapterFactory = ChunkAdapter,
) -> float:
    """Chunks per second, saved on *streams* streams and received until every final is in."""
    conn = make()
    per_stream = max(1, chunks // streams)
    with built(factory, conn, 0) as snd, built(factory, conn, 1, event_driven) as rcv:
        names = [f"t{s}" for s in range(streams)]
        for name in names:
            rcv.load_async(name)
        start = time.perf_counter()
        for i in range(per_stream):
            for name in names:
                snd.save_async(name, i, i == per_stream - 1)
        finals = 0
        deadline = start + 120
        while finals < streams:
            for chunks_in in rcv.poll_ready().values():
                finals += sum(1 for c in chunks_in if c["finished"])
            if time.perf_counter() > deadline:
                raise TimeoutError(f"bench: {streams} streams did not finish within 120 s")
            time.sleep(0.0005)
        elapsed = time.perf_counter() - start
    return per_stream * streams / elapsed


def idle_cost(
    make: ConnectorMaker,
    requests: int,
    seconds: float,
    event_driven: bool,
    factory: AdapterFactory = ChunkAdapter,
) -> dict[str, float]:
    """CPU seconds per second and gets per second with *requests* registered, no data."""
    counting = CountingConnector(make())
    with built(factory, counting, 1, event_driven) as rcv:
        for r in range(requests):
            rcv.load_async(f"idle{r}")
        time.sleep(0.2)  # let the RECV thread settle into its idle pattern
        gets0, cpu0, wall0 = counting.gets, time.process_time(), time.perf_counter()
        time.sleep(seconds)
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
        gets = counting.gets - gets0
    return {
        "cpu_per_s": cpu / wall,
        "gets_per_s": gets / wall,
        "gets_per_s_per_request": gets / wall / requests,
    }
