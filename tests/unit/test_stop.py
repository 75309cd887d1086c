"""Stopping: prompt and idempotent stop() (R18) and the calls after it (R19).

"Blocked forever" is a gate that is only released at teardown (the rig
releases every gate before it stops the adapters).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from chunk_adapter.connectors import FaultyConnector, MemoryConnector, RecordingConnector
from chunk_adapter.factory import AdapterLike
from chunk_adapter.history import BuildCall, History
from tests.unit._rig import Rig, chunk, wait_recv_passed
from tests.unit._wait import holds_for, returns_within, wait_until

IDLE_BOUND = 0.5  # the contract says well under 0.1 s; expected about 1 ms
JOIN = 0.2  # the join timeout asked for where the factory takes one
MARGIN = 1.0


def _timed_stop(adapter: AdapterLike, bound: float) -> float:
    _, elapsed = returns_within(bound + 5.0, adapter.stop, "stop()")
    return float(elapsed)


@pytest.mark.rule("R18")
def test_stop_is_prompt_when_idle_and_idempotent(rig: Rig, mem: MemoryConnector) -> None:
    """With a 5 s condition timeout, stop() is prompt only if it notifies both conditions."""
    snd, rcv, inbox = rig.receiving(mem, "r", wait_timeout=5.0)
    snd.save_async("r", 1, True)
    inbox.wait_final("r")
    for adapter in (snd, rcv):
        first = _timed_stop(adapter, IDLE_BOUND)
        second = _timed_stop(adapter, IDLE_BOUND)
        assert first < IDLE_BOUND, f"R18: idle stop() took {first:.3f}s; {rig.repro}"
        assert second < IDLE_BOUND, f"R18: a second stop() took {second:.3f}s"


@pytest.mark.rule("R18")
def test_stop_is_prompt_with_requests_polling(rig: Rig, mem: MemoryConnector) -> None:
    rcv = rig.adapter(mem, stage_id=1, wait_timeout=5.0, idle_backoff=0.5)
    for i in range(20):
        rcv.load_async(f"idle{i}")
    elapsed = _timed_stop(rcv, IDLE_BOUND)
    assert elapsed < IDLE_BOUND, f"R18: stop() took {elapsed:.3f}s; {rig.repro}"


@pytest.mark.rule("R18")
def test_context_manager_exit_stops(rig: Rig, mem: MemoryConnector) -> None:
    adapter = rig.adapter(mem, stage_id=0)
    with adapter:
        adapter.save_async("r", 1, True)
    with pytest.raises(RuntimeError):
        adapter.save_async("r", 2, True)


def _blocked_stop(rig: Rig, adapter: AdapterLike) -> None:
    join = rig.join_timeout(JOIN)
    elapsed = _timed_stop(adapter, join + MARGIN)
    assert elapsed < join + MARGIN, (
        f"R18: stop() took {elapsed:.2f}s with a thread blocked forever "
        f"(join timeout {join}s); {rig.repro}"
    )
    again = _timed_stop(adapter, join + MARGIN)
    assert again < join + MARGIN, f"R18: a second stop() took {again:.2f}s"


@pytest.mark.rule("R18")
def test_stop_within_join_timeout_while_a_build_is_blocked(rig: Rig, mem: MemoryConnector) -> None:
    history = History()
    builder = rig.gated_builder(history=history)
    snd = rig.adapter(mem, stage_id=0, build_payload=builder, join_timeout=JOIN)
    gate = builder.hold("r")
    snd.save_async("r", 0, False)
    for i in range(1, 20):
        snd.save_async("r", i, i == 19)
    assert gate.wait_started()
    _blocked_stop(rig, snd)
    # No put starts after stop() returns: not even once the build is let go.
    gate.release()
    wait_until(lambda: history.records(BuildCall), what="the held build to return")
    holds_for(lambda: mem.puts == [], 0.2, "no puts after stop()", lambda: repr(mem.puts))


@pytest.mark.rule("R18")
def test_stop_within_join_timeout_while_a_put_is_blocked(rig: Rig, mem: MemoryConnector) -> None:
    gated = rig.gated_connector(mem)
    snd = rig.adapter(gated, stage_id=0, join_timeout=JOIN)
    gate = gated.hold_put("r_0_0")
    snd.save_async("r", 0, False)
    snd.save_async("r", 1, True)
    assert gate.wait_started()
    _blocked_stop(rig, snd)
    gate.release()  # the put under way may complete (allowed); nothing after it may start
    wait_until(lambda: mem.puts == ["r_0_0"], what="the held put to complete")
    holds_for(lambda: mem.puts == ["r_0_0"], 0.2, "no further puts", lambda: repr(mem.puts))


@pytest.mark.rule("R18")
def test_stop_within_join_timeout_while_a_get_is_blocked(rig: Rig, mem: MemoryConnector) -> None:
    gated = rig.gated_connector(mem)
    rcv = rig.adapter(gated, stage_id=1, join_timeout=JOIN)
    gate = gated.hold_get("r_0_0")
    rcv.load_async("r")
    assert gate.wait_started()
    _blocked_stop(rig, rcv)


@pytest.mark.rule("R18")
def test_both_threads_blocked_share_one_join_deadline(rig: Rig, mem: MemoryConnector) -> None:
    """A build and a get blocked forever: stop() waits one join timeout, not one per thread."""
    builder = rig.gated_builder()
    gated = rig.gated_connector(mem)
    adapter = rig.adapter(
        gated, stage_id=1, src_stage_id=1, build_payload=builder, join_timeout=2.0
    )
    build_gate = builder.hold("s")
    get_gate = gated.hold_get("r_1_0")
    adapter.save_async("s", 0, True)
    adapter.load_async("r")
    assert build_gate.wait_started() and get_gate.wait_started()
    join = rig.join_timeout(2.0)
    elapsed = _timed_stop(adapter, 2 * join + MARGIN)
    # One shared deadline takes ~join; one per thread ~2 * join. The bound sits halfway,
    # with a whole second for a process crowded with other tests' threads (seen in CI).
    assert elapsed < join + 1.0, (
        f"R18: stop() took {elapsed:.2f}s with both threads blocked and a {join}s join "
        f"timeout: the joins must share one deadline; {rig.repro}"
    )


@pytest.mark.rule("R18", "R10")
def test_stop_ends_the_retries_of_a_final_that_always_fails(rig: Rig, mem: MemoryConnector) -> None:
    faulty = FaultyConnector(mem)
    faulty.fail_next("put", "r_0_0", times=10**9)
    snd = rig.adapter(faulty, stage_id=0, join_timeout=JOIN)
    snd.save_async("r", "end", True)
    wait_until(lambda: faulty.injected["put"] >= 4, what="four failed puts of the final")
    _blocked_stop(rig, snd)
    tries = faulty.injected["put"]
    holds_for(
        lambda: faulty.injected["put"] == tries,
        0.3,
        "no put attempt after stop() returned",
        lambda: f"{faulty.injected['put'] - tries} more attempts",
    )
    assert mem.puts == []


@pytest.mark.rule("R19")
def test_calls_after_stop(rig: Rig, mem: MemoryConnector) -> None:
    rec = RecordingConnector(mem)
    rcv = rig.adapter(rec, stage_id=1)
    mem.put("a_0_0", chunk("a0"))
    mem.put("a_0_1", chunk("a1", True))
    mem.put("b_0_0", chunk("b0"))
    for rid in ("sentinel", "a", "b"):
        rcv.load_async(rid)
    wait_recv_passed(rec, "a_0_1")
    wait_recv_passed(rec, "b_0_0")
    rcv.stop()
    calls: list[tuple[str, Callable[[], object]]] = [
        ("save_async", lambda: rcv.save_async("a", 1, False)),
        ("save_async final", lambda: rcv.save_async("z", 1, True)),
        ("cancel_sender", lambda: rcv.cancel_sender("a")),
        ("load_async", lambda: rcv.load_async("c")),
    ]
    for name, call in calls:
        try:
            call()
        except RuntimeError:
            continue
        pytest.fail(f"R19: {name} after stop() did not raise RuntimeError; {rig.repro}")
    rcv.cleanup_receiver("b")  # still forgets after stop()
    assert rcv.poll_ready() == {"a": [chunk("a0"), chunk("a1", True)]}, rig.repro
    assert rcv.poll_ready() == {}
    rcv.cleanup_receiver("a")


@pytest.mark.rule("R19")
def test_nothing_is_queued_by_a_save_after_stop(rig: Rig, mem: MemoryConnector) -> None:
    snd = rig.adapter(mem, stage_id=0)
    snd.save_async("r", 0, True)
    wait_until(lambda: mem.puts == ["r_0_0"], what="the first final")
    snd.stop()
    with pytest.raises(RuntimeError):
        snd.save_async("r", 1, True)
    holds_for(lambda: mem.puts == ["r_0_0"], 0.1, "no put of the refused save")


@pytest.mark.rule("R18")
def test_stop_does_not_wait_for_the_queue_to_drain(rig: Rig, mem: MemoryConnector) -> None:
    """A long FIFO behind a slow build is abandoned, not drained, by stop()."""

    def slow(rid: str, snap: object, fin: bool) -> object:
        time.sleep(0.01)  # the build's own cost, not a synchronisation
        return snap

    snd = rig.adapter(mem, stage_id=0, build_payload=slow, join_timeout=JOIN)
    for i in range(500):
        snd.save_async("r", i, False)
    wait_until(lambda: len(mem.puts) >= 1, what="the first put")
    elapsed = _timed_stop(snd, rig.join_timeout(JOIN) + MARGIN)
    assert elapsed < rig.join_timeout(JOIN) + MARGIN, f"R18: stop() took {elapsed:.2f}s"
    count = len(mem.puts)
    assert count < 500
    holds_for(lambda: len(mem.puts) <= count + 1, 0.2, "at most the put under way completes")
