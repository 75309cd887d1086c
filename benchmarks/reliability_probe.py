"""Issue 27's operator figures for the SAVE side, on real connectors (shm, Redis).

Run it on two trees with the same command and compare the JSON lines::

    git worktree add /tmp/before <rev>
    PYTHONPATH=/tmp/before/src python benchmarks/reliability_probe.py   # before
    PYTHONPATH=src python benchmarks/reliability_probe.py               # after

Figures: ``hol`` — a request id reused while its previous stream still sits
unconsumed (the new stream's first put meets the old value: a transient
``KeyOccupied``), then an unrelated request of 11 chunks: how many of them its
receiver gets within 10 s (point 1). ``burst`` — N requests x 5 chunks saved
at once, then leaving ``with`` (its 5 s drain): how many finals the receivers
get (point 6). ``backlog`` — one request saving 1,000,000 chunks with the
``max_save_queue`` option when the tree has it: how many saves were queued at
most, how many refused, and the memory it took (point 7). ``share`` — two
pipelines (a sender process and a receiver process each) on one namespace /
prefix, as two pipelines started from one parent share the default namespace,
saving the same 20 request ids x 21 chunks at once: chunks each receiver got
from the *other* pipeline, whole streams it got from it, and what each sender
was refused (point 4). Each probe uses a namespace / Redis prefix of its own
and a throwaway redis-server.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from operator_probe import rss_mib, until  # this folder is on sys.path when run as a script

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors import SharedMemoryConnector
from chunk_adapter.connectors.redis_server import RedisServer, redis_server_path


def emit(figure: str, connector: str, value: Any, **extra: Any) -> None:
    print(json.dumps({"figure": figure, "connector": connector, "value": value, **extra}))


@contextlib.contextmanager
def connectors(redis_url: str | None) -> Iterator[list[tuple[str, Callable[[], Any]]]]:
    """(name, make) per real connector; each make gives a fresh namespace / prefix."""
    made: list[Any] = []

    def shm() -> Any:
        conn = SharedMemoryConnector("r" + uuid.uuid4().hex[:10])
        made.append(conn)
        return conn

    out: list[tuple[str, Callable[[], Any]]] = [("shm", shm)]
    if redis_url:
        from chunk_adapter.connectors import RedisConnector

        def redis() -> Any:
            conn = RedisConnector(url=redis_url, prefix="p" + uuid.uuid4().hex[:8])
            made.append(conn)
            return conn

        out.append(("redis", redis))
    try:
        yield out
    finally:
        for conn in made:
            with contextlib.suppress(Exception):
                conn.purge()


def hol(name: str, make: Callable[[], Any]) -> None:
    """Point 1: an unrelated request's chunks while a reused id's put keeps failing."""
    conn = make()
    snd = ChunkAdapter(conn, stage_id=0)
    rcv = ChunkAdapter(conn, stage_id=1)
    try:
        snd.save_async("reused", "old", True)  # nobody consumes it
        until(lambda: snd.stats().finals_put == 1, 10)
        snd.save_async("reused", "new", True)  # its key still holds the old stream
        rcv.load_async("other")
        for i in range(11):
            snd.save_async("other", i, i == 10)
        got = 0
        end = time.monotonic() + 10
        while time.monotonic() < end and got < 11:
            got += len(rcv.poll_ready().get("other", []))
            time.sleep(0.005)
        stats = snd.stats()
        emit("hol: unrelated request's chunks received in 10 s (of 11)", name, got,
             reused_put_failures=stats.put_failures)  # fmt: skip
    finally:
        snd.stop()
        rcv.stop()


def burst(name: str, make: Callable[[], Any], requests: int) -> None:
    """Point 6: a burst ended by ``with``: how many finals arrive."""
    conn = make()
    rids = [f"b{i}" for i in range(requests)]
    rcv = ChunkAdapter(conn, stage_id=1)
    for r in rids:
        rcv.load_async(r)
    start = time.monotonic()
    with ChunkAdapter(conn, stage_id=0) as snd:
        for c in range(5):
            for r in rids:
                snd.save_async(r, {"c": c}, c == 4)
    left = time.monotonic() - start
    stats = snd.stats()
    finals = 0
    end = time.monotonic() + 30
    while time.monotonic() < end and finals < requests:
        for chunks in rcv.poll_ready().values():
            finals += sum(1 for v in chunks if v.get("finished"))
        time.sleep(0.01)
    rcv.stop()
    emit(f"burst: finals received after leaving `with` (of {requests})", name, finals,
         with_seconds=round(left, 2), abandoned=stats.abandoned,
         abandoned_finals=stats.abandoned_finals)  # fmt: skip


def backlog(chunks: int) -> None:
    """Point 7: one request saving *chunks* chunks as fast as it can."""
    from chunk_adapter.connectors import MemoryConnector

    options: dict[str, Any] = {}
    if "max_save_queue" in inspect.signature(ChunkAdapter).parameters:
        options["max_save_queue"] = 10_000
    before = rss_mib()
    snd = ChunkAdapter(MemoryConnector(consume_on_get=True), stage_id=0, **options)
    deepest = refused = 0
    try:
        for i in range(chunks):
            try:
                snd.save_async("big", i, i == chunks - 1)
            except Exception:  # the bound's refusal, when there is one
                refused += 1
            if i % 1000 == 0:
                deepest = max(deepest, snd.stats().save_queue_depth)
        deepest = max(deepest, snd.stats().save_queue_depth)
        emit(f"backlog: deepest save queue ({chunks} saves)", "memory", deepest,
             refused=refused, rss_growth_mib=round(rss_mib() - before, 1),
             option=options or None)  # fmt: skip
    finally:
        snd.stop()


SHARE_STREAMS, SHARE_CHUNKS = 20, 21


def _open(where: tuple[str, str, str]) -> Any:
    kind, url, name = where
    if kind == "shm":
        return SharedMemoryConnector(name)
    from chunk_adapter.connectors import RedisConnector

    return RedisConnector(url=url, prefix=name)


def _share_sender(where: tuple[str, str, str], tag: str, pipe: Any) -> None:
    conn = _open(where)
    snd = ChunkAdapter(conn, stage_id=0)
    pipe.send("ready")
    pipe.recv()  # both pipelines start at once
    for c in range(SHARE_CHUNKS):
        for r in range(SHARE_STREAMS):
            snd.save_async(f"req-{r}", {"tag": tag, "c": c}, c == SHARE_CHUNKS - 1)
    snd.flush(30)
    stats = snd.stats()
    pipe.send({"finals_failed": stats.finals_failed, "dropped": stats.dropped})
    pipe.recv()  # stay (and hold what it holds) until the receivers are done
    snd.stop()


def _share_receiver(where: tuple[str, str, str], tag: str, pipe: Any) -> None:
    conn = _open(where)
    rcv = ChunkAdapter(conn, stage_id=1)
    for r in range(SHARE_STREAMS):
        rcv.load_async(f"req-{r}")
    pipe.send("ready")
    got: dict[str, list[str]] = {}
    finals = 0
    end = time.monotonic() + 20
    while time.monotonic() < end and finals < SHARE_STREAMS:
        for rid, chunks in rcv.poll_ready().items():
            for v in chunks:
                data = v.get("data")
                got.setdefault(rid, []).append(data.get("tag") if isinstance(data, dict) else "?")
                finals += bool(v.get("finished"))
        time.sleep(0.005)
    rcv.stop()
    foreign = sum(t != tag for tags in got.values() for t in tags)
    whole = sum(bool(tags) and all(t != tag for t in tags) for tags in got.values())
    own = sum(t == tag for tags in got.values() for t in tags)
    pipe.send({"own": own, "foreign": foreign, "foreign_streams": whole, "finals": finals})


def share(name: str, make: Callable[[], Any]) -> None:
    """Point 4: two pipelines on one namespace / prefix, at once."""
    import multiprocessing

    conn = make()
    where = ("shm", "", conn.namespace) if name == "shm" else ("redis", _url(conn), conn.prefix)
    ctx = multiprocessing.get_context("spawn")
    parts = []
    for tag in ("A", "B"):
        for target in (_share_receiver, _share_sender):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=target, args=(where, tag, theirs))
            proc.start()
            assert mine.poll(60) and mine.recv() == "ready"
            parts.append((tag, target, mine, proc))
    for _, target, mine, _ in parts:
        if target is _share_sender:
            mine.send("go")
    results: dict[str, dict[str, Any]] = {}
    for tag, target, mine, _ in parts:
        if target is _share_receiver:
            assert mine.poll(120)
            results[f"receiver {tag}"] = mine.recv()
    for tag, target, mine, _ in parts:
        if target is _share_sender:
            assert mine.poll(120)
            results[f"sender {tag}"] = mine.recv()
            mine.send("done")
    for *_, proc in parts:
        proc.join(30)
    foreign = sum(results[f"receiver {t}"]["foreign"] for t in "AB")
    saved = 2 * SHARE_STREAMS * SHARE_CHUNKS
    emit(f"share: chunks a receiver got from the other pipeline (of {saved} saved)",
         name, foreign, **results)  # fmt: skip


def _url(conn: Any) -> str:
    kw = conn.client.connection_pool.connection_kwargs
    return f"redis://{kw.get('host', '127.0.0.1')}:{kw.get('port', 6379)}/{kw.get('db', 0)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figures", default="hol,burst,backlog")
    parser.add_argument("--burst-requests", type=int, default=10_000)
    parser.add_argument("--backlog-chunks", type=int, default=1_000_000)
    args = parser.parse_args()
    wanted = set(args.figures.split(","))
    import chunk_adapter

    print(json.dumps({"code": os.path.dirname(chunk_adapter.__file__)}), flush=True)
    server = RedisServer().start() if redis_server_path() else None
    try:
        with connectors(server.url if server else None) as makers:
            for name, make in makers:
                if "hol" in wanted:
                    hol(name, make)
                if "burst" in wanted:
                    burst(name, make, args.burst_requests)
                if "share" in wanted:
                    share(name, make)
        if "backlog" in wanted:
            backlog(args.backlog_chunks)
    finally:
        if server:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
