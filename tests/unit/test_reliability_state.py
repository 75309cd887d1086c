"""Issue 12 points 5 and 6: state that outlives its use, and stalls nobody reports.

Cancel marks (R6, decided in docs/contract.md): a ``cancel_sender`` for a
request with no open stream still marks it — R6 and the oracles require that
a cancel between two streams cuts the next one — but it is now visible:
counted (``cancels_idle``, ``cancel_marks``) and logged once at WARNING.
The memory connector's put log is bounded. A registration without progress
for ``stall_timeout`` seconds is reported (R28).
"""

from __future__ import annotations

import logging

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors import MemoryConnector
from tests.unit._rig import Rig, chunk
from tests.unit._wait import Inbox, wait_until


@pytest.mark.rule("R6", "R27")
def test_a_cancel_after_the_final_is_counted_logged_once_and_cuts_the_next_stream(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    snd = rig.reference(MemoryConnector(consume_on_get=True), stage_id=0, src_stage_id=0)
    inbox = Inbox(snd)
    snd.load_async("r")
    snd.save_async("r", "a", True)
    inbox.wait_final("r")
    with caplog.at_level(logging.WARNING, logger="chunk_adapter"):
        for i in range(1000):
            snd.cancel_sender(f"done{i}")  # never saved again: each mark is kept (R6)
        snd.cancel_sender("r")  # r's stream ended: this mark belongs to the next one
    stats = snd.stats()
    assert (stats.cancels_idle, stats.cancel_marks) == (1001, 1001)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "cuts the NEXT stream" in warnings[0].getMessage()
    snd.cleanup_receiver("r")
    inbox.chunks.clear()
    snd.load_async("r")
    snd.save_async("r", "b0", False)
    snd.save_async("r", "b1", True)
    inbox.wait_final("r")
    assert inbox.of("r") == [chunk(None, True)], "R6: the next stream is cut"
    assert snd.stats().cancel_marks == 1000, "the final forgot r's mark (R11)"


@pytest.mark.rule("R6", "R27")
def test_a_cancel_of_an_open_stream_is_not_idle(rig: Rig, mem: MemoryConnector) -> None:
    builder = rig.gated_builder()
    snd = rig.reference(mem, stage_id=0, build_payload=builder)
    gate = builder.hold("r")
    snd.save_async("r", 0, False)
    assert gate.wait_started()
    snd.cancel_sender("r")  # in flight
    snd.save_async("q", 0, False)
    snd.cancel_sender("q")  # queued
    gate.release()
    snd.save_async("r", 1, True)
    snd.save_async("q", 1, True)
    assert snd.flush(5.0)
    stats = snd.stats()
    assert (stats.cancels_idle, stats.cancel_marks, stats.open_streams) == (0, 0, 0), stats


@pytest.mark.rule("R24")
def test_no_per_request_state_survives_finished_streams_and_cleanups(rig: Rig) -> None:
    mem = MemoryConnector(consume_on_get=True)
    snd = rig.reference(mem, stage_id=0)
    rcv = rig.reference(mem, stage_id=1)
    inbox = Inbox(rcv)
    for round_ in range(3):
        rids = [f"r{i}" for i in range(50)]
        for rid in rids:
            rcv.load_async(rid)
            snd.save_async(rid, round_, False)
            snd.save_async(rid, "end", True)
        inbox.wait_final(*rids)
        for rid in rids:
            rcv.cleanup_receiver(rid)
        inbox.chunks.clear()
    assert snd.flush(5.0)
    s, r = snd.stats(), rcv.stats()
    assert (s.open_streams, s.cancel_marks, s.save_pending) == (0, 0, 0), s
    assert (r.registered, r.ready_chunks, r.stalled) == (0, 0, 0), r
    assert not rcv._progress_at and not rcv._awaited
    rcv.check_invariants()
    snd.check_invariants()


@pytest.mark.rule("R24")
def test_the_memory_connectors_put_log_is_bounded() -> None:
    mem = MemoryConnector(consume_on_get=True)
    for i in range(25_000):
        mem.put(f"k{i}", chunk(i))
        mem.get(f"k{i}")
    assert len(mem.puts) == 10_000 and mem.puts[-1] == "k24999"
    assert mem.put_count == 25_000 and len(mem) == 0
    everything = MemoryConnector(history=None)
    for i in range(20_000):
        everything.put(f"k{i}", chunk(i))
    assert len(everything.puts) == 20_000


@pytest.mark.rule("R28")
def test_a_registration_without_progress_is_reported_once(
    mem: MemoryConnector, caplog: pytest.LogCaptureFixture
) -> None:
    rcv = ChunkAdapter(mem, stage_id=1, stall_timeout=0.2)
    inbox = Inbox(rcv)
    try:
        with caplog.at_level(logging.WARNING, logger="chunk_adapter"):
            rcv.load_async("lost")
            rcv.load_async("fine")
            mem.put("fine_0_0", chunk("f", True))
            # The depth moves just before the WARNING is logged: wait for both.
            wait_until(
                lambda: (
                    rcv.stats().stalled == 1
                    and any("no progress" in r.getMessage() for r in caplog.records)
                ),
                5.0,
                "lost to be reported stalled (the depth and the WARNING)",
            )
        stats = rcv.stats()
        assert stats.stalls_reported == 1, "reported once, not once per round"
        warned = [r.getMessage() for r in caplog.records if "no progress" in r.getMessage()]
        assert len(warned) == 1 and "'lost'" in warned[0] and "lost_0_0" in warned[0]
        mem.put("lost_0_0", chunk("late"))  # progress: no longer stalled
        inbox.wait_count("lost", 1)
        assert rcv.stats().stalled == 0
        wait_until(lambda: rcv.stats().stalls_reported == 2, 5.0, "a second stall, at chunk 1")
        rcv.cleanup_receiver("lost")
        assert rcv.stats().stalled == 0
        inbox.poll()
        assert inbox.of("fine") == [chunk("f", True)], "a finished registration never stalls"
    finally:
        rcv.stop()
