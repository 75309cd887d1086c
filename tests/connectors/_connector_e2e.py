"""An in-process end-to-end run of two adapters over one real connector, oracle-checked.

``run_end_to_end(factory, connector, seed)`` interleaves a seeded workload of
streams (some cancelled, some with chunks saved after the cancel) over a
sender and a receiver adapter, both recorded into one History with the
connector's puts and gets, waits (bounded) for every final, and returns the
history for ``chunk_adapter.oracles.assert_ok(..., quiescent=True)``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from chunk_adapter.bed.waiting import wait_until
from chunk_adapter.connectors import RecordingConnector
from chunk_adapter.factory import AdapterFactory
from chunk_adapter.history import History
from chunk_adapter.oracles import RecordedAdapter

__all__ = ["run_end_to_end", "wait_for"]

POLL = 0.002  # pacing of polling loops; every loop is bounded by a deadline


def run_end_to_end(
    factory: AdapterFactory,
    connector: Any,
    seed: int,
    *,
    streams: int = 12,
    deadline: float = 20.0,
    **options: Any,
) -> tuple[History, dict[str, list[dict[str, Any]]]]:
    rnd = random.Random(seed)
    history = History()
    conn = RecordingConnector(connector, history)
    snd = RecordedAdapter(factory(conn, stage_id=1, **options), history, "sender")
    rcv = RecordedAdapter(factory(conn, stage_id=2, **options), history, "receiver")
    got: dict[str, list[dict[str, Any]]] = {}
    try:
        plan = {f"s{i}": rnd.randint(1, 8) for i in range(streams)}
        cancel_at = {rid: rnd.randint(0, n) for rid, n in plan.items() if rnd.random() < 0.3}
        for rid in plan:
            if rnd.random() < 0.5:
                rcv.load_async(rid)
        sent = dict.fromkeys(plan, 0)
        open_ids = list(plan)
        while open_ids:
            rid = rnd.choice(open_ids)
            i = sent[rid]
            if cancel_at.get(rid) == i:
                snd.cancel_sender(rid)
            final = i == plan[rid]
            payload = {"rid": rid, "i": i, "blob": rnd.randbytes(rnd.choice([0, 10, 3000]))}
            snd.save_async(rid, payload, final)
            sent[rid] += 1
            if final:
                open_ids.remove(rid)
            if rnd.random() < 0.2:
                _collect(rcv.poll_ready(), got)
        for rid in plan:
            rcv.load_async(rid)  # idempotent for the ones registered already (R12)
        end = time.monotonic() + deadline
        while not all(got.get(rid) and got[rid][-1]["finished"] for rid in plan):
            if time.monotonic() > end:
                missing = [r for r in plan if not (got.get(r) and got[r][-1]["finished"])]
                raise AssertionError(
                    f"finals of {missing} did not arrive within {deadline} s (seed={seed})"
                )
            _collect(rcv.poll_ready(), got)
            time.sleep(POLL)
        _collect(rcv.poll_ready(), got)
    finally:
        snd.stop()
        rcv.stop()
    return history, got


def _collect(ready: dict[str, list[dict[str, Any]]], got: dict[str, list[dict[str, Any]]]) -> None:
    for rid, values in ready.items():
        got.setdefault(rid, []).extend(values)


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    """Poll *predicate* until true; fail naming *what* after *timeout* seconds."""
    wait_until(predicate, timeout, what, interval=POLL)
