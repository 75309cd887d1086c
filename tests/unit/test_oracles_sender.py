"""The oracles on hand-written histories, the sender's rules: each fires on a violation
and stays quiet otherwise. Histories are scripted with :class:`_history_script.Script`.
"""

from __future__ import annotations

import pytest

from chunk_adapter.errors import AdapterStopped
from tests.unit._history_script import Script, sent


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
