"""The one set of bounded calls and waits (``chunk_adapter.bed.waiting``).

Every blocking call here waits on an event the test opens itself, so nothing
depends on how fast the machine is; the bounds are only how long a call that
is known to be blocked is given before it counts as hung.
"""

from __future__ import annotations

import threading

import pytest

from chunk_adapter.bed.waiting import (
    Hang,
    call_bounded,
    call_in_thread,
    holds_for,
    stopping,
    wait_until,
)

BLOCKED = 0.05  # seconds a call known to be blocked is given before it counts as hung
GENEROUS = 10.0  # seconds a call that returns at once is given (5x+ any machine's need)


def test_call_bounded_returns_the_value_and_reraises_the_error() -> None:
    assert call_bounded(lambda: 42, GENEROUS, "answer()") == 42

    def boom() -> None:
        raise KeyError("bad")

    with pytest.raises(KeyError, match="bad"):
        call_bounded(boom, GENEROUS, "boom()")


def test_call_bounded_reports_a_blocked_call_as_a_hang_naming_it() -> None:
    gate = threading.Event()  # opened by the test after the verdict, so the helper ends
    try:
        with pytest.raises(Hang, match=r"stuck\(\) did not return within 0\.05 s"):
            call_bounded(gate.wait, BLOCKED, "stuck()")
    finally:
        gate.set()


def test_call_in_thread_runs_after_on_the_helper_thread_once_the_call_ended() -> None:
    seen: list[str] = []

    def after() -> str:
        seen.append(threading.current_thread().name)
        return "tick"

    outcome = call_in_thread(lambda: "done", GENEROUS, "helper-x", after)
    assert outcome.returned and outcome.value == "done" and outcome.error is None
    assert outcome.after == "tick" and seen == ["helper-x"]
    assert outcome.elapsed is not None and outcome.elapsed >= 0


def test_call_in_thread_leaves_a_blocked_call_running_and_says_so() -> None:
    gate = threading.Event()  # opened by the test once the outcome is in
    outcome = call_in_thread(gate.wait, BLOCKED, "helper-blocked")
    assert not outcome.returned and outcome.elapsed is None
    assert outcome.thread.is_alive()
    gate.set()
    outcome.thread.join(GENEROUS)
    assert not outcome.thread.is_alive()


def test_wait_until_returns_once_the_predicate_holds() -> None:
    flag = threading.Event()  # set by a helper; the wait must see it
    threading.Thread(target=flag.set, daemon=True).start()
    wait_until(flag.is_set, GENEROUS, "the flag")
    assert flag.is_set()


def test_wait_until_names_what_it_waited_for_and_the_state() -> None:
    with pytest.raises(Hang, match=r"the sky falling did not happen within 0\.05 s; state: calm"):
        wait_until(lambda: False, BLOCKED, "the sky falling", lambda: "calm")


def test_holds_for_is_false_as_soon_as_the_predicate_breaks() -> None:
    assert holds_for(lambda: True, BLOCKED)
    looks: list[int] = []

    def breaks_on_the_third_look() -> bool:
        looks.append(1)
        return len(looks) < 3

    assert not holds_for(breaks_on_the_third_look, GENEROUS)  # returns long before the window
    assert len(looks) == 3


class _Stoppable:
    def __init__(self) -> None:
        self.stopped = 0

    def stop(self) -> None:
        self.stopped += 1


def test_stopping_releases_first_then_stops_also_after_a_failure() -> None:
    order: list[str] = []
    a, b = _Stoppable(), _Stoppable()
    with stopping(a, b, first=lambda: order.append("first")):
        pass
    assert order == ["first"] and (a.stopped, b.stopped) == (1, 1)
    with (
        pytest.raises(RuntimeError, match="in the block"),
        stopping(a, first=lambda: order.append("again")),
    ):
        raise RuntimeError("in the block")
    assert order == ["first", "again"] and a.stopped == 2
