"""Fixtures of the explorer's own tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chunk_adapter.explore.runtime.carriers import RUNTIMES
from tests.explore import _programs


@pytest.fixture(params=RUNTIMES)
def each_runtime(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test once per runtime (:mod:`chunk_adapter.explore.runtime.carriers`): the
    controllers ``tests.explore._programs`` makes use it."""
    _programs.RUNTIME[0] = request.param
    try:
        yield request.param
    finally:
        _programs.RUNTIME[0] = "thread"
