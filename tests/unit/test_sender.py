"""The sender side: keys, wire values, snapshots, the FIFO, cancel, build results, finals.

Rules R1, R2, R4–R9, R11 (put failures, R10, are in test_faults.py).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from chunk_adapter.connectors import MemoryConnector, RecordingConnector
from chunk_adapter.history import BuildCall, History
from tests.unit._rig import Rig, chunk, ok_puts
from tests.unit._wait import Inbox, returns_within, wait_until


def _wait_puts(mem: MemoryConnector, count: int) -> None:
    wait_until(lambda: len(mem.puts) >= count, what=f"{count} puts", detail=lambda: repr(mem.puts))


def _ids(keys: list[str], prefix: str) -> list[int]:
    return [int(k[len(prefix) :]) for k in keys if k.startswith(prefix)]


@pytest.mark.rule("R1")
def test_sender_keys_use_its_own_stage_id(rig: Rig, mem: MemoryConnector) -> None:
    snd = rig.adapter(mem, stage_id=7)
    for i in range(3):
        snd.save_async("req-1", i, False)
    snd.save_async("req-1", 3, True)
    _wait_puts(mem, 4)
    assert mem.puts == ["req-1_7_0", "req-1_7_1", "req-1_7_2", "req-1_7_3"], rig.repro


@pytest.mark.rule("R1")
@pytest.mark.parametrize("src_stage_id", [None, 7])
def test_receiver_reads_the_keys_of_src_stage_id(
    rig: Rig, mem: MemoryConnector, src_stage_id: int | None
) -> None:
    """Default src_stage_id is stage_id - 1; an explicit one is used as given."""
    rec = RecordingConnector(mem)
    snd = rig.adapter(mem, stage_id=7)
    stage = 8 if src_stage_id is None else 42
    rcv = rig.adapter(rec, stage_id=stage, src_stage_id=src_stage_id)
    inbox = Inbox(rcv)
    rcv.load_async("r")
    snd.save_async("r", "x", False)
    snd.save_async("r", "y", True)
    inbox.wait_final("r")
    assert inbox.data("r") == ["x", "y"]
    keys = {op.key for op in rec.history.records() if op.op == "get"}
    assert keys == {"r_7_0", "r_7_1"}, f"the receiver got keys {sorted(keys)}; {rig.repro}"


@pytest.mark.rule("R1")
def test_receiver_of_another_stage_gets_nothing(rig: Rig, mem: MemoryConnector) -> None:
    snd = rig.adapter(mem, stage_id=3)
    rcv = rig.adapter(mem, stage_id=9)  # reads stage 8
    right = rig.adapter(mem, stage_id=4)  # reads stage 3
    rcv.load_async("r")
    right.load_async("r")
    snd.save_async("r", "x", True)
    inbox = Inbox(right)
    inbox.wait_final("r")
    assert rcv.poll_ready() == {}


@pytest.mark.rule("R2")
def test_wire_value_is_exactly_data_and_finished(rig: Rig, mem: MemoryConnector) -> None:
    def build(rid: str, snap: Any, is_final: bool) -> Any:
        return {"built": snap, "rid": rid, "final": is_final}

    rec = RecordingConnector(mem)
    snd, _rcv, inbox = rig.receiving(rec, "r", build_payload=build)
    snd.save_async("r", [1], False)
    snd.save_async("r", [2], True)
    inbox.wait_final("r")
    put_values = [op.value for op in ok_puts(rec, "r_0_")]
    assert put_values == [
        {"data": {"built": [1], "rid": "r", "final": False}, "finished": False},
        {"data": {"built": [2], "rid": "r", "final": True}, "finished": True},
    ]
    assert all(type(v["finished"]) is bool for v in put_values)
    assert all(set(v) == {"data", "finished"} for v in put_values)
    assert inbox.of("r") == put_values, "R2: poll_ready must hand back what was put"


@pytest.mark.rule("R4")
def test_payload_is_built_from_the_snapshot_taken_at_the_call(
    rig: Rig, mem: MemoryConnector
) -> None:
    """The build is held until the object has been mutated: it must still see the old value."""
    history = History()
    builder = rig.gated_builder(history=history)
    snd, _rcv, inbox = rig.receiving(mem, "r", build_payload=builder)
    gate = builder.hold("r", count=2)
    live: dict[str, Any] = {"tokens": [1]}
    snd.save_async("r", live, False)
    assert gate.wait_started()
    live["tokens"].append(2)
    snd.save_async("r", live, True)
    live["tokens"].append(3)
    live["new"] = True
    gate.release()
    inbox.wait_final("r")
    assert inbox.data("r") == [{"tokens": [1]}, {"tokens": [1, 2]}], rig.repro
    snapshots = [call.snapshot for call in history.records(BuildCall)]
    assert all(s is not live for s in snapshots), "R4: build_payload got the live object"


@pytest.mark.rule("R3", "R5")
def test_builds_and_puts_happen_on_one_background_thread(rig: Rig, mem: MemoryConnector) -> None:
    history = History()
    builder = rig.gated_builder(history=history)
    rec = RecordingConnector(mem, history)
    snd = rig.adapter(rec, stage_id=0, build_payload=builder)
    for i in range(10):
        snd.save_async(f"r{i % 3}", i, i >= 7)
    _wait_puts(mem, 10)
    builds = {c.thread for c in history.records(BuildCall)}
    puts = {op.thread for op in rec.ops() if op.op == "put"}
    assert len(builds | puts) == 1, f"R5: one SAVE thread, saw {builds | puts}"
    assert threading.current_thread().name not in builds | puts, "R3: work ran on the caller"


@pytest.mark.rule("R5")
def test_puts_follow_save_order_across_requests(rig: Rig, mem: MemoryConnector) -> None:
    snd = rig.adapter(mem, stage_id=0)
    expected: list[str] = []
    counters = {"a": 0, "b": 0, "c": 0}
    order = "abcabbcaacbbacab"
    for n, rid in enumerate(order):
        is_final = n == len(order) - 1 or rid not in order[n + 1 :]
        snd.save_async(rid, n, is_final)
        expected.append(f"{rid}_0_{counters[rid]}")
        counters[rid] += 1
    _wait_puts(mem, len(order))
    assert mem.puts == expected, rig.repro


@pytest.mark.rule("R6")
def test_cancel_drops_queued_and_future_non_finals_without_building(
    rig: Rig, mem: MemoryConnector
) -> None:
    history = History()
    builder = rig.gated_builder(history=history)
    snd, _rcv, inbox = rig.receiving(mem, "w", "other", build_payload=builder)
    gate = builder.hold("blocker")
    snd.save_async("blocker", "b", True)
    assert gate.wait_started()
    snd.save_async("w", "queued-1", False)
    snd.save_async("other", "o1", False)
    snd.save_async("w", "queued-2", False)
    snd.cancel_sender("w")
    snd.save_async("w", "future", False)
    snd.save_async("w", "end", True)
    snd.save_async("other", "o2", True)
    gate.release()
    inbox.wait_final("w", "other")
    assert inbox.of("w") == [chunk(None, True)], rig.repro
    assert inbox.data("other") == ["o1", "o2"], "R6: cancel must not touch other requests"
    built = [c.request_id for c in history.records(BuildCall)]
    assert "w" not in built, f"R6: a cancelled request's chunks were built: {built}"


@pytest.mark.rule("R6", "R11")
def test_cancel_mark_lasts_until_the_final_then_is_forgotten(
    rig: Rig, mem: MemoryConnector
) -> None:
    snd = rig.adapter(mem, stage_id=0)
    snd.cancel_sender("w")  # before anything was saved: applies to future chunks
    snd.save_async("w", "dropped", False)
    snd.save_async("w", "end", True)
    _wait_puts(mem, 1)
    snd.save_async("w", "fresh", False)  # a new stream: not cancelled any more
    snd.save_async("w", "fresh-end", True)
    _wait_puts(mem, 3)
    assert mem.puts == ["w_0_0", "w_0_0", "w_0_1"], rig.repro
    assert mem.get("w_0_0") == chunk("fresh")
    assert mem.get("w_0_1") == chunk("fresh-end", True)


@pytest.mark.rule("R7")
def test_build_failure_drops_a_non_final_and_nulls_a_final(rig: Rig, mem: MemoryConnector) -> None:
    builder = rig.gated_builder()
    builder.fail(predicate=lambda rid, snap, fin: snap in ("bad", "bad-final"), times=2)
    snd, _rcv, inbox = rig.receiving(mem, "r", build_payload=builder)
    for payload in ("a", "bad", "b"):
        snd.save_async("r", payload, False)
    snd.save_async("r", "bad-final", True)
    inbox.wait_final("r")
    assert inbox.of("r") == [chunk("a"), chunk("b"), chunk(None, True)], rig.repro
    assert mem.puts == ["r_0_0", "r_0_1", "r_0_2"], "R9: the dropped chunk used no id"


@pytest.mark.rule("R7", "R3")
def test_build_runs_outside_the_locks(rig: Rig, mem: MemoryConnector) -> None:
    """While a build is held, every scheduler call still returns (no lock is held)."""
    builder = rig.gated_builder()
    snd, rcv, inbox = rig.receiving(mem, build_payload=builder)
    gate = builder.hold("slow")
    snd.save_async("slow", 0, False)
    assert gate.wait_started()
    # Each call below would deadlock if the SAVE thread built under a lock they take.
    returns_within(2.0, lambda: snd.save_async("fast", 1, True), "save_async")
    returns_within(2.0, lambda: snd.cancel_sender("other"), "cancel_sender")
    returns_within(2.0, lambda: rcv.load_async("fast"), "load_async")
    returns_within(2.0, rcv.poll_ready, "poll_ready")
    returns_within(2.0, lambda: rcv.cleanup_receiver("nobody"), "cleanup_receiver")
    gate.release()
    inbox.wait_final("fast")
    assert inbox.data("fast") == [1]


@pytest.mark.rule("R8")
def test_none_payload_skips_a_non_final_but_not_a_final(rig: Rig, mem: MemoryConnector) -> None:
    def build(rid: str, snap: Any, is_final: bool) -> Any:
        return None if snap == "skip" else snap

    snd, _rcv, inbox = rig.receiving(mem, "r", build_payload=build)
    for payload in ("skip", "a", "skip", "skip", "b"):
        snd.save_async("r", payload, False)
    snd.save_async("r", "skip", True)
    inbox.wait_final("r")
    assert inbox.of("r") == [chunk("a"), chunk("b"), chunk(None, True)], rig.repro
    assert mem.puts == ["r_0_0", "r_0_1", "r_0_2"], "R8: a skipped chunk uses no id"


@pytest.mark.rule("R8", "R11")
def test_stream_of_only_a_none_final(rig: Rig, mem: MemoryConnector) -> None:
    snd = rig.adapter(mem, stage_id=0, build_payload=lambda rid, snap, fin: None)
    snd.save_async("r", "x", False)
    snd.save_async("r", "y", True)
    _wait_puts(mem, 1)
    assert mem.puts == ["r_0_0"]
    assert mem.get("r_0_0") == chunk(None, True)


@pytest.mark.rule("R9", "R11")
def test_ids_are_contiguous_per_stream_and_restart_after_the_final(
    rig: Rig, mem: MemoryConnector
) -> None:
    builder = rig.gated_builder(lambda rid, snap, fin: None if snap % 4 == 1 else snap)
    builder.fail(predicate=lambda rid, snap, fin: snap % 5 == 2 and not fin, times=100)
    snd = rig.adapter(mem, stage_id=0, build_payload=builder)
    for stream in range(3):
        for i in range(12):
            snd.save_async("r", i, False)
            snd.save_async("s", i, False)
        snd.save_async("r", 100 + stream, True)
        snd.save_async("s", 100 + stream, True)
    wait_until(
        lambda: (
            sum(1 for k in mem.puts if k.startswith("s_")) >= 1
            and mem.get(_last(mem, "s_")) == chunk(102, True)
        ),
        what="the last final of s",
    )
    for rid in ("r", "s"):
        ids = _ids(mem.puts, f"{rid}_0_")
        streams: list[list[int]] = [[]]
        for i in ids:
            if i == 0 and streams[-1]:
                streams.append([])
            streams[-1].append(i)
        assert len(streams) == 3, f"{rid}: {ids}"
        for s in streams:
            assert s == list(range(len(s))), f"R9: ids of a {rid} stream: {s}; {rig.repro}"


def _last(mem: MemoryConnector, prefix: str) -> str:
    keys = [k for k in mem.puts if k.startswith(prefix)]
    return keys[-1] if keys else ""


@pytest.mark.rule("R11")
def test_the_final_is_the_streams_last_put_and_put_once(rig: Rig, mem: MemoryConnector) -> None:
    rec = RecordingConnector(mem)
    snd = rig.adapter(rec, stage_id=0)
    for i in range(5):
        snd.save_async("r", i, False)
    snd.save_async("r", "end", True)
    snd.save_async("x", "x-end", True)  # a later put of another request
    wait_until(lambda: "x_0_0" in mem.puts, what="x's final")
    values = [op.value for op in ok_puts(rec, "r_")]
    finals = [v for v in values if v["finished"]]
    assert finals == [chunk("end", True)] and values[-1] == finals[0], values


@pytest.mark.rule("R3")
def test_save_async_returns_at_once_while_the_save_thread_is_stuck(
    rig: Rig, mem: MemoryConnector
) -> None:
    builder = rig.gated_builder()
    snd = rig.adapter(mem, stage_id=0, build_payload=builder)
    gate = builder.hold("r")
    snd.save_async("r", 0, False)
    assert gate.wait_started()

    def many() -> None:
        for i in range(200):
            snd.save_async("r", i, False)

    _, elapsed = returns_within(2.0, many, "200 x save_async")
    assert elapsed < 1.0, f"R3: 200 save_async calls took {elapsed:.3f}s"
