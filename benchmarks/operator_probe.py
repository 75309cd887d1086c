"""The operator probe of the reference adapter's reliability (R25-R29): one figure per point 1-7.

Run it on the code before issue 12 and after, with the same command::

    git worktree add /tmp/before fe94b1e
    PYTHONPATH=/tmp/before/src python benchmarks/operator_probe.py   # before
    PYTHONPATH=src python benchmarks/operator_probe.py               # after

It prints one JSON line per figure. It uses only what both versions have
(features the old code lacks are detected, never assumed), a namespace and
Redis prefixes of its own, and a throwaway redis-server when one is installed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import resource
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors import MemoryConnector, SharedMemoryConnector
from chunk_adapter.connectors.redis_server import RedisServer, redis_server_path

RAN: list[int] = []  # set by a planted pickle when it is loaded


def _ran() -> int:
    RAN.append(1)
    return 0


class Planted:
    """Unpickling this runs _ran(): what a planted payload would do."""

    def __reduce__(self) -> tuple[Callable[[], int], tuple[()]]:
        return (_ran, ())


def emit(point: int, figure: str, value: Any) -> None:
    print(json.dumps({"point": point, "figure": figure, "value": value}), flush=True)


def ns() -> str:
    return "p" + uuid.uuid4().hex[:10]


def shm(namespace: str, **kw: Any) -> Any:
    return SharedMemoryConnector(namespace, **kw)


def until(pred: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            return False
        time.sleep(0.002)
    return True


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


# ------------------------------------------------------------------ point 1
def point1(redis_url: str | None) -> None:
    from chunk_adapter.connectors import PICKLE

    name = ns()
    attacker = shm(name, serializer=PICKLE)  # writes raw pickle bytes under the key
    receiver = shm(name)  # the default serializer
    attacker.put("r_0_0", {"data": Planted(), "finished": True})
    RAN.clear()
    with contextlib.suppress(Exception):
        receiver.get("r_0_0")
    emit(1, "shm: planted pickle runs code in a default receiver", len(RAN))
    receiver.purge()
    if redis_url:
        from chunk_adapter.connectors import RedisConnector

        bad = RedisConnector(url=redis_url, prefix="probe1", serializer=PICKLE)
        good = RedisConnector(url=redis_url, prefix="probe1")
        bad.put("r_0_0", {"data": Planted(), "finished": True})
        RAN.clear()
        with contextlib.suppress(Exception):
            good.get("r_0_0")
        emit(1, "redis: planted pickle runs code in a default receiver", len(RAN))
        good.purge()


# ------------------------------------------------------------------ point 2
def point2() -> None:
    name = ns()
    conn = shm(name)
    snd = ChunkAdapter(conn, stage_id=0)
    rcv = ChunkAdapter(conn, stage_id=1)
    rids = [f"ok{i}" for i in range(10)]
    for r in rids:
        rcv.load_async(r)
    snd.save_async("bad", lambda: None, True)  # no serializer stores a function
    for i in range(11):
        for r in rids:
            snd.save_async(r, {"i": i}, i == 10)
    got = {r: 0 for r in rids}
    end = time.monotonic() + 5
    while time.monotonic() < end and sum(got.values()) < 110:
        for r, chunks in rcv.poll_ready().items():
            got[r] += len(chunks)
        time.sleep(0.005)
    emit(
        2,
        "unsendable final: chunks of 10 other requests received in 5 s (of 110)",
        sum(got.values()),
    )
    snd.stop()
    rcv.stop()
    conn.purge()


# ------------------------------------------------------------------ point 3
def point3() -> None:
    conn = MemoryConnector()
    snd = ChunkAdapter(conn, stage_id=0)
    for i in range(10_000):
        snd.save_async(f"r{i % 100}", i, False)
    snd.stop()
    time.sleep(1.0)  # anything still in flight lands
    lost = 10_000 - len(conn.keys())
    counted = getattr(snd.stats(), "abandoned", None)
    emit(3, "stop() with 10k queued (memory): chunks lost / counted in stats", [lost, counted])
    if "drain_timeout" in ChunkAdapter.stop.__code__.co_varnames:
        conn = MemoryConnector()
        snd = ChunkAdapter(conn, stage_id=0)
        for i in range(10_000):
            snd.save_async(f"r{i % 100}", i, False)
        snd.stop(drain_timeout=60)
        emit(3, "stop(drain_timeout=60) with 10k queued: chunks lost", 10_000 - len(conn.keys()))
    conn = MemoryConnector()
    with ChunkAdapter(conn, stage_id=0) as snd:
        for i in range(400):
            snd.save_async(f"w{i % 4}", i, i >= 396)
    time.sleep(1.0)
    emit(
        3,
        "README's with-pattern: chunks lost of 400 saved just before the block ends",
        400 - len(conn.keys()),
    )


# ------------------------------------------------------------------ point 4
def reuse(conn: Any, **rcv_options: Any) -> list[Any]:
    snd = ChunkAdapter(conn, stage_id=0)
    rcv = ChunkAdapter(conn, stage_id=1, **rcv_options)
    got: list[Any] = []

    def pump() -> list[Any]:
        for chunk in rcv.poll_ready().get("r", []):
            got.append(chunk["data"])
        return got

    rcv.load_async("r")
    for d in ("A0", "A1"):
        snd.save_async("r", d, False)
    until(lambda: len(pump()) >= 2, 10)
    rcv.cleanup_receiver("r")
    rcv.load_async("r")
    got.clear()
    for d in ("A2", "A3", "A4", "A-final", "B0", "B1", "B2", "B3", "B-final"):
        snd.save_async("r", d, d.endswith("final"))
    until(lambda: bool(pump()) and str(got[-1]).endswith("final"), 15)
    snd.stop()
    rcv.stop()
    return got


def point4() -> None:
    conn = shm(ns())
    emit(4, "shm, reused id after cleanup: the new stream received", reuse(conn))
    conn.purge()
    conn = shm(ns())
    if "discard_leftovers" in ChunkAdapter.__init__.__code__.co_varnames:
        emit(4, "... with discard_leftovers=True", reuse(conn, discard_leftovers=True))
    conn.purge()


# ------------------------------------------------------------------ point 5
class Outage:
    def __init__(self, inner: Any) -> None:
        self.inner, self.down = inner, threading.Event()
        self.put_retry_window = getattr(inner, "put_retry_window", None)

    def put(self, key: str, value: Any) -> None:
        if self.down.is_set():
            raise ConnectionError("the store is down")
        self.inner.put(key, value)

    def get(self, key: str) -> Any:
        return self.inner.get(key)


def point5() -> None:
    name = ns()
    inner = shm(name)
    conn = Outage(inner)
    snd = ChunkAdapter(conn, stage_id=0)
    rcv = ChunkAdapter(conn, stage_id=1)
    rcv.load_async("r")
    conn.down.set()
    for i in range(100):
        snd.save_async("r", i, False)
    snd.save_async("r", "end", True)
    time.sleep(0.5)  # a 500 ms outage
    conn.down.clear()
    got: list[Any] = []

    def pump() -> bool:
        for chunk in rcv.poll_ready().get("r", []):
            got.append(chunk["data"])
        return bool(got) and got[-1] == "end"

    until(pump, 30)
    emit(5, "500 ms outage (shm): non-final chunks lost of 100", 100 - (len(got) - 1))
    snd.stop()
    rcv.stop()
    inner.purge()
    options = (
        {"stall_timeout": 0.3}
        if "stall_timeout" in ChunkAdapter.__init__.__code__.co_varnames
        else {}
    )
    rcv = ChunkAdapter(MemoryConnector(), stage_id=1, **options)
    rcv.load_async("never-sent")
    time.sleep(1.0)
    emit(
        5,
        "a registration whose chunk never comes: reported stalls after 1 s",
        getattr(rcv.stats(), "stalls_reported", None),
    )
    rcv.stop()


# ------------------------------------------------------------------ point 6
def _crash_sender(namespace: str, pipe: Any) -> None:
    conn = SharedMemoryConnector(namespace)
    snd = ChunkAdapter(conn, stage_id=0)
    for i in range(2000):
        snd.save_async(f"c{i % 20}", {"i": i}, False)
    until(lambda: len(conn.segments()) >= 1000, 60)
    pipe.send(len(conn.segments()))
    time.sleep(120)


def _opener(namespace: str, pipe: Any) -> None:
    pipe.send(len(SharedMemoryConnector(namespace).segments()))


def point6() -> None:
    snd = ChunkAdapter(MemoryConnector(), stage_id=0)
    for i in range(200):
        snd.save_async(f"q{i}", i, True)
    until(lambda: snd.stats().save_queue_depth == 0, 10)
    time.sleep(0.2)
    before = rss_mib()
    for n in range(100_000):
        snd.cancel_sender(f"q{n % 200}" if n < 200 else f"done{n}")
    emit(6, "100k cancel_sender after finals: RSS growth MiB", round(rss_mib() - before, 1))
    conn = MemoryConnector(consume_on_get=True)
    before = rss_mib()
    for i in range(1_000_000):
        conn.put(f"k{i}", {"data": None, "finished": True})
        conn.get(f"k{i}")
    emit(
        6,
        "memory connector, 1M puts: put keys remembered / RSS growth MiB",
        [len(conn.puts), round(rss_mib() - before, 1)],
    )
    ctx = multiprocessing.get_context("spawn")
    name = ns()
    a, b = ctx.Pipe()
    proc = ctx.Process(target=_crash_sender, args=(name, b), daemon=True)
    proc.start()
    if a.poll(120):  # the sender has put its segments: kill it now
        a.recv()
    proc.kill()
    proc.join()
    left = len(
        SharedMemoryConnector(name, **({"reclaim": False} if _has_reclaim() else {})).segments()
    )
    a2, b2 = ctx.Pipe()
    opener = ctx.Process(target=_opener, args=(name, b2), daemon=True)
    opener.start()
    after_start = a2.recv() if a2.poll(120) else -1
    opener.join()
    emit(6, "crashed sender (kill -9): segments left / after the next start", [left, after_start])
    SharedMemoryConnector(name).purge()


def _has_reclaim() -> bool:
    return "reclaim" in SharedMemoryConnector.__init__.__code__.co_varnames


def point6_churn(seconds: float) -> None:
    name = ns()
    conn = shm(name)
    snd = ChunkAdapter(conn, stage_id=0)
    rcv = ChunkAdapter(conn, stage_id=1)
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        rids = [f"id{(n + j) % 32}" for j in range(8)]
        n += 8
        for r in rids:
            rcv.load_async(r)
            for i in range(4):
                snd.save_async(r, i, False)
            if n % 3 == 0:
                snd.cancel_sender(r)
            snd.save_async(r, "end", True)
        left = set(rids)
        deadline = time.monotonic() + 5
        while left and time.monotonic() < deadline:
            for r, chunks in rcv.poll_ready().items():
                if any(c["finished"] for c in chunks):
                    left.discard(r)
            time.sleep(0.001)
        for r in rids:
            rcv.cleanup_receiver(r)
    emit(6, f"shm churn {seconds:.0f} s with reused ids: segments left", len(conn.segments()))
    snd.stop()
    rcv.stop()
    conn.purge()


# ------------------------------------------------------------------ point 7
def _other_pipeline(namespace_default: bool, pipe: Any) -> None:
    os.setsid()  # an unrelated pipeline: its own session and process group
    conn = SharedMemoryConnector()
    conn.put("iso_0_0", {"data": "theirs", "finished": True})
    pipe.send(conn.namespace)
    pipe.poll(60)  # alive until the parent has looked (an exiting child may unlink it)


def point7(redis_url: str | None) -> None:
    if redis_url:
        from chunk_adapter.connectors import RedisConnector

        job = RedisConnector(url=redis_url, prefix="job")
        job1 = RedisConnector(url=redis_url, prefix="job1")
        job.put("1x_0_0", {"data": "job's", "finished": True})
        emit(7, "redis prefix job1 reads a key of prefix job", job1.get("x_0_0") is not None)
        job1.put("y_0_0", {"data": "job1's", "finished": True})
        emit(7, "redis: job.purge() deletes job1's keys", job.purge() > 0 and not job1.keys())
        job.purge()
        job1.purge()
    ctx = multiprocessing.get_context("spawn")
    a, b = ctx.Pipe()
    proc = ctx.Process(target=_other_pipeline, args=(True, b), daemon=True)
    proc.start()
    theirs = a.recv() if a.poll(60) else None
    mine = SharedMemoryConnector()
    emit(
        7,
        "shm default namespace: an unrelated pipeline's chunk is received",
        mine.get("iso_0_0") is not None,
    )
    a.send("done")
    proc.join()
    if theirs:
        SharedMemoryConnector(theirs).purge()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", default="1,2,3,4,5,6,7")
    parser.add_argument("--churn-seconds", type=float, default=30.0)
    args = parser.parse_args()
    points = {int(p) for p in args.points.split(",")}
    import chunk_adapter

    print(json.dumps({"code": os.path.dirname(chunk_adapter.__file__)}), flush=True)
    server = RedisServer().start() if redis_server_path() else None
    url = server.url if server else None
    try:
        for p, fn in (
            (1, lambda: point1(url)),
            (2, point2),
            (3, point3),
            (4, point4),
            (5, point5),
            (6, point6),
            (6, lambda: point6_churn(args.churn_seconds)),
            (7, lambda: point7(url)),
        ):
            if p in points:
                try:
                    fn()
                except Exception as exc:  # a probe that breaks on one version is a figure too
                    emit(p, f"probe {getattr(fn, '__name__', '?')} raised", repr(exc)[:200])
    finally:
        if server:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
