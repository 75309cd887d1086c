"""A get queued on a pool after its registration was checked is a stale get (R16).

``aio_followers`` (a correct design of the catalogue) runs one follower task per
registration and its gets on a two-worker pool. As first written, a follower checked
its registration and then queued the get: behind other followers' gets it could start
after a ``cleanup_receiver`` and a new ``load_async`` of the request, and on a
consuming connector take the new registration's chunk and throw it away — a stream
that never completes. The generated worlds found it (a wide world of the long-haul
family, R16: the get began after the cleanup and the new load). The adapter now checks
again on the worker, right before the get; tests/quality/broken_followers.py is it as
first written, and must stay found.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from chunk_adapter.explore.engine.simulate import simulate
from tests.quality.broken_followers import queued_stale_get
from tests.quality.correct.aio_followers import make as correct

pytestmark = pytest.mark.rule("R16")


def _long_haul(factory: Any) -> Any:
    return simulate(
        factory, examples=1, long_haul_share=60, deadline=time.monotonic() + 300, seed=1
    )


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_get_queued_after_its_registration_was_checked_is_found_stale() -> None:
    sim = _long_haul(queued_stale_get)
    assert sim.found is not None, "the worlds missed a get queued past its registration"
    message = sim.found.execution.failures[0].message
    assert message.startswith("R16:") and "began after cleanup_receiver" in message, message


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_adapter_that_checks_again_on_the_worker_passes_the_same_worlds() -> None:
    sim = _long_haul(correct)
    assert sim.found is None, sim.found.execution.failures[0].message if sim.found else ""
