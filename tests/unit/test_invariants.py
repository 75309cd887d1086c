"""check_invariants on a running reference adapter (S1, V1–V3 of its docstring).

The checker is first shown to catch each corrupted invariant (on a stopped
adapter, so nothing races the corruption), then run over and over while a
workload with cleanups, reloads, cancels and faults runs.
"""

from __future__ import annotations

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors import FaultyConnector, MemoryConnector
from tests.unit._rig import Rig, chunk
from tests.unit._wait import Inbox, wait_until


def _stopped(rig: Rig, mem: MemoryConnector) -> ChunkAdapter:
    adapter = rig.reference(mem, stage_id=1)
    adapter.stop()
    adapter.check_invariants()
    return adapter


def test_checker_catches_a_send_id_below_one(rig: Rig, mem: MemoryConnector) -> None:
    adapter = _stopped(rig, mem)
    adapter._next_send_id["r"] = 0
    with pytest.raises(AssertionError, match="S1"):
        adapter.check_invariants()


def test_checker_catches_tokens_without_next_ids(rig: Rig, mem: MemoryConnector) -> None:
    adapter = _stopped(rig, mem)
    adapter._tokens["r"] = object()
    with pytest.raises(AssertionError, match="V1"):
        adapter.check_invariants()


def test_checker_catches_ready_chunks_of_an_unregistered_request(
    rig: Rig, mem: MemoryConnector
) -> None:
    adapter = _stopped(rig, mem)
    adapter._ready["r"] = [chunk(1)]
    with pytest.raises(AssertionError, match="V2"):
        adapter.check_invariants()


@pytest.mark.rule("R16")
def test_checker_catches_two_queue_entries_for_one_registration(
    rig: Rig, mem: MemoryConnector
) -> None:
    adapter = _stopped(rig, mem)
    token = object()
    adapter._tokens["r"] = token
    adapter._next_recv_id["r"] = 0
    adapter._queue.extend([("r", token), ("r", token)])
    with pytest.raises(AssertionError, match="V3"):
        adapter.check_invariants()


@pytest.mark.rule("R16", "R9")
def test_invariants_hold_throughout_a_churning_workload(rig: Rig) -> None:
    mem = MemoryConnector()
    faulty = FaultyConnector(mem, put_rate=0.1, get_rate=0.1, seed=1234)
    gated = rig.gated_connector(faulty)
    snd = rig.reference(gated, stage_id=0, put_backoff=0.0005)
    rcv = rig.reference(gated, stage_id=1)
    inbox = Inbox(rcv)
    rids = [f"r{i}" for i in range(6)]
    checks = 0
    for rid in rids:
        rcv.load_async(rid)
    for step in range(60):
        rid = rids[step % len(rids)]
        snd.save_async(rid, step, False)
        if step % 11 == 0:
            snd.cancel_sender(rids[(step + 1) % len(rids)])
        if step % 7 == 0:
            gate = gated.hold_get(predicate=lambda k: k.startswith("r"))
            assert gate.wait_started()
            victim = rids[step % 5]
            rcv.cleanup_receiver(victim)  # while a get is in flight
            rcv.load_async(victim)
            snd.check_invariants()
            rcv.check_invariants()
            gate.release()
        inbox.poll()
        snd.check_invariants()
        rcv.check_invariants()
        checks += 2
    for rid in rids:
        snd.save_async(rid, "end", True)

    def settled() -> bool:
        snd.check_invariants()
        rcv.check_invariants()
        inbox.poll()
        return snd.stats().finals_put == len(rids)

    wait_until(settled, what="every final put", detail=lambda: repr(snd.stats()))
    assert checks == 120
