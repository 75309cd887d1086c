"""The reference adapter's counters: stats() after scripted scenarios (reference only).

Each scenario is deterministic (scripted faults, gated builds), so every
counter has one exact expected value.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors import FaultyConnector, MemoryConnector
from chunk_adapter.stats import AdapterStats
from tests.unit._rig import Rig, chunk
from tests.unit._wait import wait_until


def _wait_stats(adapter: ChunkAdapter, what: str, **expected: int) -> AdapterStats:
    def matches() -> bool:
        stats = adapter.stats()
        return all(getattr(stats, k) == v for k, v in expected.items())

    wait_until(matches, what=what, detail=lambda: repr(adapter.stats()))
    return adapter.stats()


@pytest.mark.rule("R7", "R8", "R10")
def test_sender_counters(rig: Rig, mem: MemoryConnector) -> None:
    faulty = FaultyConnector(mem)
    faulty.fail_next("put", "a_0_1", times=3)  # a1 dropped after 3 tries; a2 takes id 1
    faulty.fail_next("put", "a_0_2", times=4)  # the final fails 4 times, then goes out
    builder = rig.gated_builder(lambda rid, snap, fin: None if snap == "skip" else snap)
    builder.fail(predicate=lambda rid, snap, fin: snap in ("bf", "cf"), times=2)
    snd = rig.reference(faulty, stage_id=0, build_payload=builder)
    for payload in ("a0", "a1", "a2", "skip", "bf"):
        snd.save_async("a", payload, False)
    snd.save_async("a", "af", True)
    stats = _wait_stats(snd, "the final of a", finals_put=1)
    assert mem.puts == ["a_0_0", "a_0_1", "a_0_2"]
    assert mem.get("a_0_1") == chunk("a2")
    assert (
        stats.chunks_put,
        stats.put_failures,
        stats.put_retries,
        stats.dropped_put_failed,
        stats.build_failures,
        stats.dropped_build_failed,
        stats.skipped_none,
        stats.dropped_cancelled,
    ) == (3, 7, 6, 1, 1, 1, 1, 0), stats

    calls = builder.calls
    snd.cancel_sender("b")
    snd.save_async("b", "b0", False)
    snd.save_async("b", "b1", False)
    snd.save_async("b", "bend", True)
    stats = _wait_stats(snd, "the final of b", finals_put=2)
    assert stats.dropped_cancelled == 2 and stats.chunks_put == 4, stats
    assert builder.calls == calls, "a cancelled request's chunks must not be built"

    snd.save_async("c", "cf", True)  # the build of a final fails: put with None
    stats = _wait_stats(snd, "the final of c", finals_put=3)
    assert stats.build_failures == 2 and stats.dropped_build_failed == 1, stats
    assert mem.get("c_0_0") == chunk(None, True)
    assert stats.dropped == 1 + 1 + 2
    assert stats.save_queue_depth == 0


@pytest.mark.rule("R13", "R16")
def test_receiver_counters(rig: Rig) -> None:
    mem = MemoryConnector()
    faulty = FaultyConnector(mem)
    gated = rig.gated_connector(faulty)
    rcv = rig.reference(gated, stage_id=1)
    mem.put("r_0_0", chunk(0))
    mem.put("r_0_1", chunk(1, True))
    rcv.load_async("r")
    stats = _wait_stats(rcv, "both chunks of r", committed=2)
    assert (stats.gets, stats.gets_empty, stats.get_failures) == (2, 0, 0), stats
    assert (stats.registered, stats.ready_chunks, stats.poll_queue_depth) == (1, 2, 0), stats
    assert rcv.poll_ready() == {"r": [chunk(0), chunk(1, True)]}
    assert rcv.stats().ready_chunks == 0

    faulty.fail_next("get", "g_0_0", times=2)
    mem.put("g_0_0", chunk("g", True))
    rcv.load_async("g")
    stats = _wait_stats(rcv, "the chunk of g", committed=3)
    assert (stats.gets, stats.get_failures, stats.gets_empty) == (5, 2, 0), stats

    # A value fetched for a registration cleaned up meanwhile is discarded.
    mem.put("s_0_0", chunk("stale"))
    gate = gated.hold_get("s_0_0")
    rcv.load_async("s")
    assert gate.wait_started()
    rcv.cleanup_receiver("s")
    gate.release()
    stats = _wait_stats(rcv, "the stale value", stale_discarded=1)
    assert stats.committed == 3 and stats.stale_entries_dropped == 0, stats

    # A queued entry of a cleaned-up registration is dropped when it is reached.
    held = gated.hold_get("x_0_0")
    rcv.load_async("x")
    assert held.wait_started()
    rcv.load_async("y")  # queued behind x's in-flight get
    rcv.cleanup_receiver("y")
    held.release()
    _wait_stats(rcv, "y's queue entry to be dropped", stale_entries_dropped=1)
    assert rcv.stats().registered == 3  # r, g (finished, not cleaned up) and x


def test_stats_is_a_frozen_snapshot(rig: Rig, mem: MemoryConnector) -> None:
    adapter = rig.reference(mem, stage_id=1)
    stats = adapter.stats()
    assert stats == AdapterStats()
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.gets = 5  # type: ignore[misc]
    as_dict: dict[str, Any] = stats.as_dict()
    assert set(as_dict) == {f.name for f in dataclasses.fields(AdapterStats)}
    assert all(v == 0 for v in as_dict.values())


def test_save_queue_depth_counts_items_behind_a_held_build(rig: Rig, mem: MemoryConnector) -> None:
    builder = rig.gated_builder()
    snd = rig.reference(mem, stage_id=0, build_payload=builder)
    gate = builder.hold("r")
    snd.save_async("r", 0, False)
    assert gate.wait_started()
    for i in range(1, 4):
        snd.save_async("r", i, False)
    assert snd.stats().save_queue_depth == 3
    gate.release()
    _wait_stats(snd, "the queue to drain", chunks_put=4, save_queue_depth=0)
