"""No busy polling, no starvation, idle means idle (R17), measured on the adapter's threads.

CPU time is the adapter's own threads' (psutil, per OS thread); bounds are at
least 5x what the reference adapter uses (see ``chunk_adapter.stress.pacing``).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from chunk_adapter.factory import AdapterFactory
from chunk_adapter.stress import TINY_SWITCH_INTERVAL, StressReport, head_of_line, idle_polling

Expect = Callable[[StressReport], None]


@pytest.mark.rule("R17")
def test_idle_registered_requests_are_not_busy_polled_R17(
    adapter_factory: AdapterFactory, seed: int, expect_ok: Expect
) -> None:
    expect_ok(idle_polling(adapter_factory, seed=seed, idle_requests=10, seconds=1.0))


@pytest.mark.rule("R17")
def test_an_adapter_with_no_requests_is_idle_R17(
    adapter_factory: AdapterFactory, seed: int, expect_ok: Expect
) -> None:
    expect_ok(idle_polling(adapter_factory, seed=seed, idle_requests=0, seconds=1.0))


@pytest.mark.rule("R17")
@pytest.mark.parametrize("notify", [False, True])
def test_a_request_with_data_is_not_stuck_behind_idle_ones_R17(
    adapter_factory: AdapterFactory, seed: int, expect_ok: Expect, notify: bool
) -> None:
    expect_ok(head_of_line(adapter_factory, seed=seed, idle_requests=200, notify=notify))


@pytest.mark.rule("R17")
def test_no_head_of_line_blocking_with_races_shaken_R17(
    adapter_factory: AdapterFactory, seed: int, expect_ok: Expect
) -> None:
    expect_ok(
        head_of_line(
            adapter_factory, seed=seed, idle_requests=100, switch_interval_s=TINY_SWITCH_INTERVAL
        )
    )


@pytest.mark.slow
@pytest.mark.rule("R17")
@pytest.mark.parametrize("notify", [False, True])
def test_hundred_idle_requests_slow(
    adapter_factory: AdapterFactory, seed: int, expect_ok: Expect, notify: bool
) -> None:
    expect_ok(
        idle_polling(
            adapter_factory,
            seed=seed,
            idle_requests=100,
            seconds=3.0,
            notify=notify,
            max_cpu_per_second=0.9,
        )
    )


@pytest.mark.slow
@pytest.mark.rule("R17")
def test_many_hot_requests_among_thousand_idle_slow(
    adapter_factory: AdapterFactory, seed: int, expect_ok: Expect
) -> None:
    expect_ok(
        head_of_line(adapter_factory, seed=seed, idle_requests=1000, hot_requests=50, bound=1.0)
    )
