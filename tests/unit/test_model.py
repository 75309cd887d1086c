"""The pure contract model: the worked examples and each rule's bookkeeping."""

from __future__ import annotations

from typing import Any

import pytest

from chunk_adapter.model import ContractModel, ModelStopped


def c(data: Any, finished: bool = False) -> dict[str, Any]:
    return {"data": data, "finished": finished}


def model(**kwargs: Any) -> ContractModel:
    return ContractModel(stage_id=1, src_stage_id=1, **kwargs)


@pytest.mark.rule("R4", "R9", "R15")
def test_example_2_snapshots_ids_and_draining() -> None:
    m = model()
    m.load("v")
    m.save("v", ["a"], False)
    m.save("v", ["a", "b"], True)
    assert [k for k, _ in m.sent] == ["v_1_0", "v_1_1"]
    m.save("q", 1, False)
    m.save("q", 2, False)
    m.load("q")
    assert m.poll() == {"v": [c(["a"]), c(["a", "b"], True)], "q": [c(1), c(2)]}
    assert m.poll() == {}
    m.save("q", 3, True)
    assert m.poll() == {"q": [c(3, True)]}


@pytest.mark.rule("R6", "R11")
def test_example_3_cancel_while_the_build_is_held() -> None:
    m = model()
    m.hold_build("w")
    m.save("w", "p0", False)
    assert m.held_save is not None and m.held_save.stage == "build"
    for p in ("p1", "p2", "p3"):
        m.save("w", p, False)
    m.save("w", "end", True)
    m.cancel("w")
    m.release_save()
    assert m.sent == [("w_1_0", c("p0")), ("w_1_1", c(None, True))]
    assert m.builds["w"] == 1  # p1..p3 dropped unbuilt, the final not built
    assert "w" not in m.cancelled  # R11: the mark is forgotten with the final


@pytest.mark.rule("R6")
def test_cancel_drops_queued_non_finals_and_nones_the_final() -> None:
    m = model()
    m.cancel("w")
    m.save("w", "p", False)
    m.save("w", "end", True)
    m.save("w", "next", True)  # a new stream after the final: not cancelled
    assert m.sent == [("w_1_0", c(None, True)), ("w_1_0", c("next", True))]


@pytest.mark.rule("R7", "R8")
def test_build_failure_and_none_payload() -> None:
    m = model()
    m.fail_build("r")
    m.save("r", "a", False)  # dropped
    m.save("r", None, False)  # skipped, no id
    m.fail_build("r")
    m.save("r", "end", True)  # final goes out with None
    assert m.sent == [("r_1_0", c(None, True))]
    assert m.builds["r"] == 3


@pytest.mark.rule("R10")
def test_put_failures_drop_a_non_final_after_put_tries_and_retry_a_final() -> None:
    m = model(put_tries=3)
    m.fail_puts("r", 4)
    m.save("r", "a", False)  # 3 failures: dropped
    m.save("r", "end", True)  # 1 failure, then put under id 0
    assert m.failed_puts == 4
    assert m.sent == [("r_1_0", c("end", True))]


@pytest.mark.rule("R10")
def test_scripted_put_failures_overlap_like_fail_next() -> None:
    m = model()
    m.fail_puts("r", 1)
    m.fail_puts("r", 1)
    m.save("r", "a", False)
    assert m.failed_puts == 1 and m.sent == [("r_1_0", c("a"))]


@pytest.mark.rule("R5", "R10")
def test_scripted_put_failures_are_per_stream() -> None:
    """Another request's puts do not meet a stream's scripted failures (R5: an adapter
    may put them while that stream waits for its retry)."""
    m = model(put_tries=3)
    m.fail_puts("r", 3)
    m.save("x", "other", True)
    m.save("r", "a", False)  # 3 failures: dropped
    m.save("r", "end", True)
    assert m.failed_puts == 3
    assert m.sent == [("x_1_0", c("other", True)), ("r_1_0", c("end", True))]


@pytest.mark.rule("R5", "R9")
def test_put_gate_holds_the_fifo_in_order() -> None:
    m = model()
    m.hold_put("a_1_0")
    m.save("a", 1, False)
    m.save("b", 2, False)
    assert m.held_save is not None and m.held_save.key == "a_1_0"
    assert m.sent == []
    m.release_save()
    assert m.sent == [("a_1_0", c(1)), ("b_1_0", c(2))]


@pytest.mark.rule("R12", "R13")
def test_load_is_idempotent_and_a_finished_registration_stops() -> None:
    m = model()
    m.save("r", "a", True)
    m.load("r")
    m.load("r")
    m.save("r", "b", True)  # new stream: same key, nobody polls it now
    assert m.poll() == {"r": [c("a", True)]}
    assert m.polling_key("r") is None
    assert m.store == {"r_1_0": c("b", True)}


@pytest.mark.rule("R16")
def test_a_get_in_flight_across_cleanup_and_load_is_discarded() -> None:
    m = model()
    m.load("r")
    m.hold_get("r_1_0")
    assert m.held_get is not None
    m.save("r", "a", False)
    m.cleanup("r")
    m.load("r")
    m.release_recv()
    assert m.ok_gets["r_1_0"] == 1  # the stale get consumed it...
    assert m.poll() == {}  # ...and it is never handed out
    assert m.polling_key("r") == "r_1_0"


@pytest.mark.rule("R16")
def test_cleanup_forgets_ready_chunks() -> None:
    m = model()
    m.load("r")
    m.save("r", "a", False)
    m.cleanup("r")
    assert m.poll() == {}


@pytest.mark.rule("R19")
def test_after_stop_sending_and_registering_raise_polling_works() -> None:
    m = model()
    m.load("r")
    m.save("r", "a", False)
    m.stop()
    for call in (lambda: m.save("r", "b", False), lambda: m.cancel("r"), lambda: m.load("x")):
        with pytest.raises(ModelStopped):
            call()
    assert m.poll() == {"r": [c("a")]}
    m.cleanup("r")


def test_bad_put_tries_is_rejected_with_the_value() -> None:
    with pytest.raises(ValueError, match=r"put_tries.*0"):
        ContractModel(put_tries=0)


def test_the_default_model_is_a_pipeline_receiving_what_the_sender_sends() -> None:
    """Sender stage 0, and the receiver reads stage 0 unless told otherwise."""
    m = ContractModel()
    assert (m.stage_id, m.src_stage_id) == (0, 0)
    m.load("r")
    m.save("r", "a", True)
    assert m.sent == [("r_0_0", c("a", True))]
    assert m.poll() == {"r": [c("a", True)]}
    other = ContractModel(stage_id=2, src_stage_id=1)
    assert other.key("r", 3) == "r_2_3" and other.key("r", 3, receiver=True) == "r_1_3"
