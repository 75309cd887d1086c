"""The connector layer: MemoryConnector, the recording, fault and gate wrappers, GatedBuilder.

These are the tools every other test relies on, so each is shown to do what it
claims, including failing when it should.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from chunk_adapter.connectors import (
    Connector,
    FaultRule,
    FaultyConnector,
    GatedBuilder,
    GatedConnector,
    MemoryConnector,
    RecordingConnector,
    chunk_key,
    identity_build,
)
from chunk_adapter.connectors.base import Subscriptions
from chunk_adapter.connectors.fatal import raised_kind
from chunk_adapter.connectors.timed import TimedFaults
from chunk_adapter.errors import InjectedFault, InvalidValue
from chunk_adapter.explore.scenarios.scenario import fail_build, fail_put, slow
from chunk_adapter.history import BuildCall, ConnectorOp, History
from tests.unit._wait import wait_until


def _in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


# ------------------------------------------------------------------ memory


@pytest.mark.rule("R1")
def test_chunk_key_format() -> None:
    assert chunk_key("req-1", 3, 0) == "req-1_3_0"
    assert chunk_key("a_b", 0, 12) == "a_b_0_12"


def test_memory_connector_put_get_and_puts_log() -> None:
    mem = MemoryConnector()
    assert isinstance(mem, Connector)
    assert mem.get("k") is None
    mem.put("k", {"data": 1, "finished": False})
    mem.put("j", {"data": 2, "finished": True})
    mem.put("k", {"data": 3, "finished": False})
    assert mem.get("k") == {"data": 3, "finished": False}
    assert mem.get("k") == {"data": 3, "finished": False}, "a keeping get does not consume"
    assert mem.puts == ["k", "j", "k"]
    assert sorted(mem.keys()) == ["j", "k"] and len(mem) == 2
    mem.puts.append("tamper")
    assert mem.puts == ["k", "j", "k"], "puts is a copy"


def test_memory_connector_consume_on_get() -> None:
    mem = MemoryConnector(consume_on_get=True)
    mem.put("k", {"data": 1, "finished": False})
    assert mem.get("k") == {"data": 1, "finished": False}
    assert mem.get("k") is None
    assert mem.keys() == [] and mem.puts == ["k"]


def test_memory_connector_is_thread_safe() -> None:
    mem = MemoryConnector()

    def writer(t: int) -> None:
        for i in range(500):
            mem.put(f"{t}_{i}", {"i": i})

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(mem) == 2000 and len(mem.puts) == 2000


# --------------------------------------------------------------- recording


def test_recording_connector_records_every_call_in_order() -> None:
    history = History()
    faulty = FaultyConnector(MemoryConnector())
    faulty.fail_next("put", "bad")
    rec = RecordingConnector(faulty, history)
    rec.put("k", {"data": 1, "finished": False})
    assert rec.get("k") == {"data": 1, "finished": False}
    assert rec.get("missing") is None
    with pytest.raises(InjectedFault):
        rec.put("bad", {"data": 2, "finished": False})
    ops = rec.ops()
    assert [(op.op, op.key, op.outcome) for op in ops] == [
        ("put", "k", "ok"),
        ("get", "k", "ok"),
        ("get", "missing", "none"),
        ("put", "bad", "error"),
    ]
    assert ops[3].error is not None and "bad" in ops[3].error
    assert all(op.begin < op.end for op in ops)
    assert all(a.end < b.begin for a, b in itertools.pairwise(ops)), (
        "sequential calls do not overlap"
    )
    assert {op.thread for op in ops} == {threading.current_thread().name}
    assert rec.puts == ["k"], "puts lists successful puts only"
    assert history.records(ConnectorOp) == ops


def test_recording_shares_one_sequence_with_a_builder() -> None:
    history = History()
    rec = RecordingConnector(MemoryConnector(), history)
    builder = GatedBuilder(history=history)
    rec.put("a", {})
    builder("r", "snap", False)
    rec.put("b", {})
    seq = [(type(r).__name__, r.begin) for r in history.records()]
    assert [name for name, _ in seq] == ["ConnectorOp", "BuildCall", "ConnectorOp"]
    assert [b for _, b in seq] == sorted(b for _, b in seq)


# ------------------------------------------------------------------ faults


def test_fault_rule_nth_and_times() -> None:
    faulty = FaultyConnector(MemoryConnector(), rules=[FaultRule("put", "k", nth=2, times=2)])
    outcomes = []
    for _ in range(5):
        try:
            faulty.put("k", {"n": 1})
            outcomes.append("ok")
        except InjectedFault:
            outcomes.append("fail")
    assert outcomes == ["ok", "fail", "fail", "ok", "ok"]
    faulty.put("other", {})  # another key is not matched
    assert faulty.injected == {"put": 2, "get": 0}


def test_a_failed_put_stores_nothing_and_fail_next_on_gets() -> None:
    mem = MemoryConnector()
    faulty = FaultyConnector(mem)
    faulty.fail_next("put", times=1)
    with pytest.raises(InjectedFault, match="'k'"):
        faulty.put("k", {"x": 1})
    assert mem.puts == [] and mem.get("k") is None
    faulty.put("k", {"x": 1})
    faulty.fail_next("get", "k", times=2)
    for _ in range(2):
        with pytest.raises(InjectedFault):
            faulty.get("k")
    assert faulty.get("k") == {"x": 1}


def test_fault_rates_are_reproducible_from_the_seed() -> None:
    def pattern(seed: int) -> list[bool]:
        faulty = FaultyConnector(MemoryConnector(), put_rate=0.5, get_rate=0.5, seed=seed)
        out = []
        for i in range(200):
            try:
                faulty.put(f"k{i}", {}) if i % 2 else faulty.get(f"k{i}")
                out.append(True)
            except InjectedFault:
                out.append(False)
        return out

    assert pattern(7) == pattern(7)
    assert pattern(7) != pattern(8)
    assert 50 < pattern(7).count(False) < 150


def test_random_faults_require_a_seed() -> None:
    with pytest.raises(InvalidValue, match="seed"):
        FaultyConnector(MemoryConnector(), put_rate=0.1)
    with pytest.raises(InvalidValue, match="seed"):
        FaultyConnector(MemoryConnector(), get_rate=0.1)
    faulty = FaultyConnector(MemoryConnector())
    with pytest.raises(InvalidValue, match="seed"):
        faulty.set_rates(put=0.5)
    seeded = FaultyConnector(MemoryConnector(), seed=1)
    seeded.set_rates(put=1.0)
    with pytest.raises(InjectedFault):
        seeded.put("k", {})
    seeded.set_rates(put=0.0)
    seeded.put("k", {})


@pytest.mark.parametrize(
    "make",
    [
        lambda: FaultRule("delete"),  # type: ignore[arg-type]
        lambda: FaultRule("put", nth=0),
        lambda: FaultRule("get", times=0),
        lambda: FaultyConnector(MemoryConnector(), put_rate=1.5, seed=1),
        lambda: FaultyConnector(MemoryConnector(), get_rate=-0.1, seed=1),
    ],
    ids=["op", "nth", "times", "put_rate", "get_rate"],
)
def test_fault_configuration_is_checked(make: Callable[[], object]) -> None:
    with pytest.raises(InvalidValue):
        make()


def _kind(call: Callable[[], object]) -> str | None:
    try:
        call()
    except BaseException as exc:  # the injected SystemExit-likes too
        return raised_kind(exc) or type(exc).__name__
    return None


def test_overlapping_rules_count_each_call_and_the_first_added_names_the_error() -> None:
    faulty = FaultyConnector(MemoryConnector())
    faulty.fail_next("put", times=2, raises="exit")  # any key: the next two puts
    faulty.fail_next("put", "r_0_0", raises="cancelled")  # added second: loses to the first
    faulty.fail_next("put", stream="r_0", times=3, raises="base")
    assert _kind(lambda: faulty.put("r_0_0", {})) == "exit"  # all three matched it
    assert _kind(lambda: faulty.put("s_0_0", {})) == "exit"  # the any-key rule's last
    assert _kind(lambda: faulty.put("r_0_1", {})) == "base"  # the stream's 2nd of 3
    assert _kind(lambda: faulty.put("r_0_0", {})) == "base"  # the keyed rule is spent
    assert _kind(lambda: faulty.put("r_0_2", {})) is None  # every rule is spent now
    assert faulty.injected == {"put": 4, "get": 0}


def _best_of(runs: int, work: Callable[[], None]) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


SPENT = 20_000
"""Faults a long run has used up: a world repeated a thousand times arms a few each copy."""


def _spend_put_rules(faulty: FaultyConnector) -> None:
    for i in range(SPENT):
        faulty.fail_next("put", f"k{i}")
        faulty.fail_next("put", stream=f"s{i}_0")
        with pytest.raises(InjectedFault):
            faulty.put(f"k{i}", {})
        with pytest.raises(InjectedFault):
            faulty.put(f"s{i}_0_0", {})


def _spend_outages(faulty: FaultyConnector) -> None:
    clock = [0.0]
    faulty.timed.use_clock(lambda: clock[0], lambda seconds: None)
    for i in range(SPENT):
        faulty.timed.outage("put", f"k{i}", 1.0)
        faulty.timed.slow("put", f"k{i}", 0.5)
        assert faulty.timed.before("put", f"k{i}")
        clock[0] += 2.0  # over
    assert faulty.timed.ends == clock[0] - 2.0 + 1.0  # the last outage's end is kept


def _spend_build_failures(builder: GatedBuilder) -> None:
    for i in range(SPENT):
        builder.fail(f"r{i}")
        with pytest.raises(InjectedFault):
            builder(f"r{i}", "x", False)


@pytest.mark.parametrize("spend", ["put rules", "outages", "build failures"])
def test_spent_faults_cost_later_calls_nothing(spend: str) -> None:
    """A long run's used-up faults are dropped: before, every put, get and build scanned
    all faults ever armed, and a world repeated 5,000 times took 470 s (R24's repeat)."""
    fresh, spent = FaultyConnector(MemoryConnector()), FaultyConnector(MemoryConnector())
    fresh_builder, spent_builder = GatedBuilder(), GatedBuilder()
    if spend == "put rules":
        _spend_put_rules(spent)
    elif spend == "outages":
        _spend_outages(spent)
        fresh.timed.use_clock(spent.timed.clock, spent.timed.sleep)
        fresh.timed.outage("put", "gone", 1.0)  # so its calls consult the windows too
    else:
        _spend_build_failures(spent_builder)

    def calls(faulty: FaultyConnector, builder: GatedBuilder) -> Callable[[], None]:
        def work() -> None:
            for i in range(500):
                faulty.put(f"x_0_{i}", {})
                faulty.get(f"x_0_{i}")
                builder("x", i, False)

        return work

    ratio = _best_of(5, calls(spent, spent_builder)) / _best_of(5, calls(fresh, fresh_builder))
    assert ratio < 5, f"{spend}: calls after {SPENT} spent faults took {ratio:.1f}x as long"


def test_an_outage_is_judged_at_the_time_its_call_read() -> None:
    """A call that read the time inside an outage fails, even when a later call dropped
    that outage as over while the first was still on its way to look (a thread paused
    between reading the clock and checking would otherwise pass a call that fell in it)."""
    timed = TimedFaults()
    reading = threading.Event()  # set by B's clock read; the test lets it return later
    go_on = threading.Event()
    late: threading.Thread | None = None  # thread A, below

    def clock() -> float:
        if threading.current_thread() is late:
            return 70.0  # A: after the outage
        if threading.current_thread().name == "B":
            reading.set()
            go_on.wait(5.0)
            return 50.0  # B: inside it, read before A's
        return 40.0  # the outage starts now

    timed.use_clock(clock, lambda seconds: None)
    timed.outage("put", "k", 20.0)  # [40, 60)
    results: dict[str, bool] = {}
    b = threading.Thread(target=lambda: results.update(B=timed.before("put", "k")), name="B")
    b.start()
    assert reading.wait(5.0)
    a = threading.Thread(target=lambda: results.update(A=timed.before("put", "k")), name="A")
    late = a
    a.start()
    a.join(0.5)  # room for A to drop the outage first, where nothing stops it
    go_on.set()
    a.join(5.0)
    b.join(5.0)
    assert results == {"A": False, "B": True}


@pytest.mark.parametrize(
    "make",
    [
        lambda: GatedBuilder().fail("r", times=0),
        lambda: TimedFaults().slow("put", None, 1.0, times=0),
        lambda: fail_build("r", times=0),
        lambda: fail_put("k", times=-1),
        lambda: slow("get", None, 1.0, times=1.5),
    ],
    ids=["builder", "timed slow", "fail_build op", "fail_put op", "slow op"],
)
def test_a_fault_counts_its_calls_from_one(make: Callable[[], object]) -> None:
    with pytest.raises(InvalidValue, match="times"):
        make()


# ------------------------------------------------------------------- gates


def test_gated_connector_holds_a_get_until_released() -> None:
    mem = MemoryConnector()
    mem.put("k", {"v": 1})
    gated = GatedConnector(mem)
    gate = gated.hold_get("k")
    assert gated.get("other") is None, "a different key is not held"
    thread, box = _in_thread(lambda: gated.get("k"))
    assert gate.wait_started(), "the get never reached the gate"
    assert thread.is_alive() and "result" not in box
    gate.release()
    thread.join(5.0)
    assert box == {"result": {"v": 1}}
    assert gated.get("k") == {"v": 1}, "the gate caught one call only"
    assert gate.held == 1


def test_gate_count_catches_several_calls_and_put_holds() -> None:
    mem = MemoryConnector()
    gated = GatedConnector(mem)
    gate = gated.hold_put(predicate=lambda k: k.startswith("a"), count=2)
    t1, _ = _in_thread(lambda: gated.put("a1", {}))
    t2, _ = _in_thread(lambda: gated.put("a2", {}))
    wait_until(lambda: gate.held == 2, what="two puts at the gate")
    gated.put("b", {})
    assert mem.puts == ["b"], "held puts have not reached the store"
    assert gate.remaining == 0 and gated.gates.armed() == []
    gate.release()
    t1.join(5.0)
    t2.join(5.0)
    assert sorted(mem.puts) == ["a1", "a2", "b"]


def test_release_all_frees_every_gate_and_disarms_the_rest() -> None:
    gated = GatedConnector(MemoryConnector())
    held = gated.hold_get("x")
    armed = gated.hold_get("y")
    thread, _ = _in_thread(lambda: gated.get("x"))
    assert held.wait_started()
    gated.release_all()
    thread.join(5.0)
    assert not thread.is_alive()
    assert armed.released.is_set() and gated.gates.armed() == []
    assert gated.get("y") is None, "a disarmed gate holds nothing"
    assert held.wait_started(0.0), "it did start"


def test_gate_wait_started_times_out_and_bad_arguments() -> None:
    gated = GatedConnector(MemoryConnector())
    gate = gated.hold_get("never")
    assert gate.wait_started(0.01) is False
    with pytest.raises(ValueError, match="not both"):
        gated.hold_get("k", predicate=lambda k: True)
    with pytest.raises(ValueError, match="count"):
        gated.hold_put("k", count=0)
    assert "armed" in repr(gate)
    gate.release()
    assert "released" in repr(gate)


def test_gated_builder_holds_fails_and_records() -> None:
    history = History()
    builder = GatedBuilder(lambda rid, snap, fin: [snap], history)
    gate = builder.hold("slow")
    builder.fail(predicate=lambda rid, snap, fin: snap == "bad", times=1)
    assert builder("fast", "x", False) == ["x"]
    with pytest.raises(InjectedFault, match="'r'"):
        builder("r", "bad", True)
    assert builder("r", "bad", True) == ["bad"], "the failure was used up"
    thread, box = _in_thread(lambda: builder("slow", "s", False))
    assert gate.wait_started()
    assert thread.is_alive()
    builder.release_all()
    thread.join(5.0)
    assert box == {"result": ["s"]}
    calls = history.records(BuildCall)
    assert [(c.request_id, c.outcome) for c in calls] == [
        ("fast", "ok"),
        ("r", "error"),
        ("r", "ok"),
        ("slow", "ok"),
    ]
    assert builder.calls == 4
    assert identity_build("r", {"a": 1}, True) == {"a": 1}
    with pytest.raises(ValueError, match="not both"):
        builder.hold("r", predicate=lambda rid, snap, fin: True)


def test_wrappers_nest_in_any_order() -> None:
    mem = MemoryConnector()
    gated = GatedConnector(mem)
    faulty = FaultyConnector(gated)
    faulty.fail_next("put", "k")
    rec = RecordingConnector(faulty)
    gate = gated.hold_get("k")
    with pytest.raises(InjectedFault):
        rec.put("k", {"v": 0})
    rec.put("k", {"v": 1})
    thread, box = _in_thread(lambda: rec.get("k"))
    assert gate.wait_started()
    assert [op.op for op in rec.ops()] == ["put", "put"], "the held get is not recorded yet"
    gate.release()
    thread.join(5.0)
    assert box == {"result": {"v": 1}}
    assert [(op.op, op.outcome) for op in rec.ops()] == [
        ("put", "error"),
        ("put", "ok"),
        ("get", "ok"),
    ]


# ------------------------------------------------------------------ subscriptions


class _Listener:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_subscriptions_unsubscribe_drops_and_closes_and_close_takes_the_rest() -> None:
    subs: Subscriptions[_Listener] = Subscriptions()
    a, b, c = _Listener(), _Listener(), _Listener()
    end_a, end_b, _ = subs.add(a), subs.add(b), subs.add(c)
    end_a()
    assert a.closed == 1 and (b.closed, c.closed) == (0, 0)
    end_a()  # a second unsubscribe closes again (listeners' close() is idempotent)
    assert a.closed == 2
    assert subs.take_all() == [b, c]  # what the connector's close() then closes
    assert subs.take_all() == []
    end_b()  # unsubscribe after the connector's close: only closes, nothing left to drop
    assert b.closed == 1 and subs.take_all() == []
