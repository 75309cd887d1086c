"""Child processes for the crash-reclaim tests (spawned, not forked).

:func:`sender_main` streams through a :class:`SharedMemoryConnector` with no
receiver, so its segments pile up, reports how many are committed, then waits
for the parent: to be killed (``kill -9``) or told to return (a normal exit,
without ``close()``). :func:`opener_main` is the next start: it makes a
connector on the namespace and reports how many segments are left.
"""

from __future__ import annotations

import time
from multiprocessing.connection import Connection

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors.shm import SharedMemoryConnector

__all__ = ["opener_main", "sender_main"]

STREAMS, CHUNKS = 6, 20


def sender_main(namespace: str, pipe: Connection) -> None:
    conn = SharedMemoryConnector(namespace)
    snd = ChunkAdapter(conn, stage_id=0)
    for i in range(CHUNKS):  # mid-stream: no final is ever saved
        for r in range(STREAMS):
            snd.save_async(f"crash{r}", {"r": r, "i": i, "blob": "x" * 512}, False)
    deadline = time.monotonic() + 60
    while len(conn.segments(committed=True)) < STREAMS * CHUNKS // 2:
        if time.monotonic() > deadline:
            pipe.send(("error", f"only {len(conn.segments())} segments after 60 s"))
            return
        time.sleep(0.002)
    pipe.send(("putting", len(conn.segments())))
    if pipe.poll(120) and pipe.recv() == "exit":  # else the parent kills us meanwhile
        snd.stop(drain_timeout=60)
        pipe.send(("exiting", len(conn.segments())))  # no close(): the values stay


def opener_main(namespace: str, pipe: Connection) -> None:
    conn = SharedMemoryConnector(namespace)  # reclaim=True: the next start
    pipe.send(("left", len(conn.segments())))
