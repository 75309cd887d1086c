"""``chunk-adapter bench``: every row for every connector, polling vs event-driven.

Measures the adapter a factory builds (the reference adapter by default).
Writes ``bench.json`` (all numbers, with the baselines measured in the same
run and the ratios) and, where matplotlib is installed, ``bench.png``, into
the folder it is given (the command line's default is a fresh temporary one).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Protocol, TextIO

from ..connectors.base import Connector
from ..connectors.memory import MemoryConnector
from ..connectors.redis import RedisConnector
from ..connectors.redis_server import RedisServer, redis_server_path, redis_unavailable
from ..connectors.shm import SharedMemoryConnector
from ..factory import REFERENCE, AdapterFactory, load_factory
from . import measure

__all__ = ["CONNECTORS", "run_bench", "unavailable"]

# name -> a context giving connector makers: (polling mode, event-driven mode)
Makers = tuple[Callable[[], Connector], Callable[[], Connector] | None]


class _Closable(Connector, Protocol):
    def close(self) -> None: ...


@contextmanager
def _closing(build: Callable[[int, bool], _Closable]) -> Iterator[Makers]:
    """Makers of connectors ``build(n, notify)`` makes (the *n*-th made), each closed
    at the end."""
    made: list[_Closable] = []

    def make(notify: bool) -> Connector:
        made.append(build(len(made), notify))
        return made[-1]

    try:
        yield (lambda: make(False), lambda: make(True))
    finally:
        for conn in made:
            conn.close()


@contextmanager
def _shm() -> Iterator[Makers]:
    run = uuid.uuid4().hex[:8]
    with _closing(lambda n, notify: SharedMemoryConnector(f"bench{run}n{n}", notify=notify)) as m:
        yield m


@contextmanager
def _redis() -> Iterator[Makers]:
    why = redis_unavailable()
    if why is not None:
        raise RuntimeError(f"cannot bench redis: {why}")
    with (
        RedisServer() as server,
        _closing(
            lambda n, notify: RedisConnector(url=server.url, prefix=f"bench{n}:", notify=notify)
        ) as makers,
    ):
        yield makers


CONNECTORS: dict[str, Callable[[], AbstractContextManager[Makers]]] = {
    "memory": lambda: nullcontext((MemoryConnector, lambda: MemoryConnector(notify=True))),
    "shm": _shm,
    "redis": _redis,
}


def unavailable(name: str) -> str | None:
    """Why connector *name* cannot be benched on this machine (with the fix), or ``None``."""
    if name != "redis":
        return None
    why = redis_unavailable()
    path = redis_server_path()
    if why is None and path is not None and not os.access(path, os.X_OK):
        why = (
            f"REDIS_SERVER={path} is not an executable file: point REDIS_SERVER at a "
            "redis-server binary, or unset it to use the one on PATH"
        )
    return why


def _sizes(quick: bool) -> dict[str, int]:
    if quick:
        return {"latency": 200, "save": 2000, "chunks": 2000, "idle_requests": 100}
    return {"latency": 2000, "save": 20000, "chunks": 20000, "idle_requests": 100}


def _rows(
    makers: Makers, quick: bool, say: Callable[[str], None], factory: AdapterFactory
) -> Iterator[tuple[str, Any]]:
    sizes = _sizes(quick)
    idle_seconds = 1.0 if quick else 3.0
    yield "save_cost", measure.save_cost(makers[0], sizes["save"], factory)
    modes = [("polling", makers[0], False)]
    if makers[1] is not None:
        modes.append(("event", makers[1], True))
    for mode, make, event in modes:
        say(f"  {mode}: latency")
        latency = measure.save_to_ready_latency(make, sizes["latency"], event, factory)
        yield f"{mode}.latency", latency
        for streams in (1, 10, 100):
            say(f"  {mode}: throughput with {streams} stream(s)")
            rate = measure.throughput(make, streams, sizes["chunks"], event, factory)
            yield f"{mode}.chunks_per_s.{streams}", rate
        say(f"  {mode}: idle cost with {sizes['idle_requests']} registered requests")
        idle = measure.idle_cost(make, sizes["idle_requests"], idle_seconds, event, factory)
        yield f"{mode}.idle", idle


def run_bench(
    out_dir: Path, connectors: list[str], quick: bool, log: TextIO, adapter: str = REFERENCE
) -> dict[str, Any]:
    """Bench the adapter named *adapter* (``pkg.mod:factory``) on each of *connectors*.

    Raises ``UsageError`` when *adapter* cannot be loaded. The results go to
    ``out_dir/bench.json`` (and ``bench.png``).
    """
    factory = load_factory(adapter)

    def say(line: str) -> None:
        print(line, file=log, flush=True)

    say(f"bench: {adapter}; results go to {out_dir}")
    say("baseline: bare threading.Condition hand-off")
    baseline = measure.handoff_latency(_sizes(quick)["latency"])
    results: dict[str, Any] = {
        "adapter": adapter,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "quick": quick,
        "baseline_handoff": baseline,
        "connectors": {},
    }
    for name in connectors:
        say(f"{name}:")
        with CONNECTORS[name]() as makers:
            rows = dict(_rows(makers, quick, say, factory))
        for mode in ("polling", "event"):
            if f"{mode}.latency" in rows:
                rows[f"{mode}.latency_ratio_p50"] = rows[f"{mode}.latency"]["p50"] / baseline["p50"]
        results["connectors"][name] = rows
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "bench.json").write_text(json.dumps(results, indent=2) + "\n")
    _summary(results, log)
    _plot(results, out_dir / "bench.png", say)
    say(f"results: {out_dir / 'bench.json'}")
    return results


def _summary(results: dict[str, Any], log: TextIO) -> None:
    base = results["baseline_handoff"]
    print(f"\nadapter: {results['adapter']}", file=log)
    print(f"baseline Condition hand-off: p50 {base['p50'] * 1e6:.0f} us, "
          f"p99 {base['p99'] * 1e6:.0f} us", file=log)  # fmt: skip
    for name, rows in results["connectors"].items():
        save = rows["save_cost"]
        print(f"{name}: save_async {save['save_async_s'] * 1e6:.1f} us = "
              f"{save['ratio']:.2f} x deepcopy", file=log)  # fmt: skip
        for mode in ("polling", "event"):
            if f"{mode}.latency" not in rows:
                continue
            lat, idle = rows[f"{mode}.latency"], rows[f"{mode}.idle"]
            rates = ", ".join(
                f"{s}: {rows[f'{mode}.chunks_per_s.{s}']:.0f}/s" for s in (1, 10, 100)
            )
            print(
                f"  {mode:<8} latency p50 {lat['p50'] * 1e6:.0f} us "
                f"({rows[f'{mode}.latency_ratio_p50']:.2f} x baseline), "
                f"p99 {lat['p99'] * 1e6:.0f} us; chunks {rates}; "
                f"idle CPU {idle['cpu_per_s'] * 100:.2f} % of a core, "
                f"{idle['gets_per_s_per_request']:.1f} gets/s per request",
                file=log,
            )


def _plot(results: dict[str, Any], path: Path, say: Callable[[str], None]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        say("(matplotlib not installed: no plot; pip install 'chunk-adapter[bench]')")
        return
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    labels, p50, cpu, rate = [], [], [], []
    for name, rows in results["connectors"].items():
        for mode in ("polling", "event"):
            if f"{mode}.latency" in rows:
                labels.append(f"{name}\n{mode}")
                p50.append(rows[f"{mode}.latency_ratio_p50"])
                cpu.append(rows[f"{mode}.idle"]["cpu_per_s"] * 100)
                rate.append(rows[f"{mode}.chunks_per_s.10"])
    axes[0].bar(labels, p50)
    axes[0].axhline(1.0, color="grey", linestyle="--")
    axes[0].set_title("latency p50 / bare Condition hand-off")
    axes[1].bar(labels, cpu)
    axes[1].set_title("idle CPU, % of a core (100 requests)")
    axes[2].bar(labels, rate)
    axes[2].set_title("chunks per second (10 streams)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    say(f"plot: {path}")
