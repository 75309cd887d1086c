"""Issue 27 point 1 and R31: one request's failing puts never hold back another's.

Before: a put that failed transiently was retried in place, so a final whose
put kept failing (a reused request id whose old stream still sat unconsumed:
``KeyOccupied``) held the only SAVE thread, and an unrelated request got 0 of
11 chunks. Now the failing stream is parked until its next try and the SAVE
thread goes on; its own later chunks wait behind it (R5: order per request).

No test sleeps: the connector counts the failing key's tries, and a retry that
is due goes first while every other chunk goes between two tries, so "after the
failing key's 12th try, all 11 other chunks are put" is exact, not timed.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from chunk_adapter import ChunkAdapter, MemoryConnector
from tests.unit._rig import chunk
from tests.unit._wait import Inbox, wait_until

WAIT = 10.0  # generous: every wait below ends on an event well before


class _FailingKey(MemoryConnector):
    """Fails every put of the keys in ``failing`` (transiently) until ``heal()``; at the
    ``watch_at``-th failure it records how many other keys had been put."""

    def __init__(self, *failing: str, watch_at: int = 12) -> None:
        super().__init__()
        self.failing = set(failing)
        self.failures = 0
        self.watch_at = watch_at
        self.others_put_at_watch: int | None = None
        self.watched = threading.Event()  # set at the watch_at-th failure
        self.others: list[str] = []  # keys put that are not failing, in put order
        self._lock = threading.Lock()  # guards failures, others, failing

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            if key in self.failing:
                self.failures += 1
                if self.failures == self.watch_at:
                    self.others_put_at_watch = len(self.others)
                    self.watched.set()
                raise ConnectionError(f"{key} is busy (transient)")
            self.others.append(key)
        super().put(key, value)

    def heal(self) -> None:
        with self._lock:
            self.failing.clear()


class _RetriesInPlace(ChunkAdapter):
    """The seeded bug: the old SAVE loop, a failed put retried in place (R31)."""

    def _put_with_retries(self, request_id: str, value: dict[str, Any], is_final: bool) -> None:
        super()._put_with_retries(request_id, value, is_final)


FAST = {"put_backoff": 0.001, "put_backoff_max": 0.002, "put_retry_window": None}


def _other_chunks_put_while_a_final_fails(cls: type[ChunkAdapter]) -> int | None:
    conn = _FailingKey("stuck_0_0")
    snd = cls(conn, stage_id=0, **FAST)
    try:
        snd.save_async("stuck", "end", True)
        for i in range(11):
            snd.save_async("other", i, i == 10)
        assert conn.watched.wait(WAIT), "the stuck final was not retried 12 times"
        return conn.others_put_at_watch
    finally:
        snd.stop()


@pytest.mark.rule("R31")
def test_an_unrelated_request_gets_all_its_chunks_while_a_final_keeps_failing() -> None:
    assert _other_chunks_put_while_a_final_fails(ChunkAdapter) == 11


@pytest.mark.rule("R31")
def test_the_seeded_bug_retrying_in_place_is_caught() -> None:
    """The same check on the old loop: nothing else goes out while the final fails."""
    assert _other_chunks_put_while_a_final_fails(_RetriesInPlace) == 0


@pytest.mark.rule("R31", "R5", "R9", "R11")
def test_a_parked_stream_keeps_its_own_order_and_ids_and_its_reused_id_waits() -> None:
    """A stream's chunks saved while it is parked (its final retried; then the id
    reused) go out after it, in save order, with contiguous ids; the other request
    goes on meanwhile; flush waits for all of it."""
    conn = _FailingKey("r_0_1", watch_at=5)
    snd = ChunkAdapter(conn, stage_id=0, **FAST)
    rcv = ChunkAdapter(conn, stage_id=1, event_driven=False)
    inbox = Inbox(rcv)
    try:
        rcv.load_async("r")
        snd.save_async("r", "a", False)
        snd.save_async("r", "end", True)  # r_0_1 fails until healed
        snd.save_async("r", "again", True)  # the id reused: a new stream, held behind
        snd.save_async("x", "x-end", True)
        assert conn.watched.wait(WAIT)
        assert "x_0_0" in conn.others, "the other request went on"
        inbox.wait_count("r", 1)  # r_0_0 consumed before the next stream may reuse it
        stats = snd.stats()
        assert stats.save_held == 1 and stats.save_parked + stats.save_in_flight == 1, stats
        assert snd.flush(0.0) is False, "parked and held chunks are not done"
        snd.check_invariants()
        conn.heal()
        assert snd.flush(WAIT)
        inbox.wait_final("r")
        assert inbox.of("r") == [chunk("a"), chunk("end", True)]
        assert [k for k in conn.others if k.startswith("r_")] == ["r_0_0", "r_0_1", "r_0_0"]
        assert conn.get("r_0_0") == chunk("again", True), "the reused id's stream, after"
        assert snd.stats().save_pending == 0
        snd.check_invariants()
    finally:
        snd.stop()
        rcv.stop()


@pytest.mark.rule("R31", "R26")
def test_stop_counts_parked_and_held_chunks_as_abandoned() -> None:
    conn = _FailingKey("r_0_0", watch_at=3)
    snd = ChunkAdapter(conn, stage_id=0, **FAST)
    snd.save_async("r", "a", True)
    snd.save_async("r", "b", False)
    snd.save_async("r", "c", True)
    assert conn.watched.wait(WAIT)
    wait_until(lambda: snd.stats().save_held == 2, WAIT, "the reused id's chunks held")
    snd.stop()
    stats = snd.stats()
    assert (stats.abandoned, stats.abandoned_finals) == (3, 2), stats
    assert (stats.save_parked, stats.save_held) == (0, 0)


@pytest.mark.rule("R31", "R11")
def test_final_put_timeout_gives_a_final_up_loudly_and_frees_the_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    conn = _FailingKey("r_0_0", watch_at=1)
    snd = ChunkAdapter(conn, stage_id=0, final_put_timeout=0.02, **FAST)
    try:
        snd.save_async("r", "end", True)
        wait_until(lambda: snd.stats().finals_failed == 1, WAIT, "the final given up")
        assert snd.flush(WAIT)
        stats = snd.stats()
        assert (stats.open_streams, stats.save_parked, stats.finals_put) == (0, 0, 0)
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert any("r_0_0" in m and "given up" in m for m in errors), errors
        conn.heal()
        snd.save_async("r", "next", True)  # the id starts over at chunk 0 (R11)
        assert snd.flush(WAIT)
        assert conn.get("r_0_0") == chunk("next", True)
    finally:
        snd.stop()


@pytest.mark.rule("R31", "R10")
def test_without_final_put_timeout_a_final_is_retried_until_it_lands() -> None:
    conn = _FailingKey("r_0_0", watch_at=40)
    snd = ChunkAdapter(conn, stage_id=0, **FAST)
    try:
        snd.save_async("r", "end", True)
        assert conn.watched.wait(WAIT), "retried 40 times"
        assert snd.stats().finals_failed == 0
        conn.heal()
        assert snd.flush(WAIT)
        assert conn.get("r_0_0") == chunk("end", True)
    finally:
        snd.stop()


@pytest.mark.rule("R21")
@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), "5"])
def test_a_bad_final_put_timeout_is_refused_naming_it(bad: object) -> None:
    with pytest.raises((ValueError, TypeError), match="final_put_timeout"):
        ChunkAdapter(MemoryConnector(), stage_id=0, final_put_timeout=bad)  # type: ignore[arg-type]
