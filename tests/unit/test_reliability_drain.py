"""Issue 12 point 3 and R26: a graceful drain, and nothing abandoned in silence.

Before: ``with ChunkAdapter(...)`` lost every chunk saved just before the block
ended (400/400), stop() threw away a queue of 10k chunks with no counter and no
log, and waiting for ``save_queue_depth == 0`` still lost the in-flight final.
Now ``flush(timeout)`` returns once everything saved before it was put or
counted, ``__exit__`` drains (bounded by ``exit_drain_timeout``),
``stop(drain_timeout=...)`` drains first, and what stop() gives up is counted
(``abandoned``, ``abandoned_finals``) and logged at WARNING.
"""

from __future__ import annotations

import logging

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors import GatedConnector, MemoryConnector
from tests.unit._rig import Rig
from tests.unit._wait import Inbox, holds_for


@pytest.mark.rule("R26")
def test_the_with_block_puts_everything_saved_before_it_ends() -> None:
    mem = MemoryConnector()
    with ChunkAdapter(mem, stage_id=0) as snd:
        for i in range(399):
            snd.save_async(f"r{i % 7}", {"i": i, "blob": "x" * 100}, False)
        snd.save_async("last", "end", True)
    assert len(mem.puts) == 400, f"{400 - len(mem.puts)} of 400 chunks lost at __exit__"
    assert snd.stats().abandoned == 0


@pytest.mark.rule("R26")
def test_flush_waits_for_the_in_flight_final(rig: Rig, mem: MemoryConnector) -> None:
    gated = rig.gated_connector(mem)
    snd = rig.reference(gated, stage_id=0)
    gate = gated.hold_put("r_0_0")
    snd.save_async("r", "end", True)
    assert gate.wait_started()
    stats = snd.stats()
    assert (stats.save_queue_depth, stats.save_in_flight, stats.save_pending) == (0, 1, 1)
    assert snd.flush(0.05) is False, "the final is still in flight: not drained"
    gate.release()
    assert snd.flush(5.0) is True
    assert mem.puts == ["r_0_0"] and snd.stats().save_pending == 0


@pytest.mark.rule("R26")
def test_stop_with_a_drain_timeout_puts_the_queue_first(rig: Rig, mem: MemoryConnector) -> None:
    builder = rig.gated_builder()
    snd = rig.reference(mem, stage_id=0, build_payload=builder)
    gate = builder.hold("r")
    for i in range(50):
        snd.save_async("r", i, i == 49)
    assert gate.wait_started()
    gate.release()  # stop() must drain the 49 still queued before it stops the threads
    snd.stop(drain_timeout=10.0)
    assert mem.put_count == 50 and snd.stats().abandoned == 0


@pytest.mark.rule("R26", "R18")
def test_what_stop_abandons_is_counted_and_logged(
    rig: Rig, mem: MemoryConnector, caplog: pytest.LogCaptureFixture
) -> None:
    builder = rig.gated_builder()
    snd = rig.reference(mem, stage_id=0, build_payload=builder, join_timeout=0.1)
    gate = builder.hold("a")
    snd.save_async("a", 0, False)  # held inside its build
    assert gate.wait_started()
    for rid in ("a", "b", "c"):
        snd.save_async(rid, 1, False)
        snd.save_async(rid, 2, True)
    with caplog.at_level(logging.WARNING, logger="chunk_adapter"):
        snd.stop()  # the build stays blocked: the SAVE thread is abandoned
    stats = snd.stats()
    assert (stats.abandoned, stats.abandoned_finals) == (7, 3), stats
    assert stats.save_queue_depth == 0
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("abandoned 7 saved chunk(s) (3 final(s))" in m for m in warned), warned
    assert any("flush(timeout)" in m for m in warned), "the message names the fix"
    gate.release()  # the build returns after stop(): its chunk is not put, nor counted twice
    holds_for(lambda: mem.puts == [], 0.1, "no put after stop()")
    assert snd.stats().abandoned == 7


@pytest.mark.rule("R26")
def test_a_stop_that_abandons_nothing_says_nothing(
    mem: MemoryConnector, caplog: pytest.LogCaptureFixture
) -> None:
    snd = ChunkAdapter(mem, stage_id=0, src_stage_id=0)
    inbox = Inbox(snd)
    snd.load_async("r")
    snd.save_async("r", 1, True)
    inbox.wait_final("r")
    with caplog.at_level(logging.WARNING, logger="chunk_adapter"):
        snd.stop()
    assert snd.stats().abandoned == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.rule("R26")
def test_exit_drains_within_its_bound_then_stops(rig: Rig) -> None:
    gated = GatedConnector(MemoryConnector())
    snd = ChunkAdapter(gated, stage_id=0, exit_drain_timeout=0.2, join_timeout=0.1)
    gate = gated.hold_put("r_0_0")
    try:
        with snd:
            snd.save_async("r", 0, True)
            assert gate.wait_started()
        # the put stays held: __exit__ gave up after 0.2 s and stop() counted it
        assert snd.stats().abandoned == 1
    finally:
        gate.release()
        snd.stop()


def test_flush_after_stop_is_true_only_if_nothing_was_abandoned(rig: Rig) -> None:
    idle = ChunkAdapter(MemoryConnector(), stage_id=0)
    idle.stop()
    assert idle.flush(10.0) is True, "nothing was saved: nothing is missing"
    gated = rig.gated_connector(MemoryConnector())
    snd = rig.reference(gated, stage_id=0, join_timeout=0.05)
    gate = gated.hold_put("r_0_0")
    snd.save_async("r", 0, False)
    snd.save_async("r", 1, True)
    assert gate.wait_started()
    snd.stop()
    assert snd.flush(10.0) is False, "answered at once: the abandoned chunks never come"
