"""Issue 12 "done when": ``chunk-adapter bench --churn`` reports RSS and the store's size
every interval and stays flat with reused request ids (a short run here; the
5-minute runs per connector are marked slow)."""

from __future__ import annotations

import io
import json

import pytest

from chunk_adapter.bench.churn import run_churn
from tests._need_redis import require_redis


def _check(connector: str, seconds: float, interval: float) -> None:
    log = io.StringIO()
    result = run_churn(connector, seconds, interval, log)
    lines = [json.loads(line) for line in log.getvalue().splitlines() if line.startswith("{")]
    assert len(lines) >= 3 and {"rss_mib", "store", "cancel_marks"} <= set(lines[0])
    assert result["flat"] is True, result["summary"]
    last = result["samples"][-1]
    assert last["streams"] > 100 and last["save_pending"] == 0, last


@pytest.mark.rule("R24")
def test_a_short_churn_on_memory_stays_flat() -> None:
    _check("memory", 2.0, 0.5)


@pytest.mark.slow
@pytest.mark.timeout(300 + 180)  # five minutes of churn, then the report
@pytest.mark.parametrize("connector", ["memory", "shm", "redis"])
def test_five_minutes_of_churn_stay_flat(connector: str) -> None:
    if connector == "redis":
        require_redis()
    _check(connector, 300.0, 10.0)
