"""The receiver side: registration, in-order receiving, exactly-once draining, the fence.

Rules R12–R16. Chunks are put straight into the connector (the test plays the
sender), so every key and value is exact. A ``sentinel`` request that never
gets data keeps the RECV thread polling, which ``wait_recv_passed`` relies on.
"""

from __future__ import annotations

import time

import pytest

from chunk_adapter.connectors import FaultyConnector, MemoryConnector, RecordingConnector
from tests.unit._rig import GetsPerRequest, Rig, chunk, gets, wait_recv_passed
from tests.unit._wait import Inbox, holds_for, wait_until


def _put_stream(mem: MemoryConnector, rid: str, values: list[object], final: bool = True) -> None:
    for i, value in enumerate(values):
        mem.put(f"{rid}_0_{i}", chunk(value, final and i == len(values) - 1))


@pytest.mark.rule("R12")
def test_chunks_put_before_load_async_are_received(rig: Rig, mem: MemoryConnector) -> None:
    _put_stream(mem, "r", ["a", "b", "c"])
    rcv = rig.adapter(mem, stage_id=1)
    inbox = Inbox(rcv)
    rcv.load_async("r")
    inbox.wait_final("r")
    assert inbox.of("r") == [chunk("a"), chunk("b"), chunk("c", True)], rig.repro


@pytest.mark.rule("R12")
def test_load_async_again_while_polling_changes_nothing(rig: Rig, mem: MemoryConnector) -> None:
    """A second registration would start again at chunk 0 and receive 0 and 1 twice."""
    _put_stream(mem, "r", [0, 1], final=False)
    rcv = rig.adapter(mem, stage_id=1)
    inbox = Inbox(rcv)
    rcv.load_async("r")
    inbox.wait_count("r", 2)
    rcv.load_async("r")
    rcv.load_async("r")
    mem.put("r_0_2", chunk(2, True))
    inbox.wait_final("r")
    assert inbox.data("r") == [0, 1, 2], rig.repro


@pytest.mark.rule("R12", "R13")
def test_load_async_again_after_the_final_changes_nothing(rig: Rig, mem: MemoryConnector) -> None:
    _put_stream(mem, "r", [0, 1])
    rcv = rig.adapter(mem, stage_id=1)
    inbox = Inbox(rcv)
    rcv.load_async("r")
    inbox.wait_final("r")
    rcv.load_async("r")  # finished but not cleaned up: still registered
    rcv.load_async("s")
    mem.put("s_0_0", chunk("s", True))
    inbox.wait_final("s")  # the RECV thread has done at least one more round
    holds_for(lambda: "r" not in inbox.poll(), 0.1, "no new chunks of 'r'", inbox.describe)
    assert inbox.data("r") == [0, 1], rig.repro


@pytest.mark.rule("R12", "R3")
def test_load_async_and_save_async_wake_the_background_threads(
    rig: Rig, mem: MemoryConnector
) -> None:
    """With a 5 s condition timeout, only a notify explains a prompt delivery."""
    if not rig.accepts("wait_timeout"):
        pytest.skip("the factory takes no wait_timeout option")
    snd, rcv, inbox = rig.receiving(mem, wait_timeout=5.0)
    start = time.monotonic()
    rcv.load_async("r")
    snd.save_async("r", "x", True)
    inbox.wait_final("r", timeout=10.0)
    elapsed = time.monotonic() - start
    assert elapsed < 2.0, f"delivery took {elapsed:.2f}s: a thread was not woken; {rig.repro}"


@pytest.mark.rule("R13")
def test_gets_only_the_next_id_and_nothing_past_the_final(rig: Rig, mem: MemoryConnector) -> None:
    _put_stream(mem, "r", [0, 1, 2])
    mem.put("r_0_3", chunk("past the final"))
    mem.put("r_0_4", chunk("past the final", True))
    rec = RecordingConnector(mem)
    rcv = rig.adapter(rec, stage_id=1)
    inbox = Inbox(rcv)
    rcv.load_async("sentinel")
    rcv.load_async("r")
    inbox.wait_final("r")
    wait_recv_passed(rec, "r_0_2")
    after = len(gets(rec, "sentinel_"))
    wait_until(lambda: len(gets(rec, "sentinel_")) >= after + 5, what="5 more rounds")
    r_gets = gets(rec, "r_")
    ids = [int(op.key.split("_")[-1]) for op in r_gets]
    assert set(ids) == {0, 1, 2}, f"R13: gets of r: {ids}; {rig.repro}"
    assert ids == sorted(ids), f"R13: gets out of id order: {ids}"
    final_end = next(op.end for op in r_gets if op.key == "r_0_2" and op.outcome == "ok")
    assert not [op for op in r_gets if op.begin > final_end], "R13: polled after its final"
    for n in (1, 2):
        first = next(op for op in r_gets if op.key == f"r_0_{n}")
        prev_ok = next(op for op in r_gets if op.key == f"r_0_{n - 1}" and op.outcome == "ok")
        assert first.begin > prev_ok.end, f"R13: got r_0_{n} before r_0_{n - 1} arrived"
    assert inbox.data("r") == [0, 1, 2]


@pytest.mark.rule("R13")
def test_empty_and_failed_gets_are_retried(rig: Rig, mem: MemoryConnector) -> None:
    faulty = FaultyConnector(mem)
    faulty.fail_next("get", "r_0_1", times=3)
    rec = RecordingConnector(faulty)
    rcv = rig.adapter(rec, stage_id=1)
    inbox = Inbox(rcv)
    rcv.load_async("r")
    wait_until(lambda: len(gets(rec, "r_0_0")) >= 3, what="three empty gets of r_0_0")
    mem.put("r_0_0", chunk("a"))
    mem.put("r_0_1", chunk("b", True))
    inbox.wait_final("r")
    assert inbox.data("r") == ["a", "b"], rig.repro
    outcomes = [op.outcome for op in gets(rec, "r_0_1")]
    assert outcomes == ["error", "error", "error", "ok"], outcomes


@pytest.mark.rule("R14", "R15")
@pytest.mark.parametrize("consume", [False, True], ids=["keep", "consume"])
def test_every_chunk_handed_out_exactly_once_in_order(rig: Rig, consume: bool) -> None:
    mem = MemoryConnector(consume_on_get=consume)
    snd, rcv, inbox = rig.receiving(mem)
    rids = [f"r{i}" for i in range(4)]
    for rid in rids:
        rcv.load_async(rid)
    for i in range(30):  # poll while chunks are being committed
        for rid in rids:
            snd.save_async(rid, i, False)
        inbox.poll()
    for rid in rids:
        snd.save_async(rid, "end", True)
    inbox.wait_final(*rids)
    for rid in rids:
        assert inbox.data(rid) == [*range(30), "end"], f"{rid}: {inbox.data(rid)}; {rig.repro}"
    assert rcv.poll_ready() == {}


@pytest.mark.rule("R15")
def test_poll_ready_lists_only_requests_with_something_new(rig: Rig, mem: MemoryConnector) -> None:
    rec = RecordingConnector(mem)
    rcv = rig.adapter(rec, stage_id=1)
    assert rcv.poll_ready() == {}
    mem.put("a_0_0", chunk("a0"))
    mem.put("b_0_0", chunk("b0"))
    for rid in ("sentinel", "a", "b"):
        rcv.load_async(rid)
    wait_recv_passed(rec, "a_0_0")
    wait_recv_passed(rec, "b_0_0")
    assert rcv.poll_ready() == {"a": [chunk("a0")], "b": [chunk("b0")]}, rig.repro
    assert rcv.poll_ready() == {}
    mem.put("a_0_1", chunk("a1", True))
    wait_recv_passed(rec, "a_0_1")
    assert rcv.poll_ready() == {"a": [chunk("a1", True)]}, rig.repro
    assert rcv.poll_ready() == {}


@pytest.mark.rule("R16")
def test_cleanup_is_a_fence_for_a_get_in_flight(rig: Rig) -> None:
    """The get of r_0_2 is held while cleanup_receiver runs; its value must never appear."""
    mem = MemoryConnector()
    gated = rig.gated_connector(mem)
    rec = RecordingConnector(gated)
    rcv = rig.adapter(rec, stage_id=1)
    inbox = Inbox(rcv)
    _put_stream(mem, "r", [0, 1, 2])
    gate = gated.hold_get("r_0_2")
    rcv.load_async("sentinel")
    rcv.load_async("r")
    assert gate.wait_started(), "the get of r_0_2 never started"
    rcv.cleanup_receiver("r")  # chunks 0 and 1 are committed: forgotten too
    gate.release()
    wait_recv_passed(rec, "r_0_2")
    assert inbox.poll() == {}, f"R16: chunks of a cleaned-up registration: {inbox.chunks}"
    # A fresh registration starts at chunk 0 and gets each chunk once.
    rcv.load_async("r")
    inbox.wait_final("r")
    assert inbox.data("r") == [0, 1, 2], rig.repro


@pytest.mark.rule("R16")
def test_cleanup_then_load_during_a_get_in_flight(rig: Rig) -> None:
    """The in-flight get consumes the OLD stream's chunk 0; the new registration must
    get the NEW stream's chunk 0, not the stale one (contract R16: token check at commit)."""
    mem = MemoryConnector(consume_on_get=True)
    gated = rig.gated_connector(mem)
    rec = RecordingConnector(gated)
    rcv = rig.adapter(rec, stage_id=1)
    inbox = Inbox(rcv)
    mem.put("r_0_0", chunk("old"))
    gate = gated.hold_get("r_0_0")
    rcv.load_async("sentinel")
    rcv.load_async("r")
    assert gate.wait_started()
    rcv.cleanup_receiver("r")
    rcv.load_async("r")
    gate.release()
    wait_recv_passed(rec, "r_0_0")
    assert "r" not in inbox.poll(), f"R16: the stale chunk was committed: {inbox.chunks}"
    mem.put("r_0_0", chunk("new"))
    mem.put("r_0_1", chunk("new-end", True))
    inbox.wait_final("r")
    assert inbox.of("r") == [chunk("new"), chunk("new-end", True)], rig.repro


@pytest.mark.rule("R16")
def test_cleanup_forgets_ready_chunks_and_a_new_registration_starts_at_zero(
    rig: Rig, mem: MemoryConnector
) -> None:
    rec = RecordingConnector(mem)
    rcv = rig.adapter(rec, stage_id=1)
    _put_stream(mem, "r", ["a", "b"], final=False)
    rcv.load_async("sentinel")
    rcv.load_async("r")
    wait_recv_passed(rec, "r_0_1")
    rcv.cleanup_receiver("r")
    assert rcv.poll_ready() == {}, "R16: cleanup_receiver must forget the ready chunks"
    rcv.cleanup_receiver("r")  # forgetting twice is harmless
    rcv.cleanup_receiver("never-registered")
    rcv.load_async("r")
    inbox = Inbox(rcv)
    mem.put("r_0_2", chunk("c", True))
    inbox.wait_final("r")
    assert inbox.data("r") == ["a", "b", "c"], rig.repro


@pytest.mark.rule("R16", "R14")
def test_cleanup_and_reload_many_times_while_gets_are_in_flight(rig: Rig) -> None:
    """Each cycle holds a get, cleans up, reloads and releases: no value is ever duplicated."""
    mem = MemoryConnector()
    gated = rig.gated_connector(mem)
    rcv = rig.adapter(gated, stage_id=1)
    inbox = Inbox(rcv)
    rcv.load_async("r")
    for cycle in range(10):
        gate = gated.hold_get(f"r_0_{cycle}")
        assert gate.wait_started(), f"cycle {cycle}"
        rcv.cleanup_receiver("r")
        inbox.chunks.pop("r", None)
        rcv.load_async("r")
        mem.put(f"r_0_{cycle}", chunk(cycle))
        gate.release()
        inbox.wait_count("r", cycle + 1)
        assert inbox.data("r") == list(range(cycle + 1)), f"cycle {cycle}; {rig.repro}"


@pytest.mark.rule("R16", "R17")
def test_reloading_during_a_get_in_flight_leaves_one_queue_entry(
    rig: Rig, mem: MemoryConnector
) -> None:
    """After cleanup + load_async while a get is in flight (three times), the request
    is polled as often as an untouched one: a second queue entry would double its gets."""
    counting = GetsPerRequest(mem)
    gated = rig.gated_connector(counting)
    rcv = rig.adapter(gated, stage_id=1, idle_backoff=0.01)
    rcv.load_async("a")
    rcv.load_async("b")
    for cycle in range(3):
        gate = gated.hold_get("a_0_0")
        assert gate.wait_started(), f"cycle {cycle}"
        rcv.cleanup_receiver("a")
        rcv.load_async("a")
        gate.release()
    wait_until(lambda: counting.snapshot()["a"] > 10, what="a few rounds")
    before = counting.snapshot()
    time.sleep(0.5)  # observation window
    after = counting.snapshot()
    a, b = after["a"] - before["a"], after["b"] - before["b"]
    assert b >= 10, f"too few rounds to compare: a={a}, b={b}"
    assert a < 1.5 * b, f"R16: 'a' polled {a} times vs {b} for 'b': two queue entries; {rig.repro}"
