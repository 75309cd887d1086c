"""The oracles on hand-written histories: each fires on a violation and stays quiet otherwise.

Histories are scripted record by record with :class:`Script`; every record
takes fresh sequence numbers, so records are strictly ordered unless a test
opens an operation early (``begin=``) to make it overlap others.
"""

from __future__ import annotations

from typing import Any

import pytest

from chunk_adapter.errors import AdapterStopped
from chunk_adapter.history import BuildCall, ConnectorOp, History
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


class Script:
    """Builds a History by hand (module doc)."""

    def __init__(self) -> None:
        self.h = History()

    def start(self) -> int:
        return self.h.tick()

    def call(
        self,
        call: Any,
        rid: str | None = None,
        args: tuple[Any, ...] = (),
        result: Any = None,
        error: BaseException | None = None,
        adapter: str = "adapter",
    ) -> None:
        b = self.h.tick()
        self.h.append(CallRecord(call, rid, args, result, error, b, self.h.tick(), "main", adapter))

    def save(self, rid: str, snap: Any, final: bool = False) -> None:
        self.call("save_async", rid, (snap, final))

    def cancel(self, rid: str) -> None:
        self.call("cancel_sender", rid)

    def load(self, rid: str) -> None:
        self.call("load_async", rid)

    def cleanup(self, rid: str) -> None:
        self.call("cleanup_receiver", rid)

    def poll(self, result: dict[str, list[dict[str, Any]]]) -> None:
        self.call("poll_ready", None, (), result)

    def stop(self) -> None:
        self.call("stop")

    def build(self, rid: str, snap: Any, final: bool = False, *, fail: bool = False) -> None:
        b = self.h.tick()
        self.h.append(
            BuildCall(
                rid,
                snap,
                final,
                None if fail else snap,
                "error" if fail else "ok",
                "InjectedFault()" if fail else None,
                b,
                self.h.tick(),
                "save",
            )
        )

    def put(
        self, key: str, data: Any, finished: bool = False, *, fail: bool = False, value: Any = None
    ) -> None:
        b = self.h.tick()
        v = value if value is not None else {"data": data, "finished": finished}
        self.h.append(
            ConnectorOp(
                "put",
                key,
                v,
                "error" if fail else "ok",
                "InjectedFault()" if fail else None,
                b,
                self.h.tick(),
                "save",
            )
        )

    def get(self, key: str, value: Any = None, *, begin: int | None = None) -> None:
        b = begin if begin is not None else self.h.tick()
        outcome = "none" if value is None else "ok"
        self.h.append(ConnectorOp("get", key, value, outcome, None, b, self.h.tick(), "recv"))

    def rules(self, *, quiescent: bool = False, put_tries: int | None = 3) -> list[str]:
        return [v.rule for v in check(self.h, quiescent=quiescent, put_tries=put_tries)]


def c(data: Any, finished: bool = False) -> dict[str, Any]:
    return {"data": data, "finished": finished}


def sent(s: Script, rid: str, items: list[tuple[Any, bool]]) -> None:
    """Save, build and put *items* of one request correctly, in order."""
    for snap, final in items:
        s.save(rid, snap, final)
    for i, (snap, final) in enumerate(items):
        s.build(rid, snap, final)
        s.put(f"{rid}_1_{i}", snap, final)


# ------------------------------------------------------------------ sender side
@pytest.mark.rule("R9")
def test_r9_quiet_on_contiguous_ids_and_stream_reuse() -> None:
    s = Script()
    sent(s, "r", [("a", False), ("b", True)])
    sent(s, "r", [("c", True)])
    assert s.rules(quiescent=True) == []


@pytest.mark.rule("R9")
def test_r9_fires_on_a_gap() -> None:
    s = Script()
    s.save("r", "a")
    s.save("r", "b")
    s.build("r", "a")
    s.put("r_1_0", "a")
    s.build("r", "b")
    s.put("r_1_2", "b")
    assert "R9" in s.rules()


@pytest.mark.rule("R9", "R10")
def test_r9_fires_when_a_failed_put_used_up_an_id() -> None:
    s = Script()
    s.save("r", "a")
    s.build("r", "a")
    s.put("r_1_0", "a", fail=True)
    s.put("r_1_1", "a")
    assert "R9" in s.rules()


@pytest.mark.rule("R2")
def test_r2_fires_on_a_malformed_wire_value() -> None:
    s = Script()
    s.save("r", "a")
    s.build("r", "a")
    s.put("r_1_0", None, value={"data": "a"})
    assert "R2" in s.rules()


@pytest.mark.rule("R5")
def test_r5_fires_when_chunks_are_put_out_of_save_order() -> None:
    s = Script()
    s.save("r", "a")
    s.save("r", "b")
    s.build("r", "b")
    s.put("r_1_0", "b")
    s.build("r", "a")
    s.put("r_1_1", "a")
    assert "R5" in s.rules()


@pytest.mark.rule("R5")
def test_r5_fires_on_an_unexplained_drop() -> None:
    s = Script()
    s.save("r", "a")
    s.save("r", "b")
    s.build("r", "b")
    s.put("r_1_0", "b")
    assert s.rules() == ["R5"]


@pytest.mark.rule("R4")
def test_r4_fires_when_the_payload_is_not_built_from_the_snapshot() -> None:
    s = Script()
    s.save("r", ["a"])
    s.build("r", ["a", "mutated"])
    s.put("r_1_0", ["a", "mutated"])
    assert "R4" in s.rules()


@pytest.mark.rule("R4")
def test_r4_quiet_without_builder_records_when_data_is_the_snapshot() -> None:
    s = Script()
    s.save("r", ["a"])
    s.put("r_1_0", ["a"])
    assert s.rules() == []
    s.save("r", ["b"], True)
    s.put("r_1_1", ["b", "mutated"], True)
    assert "R4" in s.rules()


@pytest.mark.rule("R6")
def test_r6_quiet_on_a_cancelled_stream_with_a_none_final() -> None:
    s = Script()
    s.save("r", "a")
    s.cancel("r")
    s.save("r", "b")
    s.save("r", "end", True)
    s.put("r_1_0", None, True)
    assert s.rules(quiescent=True) == []


@pytest.mark.rule("R6")
def test_r6_fires_on_a_chunk_saved_after_cancel_and_put() -> None:
    s = Script()
    s.cancel("r")
    s.save("r", "a")
    s.build("r", "a")
    s.put("r_1_0", "a")
    assert "R6" in s.rules()


@pytest.mark.rule("R6")
def test_r6_fires_on_a_final_saved_after_cancel_with_data() -> None:
    s = Script()
    s.cancel("r")
    s.save("r", "end", True)
    s.build("r", "end", True)
    s.put("r_1_0", "end", True)
    assert "R6" in s.rules()


@pytest.mark.rule("R6")
def test_r6_allows_one_chunk_past_the_check_but_not_two() -> None:
    one = Script()
    one.save("w", "p0")
    one.save("w", "p1")
    one.cancel("w")
    one.build("w", "p0")  # build began after the cancel: the one in progress
    one.put("w_1_0", "p0")
    assert one.rules() == []
    two = Script()
    two.save("w", "p0")
    two.save("w", "p1")
    two.cancel("w")
    two.build("w", "p0")
    two.put("w_1_0", "p0")
    two.build("w", "p1")
    two.put("w_1_1", "p1")
    assert "R6" in two.rules()


@pytest.mark.rule("R7")
def test_r7_quiet_when_a_failed_build_drops_a_chunk_and_nones_the_final() -> None:
    s = Script()
    s.save("r", "a")
    s.save("r", "end", True)
    s.build("r", "a", fail=True)
    s.build("r", "end", True, fail=True)
    s.put("r_1_0", None, True)
    assert s.rules(quiescent=True) == []


@pytest.mark.rule("R7")
def test_r7_fires_on_a_put_without_a_successful_build() -> None:
    s = Script()
    s.save("r", "a")
    s.build("r", "a", fail=True)
    s.put("r_1_0", "a")
    assert "R7" in s.rules()


@pytest.mark.rule("R7")
def test_r7_fires_on_a_none_final_that_nothing_explains() -> None:
    s = Script()
    s.save("r", "end", True)
    s.build("r", "end", True)
    s.put("r_1_0", None, True)
    assert "R7" in s.rules()


@pytest.mark.rule("R8")
def test_r8_quiet_when_a_none_payload_is_skipped() -> None:
    s = Script()
    s.save("r", None)
    s.save("r", "b")
    s.build("r", None)
    s.build("r", "b")
    s.put("r_1_0", "b")
    assert s.rules(quiescent=True) == []


@pytest.mark.rule("R8")
def test_r8_fires_on_a_non_final_put_with_none() -> None:
    s = Script()
    s.save("r", None)
    s.build("r", None)
    s.put("r_1_0", None)
    assert "R8" in s.rules()


@pytest.mark.rule("R10")
def test_r10_quiet_on_a_drop_after_all_tries() -> None:
    s = Script()
    s.save("r", "a")
    s.save("r", "b")
    s.build("r", "a")
    for _ in range(3):
        s.put("r_1_0", "a", fail=True)
    s.build("r", "b")
    s.put("r_1_0", "b")
    assert s.rules(put_tries=3) == []


@pytest.mark.rule("R10")
def test_r10_fires_on_a_drop_after_too_few_tries() -> None:
    s = Script()
    s.save("r", "a")
    s.save("r", "b")
    s.build("r", "a")
    s.put("r_1_0", "a", fail=True)
    s.build("r", "b")
    s.put("r_1_0", "b")
    assert s.rules(put_tries=3) == ["R10"]
    assert s.rules(put_tries=None) == []


@pytest.mark.rule("R10")
def test_r10_fires_on_a_non_final_tried_more_than_put_tries() -> None:
    s = Script()
    s.save("r", "a")
    s.build("r", "a")
    for _ in range(3):
        s.put("r_1_0", "a", fail=True)
    s.put("r_1_0", "a")
    assert s.rules(put_tries=3) == ["R10"]


@pytest.mark.rule("R11")
def test_r11_fires_on_a_final_never_put_after_quiescence() -> None:
    s = Script()
    s.save("r", "end", True)
    assert s.rules(quiescent=False) == []
    assert s.rules(quiescent=True) == ["R11"]


@pytest.mark.rule("R11")
def test_r11_fires_on_a_final_put_that_was_never_saved() -> None:
    s = Script()
    s.save("r", "a")
    s.build("r", "a", True)
    s.put("r_1_0", "a", True)
    assert "R11" in s.rules()


@pytest.mark.rule("R23")
def test_r23_fires_on_a_saved_chunk_never_put_after_quiescence() -> None:
    s = Script()
    s.save("r", "a")
    assert s.rules(quiescent=False) == []
    assert s.rules(quiescent=True) == ["R23"]


@pytest.mark.rule("R18")
def test_r18_fires_on_a_put_after_stop_returned() -> None:
    s = Script()
    s.save("r", "a")
    s.build("r", "a")
    s.stop()
    assert s.rules() == []
    s.put("r_1_0", "a")
    assert "R18" in s.rules()


@pytest.mark.rule("R19")
def test_r19_fires_when_save_after_stop_does_not_raise() -> None:
    s = Script()
    s.stop()
    s.call("save_async", "r", ("a", False), error=AdapterStopped("stopped"))
    s.call("poll_ready", None, (), {})
    assert s.rules() == []
    s.call("load_async", "r")
    assert s.rules() == ["R19"]


# ---------------------------------------------------------------- receiver side
def received(s: Script, rid: str, values: list[dict[str, Any]]) -> None:
    for i, v in enumerate(values):
        s.put(f"{rid}_1_{i}", v["data"], v["finished"])
        s.get(f"{rid}_1_{i}", v)


@pytest.mark.rule("R14")
def test_r14_quiet_on_a_registration_delivered_in_order() -> None:
    s = Script()
    s.load("r")
    received(s, "r", [c("a"), c("b", True)])
    s.poll({"r": [c("a")]})
    s.poll({"r": [c("b", True)]})
    assert s.rules(quiescent=True, put_tries=None) == []


@pytest.mark.rule("R14")
def test_r14_fires_on_a_value_no_get_returned() -> None:
    s = Script()
    s.load("r")
    s.poll({"r": [c("ghost")]})
    assert s.rules() == ["R14"]


@pytest.mark.rule("R14")
def test_r14_fires_on_a_chunk_got_but_never_handed_out() -> None:
    s = Script()
    s.load("r")
    received(s, "r", [c("a")])
    s.poll({})
    assert s.rules(quiescent=False) == []
    assert s.rules(quiescent=True) == ["R14"]


@pytest.mark.rule("R23")
def test_r23_fires_on_a_chunk_put_but_never_received() -> None:
    s = Script()
    s.load("r")
    s.put("r_1_0", "a")
    s.get("r_1_0")  # looked before the put landed? no: after, and found nothing
    s.poll({})
    assert "R23" in s.rules(quiescent=True, put_tries=None)


@pytest.mark.rule("R15")
def test_r15_fires_on_an_empty_list_and_on_a_second_hand_out() -> None:
    s = Script()
    s.load("r")
    s.poll({"r": []})
    assert "R15" in s.rules()
    t = Script()
    t.load("r")
    received(t, "r", [c("a")])
    t.poll({"r": [c("a")]})
    t.poll({"r": [c("a")]})
    assert "R15" in t.rules()


@pytest.mark.rule("R13")
def test_r13_fires_on_a_get_past_the_final() -> None:
    s = Script()
    s.load("r")
    received(s, "r", [c("end", True)])
    s.get("r_1_1")
    assert "R13" in s.rules(put_tries=None)


@pytest.mark.rule("R13")
def test_r13_quiet_after_a_new_registration() -> None:
    s = Script()
    s.load("r")
    received(s, "r", [c("end", True)])
    s.cleanup("r")
    s.load("r")
    s.get("r_1_0")
    assert s.rules(put_tries=None) == []


@pytest.mark.rule("R16")
def test_r16_fires_on_a_hand_out_after_cleanup() -> None:
    s = Script()
    s.load("r")
    received(s, "r", [c("a")])
    s.cleanup("r")
    s.poll({"r": [c("a")]})
    assert s.rules(put_tries=None) == ["R16"]


@pytest.mark.rule("R16")
def test_r16_fires_on_a_stale_get_crossing_cleanup_and_load() -> None:
    s = Script()
    s.load("r")
    s.put("r_1_0", "a")
    in_flight = s.start()  # the get began under the first registration
    s.cleanup("r")
    s.load("r")
    s.get("r_1_0", c("a"), begin=in_flight)
    assert s.rules(put_tries=None) == []  # discarded: fine
    s.poll({"r": [c("a")]})
    assert s.rules(put_tries=None) == ["R16"]


@pytest.mark.rule("R12")
def test_r12_fires_on_a_hand_out_for_a_request_never_registered() -> None:
    s = Script()
    s.poll({"r": [c("a")]})
    assert s.rules() == ["R12"]


# --------------------------------------------------------- API and reporting
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
