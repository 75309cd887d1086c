"""The counters a recording implies, which the stress scenarios compare with ``stats()``."""

from __future__ import annotations

from typing import Any

from chunk_adapter.history import BuildCall, ConnectorOp, History, Outcome
from chunk_adapter.stress.accounting import expected_counters, stats_mismatches


def _put(h: History, key: str, data: Any, final: bool, ok: bool) -> None:
    b, e = h.tick(), h.tick()
    value = {"data": data, "finished": final}
    outcome: Outcome = "ok" if ok else "error"
    h.append(ConnectorOp("put", key, value, outcome, None if ok else "boom", b, e, "save"))


def _get(h: History, key: str, value: Any, outcome: Outcome) -> None:
    b, e = h.tick(), h.tick()
    h.append(ConnectorOp("get", key, value, outcome, None, b, e, "recv"))


def _build(h: History, snap: Any, final: bool, result: Any, ok: bool = True) -> None:
    b, e = h.tick(), h.tick()
    outcome: Outcome = "ok" if ok else "error"
    h.append(BuildCall("r", snap, final, result, outcome, None, b, e, "save"))


def test_counters_from_a_recording_with_retries_drops_and_skips() -> None:
    h = History()
    _build(h, "a", False, "a")
    _put(h, "r_1_0", "a", False, ok=False)  # retried ...
    _put(h, "r_1_0", "a", False, ok=True)  # ... and put
    _build(h, "b", False, "b")
    _put(h, "r_1_1", "b", False, ok=False)  # three tries, dropped
    _put(h, "r_1_1", "b", False, ok=False)
    _put(h, "r_1_1", "b", False, ok=False)
    _build(h, "c", False, None)  # skipped
    _build(h, "d", False, None, ok=False)  # build failed, dropped
    _build(h, "e", True, "e", ok=False)  # final build failed: put with None
    _put(h, "r_1_1", None, True, ok=False)  # the final takes the dropped chunk's id
    _put(h, "r_1_1", None, True, ok=True)
    _get(h, "r_1_0", None, "none")
    _get(h, "r_1_0", {"data": "a", "finished": False}, "ok")
    _get(h, "r_1_1", None, "error")
    _get(h, "r_1_1", {"data": None, "finished": True}, "ok")
    got = expected_counters(h, nonfinal_saves=5)  # a b c d + one dropped by a cancel
    assert got == {
        "chunks_put": 2,
        "finals_put": 1,
        "put_failures": 5,
        "put_retries": 4,
        "dropped_put_failed": 1,
        "build_failures": 2,
        "dropped_build_failed": 1,
        "skipped_none": 1,
        "dropped_cancelled": 1,
        "gets": 4,
        "gets_empty": 1,
        "get_failures": 1,
    }


class _Stats:
    chunks_put = 2
    dropped_put_failed = 0  # wrong: the recording shows 1
    committed = 2
    stale_discarded = 0


def test_a_counter_that_disagrees_is_named_with_both_values() -> None:
    h = History()
    _put(h, "r_1_0", "a", False, ok=True)
    _put(h, "r_1_1", "b", False, ok=False)
    _put(h, "r_1_1", "c", True, ok=True)
    _get(h, "r_1_0", {"data": "a", "finished": False}, "ok")
    _get(h, "r_1_1", {"data": "c", "finished": True}, "ok")
    assert stats_mismatches(_Stats(), h, nonfinal_saves=2) == [
        "dropped_put_failed: stats() says 0, the recording shows 1"
    ]
    assert stats_mismatches(None, h, nonfinal_saves=2) == []
