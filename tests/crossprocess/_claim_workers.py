"""Child processes for tests/crossprocess/test_stage_claims.py (spawned, not forked).

Each answers on its pipe what happened: ``("ok", value)`` or ``("refused", message)``
for one connector call, or a sender stage's ``stats()``; a holder then waits for the
parent's ``"exit"`` (or to be killed) so its claim stays live meanwhile.
"""

from __future__ import annotations

import traceback
from dataclasses import asdict
from multiprocessing.connection import Connection
from typing import Any

from chunk_adapter import ChunkAdapter
from chunk_adapter.connectors import NamespaceShared, SharedMemoryConnector

__all__ = ["call_main", "sender_main"]

WAIT = 60.0  # seconds a child waits for its parent's next word before giving up


def call_main(
    namespace: str, call: str, key: str, hold: bool, options: dict[str, Any], pipe: Connection
) -> None:
    """``put`` or ``get`` *key* once on a fresh connector; answer; with *hold*, keep the
    connector (and its claim) until told to exit."""
    try:
        conn = SharedMemoryConnector(namespace, **options)
        try:
            if call == "put":
                conn.put(key, {"data": "child", "finished": True})
                pipe.send(("ok", None))
            else:
                pipe.send(("ok", conn.get(key)))
        except NamespaceShared as exc:
            pipe.send(("refused", str(exc)))
        if hold and pipe.poll(WAIT):
            pipe.recv()
        conn.close()
    except BaseException:
        pipe.send(("error", traceback.format_exc()))


def sender_main(namespace: str, requests: int, chunks: int, tag: str, pipe: Connection) -> None:
    """A sender stage 0 saving *requests* streams of *chunks* chunks (data ``tag``), then
    flushing; answers its ``stats()`` counters as a dict."""
    try:
        conn = SharedMemoryConnector(namespace)
        adapter = ChunkAdapter(conn, stage_id=0)
        try:
            for n in range(chunks):
                for r in range(requests):
                    adapter.save_async(f"req-{r}", {"tag": tag, "n": n}, n == chunks - 1)
            adapter.flush(timeout=WAIT)
            pipe.send(("stats", asdict(adapter.stats())))
        finally:
            adapter.stop()
            conn.close()
    except BaseException:
        pipe.send(("error", traceback.format_exc()))
