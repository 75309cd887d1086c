"""Faults: put retries (R10) and exceptions that never kill a background thread (R22).

Faults are scripted with FaultyConnector rules and GatedBuilder.fail, so every
run is the same. Counters (stats()) are checked in test_stats.py.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from chunk_adapter.connectors import FaultyConnector, MemoryConnector, RecordingConnector
from chunk_adapter.history import ConnectorOp
from tests.unit._rig import Rig, chunk
from tests.unit._wait import Inbox, wait_until


def _attempts(rec: RecordingConnector, key: str) -> list[ConnectorOp]:
    return [op for op in rec.ops() if op.op == "put" and op.key == key]


@pytest.mark.rule("R10", "R9")
def test_a_failed_put_is_retried_under_the_same_id(rig: Rig, mem: MemoryConnector) -> None:
    faulty = FaultyConnector(mem)
    faulty.fail_next("put", "r_0_0", times=2)  # two failures: the third try succeeds
    rec = RecordingConnector(faulty)
    snd, _rcv, inbox = rig.receiving(rec, "r")
    snd.save_async("r", "a", False)
    snd.save_async("r", "b", True)
    inbox.wait_final("r")
    assert inbox.of("r") == [chunk("a"), chunk("b", True)], rig.repro
    attempts = _attempts(rec, "r_0_0")
    assert [op.outcome for op in attempts] == ["error", "error", "ok"], attempts
    assert all(op.value == chunk("a") for op in attempts), "R10: the retry must put the same value"
    assert mem.puts == ["r_0_0", "r_0_1"]


@pytest.mark.rule("R10", "R9")
def test_a_non_final_is_dropped_after_three_tries_and_the_next_takes_its_id(
    rig: Rig, mem: MemoryConnector
) -> None:
    faulty = FaultyConnector(mem)
    faulty.fail_next("put", "r_0_1", times=3)
    rec = RecordingConnector(faulty)
    snd, _rcv, inbox = rig.receiving(rec, "r")
    for payload in ("a", "lost", "c"):
        snd.save_async("r", payload, False)
    snd.save_async("r", "end", True)
    inbox.wait_final("r")
    assert inbox.of("r") == [chunk("a"), chunk("c"), chunk("end", True)], rig.repro
    attempts = _attempts(rec, "r_0_1")
    assert [(op.outcome, op.value["data"]) for op in attempts] == [
        ("error", "lost"),
        ("error", "lost"),
        ("error", "lost"),
        ("ok", "c"),
    ], f"R10: 3 tries in all by default; {attempts}"


@pytest.mark.rule("R10")
def test_put_tries_option_sets_the_number_of_tries(rig: Rig, mem: MemoryConnector) -> None:
    if not rig.accepts("put_tries"):
        pytest.skip("the factory takes no put_tries option")
    faulty = FaultyConnector(mem)
    faulty.fail_next("put", "r_0_0", times=5)
    rec = RecordingConnector(faulty)
    snd = rig.adapter(rec, stage_id=0, put_tries=5, put_backoff=0.001)
    snd.save_async("r", "lost", False)
    snd.save_async("r", "end", True)
    wait_until(lambda: mem.puts == ["r_0_0"], what="the final")
    assert [op.outcome for op in _attempts(rec, "r_0_0")] == ["error"] * 5 + ["ok"]
    assert mem.get("r_0_0") == chunk("end", True)


@pytest.mark.rule("R10", "R11")
def test_a_final_is_retried_until_it_succeeds(rig: Rig, mem: MemoryConnector) -> None:
    faulty = FaultyConnector(mem)
    faulty.fail_next("put", "r_0_1", times=7)  # far more than the non-final budget
    rec = RecordingConnector(faulty)
    snd, _rcv, inbox = rig.receiving(rec, "r")
    snd.save_async("r", "a", False)
    snd.save_async("r", "end", True)
    snd.save_async("next", "n", True)  # another request's: may pass the failing final (R5)
    inbox.wait_final("r")
    attempts = _attempts(rec, "r_0_1")
    assert [op.outcome for op in attempts] == ["error"] * 7 + ["ok"], rig.repro
    assert inbox.of("r") == [chunk("a"), chunk("end", True)]
    wait_until(lambda: "next_0_0" in mem.puts, what="the other request's final")
    assert [k for k in mem.puts if k.startswith("r_")] == ["r_0_0", "r_0_1"], rig.repro


@pytest.mark.rule("R10")
def test_retries_back_off(rig: Rig, mem: MemoryConnector) -> None:
    """Three tries of a doomed chunk are spread in time, not fired back to back."""

    class Stamped:
        def __init__(self) -> None:
            self.times: list[float] = []

        def put(self, key: str, value: dict[str, Any]) -> None:
            self.times.append(time.perf_counter())
            raise ConnectionError(f"refused {key}")

        def get(self, key: str) -> dict[str, Any] | None:
            return None

    stamped = Stamped()
    snd = rig.adapter(stamped, stage_id=0)
    snd.save_async("r", "doomed", False)
    wait_until(lambda: len(stamped.times) >= 3, what="three tries")
    span = stamped.times[2] - stamped.times[0]
    assert span >= 0.001, f"R10: three tries within {span * 1e6:.0f} us: no backoff"


@pytest.mark.rule("R22")
@pytest.mark.parametrize(
    "error",
    [RuntimeError("boom"), KeyError("k"), ConnectionError("down"), ValueError("v")],
    ids=lambda e: type(e).__name__,
)
def test_put_exceptions_never_kill_the_save_thread(
    rig: Rig, mem: MemoryConnector, error: Exception
) -> None:
    class Raising:
        def put(self, key: str, value: dict[str, Any]) -> None:
            if key.startswith("bad_"):
                raise error
            mem.put(key, value)

        def get(self, key: str) -> dict[str, Any] | None:
            return mem.get(key)

    snd, _rcv, inbox = rig.receiving(Raising(), "good")
    for i in range(5):
        snd.save_async("bad", i, False)
        snd.save_async("good", i, False)
    snd.save_async("good", "end", True)
    inbox.wait_final("good")
    assert inbox.data("good") == [0, 1, 2, 3, 4, "end"], rig.repro


@pytest.mark.rule("R22")
def test_a_final_that_never_puts_does_not_stop_the_receiver(rig: Rig, mem: MemoryConnector) -> None:
    """The SAVE thread is stuck retrying one final; the RECV thread keeps serving."""
    faulty = FaultyConnector(mem)
    faulty.fail_next("put", "stuck_0_0", times=10**9)
    snd = rig.adapter(faulty, stage_id=0)
    rcv = rig.adapter(mem, stage_id=1)
    inbox = Inbox(rcv)
    snd.save_async("stuck", "end", True)
    wait_until(lambda: faulty.injected["put"] >= 2, what="two failed puts")
    rcv.load_async("r")
    mem.put("r_0_0", chunk("x", True))
    inbox.wait_final("r")


@pytest.mark.rule("R22")
def test_get_exceptions_never_kill_the_recv_thread(rig: Rig, mem: MemoryConnector) -> None:
    class Raising:
        def put(self, key: str, value: dict[str, Any]) -> None:
            mem.put(key, value)

        def get(self, key: str) -> dict[str, Any] | None:
            if key.startswith("bad_"):
                raise RuntimeError(f"get {key} exploded")
            return mem.get(key)

    rcv = rig.adapter(Raising(), stage_id=1)
    inbox = Inbox(rcv)
    mem.put("bad_0_0", chunk("never", True))
    rcv.load_async("bad")
    rcv.load_async("good")
    for i in range(5):
        mem.put(f"good_0_{i}", chunk(i, i == 4))
    inbox.wait_final("good")
    assert inbox.data("good") == [0, 1, 2, 3, 4], rig.repro
    assert "bad" not in inbox.chunks


@pytest.mark.rule("R22", "R7")
def test_build_exceptions_never_kill_the_save_thread(rig: Rig, mem: MemoryConnector) -> None:
    def build(rid: str, snap: Any, is_final: bool) -> Any:
        if rid == "bad":
            raise RuntimeError("build exploded")
        return snap

    snd, rcv, inbox = rig.receiving(mem, build_payload=build)
    for rid in ("bad", "good"):
        rcv.load_async(rid)
    for i in range(5):
        snd.save_async("bad", i, False)
        snd.save_async("good", i, False)
    snd.save_async("bad", "end", True)
    snd.save_async("good", "end", True)
    inbox.wait_final("bad", "good")
    assert inbox.data("good") == [0, 1, 2, 3, 4, "end"], rig.repro
    assert inbox.of("bad") == [chunk(None, True)], "R7: the final of a failing build is None"


@pytest.mark.rule("R22")
def test_faults_on_every_path_at_once(rig: Rig, mem: MemoryConnector) -> None:
    """Puts, gets and builds all fail now and then (scripted); every final still arrives."""
    faulty = FaultyConnector(mem)
    for n in range(0, 40, 3):
        faulty.fail_next("put", f"r{n % 4}_0_{n // 4}", times=2)
        faulty.fail_next("get", f"r{(n + 1) % 4}_0_{n // 4}", times=2)
    builder = rig.gated_builder()
    builder.fail(predicate=lambda rid, snap, fin: snap % 7 == 3, times=100)
    snd, rcv, inbox = rig.receiving(faulty, build_payload=builder)
    rids = [f"r{i}" for i in range(4)]
    for rid in rids:
        rcv.load_async(rid)
    for i in range(12):
        for rid in rids:
            snd.save_async(rid, i, i == 11)
    inbox.wait_final(*rids)
    for rid in rids:
        data = inbox.data(rid)
        expected = [i for i in range(12) if i % 7 != 3]
        assert data == expected, f"{rid}: {data}; {rig.repro}"
