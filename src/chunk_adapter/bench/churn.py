"""The churn benchmark: does anything grow when streams come and go for minutes?

``run_churn(connector, seconds, interval)`` runs a sender and a receiver adapter
over one connector with a small pool of request ids that are reused again and
again, eight streams in flight at a time: each is registered, sent (a few
chunks and a final; some cancelled mid-stream, some cancelled again after
their final), received and cleaned up.
Every ``interval`` seconds it samples the process's RSS, the store's size
(segments in the shared-memory namespace, keys under the Redis prefix, values
in the memory connector) and the adapters' state depths. The verdict is
"flat" when, after the first third of the run (warm-up), RSS grew by less
than 10 % (and 8 MiB) and the store and every depth stayed within a bound that
does not depend on how long the run was.

``python -m chunk_adapter.bench.churn --connector shm --seconds 300``; the
``chunk-adapter bench --churn`` flag is the same run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from ..adapter import ChunkAdapter
from ..connectors.memory import MemoryConnector
from ..connectors.redis import RedisConnector
from ..connectors.redis_server import RedisServer
from ..connectors.shm import SharedMemoryConnector
from .run import CONNECTORS

__all__ = ["Sample", "run_churn"]

IDS = 32  # the reused request ids
CHUNKS = 4  # non-final chunks per stream
BATCH = 8  # streams in flight at once


@dataclass(frozen=True)
class Sample:
    t: float
    rss_mib: float
    store: int
    streams: int
    open_streams: int
    cancel_marks: int
    registered: int
    save_pending: int


@contextmanager
def _store(name: str) -> Iterator[tuple[Any, Callable[[], int]]]:
    if name == "memory":
        mem = MemoryConnector(consume_on_get=True)
        yield mem, lambda: len(mem)
    elif name == "shm":
        with SharedMemoryConnector(f"churn{uuid.uuid4().hex[:8]}") as shm:
            try:
                yield shm, lambda: len(shm.segments())
            finally:
                shm.purge()
    elif name == "redis":
        with RedisServer() as server, RedisConnector(url=server.url, prefix="churn") as red:
            yield red, lambda: len(red.keys())
    else:
        raise ValueError(f"unknown connector {name!r}; pick one of {', '.join(CONNECTORS)}")


def _batch(snd: ChunkAdapter, rcv: ChunkAdapter, rids: list[str], rnd: random.Random) -> None:
    """Streams of *rids*, interleaved: register, send, receive every final, clean up.

    One in ten is cancelled mid-stream; one in twenty is cancelled again after
    its final, which marks the next stream of that id (R27): the marks stay
    bounded by the id pool because the ids come back.
    """
    for rid in rids:
        rcv.load_async(rid)
    for i in range(CHUNKS + 1):
        for rid in rids:
            if i == 1 and rnd.random() < 0.1:
                snd.cancel_sender(rid)
            snd.save_async(rid, {"i": i, "blob": "x" * rnd.choice((10, 1000))}, i == CHUNKS)
    pending, deadline = set(rids), time.monotonic() + 30.0
    while pending:
        for rid, got in rcv.poll_ready().items():
            if got[-1]["finished"]:
                pending.discard(rid)
        if time.monotonic() > deadline:
            raise RuntimeError(f"churn: the finals of {sorted(pending)} did not come in 30 s")
        time.sleep(0.0005)
    for rid in rids:
        rcv.cleanup_receiver(rid)
        if rnd.random() < 0.05:
            snd.cancel_sender(rid)


def run_churn(
    connector: str, seconds: float = 300.0, interval: float = 10.0, log: TextIO = sys.stdout
) -> dict[str, Any]:
    """Churn for *seconds*, sampling every *interval*; returns the samples and the verdict."""
    psutil = importlib.import_module("psutil")  # untyped: imported by name
    proc, rnd, samples = psutil.Process(), random.Random(0), []
    with _store(connector) as (conn, store_size):
        snd = ChunkAdapter(conn, stage_id=0)
        rcv = ChunkAdapter(conn, stage_id=1)
        try:
            start = next_sample = time.monotonic()
            streams = 0
            while True:
                now = time.monotonic()
                if now >= next_sample:
                    s, r = snd.stats(), rcv.stats()
                    sample = Sample(
                        t=round(now - start, 1),
                        rss_mib=round(proc.memory_info().rss / 2**20, 1),
                        store=store_size(),
                        streams=streams,
                        open_streams=s.open_streams,
                        cancel_marks=s.cancel_marks,
                        registered=r.registered,
                        save_pending=s.save_pending,
                    )
                    samples.append(sample)
                    print(json.dumps({"connector": connector, **asdict(sample)}), file=log)
                    next_sample += interval
                    if now - start >= seconds:
                        break
                rids = rnd.sample(range(IDS), BATCH)
                _batch(snd, rcv, [f"req{n}" for n in rids], rnd)
                streams += BATCH
        finally:
            snd.stop()
            rcv.stop()
    verdict = _verdict(samples)
    print(f"churn {connector}: {verdict['summary']}", file=log)
    return {"connector": connector, "samples": [asdict(s) for s in samples], **verdict}


def _verdict(samples: list[Sample]) -> dict[str, Any]:
    if len(samples) < 3:
        return {"flat": None, "summary": "too short to judge (fewer than 3 samples)"}
    base, last = samples[len(samples) // 3], samples[-1]
    growth = last.rss_mib - base.rss_mib
    rss_flat = growth < max(8.0, 0.1 * base.rss_mib)
    bound = IDS * (CHUNKS + 1)
    bounded = all(
        s.store <= bound and s.open_streams <= IDS and s.cancel_marks <= IDS for s in samples
    )
    flat = rss_flat and bounded
    return {
        "flat": flat,
        "summary": (
            f"{'FLAT' if flat else 'GROWING'}: RSS {base.rss_mib} -> {last.rss_mib} MiB "
            f"after warm-up, store at most {max(s.store for s in samples)} (bound {bound}), "
            f"{last.streams} streams"
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chunk_adapter.bench.churn")
    parser.add_argument("--connector", action="append", choices=tuple(CONNECTORS))
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--interval", type=float, default=10.0)
    args = parser.parse_args(argv)
    results = [
        run_churn(name, args.seconds, args.interval) for name in args.connector or list(CONNECTORS)
    ]
    return 0 if all(r["flat"] is not False for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
