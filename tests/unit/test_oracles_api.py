"""The oracles' API, the recording wrappers, and the order findings are reported in
(root cause first). Histories are scripted with :class:`_history_script.Script`.
"""

from __future__ import annotations

from typing import Any

import pytest

from chunk_adapter.errors import AdapterStopped
from chunk_adapter.history import BuildCall, History
from chunk_adapter.oracles import (
    CallRecord,
    ContractViolation,
    RecordedAdapter,
    RecordedPipeline,
    Violation,
    assert_ok,
    check,
)
from chunk_adapter.oracles.check import collapse
from tests.unit._history_script import Script, c


def test_violation_str_starts_with_the_rule_and_assert_ok_lists_them() -> None:
    v = Violation("R9", "expected id 1", "r", "r_1_2")
    assert str(v).startswith("R9: ")
    assert "'r_1_2'" in str(v)
    s = Script()
    s.load("r")
    s.poll({"r": [c("ghost")]})
    with pytest.raises(ContractViolation) as info:
        assert_ok(s.h, quiescent=False, context="reproduce: X")
    assert info.value.rules == ["R14"]
    assert "R14" in str(info.value) and "reproduce: X" in str(info.value)
    assert_ok(Script().h, quiescent=True)


class _Fake:
    def __init__(self) -> None:
        self.saved: list[Any] = []

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self.saved.append(obj)

    def cancel_sender(self, request_id: str) -> None:
        raise AdapterStopped("stopped")

    def load_async(self, request_id: str) -> None: ...

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        return {"r": [c(["x"])]}

    def cleanup_receiver(self, request_id: str) -> None: ...

    def stop(self) -> None: ...


def test_recorded_adapter_records_snapshot_result_and_error() -> None:
    h = History()
    fake = _Fake()
    a = RecordedAdapter(fake, h)
    obj = ["a"]
    a.save_async("r", obj, False)
    obj.append("mutated")
    got = a.poll_ready()
    got["r"][0]["data"].append("caller mutates")
    with pytest.raises(AdapterStopped):
        a.cancel_sender("r")
    save, poll, cancel = h.records(CallRecord)
    assert save.args == (["a"], False) and fake.saved[0] is obj
    assert poll.result == {"r": [c(["x"])]}
    assert isinstance(cancel.error, AdapterStopped) and cancel.request_id == "r"
    assert save.end < poll.begin < poll.end < cancel.begin


# ------------------------------------------------------- root cause first (at)
def test_violations_are_ordered_by_the_event_that_broke_them() -> None:
    early_receiver = Script()
    early_receiver.load("r")
    early_receiver.poll({"r": [c("ghost")]})  # R14, at this poll
    early_receiver.save("q", "a")
    early_receiver.build("q", "a")
    early_receiver.put("q_1_0", None, value={"data": "a"})  # R2, later
    found = check(early_receiver.h, quiescent=False)
    assert [v.rule for v in found] == ["R14", "R2"]
    assert found[0].at is not None and found[1].at is not None and found[0].at < found[1].at

    early_sender = Script()
    early_sender.save("q", "a")
    early_sender.build("q", "a")
    early_sender.put("q_1_0", None, value={"data": "a"})  # R2, first
    early_sender.load("r")
    early_sender.poll({"r": [c("ghost")]})  # R14, after it
    assert early_sender.rules() == ["R2", "R14"]
    with pytest.raises(ContractViolation) as info:
        assert_ok(early_sender.h, quiescent=False)
    assert info.value.rules == ["R2", "R14"]
    assert str(info.value).startswith("contract rules broken: R2, R14")


def test_what_never_happened_comes_after_what_went_wrong() -> None:
    s = Script()
    s.save("a", "lost", True)  # never put: R11, a consequence-style (liveness) finding
    s.save("z", "x")
    s.save("z", "y", True)
    s.build("z", "x")
    s.put("z_1_0", "x")
    s.build("z", "y", True)
    s.put("z_1_2", "y", True)  # a gap: R9, at this put
    found = check(s.h, quiescent=True, put_tries=3)
    assert [v.rule for v in found][:2] == ["R9", "R11"]
    assert found[0].at is not None and found[1].at is None


@pytest.mark.rule("R4", "R5")
def test_a_mutated_payload_is_reported_once_as_r4_not_again_as_r5() -> None:
    """The put of a mutated object is still the put of its save: the next chunk's put
    must not report that save as never put."""
    s = Script()
    s.save("r", ["a"])
    s.save("r", ["b"])
    s.build("r", ["a", "mutated"])
    s.put("r_1_0", ["a", "mutated"])
    s.build("r", ["b"])
    s.put("r_1_1", ["b"])
    assert s.rules(quiescent=True) == ["R4"]


def test_collapse_keeps_one_violation_per_faulty_chunk() -> None:
    gap = Violation("R9", "gap", "r", "r_1_1", at=5)
    lost = Violation("R23", "never received", "r", "r_1_1")
    other = Violation("R23", "never received", "r", "r_1_2")
    assert collapse([gap, lost, other]) == [gap, other]


def test_after_stop_is_judged_per_adapter() -> None:
    """A pipeline: a save after the *sender* stopped must raise; the receiver keeps
    registering until it is stopped itself, and polls work after its stop."""
    s = Script()
    s.call("load_async", "r", adapter="receiver")
    s.call("stop", adapter="sender")
    s.call("save_async", "r", ("a", False), adapter="sender")  # returned normally: R19
    s.call("load_async", "q", adapter="receiver")  # the receiver still runs: fine
    s.call("stop", adapter="receiver")
    s.call("poll_ready", None, (), {}, adapter="receiver")  # must work: fine
    found = check(s.h, quiescent=False)
    assert [v.rule for v in found] == ["R19"]
    assert "save_async" in found[0].message


def test_a_poll_hands_out_only_its_own_adapters_registrations() -> None:
    s = Script()
    s.call("load_async", "r", adapter="receiver")
    s.call("poll_ready", None, (), {"r": [c("x")]}, adapter="other")
    assert s.rules() == ["R12"]


def test_recorded_pipeline_sends_on_the_sender_and_receives_on_the_receiver() -> None:
    h = History()
    snd, rcv = _Fake(), _Fake()
    p = RecordedPipeline(snd, rcv, h)
    p.save_async("r", ["a"], False)
    p.load_async("r")
    p.poll_ready()
    p.stop()
    calls = [(r.call, r.adapter) for r in h.records(CallRecord)]
    assert calls == [
        ("save_async", "sender"),
        ("load_async", "receiver"),
        ("poll_ready", "receiver"),
        ("stop", "sender"),
        ("stop", "receiver"),
    ]
    assert snd.saved == [["a"]] and rcv.saved == []
    one = RecordedPipeline(snd, snd, History())
    assert one.loopback and [a.name for a in one.sides] == ["adapter"]


@pytest.mark.rule("R3")
def test_r3_fires_on_a_build_done_inside_save_async_and_comes_first() -> None:
    """A build on the scheduler's own thread, while save_async runs, is the root cause;
    it is kept out of the alignment, so the SAVE thread's own build and put are fine."""
    s = Script()
    begin = s.start()
    b = s.h.tick()
    s.h.append(BuildCall("r", "a", False, "a", "ok", None, b, s.h.tick(), "main"))
    s.h.append(CallRecord("save_async", "r", ("a", False), None, None, begin, s.h.tick(), "main"))
    s.build("r", "a")
    s.put("r_1_0", "a")
    found = check(s.h, quiescent=True, put_tries=3)
    assert [v.rule for v in found] == ["R3"], found
    assert found[0].at == b and "build_payload" in found[0].message
    s.save("r", "b")
    s.build("r", "b")
    s.put("r_1_1", "b")
    assert s.rules(quiescent=True) == ["R3"]  # a build on another thread is not inline
