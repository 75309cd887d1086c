"""Issue 27 points 6 and 7 (R26): an ending drain delivers the finals; a bounded queue.

Before: leaving ``with`` after a burst of 10,000 requests x 5 chunks on Redis
abandoned every final (finals sit last in the FIFO), and one request saving
1,000,000 chunks queued 621k of them with nothing to bound it.

The drain test runs on a clock of its own that only puts advance (each put
costs 10 ms of it): whether the time left is short is then a fact of the test,
not of the machine's speed.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from chunk_adapter import ChunkAdapter, MemoryConnector, SaveQueueFull, ThreadingRuntime
from chunk_adapter.connectors import GatedConnector
from tests.unit._rig import chunk

PUT_COST = 0.01  # seconds of the test's clock per put


class _PutClock(ThreadingRuntime):
    """Real threads and waits; a monotonic clock that only puts advance."""

    def __init__(self) -> None:
        self.now = 0.0
        self._lock = threading.Lock()  # guards now (the SAVE thread and the test read it)

    def monotonic(self) -> float:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


class _CostlyPuts(MemoryConnector):
    def __init__(self, clock: _PutClock) -> None:
        super().__init__()
        self.clock = clock

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.clock.advance(PUT_COST)
        super().put(key, value)


def _burst(requests: int, chunks: int, drain: float) -> tuple[_CostlyPuts, ChunkAdapter]:
    clock = _PutClock()
    conn = _CostlyPuts(clock)
    gated = GatedConnector(conn)
    gate = gated.hold_put("warm_0_0")  # the burst is queued whole before anything goes
    snd = ChunkAdapter(gated, stage_id=0, runtime=clock, exit_drain_timeout=drain)
    with snd:
        snd.save_async("warm", "w", True)
        assert gate.wait_started(10.0)
        for c in range(chunks):
            for r in range(requests):
                snd.save_async(f"b{r}", c, c == chunks - 1)
        gate.release()
    return conn, snd


@pytest.mark.rule("R26", "R11", "R6")
def test_leaving_with_after_a_burst_delivers_every_final_cutting_what_has_no_time() -> None:
    # 20 requests x 5 chunks = 100 puts = 1.0 s of the clock; the drain has 0.6 s:
    # everything cannot go, the 20 finals (0.2 s) can.
    conn, snd = _burst(requests=20, chunks=5, drain=0.6)
    stats = snd.stats()
    keys_now = conn.keys()  # a MemoryConnector's stored keys (a list)
    stored = {k: conn.get(k) for k in keys_now}
    finals = {k: v for k, v in stored.items() if v and v["finished"]}
    assert len(finals) == 21 and stats.abandoned_finals == 0, stats
    assert stats.dropped_at_exit > 0 and stats.abandoned == 0, stats
    for r in range(20):  # a stream is whole, or cut: its final then says so (data None)
        keys = sorted(k for k in conn.puts if k.startswith(f"b{r}_"))
        assert len(set(keys)) == len(keys), f"b{r}: a key put twice"
        final = stored[f"b{r}_0_{len(keys) - 1}"]
        assert final and final["finished"], f"b{r}: its last key is not its final"
        assert final == (chunk(4, True) if len(keys) == 5 else chunk(None, True)), (r, keys)


@pytest.mark.rule("R26")
def test_an_ending_drain_with_time_enough_cuts_nothing() -> None:
    _, snd = _burst(requests=20, chunks=5, drain=5.0)
    stats = snd.stats()
    assert (stats.dropped_at_exit, stats.abandoned, stats.chunks_put) == (0, 0, 101), stats


@pytest.mark.rule("R26")
def test_flush_alone_never_cuts() -> None:
    """Only an ending drain cuts: a flush that times out leaves every chunk to go."""
    clock = _PutClock()
    snd = ChunkAdapter(_CostlyPuts(clock), stage_id=0, runtime=clock)
    try:
        for c in range(5):
            for r in range(20):
                snd.save_async(f"b{r}", c, c == 4)
        snd.flush(0.3)
        assert snd.flush(60.0)
        stats = snd.stats()
        assert (stats.dropped_at_exit, stats.chunks_put) == (0, 100), stats
    finally:
        snd.stop()


@pytest.mark.rule("R3")
def test_max_save_queue_refuses_a_non_final_at_once_and_always_takes_a_final() -> None:
    gated = GatedConnector(MemoryConnector())
    gate = gated.hold_put("r_0_0")
    snd = ChunkAdapter(gated, stage_id=0, max_save_queue=3)
    try:
        snd.save_async("r", 0, False)  # in flight, held at the gate
        assert gate.wait_started(10.0)
        for i in (1, 2, 3):
            snd.save_async("r", i, False)
        with pytest.raises(SaveQueueFull, match="max_save_queue") as refused:
            snd.save_async("r", 4, False)
        assert "3 chunks wait" in str(refused.value) and "nothing was queued" in str(refused.value)
        snd.save_async("r", "end", True)  # a final is always accepted (R11)
        stats = snd.stats()
        assert (stats.saves_refused, stats.save_queue_depth) == (1, 4), stats
        gate.release()
        assert snd.flush(10.0)
        inner = gated.inner
        assert isinstance(inner, MemoryConnector)
        assert [inner.get(f"r_0_{i}") for i in range(5)] == [
            chunk(0),
            chunk(1),
            chunk(2),
            chunk(3),
            chunk("end", True),
        ]
    finally:
        snd.stop()


@pytest.mark.rule("R21")
@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "10"])
def test_a_bad_max_save_queue_is_refused_naming_it(bad: object) -> None:
    with pytest.raises(ValueError, match="max_save_queue"):
        ChunkAdapter(MemoryConnector(), stage_id=0, max_save_queue=bad)  # type: ignore[arg-type]
