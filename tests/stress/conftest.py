"""Stress-tier fixtures: the seed, a report check that prints how to rerun it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator

import pytest

from chunk_adapter.stress import StressReport, seed_from_env


@pytest.fixture
def seed(pytestconfig: pytest.Config) -> int:
    """The run's seed: ``--chunk-seed`` if given, else ``CHUNK_ADAPTER_SEED``, else the default."""
    given = pytestconfig.getoption("--chunk-seed", default=None)
    return int(given) if given is not None else seed_from_env()


@pytest.fixture
def expect_ok(adapter_spec: str, request: pytest.FixtureRequest) -> Callable[[StressReport], None]:
    """Fail the test with the report, the seed and the command that reproduces it."""

    def check(report: StressReport) -> None:
        report.raise_if_failed(adapter_spec, request.node.nodeid)

    return check


@pytest.fixture(autouse=True)
def _switch_interval_restored() -> Iterator[None]:
    """Every scenario that shakes races restores the interpreter's switch interval."""
    before = sys.getswitchinterval()
    yield
    after = sys.getswitchinterval()
    sys.setswitchinterval(before)
    assert after == before, f"switch interval left at {after} (was {before})"
