"""The scheduler never waits while builds, puts or gets are held (R3), and after the
gates open every stream completes with contiguous ids (R6, R9, R11): Example 3 at scale."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from chunk_adapter.factory import AdapterFactory
from chunk_adapter.stress import TINY_SWITCH_INTERVAL, StressReport, blocked_work

Expect = Callable[[StressReport], None]


@pytest.mark.rule("R3", "R6", "R9", "R11")
@pytest.mark.parametrize("notify", [False, True])
def test_scheduler_calls_stay_prompt_while_work_is_blocked_R3(
    adapter_factory: AdapterFactory, seed: int, expect_ok: Expect, notify: bool
) -> None:
    expect_ok(blocked_work(adapter_factory, seed=seed, notify=notify))


@pytest.mark.rule("R3", "R6", "R9", "R11")
def test_blocked_work_with_races_shaken_R3(
    adapter_factory: AdapterFactory, seed: int, expect_ok: Expect
) -> None:
    expect_ok(blocked_work(adapter_factory, seed=seed, switch_interval_s=TINY_SWITCH_INTERVAL))


@pytest.mark.slow
@pytest.mark.rule("R3", "R6", "R9", "R11")
@pytest.mark.parametrize("offset", range(10))
def test_blocked_work_many_seeds_slow(
    adapter_factory: AdapterFactory, seed: int, expect_ok: Expect, offset: int
) -> None:
    expect_ok(
        blocked_work(
            adapter_factory,
            seed=seed + offset,
            requests=300,
            episodes=15,
            switch_interval_s=TINY_SWITCH_INTERVAL if offset % 2 else None,
        )
    )
