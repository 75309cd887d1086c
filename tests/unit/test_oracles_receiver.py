"""The oracles on hand-written histories, the receiver's rules: each fires on a violation
and stays quiet otherwise. Histories are scripted with :class:`_history_script.Script`.
"""

from __future__ import annotations

import pytest

from tests.unit._history_script import Script, c, received


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
