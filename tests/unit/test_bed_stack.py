"""The one test bed (``chunk_adapter.bed.Bed``) and the one progress counter (``Progress``).

Every driver builds its connector stack with :class:`Bed`, so its layer order
is what the drivers observe: these tests pin that order by what a call through
the stack does, not by the classes' names alone. Blocking calls wait on events
the test opens itself; the bounds are only how long a call known to be blocked
is given.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from chunk_adapter.bed import Bed, Hang, Progress
from chunk_adapter.connectors import (
    FaultyConnector,
    MemoryConnector,
    RecordingConnector,
)
from chunk_adapter.errors import InjectedFault, UsageError
from chunk_adapter.factory import reference_factory
from chunk_adapter.history import BuildCall, ConnectorOp

BLOCKED = 0.05  # seconds a call known to be blocked is given before it counts as hung
GENEROUS = 10.0  # seconds for something that happens at once (5x+ any machine's need)


def test_the_layers_stack_in_one_order_memory_gated_faulty_recording_outer() -> None:
    bed = Bed(gated=True, faulty=True, record=True)
    outer = bed.wrap(Progress)
    assert bed.connector is outer
    assert outer.inner is bed.recording
    assert bed.recording.inner is bed.faulty
    assert bed.faulty.inner is bed.gated
    assert bed.gated.inner is bed.memory
    assert isinstance(bed.memory, MemoryConnector)


def test_a_layer_left_out_is_skipped_and_naming_it_says_how_to_get_it() -> None:
    bed = Bed(record=True)
    assert isinstance(bed.connector, RecordingConnector)
    assert bed.recording.inner is bed.memory
    with pytest.raises(UsageError, match=r"Bed\(gated=True\)"):
        _ = bed.gated
    with pytest.raises(UsageError, match=r"Bed\(faulty=True\)"):
        _ = bed.faulty
    with pytest.raises(UsageError, match=r"Bed\(record=True\)"):
        _ = Bed().history


def test_fault_options_without_the_faulty_layer_are_refused_naming_them() -> None:
    with pytest.raises(UsageError, match=r"put_rate=0\.5.*pass faulty=True"):
        Bed(put_rate=0.5, seed=1)


def test_memory_options_reach_the_memory_layer_and_base_replaces_it() -> None:
    bed = Bed(consume_on_get=True, keep_puts=0)
    bed.connector.put("r_0_0", {"data": 1, "finished": True})
    assert bed.connector.get("r_0_0") == {"data": 1, "finished": True}
    assert bed.connector.get("r_0_0") is None  # consumed
    assert bed.memory is not None and bed.memory.puts == []  # no key log kept
    base = MemoryConnector()
    on_base = Bed(base=base, gated=True)
    assert on_base.memory is None
    assert on_base.gated.inner is base


def test_a_fault_fires_before_the_gate_so_a_failed_call_is_never_held_and_is_recorded() -> None:
    bed = Bed(gated=True, faulty=True, record=True)
    gate = bed.gated.hold_put("k_0_0")
    bed.faulty.fail_next("put", "k_0_0")
    try:
        with pytest.raises(InjectedFault):
            bed.connector.put("k_0_0", {"data": 1, "finished": False})
        assert not gate.wait_started(BLOCKED), "the failed put reached the gate"
        ops = bed.history.records(ConnectorOp)
        assert [(op.op, op.key, op.outcome) for op in ops] == [("put", "k_0_0", "error")]
    finally:
        bed.release_all()


def test_builders_record_into_the_bed_history_unless_told_not_to_and_release_all_opens_them() -> (
    None
):
    bed = Bed(gated=True, record=True)
    recorded, quiet = bed.builder(), bed.builder(recorded=False)
    recorded("r", 1, True)
    quiet("q", 2, True)
    assert [b.request_id for b in bed.history.records(BuildCall)] == ["r"]
    held = quiet.hold("h")
    put_gate = bed.gated.hold_put("p_0_0")
    build_done = threading.Event()  # set by its helper once the held build returned
    put_done = threading.Event()  # set by its helper once the held put returned

    def build() -> None:
        quiet("h", 3, True)
        build_done.set()

    def put() -> None:
        bed.connector.put("p_0_0", {"data": 0, "finished": True})
        put_done.set()

    for target in (build, put):
        threading.Thread(target=target, name="bed-test-held", daemon=True).start()
    assert held.wait_started(GENEROUS) and put_gate.wait_started(GENEROUS)
    assert not build_done.is_set() and not put_done.is_set()
    bed.release_all()
    assert build_done.wait(GENEROUS), "release_all() left a builder's gate shut"
    assert put_done.wait(GENEROUS), "release_all() left the gated layer's gate shut"


def test_adapter_calls_the_factory_with_the_outermost_connector() -> None:
    seen: dict[str, Any] = {}

    def factory(connector: Any, **kwargs: Any) -> Any:
        seen.update(connector=connector, **kwargs)
        return reference_factory(connector, **kwargs)

    bed = Bed(record=True)
    outer = bed.wrap(Progress)
    adapter = bed.adapter(factory, bound=GENEROUS, stage_id=3)
    adapter.stop()
    assert seen["connector"] is outer and seen["stage_id"] == 3


def test_a_bounded_factory_that_hangs_is_a_hang_naming_what_it_made() -> None:
    release = threading.Event()  # opened by the test after the verdict, so the helper ends

    def stuck(connector: Any, **kwargs: Any) -> Any:
        release.wait(GENEROUS)
        return None

    try:
        with pytest.raises(Hang, match=r"the factory \(sender\) did not return within 0\.05 s"):
            Bed().adapter(stuck, bound=BLOCKED, what="the factory (sender)", stage_id=0)
    finally:
        release.set()


def test_pair_makes_a_sender_and_a_receiver_or_one_loopback_adapter() -> None:
    calls: list[dict[str, Any]] = []

    def factory(connector: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return reference_factory(connector, **kwargs)

    bed = Bed()
    builder = bed.builder()
    sender, receiver = bed.pair(factory, build_payload=builder, join_timeout=0.5)
    sender.stop()
    receiver.stop()
    assert calls == [
        {"stage_id": 0, "build_payload": builder, "join_timeout": 0.5},
        {"stage_id": 1, "src_stage_id": 0, "join_timeout": 0.5},
    ]
    one, same = bed.pair(factory, loopback=True)
    one.stop()
    assert one is same
    assert calls[-1] == {"stage_id": 1, "src_stage_id": 1, "build_payload": None}


def test_pair_stops_the_sender_when_the_receiver_cannot_be_made() -> None:
    made: list[Any] = []

    def factory(connector: Any, **kwargs: Any) -> Any:
        if kwargs["stage_id"] == 1:
            raise ValueError("no receivers today")
        made.append(reference_factory(connector, **kwargs))
        return made[-1]

    with pytest.raises(ValueError, match="no receivers today"):
        Bed().pair(factory)
    assert made and all(not t.is_alive() for t in made[0].threads())


def test_progress_counts_calls_and_changes_apart() -> None:
    progress = Progress(FaultyConnector(MemoryConnector()))
    progress.put("a_0_0", {"data": 1, "finished": False})
    assert progress.get("a_0_0") is not None
    assert progress.get("missing") is None
    progress.inner.fail_next("put")  # type: ignore[attr-defined]
    with pytest.raises(InjectedFault):
        progress.put("b_0_0", {"data": 2, "finished": False})
    # ops: every call; changes: puts (a failed one too) and gets that found a value
    assert (progress.ops, progress.changes) == (4, 3)


def test_progress_wait_for_wakes_when_another_thread_calls_the_connector() -> None:
    progress = Progress(MemoryConnector())
    go = threading.Event()  # opened by the test once the waiter is about to wait

    def putter() -> None:
        go.wait(GENEROUS)
        progress.put("p_0_0", {"data": 0, "finished": True})

    threading.Thread(target=putter, name="bed-test-putter", daemon=True).start()
    go.set()
    assert progress.wait_for(lambda: progress.ops >= 1, GENEROUS)
    assert not progress.wait_for(lambda: progress.ops >= 2, BLOCKED)


def test_progress_wait_quiet_returns_once_nothing_changed_and_fails_while_busy() -> None:
    progress = Progress(MemoryConnector())
    assert progress.wait_quiet(BLOCKED, GENEROUS)
    stop = threading.Event()  # set by the test to end the busy putter

    def busy() -> None:
        i = 0
        while not stop.is_set():
            progress.put(f"b_0_{i}", {"data": i, "finished": False})
            i += 1
            stop.wait(BLOCKED / 10)

    thread = threading.Thread(target=busy, name="bed-test-busy", daemon=True)
    thread.start()
    try:
        assert progress.wait_for(lambda: progress.changes > 0, GENEROUS)
        assert not progress.wait_quiet(idle=GENEROUS, limit=BLOCKED * 4)
    finally:
        stop.set()
        thread.join(GENEROUS)
