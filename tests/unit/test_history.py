"""History.timed and History.settle: a call is open until its record is in."""

from __future__ import annotations

import threading
from typing import Any

from chunk_adapter.history import History


def _record(begin: int, result: Any, exc: BaseException | None, end: int) -> tuple[Any, ...]:
    return ("call", begin, result, exc, end)


def test_timed_returns_the_result_and_records_it_between_two_ticks() -> None:
    history = History()
    assert history.timed(lambda: 7, _record) == (7, None)
    [(_, begin, result, exc, end)] = history.records()
    assert (result, exc) == (7, None)
    assert begin < end


def test_timed_returns_the_exception_after_recording_it() -> None:
    history = History()
    boom = ValueError("boom")

    def fails() -> None:
        raise boom

    assert history.timed(fails, _record) == (None, boom)
    assert history.records()[0][3] is boom


def test_settle_waits_for_a_call_whose_record_is_not_in_yet() -> None:
    history = History()
    entered, release = threading.Event(), threading.Event()

    def slow_record(begin: int, result: Any, exc: BaseException | None, end: int) -> Any:
        entered.set()
        assert release.wait(timeout=30.0)
        return _record(begin, result, exc, end)

    worker = threading.Thread(target=history.timed, args=(lambda: "done", slow_record))
    worker.start()
    try:
        assert entered.wait(timeout=30.0)
        assert history.settle(timeout=0.01) is False  # the call returned, its record is not in
        assert len(history) == 0
        release.set()
        assert history.settle(timeout=30.0) is True
        assert [r[2] for r in history.records()] == ["done"]
    finally:
        release.set()
        worker.join(timeout=30.0)


def test_settle_gives_up_on_a_call_blocked_past_its_timeout() -> None:
    history = History()
    assert history.settle(timeout=0.0) is True  # nothing open
    entered, release = threading.Event(), threading.Event()

    def blocked() -> bool:
        entered.set()
        return release.wait(30.0)

    worker = threading.Thread(target=history.timed, args=(blocked, _record))
    worker.start()
    try:
        assert entered.wait(timeout=30.0)
        assert history.settle(timeout=0.01) is False
    finally:
        release.set()
        worker.join(timeout=30.0)
    assert history.settle(timeout=0.0) is True
    assert [r[2] for r in history.records()] == [True]
