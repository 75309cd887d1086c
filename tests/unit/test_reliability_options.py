"""Issue 12 point 8: every timeout is a finite number, checked when the adapter is made,
and an error message costs microseconds whatever was passed (R21, R25 options).

Before: ``wait_timeout=inf`` was accepted and both background threads died with
OverflowError at their first wait; a request id with a huge repr cost half a
second (and megabytes) in the error message.
"""

from __future__ import annotations

import gc
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors import MemoryConnector
from chunk_adapter.errors import InvalidType, InvalidValue

TIMEOUTS = (
    "wait_timeout",
    "idle_backoff",
    "join_timeout",
    "put_backoff",
    "put_backoff_max",
    "repoll_interval",
    "put_retry_window",
    "exit_drain_timeout",
    "stall_timeout",
)
NOT_FINITE = (math.inf, -math.inf, math.nan, 10**400)


@pytest.mark.rule("R21")
@pytest.mark.parametrize("bad", NOT_FINITE, ids=["inf", "-inf", "nan", "10**400"])
@pytest.mark.parametrize("option", TIMEOUTS)
def test_a_timeout_that_is_not_finite_is_refused_at_construction(option: str, bad: Any) -> None:
    with pytest.raises(InvalidValue, match=rf"{option} must be a finite number.*such as 1\.0"):
        ChunkAdapter(MemoryConnector(), stage_id=0, **{option: bad})


@pytest.mark.rule("R21")
@pytest.mark.parametrize("option", TIMEOUTS)
def test_a_timeout_of_the_wrong_type_names_the_option_and_the_fix(option: str) -> None:
    with pytest.raises(InvalidType, match=rf"{option} must be a number of seconds.*{option}="):
        ChunkAdapter(MemoryConnector(), stage_id=0, **{option: "1"})


def test_optional_timeouts_accept_none_and_the_adapter_serves() -> None:
    with ChunkAdapter(
        MemoryConnector(), stage_id=0, src_stage_id=0, put_retry_window=None, stall_timeout=None
    ) as adapter:
        adapter.load_async("r")
        adapter.save_async("r", 1, True)
        assert adapter.flush(5.0)
    assert adapter.stats().finals_put == 1


# Builders, not values: a value in a module-level list (and in the parametrized items)
# would stay alive for the whole session -- 260 MB of RSS in every later test.
HUGE: dict[str, Callable[[], Any]] = {
    "list": lambda: list(range(2_000_000)),
    "str": lambda: "x" * 20_000_000,
    "dict": lambda: {i: i for i in range(1_000_000)},
    "set": lambda: set(range(1_000_000)),
    "int": lambda: 10**200_000,
}


@pytest.mark.rule("R21")
@pytest.mark.parametrize("kind", list(HUGE))
def test_an_error_about_a_huge_value_is_short_and_cheap(kind: str) -> None:
    value = HUGE[kind]()
    # Building the value allocated up to a million objects: a full collection now, not
    # one that lands in a timed call below (it walks the whole heap of a crowded run).
    gc.collect()
    adapter = ChunkAdapter(MemoryConnector(), stage_id=0)
    calls: list[Any] = [
        lambda: adapter.save_async("r", 1, value),  # is_final
        lambda: adapter.save_async("r", [threading.Lock(), value], False),  # no snapshot
    ]
    if kind != "str":
        calls += [lambda: adapter.save_async(value, 1, True), lambda: adapter.load_async(value)]
    try:
        for call in calls:
            start = time.perf_counter()
            with pytest.raises(TypeError) as info:
                call()
            elapsed = time.perf_counter() - start
            assert len(str(info.value)) < 400, f"a {len(str(info.value))}-character message"
            assert elapsed < 0.05, f"the error about a huge {kind} took {elapsed:.3f}s"
    finally:
        adapter.stop()


def test_short_repr_cuts_subclasses_and_failing_reprs() -> None:
    from chunk_adapter._validate import short_repr

    class Tokens(list[int]):
        pass

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    assert short_repr(Tokens(range(10**6))) == "<Tokens of length 1000000>"
    assert short_repr(Broken()) == "<Broken object>"
    assert short_repr("abc") == "'abc'"
    assert short_repr(10**200_000) == "<int of 664386 bits>"
    assert short_repr([1, 10**200_000]) == "[1, <int of 664386 bits>]"
